//! Melded reads in the controller (Arpith K., Gopinath: melded pages). A TLC wordline holds
//! LSB, CSB and MSB pages; reading them one by one costs X + Y, X + 2Y and X + 4Y, while one
//! melded read senses all seven reference voltages once (X + 7Y) and returns all three. It pays
//! when the pages are wanted together, which is decided where they were written (see
//! `placement::wordline`).
//!
//! `host.melded_reads` decides per wordline a read touches:
//! - `off`: normal reads only.
//! - `on`: every read senses its whole wordline and transfers all of its pages (the paper's
//!   melded controller; a 4 KiB read waits for the whole melded read).
//! - `auto`: by request size and queue state: meld when the pages wanted from the wordline --
//!   by this request, and (on the event engine) by host reads queued at its die when one of
//!   them starts -- cost less die time melded (`melded_read_ns` + one transfer per page of the
//!   wordline) than one by one (Σ tR(type) + one transfer each); always when they are the whole
//!   wordline. A die serves its reads in sequence, so on a die die time is also latency.

use super::Device;
use crate::config::{CellKind, Config, Derived, MeldedReads};
use crate::nand::Geometry;
use crate::placement::wordline::{ReadGroupCounters, ReadGroupPlacer};
use crate::request::Hint;

impl Device {
    /// The run of `items` (sorted by page) from `i` that lies in one wordline: how many
    /// pages it holds and whether they are served by one melded read.
    pub(super) fn wordline_run<T>(
        &self,
        items: &[T],
        i: usize,
        ppa: impl Fn(&T) -> u32,
    ) -> (usize, bool) {
        let wordline = self.geo.wordline(ppa(&items[i]));
        let n = items[i..]
            .iter()
            .take_while(|t| self.geo.wordline(ppa(t)) == wordline)
            .count();
        let meld = self.should_meld(items[i..i + n].iter().map(&ppa));
        (n, meld)
    }

    /// Whether the pages `wanted` (distinct pages of one wordline) are read melded.
    pub(super) fn should_meld(&self, wanted: impl Iterator<Item = u32>) -> bool {
        let bits = self.geo.bits_per_cell;
        if bits < 2 {
            return false;
        }
        match self.config.host.melded_reads {
            MeldedReads::Off => false,
            MeldedReads::On => true,
            MeldedReads::Auto => {
                let xfer = self.derived.page_transfer_ns;
                let (mut n, mut separate_ns) = (0, 0);
                for ppa in wanted {
                    n += 1;
                    separate_ns += self.derived.read_ns[self.geo.page_type(ppa) as usize] + xfer;
                }
                let melded_ns = self.derived.melded_read_ns + bits as u64 * xfer;
                n == bits || melded_ns < separate_ns
            }
        }
    }

    /// Account one melded read that returns `wanted` of the wordline's pages: the array senses
    /// once (energy counts it as one read) and every page of the wordline crosses the channel;
    /// only the wanted pages are decoded.
    pub(super) fn count_melded_read(&mut self, wanted: u32) {
        let bits = self.geo.bits_per_cell;
        self.flash.melded_reads += 1;
        self.count_host_read(
            bits,
            self.derived.melded_read_ns + bits as u64 * self.derived.page_transfer_ns,
        );
        self.flash.codewords_decoded -=
            (bits - wanted) as u64 * self.derived.codewords_per_page as u64;
    }
}

/// The read-group scheduler of a device whose cells are TLC; on other cells a read group is
/// ignored (the front ends warn once).
pub(super) fn read_group_placer(
    config: &Config,
    geo: &Geometry,
    derived: &Derived,
) -> Option<ReadGroupPlacer> {
    (config.cell.kind == CellKind::Tlc).then(|| {
        let mut placer = ReadGroupPlacer::new(
            geo,
            derived.units_per_page,
            config.placement.read_group_timeout_ns,
        );
        if config.placement.learn_read_groups {
            placer.learn(derived.logical_units);
        }
        placer
    })
}

