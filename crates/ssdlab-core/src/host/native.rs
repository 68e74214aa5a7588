//! The native flash interface of a [`Device`], timed: each call takes an issue time and returns
//! its completion time, reserved on the device's own dies and channels ([`Timeline`], the
//! block interface's first-come-first-served reservation), so operations on different dies
//! overlap, those on one die serialise, and channel transfers contend as for block requests.
//!
//! A program: its data crosses the host link, is ECC-encoded, crosses the channel, and the die
//! programs it (tPROG of its page type). A read: the die senses the page, its data and OOB
//! cross the channel, are decoded, and cross the host link. An OOB read: the die senses the
//! page, only the OOB crosses the channel and the link. An erase: the die erases (tBERS).
//! There is no device FTL, so no device-CPU time. The NAND rules and stored state are in
//! [`crate::native`]. Once a device has handed its flash to a native host, its block interface
//! refuses requests: the flash has one owner.

use super::{Device, DeviceError};
use crate::native::{BlockLocation, NandError, NativeCounters, NativeFlashState, NativeGeometry};

/// A page read by [`NativeFlash::read_page`]: the stored data and OOB, lent until the next
/// call on the flash.
#[derive(Debug, Clone, Copy)]
pub struct PageRead<'a> {
    /// When the data has crossed the host link.
    pub done_ns: u64,
    /// The page's data; None on a device without a data store.
    pub data: Option<&'a [u8]>,
    /// The page's OOB area (the OOB size).
    pub oob: &'a [u8],
}

/// A device's flash driven natively (see the module documentation).
pub struct NativeFlash<'a> {
    dev: &'a mut Device,
}

impl Device {
    /// The native flash interface. The first call hands the flash to the caller: all blocks
    /// erased, no wear, and from then on the block interface refuses requests. Refused while
    /// a run is in progress or once the block interface has written data.
    pub fn native(&mut self) -> Result<NativeFlash<'_>, DeviceError> {
        if self.native.is_none() {
            if self.run.is_some() {
                return Err(DeviceError::Run(
                    "a run is in progress: finish it before using the native flash interface",
                ));
            }
            if self.ftl.counters().host_units_written > 0 || self.block_interface_used {
                return Err(DeviceError::Run(
                    "the block interface has written to this device: the native flash \
                     interface needs a device whose flash is the host's from the start",
                ));
            }
            let state = NativeFlashState::new(&self.config, self.store.is_some());
            self.native = Some(Box::new(state));
            // The block interface's data store will never hold data again.
            self.store = None;
        }
        Ok(NativeFlash { dev: self })
    }

    /// Is the flash driven through the native interface?
    pub fn is_native(&self) -> bool {
        self.native.is_some()
    }

    /// The native flash's state, if the flash was handed to a native host.
    pub fn native_state(&self) -> Option<&NativeFlashState> {
        self.native.as_deref()
    }

    /// Refuse block-interface work once the flash is native.
    pub(super) fn check_block_interface(&self) -> Result<(), DeviceError> {
        if self.native.is_some() {
            return Err(DeviceError::NativeOwned);
        }
        if self.powered_off.is_some() {
            return Err(DeviceError::Run(
                "the device lost power: call recover() before sending it requests",
            ));
        }
        Ok(())
    }
}

