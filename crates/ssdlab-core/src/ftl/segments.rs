//! SEA-SSD's segments on the page-mapping FTL (Sun, Arakawa, Takeuchi, "SEA-SSD: a
//! storage-engine-assisted SSD", TCAS-I 2014): the `dyn` segment holds data the storage engine
//! will rewrite soon, `stat` the rest.
//!
//! The classification hint already picks a placement handle per write (`placement`), and a
//! block belongs to the handle whose frontier opened it, so a segment is a set of blocks: `dyn`
//! the blocks of `placement.sea_dyn_handle`, `stat` every other block. This module adds the
//! two other hints:
//!
//! - *Settings*: the engine's WAL and cache sizes give the `dyn` segment a quota of blocks per
//!   plane. Once sized, a plane that needs a victim collects inside `dyn` when `dyn` holds more
//!   blocks than its quota there, and inside `stat` otherwise, with the configured victim policy
//!   restricted to that segment's blocks, unless the best victim of all blocks costs at most
//!   `sea.cross_segment_ratio` of that one in units copied per unit freed (then it is taken: a
//!   quota that misjudges dyn's live data must not make GC copy it over and over). Unsized (no settings
//!   hint), victims are chosen among all blocks, as without SEA. The quota is a victim-choice
//!   rule, not a partition: `dyn` may run over it between collections.
//! - *Prediction*: logical units the engine will write soon. They are kept in a bounded FIFO
//!   table; a unit leaves it when the host writes it (the prediction came true) or when it has
//!   fallen out of the latest `sea.predict_table_entries` predictions (expired). GC of a `stat`
//!   victim sends a predicted unit to the `dyn` handle's GC frontier instead of its own.
//!
//! The FTL calls in at three points: a block opened or freed (the per-plane block counts), a
//! victim chosen ([`Segments::candidates`]) and a valid unit moved ([`Segments::gc_handle`]).

use crate::config::{Config, Derived, SeaConfig};
use crate::gc::BlockState;
use crate::placement::sea_handles;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};

/// What the prediction hint did, in logical mapping units (reset with the other counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SeaCounters {
    /// Predicted units the host then wrote while still in the table.
    pub came_true_units: u64,
    /// Predicted units that fell out of the table unwritten.
    pub expired_units: u64,
    /// Valid units GC moved from `stat` to `dyn` because they were predicted.
    pub migrated_units: u64,
}

/// The segments now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SeaState {
    pub counters: SeaCounters,
    /// Blocks (open, full or in collection) of the dyn handle, over all planes.
    pub dyn_blocks: u64,
    /// Blocks of every other handle.
    pub stat_blocks: u64,
    /// The dyn quota per plane, once a settings hint sized the segments.
    pub dyn_quota_blocks_per_plane: Option<u32>,
    /// Predictions waiting in the table.
    pub predicted_in_table: u64,
}

/// The dyn segment a settings hint asks for, and what the device grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DynQuota {
    /// Blocks asked for over the device: (WAL + cache × dirty fraction) × multiplier, rounded
    /// up to whole blocks.
    pub requested_blocks: u64,
    /// Granted per plane: the request spread evenly (rounded up), clamped.
    pub blocks_per_plane: u32,
    /// The clamp cut the request.
    pub clamped: bool,
}

/// What sizing the `dyn` segment needs of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentGeometry {
    pub block_bytes: u64,
    pub planes: u32,
    pub blocks_per_plane: u32,
    pub logical_bytes: u64,
    /// Blocks per plane no segment may count on: the open blocks (host and GC frontier per
    /// handle), the foreground-GC watermark and the hard reserve, as `Config::validate` counts
    /// them.
    pub reserve_blocks_per_plane: u32,
}

impl SegmentGeometry {
    pub fn new(config: &Config, derived: &Derived) -> Self {
        let g = &config.geometry;
        SegmentGeometry {
            block_bytes: g.pages_per_block as u64 * g.page_size_bytes as u64,
            planes: derived.planes,
            blocks_per_plane: g.blocks_per_plane,
            logical_bytes: derived.logical_bytes,
            reserve_blocks_per_plane: 2 * config.placement.handles
                + config.ftl.gc_fg_free_blocks
                + 1,
        }
    }
}

