//! Power loss and recovery. A power loss at the device's present drops what is volatile: the
//! mapping in RAM (and DFTL's cached table) and the units still staged in the controller's
//! write buffer (partly filled pages, never sent to flash), unless the drive has power-loss
//! protection (`controller.power_loss_protection`): then the hold-up energy programs those
//! pages, padded, and only the mapping needs rebuilding. Commands already issued to the
//! dies complete on the drive's hold-up energy, as on drives with power-loss protection: the
//! reservation model issues a buffered page's program when the buffer accepts it, and fixes
//! each die's order of programs and erases then, so completing them keeps every copy that
//! recovery may need (an erase never overtakes the program of the newer copy it makes
//! stale). Recovery
//! rebuilds the mapping from what is on flash, the OOB area of every programmed page (its
//! logical unit and the write's sequence number; DFTL: its translation pages, then the OOB
//! of pages newer than them), and reports what that cost: pages read and simulated time,
//! each OOB read one sensing plus the OOB's transfer, on the device's dies in parallel.

use super::{Device, DeviceError};
use std::collections::BTreeSet;

/// What recovery did and what it cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Pages whose OOB area was read.
    pub oob_pages_read: u64,
    /// Pages read whole (DFTL's translation pages).
    pub full_pages_read: u64,
    /// Mapping units whose data was lost: the current copies of logical units that were staged
    /// in pages not yet programmed at the power loss.
    pub lost_units: u64,
    /// Logical units mapped after recovery.
    pub mapped_units: u64,
    /// Simulated time the recovery took.
    pub duration_ns: u64,
    /// When the device was ready again.
    pub ready_ns: u64,
}

/// What a power loss took: the physical units whose pages were never programmed (every slot of
/// a staged page), and how many of them held the current copy of their logical unit (the
/// data lost; an empty slot or a copy already rewritten loses nothing).
#[derive(Debug, Clone, Default)]
pub(crate) struct PowerLost {
    units: BTreeSet<u32>,
    live: u64,
}

impl Device {
    /// Simulate a power loss now (see the module documentation). Until [`Device::recover`],
    /// the device refuses requests.
    pub fn power_loss(&mut self) -> Result<(), DeviceError> {
        if self.run.is_some() {
            return Err(DeviceError::Run(
                "a run is in progress: finish it before simulating a power loss",
            ));
        }
        let mut now = self.now_ns;
        if self.config.controller.power_loss_protection {
            // The hold-up energy programs the pages still filling, padded: nothing accepted
            // is lost, and recovery starts once those programs are done.
            now = now.max(self.flush_staged(now));
            self.now_ns = now;
        }
        let shift = self.unit_shift;
        let mut lost = BTreeSet::new();
        let mut live = 0;
        for &ppa in self.staged.keys() {
            let first = ppa << shift;
            for unit in first..first + (1 << shift) {
                lost.insert(unit);
                live += self.ftl.holds_current_copy(unit) as u64;
            }
        }
        self.staged.clear();
        self.buffer_ends.clear();
        self.buffer_last_end_ns = now;
        self.programs_in_flight.clear();
        self.active_plane.iter_mut().for_each(|p| *p = u32::MAX);
        self.powered_off = Some(PowerLost { units: lost, live });
        Ok(())
    }

    /// Power the device on after [`Device::power_loss`]: rebuild the mapping from flash, time
    /// the scan from the present, and move the clock to its end.
    pub fn recover(&mut self) -> Result<RecoveryReport, DeviceError> {
        let Some(lost) = self.powered_off.take() else {
            return Err(DeviceError::Run(
                "recover: the device has not lost power (call power_loss first)",
            ));
        };
        let scan = self.ftl.recover(&|unit| lost.units.contains(&unit));
        let start = self.now_ns;
        // Work in flight at the power loss was aborted: dies and channels are free now.
        for die in 0..self.geo.dies {
            self.timeline.set_die_free_ns(die, start);
        }
        for channel in 0..self.geo.channels {
            self.timeline.set_channel_free_ns(channel, start);
        }
        self.cpu_free_ns = start;
        self.link_in_free_ns = start;
        let c = &self.config.channel;
        let bytes_per_us = c.rate_mtps as u64 * c.bus_width_bytes as u64;
        let oob_xfer = (self.config.geometry.oob_size_bytes as u64 * 1000).div_ceil(bytes_per_us)
            + c.command_overhead_ns;
        let xfer = self.derived.page_transfer_ns;
        let mut end = start;
        for &ppa in &scan.oob_pages {
            let t_read = self.derived.read_ns[self.geo.page_type(ppa) as usize];
            let r = self
                .timeline
                .read(self.geo.die_of(ppa), start, t_read, 1, oob_xfer);
            end = end.max(r.end_ns);
            self.flash.array_reads += 1;
            self.flash.oob_reads += 1;
        }
        for &ppa in &scan.full_pages {
            let t_read = self.derived.read_ns[self.geo.page_type(ppa) as usize];
            let r = self
                .timeline
                .read(self.geo.die_of(ppa), start, t_read, 1, xfer);
            end = end.max(r.end_ns + self.derived.decode_ns);
            self.flash.array_reads += 1;
            self.flash.oob_reads += 1;
            self.flash.bytes_transferred += self.page_size() as u64;
        }
        self.now_ns = end;
        let mapped_units = (0..self.derived.logical_units)
            .filter(|&u| self.ftl.mapped(u).is_some())
            .count() as u64;
        Ok(RecoveryReport {
            oob_pages_read: scan.oob_pages.len() as u64,
            full_pages_read: scan.full_pages.len() as u64,
            lost_units: lost.live,
            mapped_units,
            duration_ns: end - start,
            ready_ns: end,
        })
    }

    /// Is the device waiting for [`Device::recover`] after a power loss?
    pub fn is_powered_off(&self) -> bool {
        self.powered_off.is_some()
    }
}