impl NativeFlash<'_> {
    fn state(&self) -> &NativeFlashState {
        self.dev.native.as_deref().expect("native state exists")
    }

    pub fn geometry(&self) -> &NativeGeometry {
        self.state().geometry()
    }

    pub fn locate(&self, block: u32) -> Result<BlockLocation, NandError> {
        self.state().locate(block)
    }

    pub fn stores_data(&self) -> bool {
        self.state().stores_data()
    }

    pub fn erase_count(&self, block: u32) -> Result<u32, NandError> {
        self.state().erase_count(block)
    }

    pub fn erase_counts(&self) -> &[u32] {
        self.state().erase_counts()
    }

    pub fn bad_blocks(&self) -> Vec<u32> {
        self.state().bad_blocks()
    }

    pub fn is_erased(&self, page: u64) -> Result<bool, NandError> {
        self.state().is_erased(page)
    }

    pub fn next_page(&self, block: u32) -> Result<u32, NandError> {
        self.state().next_page(block)
    }

    pub fn counters(&self) -> NativeCounters {
        self.state().counters
    }

    /// Array-busy time of each device die (channel-major order) so far.
    pub fn die_busy_ns(&self) -> &[u64] {
        &self.dev.timeline.busy_per_die_ns
    }

    /// The device's clock.
    pub fn now_ns(&self) -> u64 {
        self.dev.now_ns
    }

    /// The issue time of a call at `at_ns` (the device's clock when None): never before the
    /// clock, which moves to it (resources are reserved in issue order).
    #[inline]
    fn issue(&mut self, at_ns: Option<u64>) -> u64 {
        let t = at_ns.map_or(self.dev.now_ns, |at| at.max(self.dev.now_ns));
        self.dev.now_ns = t;
        t
    }

    /// Program page `page` with `data` (exactly a page) and `oob` (at most the OOB size; the
    /// rest stays 0xFF), issued at `at_ns`. Returns when the program ends. The data is copied
    /// once into the store; [`NativeFlash::program_owned`] avoids the copy.
    #[inline]
    pub fn program(
        &mut self,
        page: u64,
        data: &[u8],
        oob: &[u8],
        at_ns: Option<u64>,
    ) -> Result<u64, NandError> {
        let checked = self.state().check_program(page, data.len(), oob.len());
        let (block, index) = match checked {
            Ok(v) => v,
            Err(e) => return Err(self.refused(e)),
        };
        let issue = self.issue(at_ns);
        let state = self.dev.native.as_deref_mut().expect("native state exists");
        state.apply_program(block, index, data, oob);
        Ok(self.time_program(block, index, issue))
    }

    /// A page-sized buffer to fill and hand to [`NativeFlash::program_owned`]: one whose page
    /// was erased when there is one (its contents are stale), else a new one. None on a
    /// device without a data store.
    #[inline]
    pub fn page_buffer(&mut self) -> Option<Box<[u8]>> {
        let state = self.dev.native.as_deref_mut().expect("native state exists");
        state.take_buffer()
    }

    /// Program page `page` with `data`, which becomes the page's storage (no copy), and
    /// `oob` as [`NativeFlash::program`] does. A refused program keeps the buffer for later
    /// [`NativeFlash::page_buffer`] calls. Without a data store the buffer is dropped.
    #[inline]
    pub fn program_owned(
        &mut self,
        page: u64,
        data: Box<[u8]>,
        oob: &[u8],
        at_ns: Option<u64>,
    ) -> Result<u64, NandError> {
        let checked = self.state().check_program(page, data.len(), oob.len());
        let (block, index) = match checked {
            Ok(v) => v,
            Err(e) => {
                let state = self.dev.native.as_deref_mut().expect("native state exists");
                state.give_back_buffer(data);
                return Err(self.refused(e));
            }
        };
        let issue = self.issue(at_ns);
        let state = self.dev.native.as_deref_mut().expect("native state exists");
        state.apply_program_owned(block, index, data, oob);
        Ok(self.time_program(block, index, issue))
    }

    /// Reserve a program of page `index` of `block` issued at `issue`; returns its end.
    #[inline]
    fn time_program(&mut self, block: u32, index: u32, issue: u64) -> u64 {
        let dev = &mut *self.dev;
        let die = dev
            .native
            .as_deref()
            .expect("native state exists")
            .device_die_of(block);
        let page_bytes = dev.page_size() as u64;
        let ready = dev.host_data_in(issue, page_bytes) + dev.derived.encode_ns;
        let t_prog = dev.derived.program_ns[page_type(index, dev.geo.bits_per_cell)];
        let xfer = dev.derived.page_transfer_ns;
        let p = dev.timeline.program(die, ready, t_prog, 1, xfer);
        let f = &mut dev.flash;
        f.programs += 1;
        f.oob_writes += 1;
        f.bytes_transferred += page_bytes;
        f.codewords_encoded += dev.derived.codewords_per_page as u64;
        p.end_ns
    }

    /// Read page `page` issued at `at_ns`: its data into `data` (exactly a page; left as it is
    /// on a device without a data store) and its OOB into `oob` (exactly the OOB size). An
    /// erased page reads as 0xFF. Returns when the data has crossed the host link. The data
    /// is copied once; [`NativeFlash::read_page`] lends it instead.
    #[inline]
    pub fn read(
        &mut self,
        page: u64,
        data: &mut [u8],
        oob: &mut [u8],
        at_ns: Option<u64>,
    ) -> Result<u64, NandError> {
        let (block, index) = match self.check_read(page, Some(data.len()), Some(oob.len())) {
            Ok(v) => v,
            Err(e) => return Err(self.refused(e)),
        };
        let done = self.time_read(block, index, at_ns);
        let state = self.state();
        state.copy_data(block, index, data);
        state.copy_oob(block, index, oob);
        Ok(done)
    }

    /// Read page `page` issued at `at_ns`, timed as [`NativeFlash::read`], lending the stored
    /// data and OOB instead of copying them (all 0xFF when the page is erased; no data on a
    /// device without a data store).
    #[inline]
    pub fn read_page(&mut self, page: u64, at_ns: Option<u64>) -> Result<PageRead<'_>, NandError> {
        let (block, index) = match self.check_read(page, None, None) {
            Ok(v) => v,
            Err(e) => return Err(self.refused(e)),
        };
        let done_ns = self.time_read(block, index, at_ns);
        let state = self.dev.native.as_deref().expect("native state exists");
        Ok(PageRead {
            done_ns,
            data: state.page_data(block, index),
            oob: state.page_oob(block, index),
        })
    }

    /// Reserve a page read of page `index` of `block` at `at_ns`; returns when its data has
    /// crossed the host link.
    #[inline]
    fn time_read(&mut self, block: u32, index: u32, at_ns: Option<u64>) -> u64 {
        let issue = self.issue(at_ns);
        let dev = &mut *self.dev;
        let state = dev.native.as_deref_mut().expect("native state exists");
        let die = state.device_die_of(block);
        state.counters.reads += 1;
        let page_bytes = dev.page_size() as u64;
        let t_read = dev.derived.read_ns[page_type(index, dev.geo.bits_per_cell)];
        let xfer = dev.derived.page_transfer_ns;
        let r = dev.timeline.read(die, issue, t_read, 1, xfer);
        let decoded = r.end_ns + dev.derived.decode_ns;
        let link = dev.link_ns(page_bytes);
        let done = dev.link_out.reserve(decoded, link, issue);
        let f = &mut dev.flash;
        f.array_reads += 1;
        f.oob_reads += 1;
        f.bytes_transferred += page_bytes;
        f.codewords_decoded += dev.derived.codewords_per_page as u64;
        done
    }

    /// Read only page `page`'s OOB into `oob` (exactly the OOB size), issued at `at_ns`: the
    /// die senses the page, and only the OOB bytes cross the channel and the host link.
    #[inline]
    pub fn read_oob(
        &mut self,
        page: u64,
        oob: &mut [u8],
        at_ns: Option<u64>,
    ) -> Result<u64, NandError> {
        let (block, index) = match self.check_read(page, None, Some(oob.len())) {
            Ok(v) => v,
            Err(e) => return Err(self.refused(e)),
        };
        let issue = self.issue(at_ns);
        let dev = &mut *self.dev;
        let state = dev.native.as_deref_mut().expect("native state exists");
        let die = state.device_die_of(block);
        state.copy_oob(block, index, oob);
        state.counters.oob_reads += 1;
        let oob_bytes = state.geometry().oob_bytes as u64;
        let t_read = dev.derived.read_ns[page_type(index, dev.geo.bits_per_cell)];
        let xfer = oob_transfer_ns(dev, oob_bytes);
        let r = dev.timeline.read(die, issue, t_read, 1, xfer);
        let link = dev.link_ns(oob_bytes);
        let done = dev.link_out.reserve(r.end_ns, link, issue);
        let f = &mut dev.flash;
        f.array_reads += 1;
        f.oob_reads += 1;
        f.bytes_transferred += oob_bytes;
        Ok(done)
    }

    /// Erase block `block` issued at `at_ns`. Returns when the erase ends. An erase of a block
    /// at its endurance limit fails (untimed) and the block becomes bad.
    pub fn erase(&mut self, block: u32, at_ns: Option<u64>) -> Result<u64, NandError> {
        let state = self.dev.native.as_deref_mut().expect("native state exists");
        state.check_erase(block)?;
        state.apply_erase(block);
        let die = state.device_die_of(block);
        let issue = self.issue(at_ns);
        let dev = &mut *self.dev;
        let e = dev.timeline.erase(die, issue, dev.config.cell.erase_ns);
        dev.flash.erases += 1;
        Ok(e.end_ns)
    }

    #[inline]
    fn check_read(
        &self,
        page: u64,
        data_len: Option<usize>,
        oob_len: Option<usize>,
    ) -> Result<(u32, u32), NandError> {
        let state = self.state();
        let g = state.geometry();
        let (block, index) = state.split_page(page)?;
        if let Some(len) = data_len.filter(|&l| l != g.page_bytes as usize) {
            return Err(NandError::BufferSize {
                arg: "data",
                expected: format!("a buffer of the page size, {} bytes", g.page_bytes),
                len,
            });
        }
        if let Some(len) = oob_len.filter(|&l| l != g.oob_bytes as usize) {
            return Err(NandError::BufferSize {
                arg: "oob",
                expected: format!("a buffer of the OOB size, {} bytes", g.oob_bytes),
                len,
            });
        }
        Ok((block, index))
    }

    #[cold]
    fn refused(&mut self, error: NandError) -> NandError {
        if let Some(state) = self.dev.native.as_deref_mut() {
            state.note_violation(&error);
        }
        error
    }
}

/// Page type of page `index` of a block: the pages of a wordline are consecutive.
#[inline]
fn page_type(index: u32, bits_per_cell: u32) -> usize {
    if bits_per_cell == 1 {
        0
    } else {
        (index % bits_per_cell) as usize
    }
}

/// Channel time of `bytes` of OOB, with the command overhead of a transfer.
fn oob_transfer_ns(dev: &Device, bytes: u64) -> u64 {
    let c = &dev.config.channel;
    let bytes_per_us = c.rate_mtps as u64 * c.bus_width_bytes as u64;
    (bytes * 1000).div_ceil(bytes_per_us) + c.command_overhead_ns
}