/// The dyn quota for a settings hint of `wal_bytes` and `cache_bytes`.
///
/// The engine's dyn data is D = WAL + cache × `sea.dirty_fraction`, and the segment asked for
/// is D × `sea.dyn_multiplier`, in whole blocks spread evenly over the planes (rounded up).
/// The clamp: `stat` keeps enough blocks in every plane to hold the rest of the logical
/// capacity (capacity − D) plus the reserve blocks; beyond that, a plane whose `dyn` is under
/// its quota would collect `stat` victims with nothing to gain.
pub fn dyn_quota(
    sea: &SeaConfig,
    wal_bytes: u64,
    cache_bytes: u64,
    g: &SegmentGeometry,
) -> DynQuota {
    let dyn_data = wal_bytes as f64 + cache_bytes as f64 * sea.dirty_fraction;
    // f64 → u64 saturates; a request past the device is clamped below anyway.
    let requested_blocks = (dyn_data * sea.dyn_multiplier / g.block_bytes as f64).ceil() as u64;
    let per_plane = requested_blocks.div_ceil(g.planes as u64);
    let stat_bytes = g.logical_bytes.saturating_sub(dyn_data.ceil() as u64);
    let stat_blocks = stat_bytes.div_ceil(g.block_bytes).div_ceil(g.planes as u64);
    let max_per_plane =
        (g.blocks_per_plane as u64).saturating_sub(stat_blocks + g.reserve_blocks_per_plane as u64);
    DynQuota {
        requested_blocks,
        blocks_per_plane: per_plane.min(max_per_plane) as u32,
        clamped: per_plane > max_per_plane,
    }
}

/// Predicted logical units: the latest `capacity` predictions, minus the units written since.
/// Memory follows the capacity, not the device: a ring of the predictions in order and a map
/// from each unit still waiting to the sequence number of its newest prediction (an older ring
/// entry of a re-predicted or written unit is stale and skipped when it leaves the ring).
#[derive(Debug, Clone)]
struct PredictTable {
    capacity: usize,
    ring: VecDeque<(u32, u64)>,
    waiting: HashMap<u32, u64>,
    next_seq: u64,
}

impl PredictTable {
    fn new(capacity: u32) -> Self {
        PredictTable {
            capacity: capacity as usize,
            ring: VecDeque::new(),
            waiting: HashMap::new(),
            next_seq: 0,
        }
    }

    /// Remember `unit`; true if an older prediction expired to make room.
    fn predict(&mut self, unit: u32) -> bool {
        // The newest prediction of `unit` first: an older one leaving the ring is then stale.
        self.waiting.insert(unit, self.next_seq);
        let mut expired = false;
        if self.ring.len() == self.capacity {
            let (old, seq) = self.ring.pop_front().expect("capacity is at least 1");
            if self.waiting.get(&old) == Some(&seq) {
                self.waiting.remove(&old);
                expired = true;
            }
        }
        self.ring.push_back((unit, self.next_seq));
        self.next_seq += 1;
        expired
    }

    /// `unit` was written: true if it was waiting (the prediction came true).
    #[inline]
    fn written(&mut self, unit: u32) -> bool {
        !self.waiting.is_empty() && self.waiting.remove(&unit).is_some()
    }

    #[inline]
    fn contains(&self, unit: u32) -> bool {
        !self.waiting.is_empty() && self.waiting.contains_key(&unit)
    }
}

/// The SEA-SSD state of an FTL.
#[derive(Debug, Clone)]
pub struct Segments {
    dyn_handle: u32,
    /// Distinct dyn and stat handles: without them there are no segments.
    active: bool,
    handles: u32,
    migrate: bool,
    cross_segment_ratio: f64,
    quota: Option<u32>,
    /// Blocks in use (not free) per (plane, handle).
    in_use: Vec<u32>,
    table: PredictTable,
    counters: SeaCounters,
    /// A plane's block states with the other segment's blocks hidden (reused scratch).
    mask: Vec<BlockState>,
}

impl Segments {
    pub fn new(config: &Config, planes: u32) -> Self {
        let p = &config.placement;
        let (dyn_handle, stat_handle) = sea_handles(p);
        Segments {
            dyn_handle,
            active: dyn_handle != stat_handle,
            handles: p.handles,
            migrate: config.sea.migrate_predicted,
            cross_segment_ratio: config.sea.cross_segment_ratio,
            quota: None,
            in_use: vec![0; planes as usize * p.handles as usize],
            table: PredictTable::new(config.sea.predict_table_entries),
            counters: SeaCounters::default(),
            mask: Vec::new(),
        }
    }

    pub fn dyn_handle(&self) -> u32 {
        self.dyn_handle
    }

    /// `sea.cross_segment_ratio`: when the other segment's best victim is cheap enough to be
    /// taken instead of the quota's.
    pub fn cross_segment_ratio(&self) -> f64 {
        self.cross_segment_ratio
    }

    /// Are there two segments (distinct dyn and stat handles)?
    pub fn active(&self) -> bool {
        self.active
    }

    /// A settings hint: from now on victims are chosen per segment.
    pub fn size(&mut self, dyn_blocks_per_plane: u32) {
        self.quota = Some(dyn_blocks_per_plane);
    }

    /// A prediction hint for one logical unit.
    pub fn predict(&mut self, unit: u64) {
        if self.table.predict(unit as u32) {
            self.counters.expired_units += 1;
        }
    }

    /// The host wrote `unit`.
    #[inline]
    pub fn host_written(&mut self, unit: u64) {
        if self.table.written(unit as u32) {
            self.counters.came_true_units += 1;
        }
    }

    #[inline]
    pub fn block_opened(&mut self, plane: u32, handle: u32) {
        self.in_use[(plane * self.handles + handle) as usize] += 1;
    }