/// Learnt group ids live in the top half of the id space, apart from the host's own.
const LEARNT_GROUP_BIT: u64 = 1 << 63;

impl Device {
    /// Learnt mode: a host read of at least one wordline's worth of mapping units makes its
    /// units one group (numbered by the read), replacing what they belonged to. The heuristic
    /// is the paper's motivation: data read together in one large request (an HDFS block, a
    /// table scan) will be read together again, and a later rewrite of it can be placed a
    /// wordline per group. Small reads teach nothing, so point lookups do not split groups.
    pub(super) fn learn_read_group(&mut self, first_unit: u64, units: u64) {
        let per_wordline = (self.geo.bits_per_cell * self.derived.units_per_page) as u64;
        if let Some(placer) = self.read_groups.as_mut() {
            if units >= per_wordline {
                placer.learn_group(first_unit, units);
            }
        }
    }

    fn learnt_group(&self, unit: u64) -> Option<u64> {
        let group = self.read_groups.as_ref()?.learnt_group_of(unit)?;
        Some(LEARNT_GROUP_BIT | group as u64)
    }
}

impl Device {
    /// The plane of the next host unit of `handle`: its read group's wordline when the write
    /// carries one (and hints are honoured), the allocation policy's choice otherwise.
    pub(super) fn host_plane_for(
        &mut self,
        hint: &Hint,
        unit: u64,
        handle: u32,
        now_ns: u64,
    ) -> u32 {
        let group = hint.read_group.or_else(|| self.learnt_group(unit));
        if let (Some(group), Some(placer), true) = (
            group,
            self.read_groups.as_mut(),
            self.config.placement.honor_hints,
        ) {
            let ftl = &self.ftl;
            if let Some(plane) = placer.place(group, now_ns, |plane| {
                ftl.host_frontier_units(plane, handle)
            }) {
                // The next unhinted unit of the handle must not join this group's page.
                self.active_plane[handle as usize] = u32::MAX;
                return plane;
            }
        }
        self.host_plane(handle, now_ns)
    }

    /// After a host write of logical `unit` to physical `new`: tell the FTL its read group, so
    /// that GC keeps the group on whole wordlines. The FTL keeps a compact 32-bit id per unit:
    /// the group folded to 32 bits, exact for host groups below 2^31 and for learnt groups
    /// (two groups folding to one id would only be moved as one group by GC).
    pub(super) fn note_read_group_written(&mut self, hint: &Hint, unit: u64, new: u32) {
        if self.read_groups.is_none() || !self.config.placement.honor_hints {
            return;
        }
        if let Some(group) = hint.read_group.or_else(|| self.learnt_group(unit)) {
            let id = (group ^ (group >> 32)) as u32;
            self.ftl
                .note_read_group(new, id.checked_add(1).unwrap_or(1));
        }
    }

    /// The read-group scheduler's counters (`None` on a device that is not TLC).
    pub fn read_group_counters(&self) -> Option<ReadGroupCounters> {
        self.read_groups.as_ref().map(|p| p.counters())
    }
}

impl Device {
    /// `ssd.read_groups`: what the wordline scheduler did (TLC devices only).
    pub(super) fn add_read_group_json(&self, ssd: &mut serde_json::Value) {
        if let (Some(c), Some(obj)) = (self.read_group_counters(), ssd.as_object_mut()) {
            obj.insert(
                "read_groups".into(),
                serde_json::json!({
                    "units_placed": c.units_placed,
                    "wordlines_opened": c.wordlines_opened,
                    "units_fallback": c.units_fallback,
                    "wordlines_abandoned": c.wordlines_abandoned,
                    "wordlines_released": c.wordlines_released,
                    "groups_learnt": c.groups_learnt,
                    "gc_moved": self.ftl.gc_read_group_units().0,
                    "gc_kept": self.ftl.gc_read_group_units().1,
                }),
            );
        }
    }
}