    #[inline]
    pub fn block_freed(&mut self, plane: u32, handle: u32) {
        self.in_use[(plane * self.handles + handle) as usize] -= 1;
    }

    fn dyn_blocks_in(&self, plane: u32) -> u32 {
        self.in_use[(plane * self.handles + self.dyn_handle) as usize]
    }

    /// The block states a victim of `plane` is chosen among (`state` and `owner` are the
    /// plane's): the segment's own blocks once the segments are sized (`dyn` if it holds more
    /// than its quota in the plane, else `stat`), None for all blocks.
    pub fn candidates(
        &mut self,
        plane: u32,
        state: &[BlockState],
        owner: &[u8],
    ) -> Option<&[BlockState]> {
        let quota = self.quota.filter(|_| self.active)?;
        let want_dyn = self.dyn_blocks_in(plane) > quota;
        let dyn_handle = self.dyn_handle;
        self.mask.clear();
        self.mask.extend(state.iter().zip(owner).map(|(&s, &h)| {
            if (h as u32 == dyn_handle) == want_dyn {
                s
            } else {
                // Not a candidate: policies choose among full blocks only.
                BlockState::Open
            }
        }));
        Some(&self.mask)
    }

    /// The dyn handle if logical unit `unit`, valid in a victim of `victim_handle`, should
    /// migrate there: it is predicted and leaves `stat`. The FTL moves it there if the dyn
    /// GC frontier has room, and then calls [`Segments::note_migrated`].
    #[inline]
    pub fn migration_target(&self, victim_handle: u32, unit: u32) -> Option<u32> {
        (self.may_migrate(victim_handle) && self.table.contains(unit)).then_some(self.dyn_handle)
    }

    /// May any unit of a victim of `victim_handle` migrate (is there a `migration_target`
    /// to ask about)?
    #[inline]
    pub fn may_migrate(&self, victim_handle: u32) -> bool {
        self.migrate && self.active && victim_handle != self.dyn_handle
    }

    #[inline]
    pub fn note_migrated(&mut self) {
        self.counters.migrated_units += 1;
    }

    pub fn reset_counters(&mut self) {
        self.counters = SeaCounters::default();
    }

    pub fn state(&self) -> SeaState {
        let total: u64 = self.in_use.iter().map(|&n| n as u64).sum();
        let dyn_blocks: u64 = if self.active {
            self.in_use
                .iter()
                .skip(self.dyn_handle as usize)
                .step_by(self.handles as usize)
                .map(|&n| n as u64)
                .sum()
        } else {
            0
        };
        SeaState {
            counters: self.counters,
            dyn_blocks,
            stat_blocks: total - dyn_blocks,
            dyn_quota_blocks_per_plane: self.quota,
            predicted_in_table: self.table.waiting.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_keeps_the_latest_predictions_and_forgets_written_units() {
        let mut t = PredictTable::new(3);
        assert!(!t.predict(1));
        assert!(!t.predict(2));
        assert!(t.written(1));
        assert!(!t.written(1), "a unit leaves the table once");
        assert!(!t.predict(3));
        // The ring is full: 1's entry is stale, so nothing waiting expires.
        assert!(!t.predict(4));
        assert!(t.contains(2) && t.contains(3) && t.contains(4));
        assert!(t.predict(5), "2 fell out of the last three predictions");
        assert!(!t.contains(2));
        // A re-prediction refreshes a unit: its older entry leaves without expiring it.
        assert!(!t.predict(3));
        assert!(t.predict(6), "4 expires");
        assert!(t.contains(3) && t.contains(5) && t.contains(6));
        assert!(t.ring.len() <= 3 && t.waiting.len() <= 3);
    }

    #[test]
    fn quota_rounds_up_spreads_and_clamps() {
        let sea = SeaConfig::default();
        let g = SegmentGeometry {
            block_bytes: 1 << 20,
            planes: 2,
            blocks_per_plane: 20,
            logical_bytes: 30 << 20,
            reserve_blocks_per_plane: 3,
        };
        // 1 MiB WAL + 8 MiB cache × 0.25 = 3 MiB in 1 MiB blocks over 2 planes: 2 per plane.
        let q = dyn_quota(&sea, 1 << 20, 8 << 20, &g);
        assert_eq!(q.requested_blocks, 3);
        assert_eq!((q.blocks_per_plane, q.clamped), (2, false));
        // Twice as much: stat keeps (30 - 6) / 2 = 12 blocks + 3 reserve of a plane's 20.
        let sea4 = SeaConfig {
            dyn_multiplier: 4.0,
            ..sea.clone()
        };
        let q = dyn_quota(&sea4, 2 << 20, 16 << 20, &g);
        assert_eq!(q.requested_blocks, 24);
        assert_eq!((q.blocks_per_plane, q.clamped), (5, true));
        let q = dyn_quota(&sea, u64::MAX, u64::MAX, &g);
        assert_eq!((q.blocks_per_plane, q.clamped), (17, true));
        assert_eq!(dyn_quota(&sea, 0, 0, &g).blocks_per_plane, 0);
    }
}
