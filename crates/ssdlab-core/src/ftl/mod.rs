//! Flash translation layers behind one trait.
//!
//! An FTL owns the mapping and the block life cycle and decides; it never computes time. For each
//! host page it returns where the data goes and pushes the flash commands its own bookkeeping
//! needs (GC moves and erases) into a
//! [`FlashOp`] list that the device then times on the hardware and applies to stored data.
//! The page-mapping FTL is the one built; DFTL, a hybrid FTL and the host-managed (NoFTL) mode
//! are meant to implement the same trait.

mod dftl;
mod l2p;
mod page_map;
pub mod segments;

pub use dftl::{DftlCounters, DftlFtl, DFTL_ENTRY_BYTES};
pub use page_map::{PageMapFtl, GC_RESERVE_BLOCKS};
pub use segments::{SeaCounters, SeaState};

use crate::config::{Config, Derived, FtlKind};
use crate::ecc::flex::FlexPages;
use crate::nand::Geometry;
use crate::placement::HandleCounters;
use serde::Serialize;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FtlError {
    #[error("device full: no free block in plane {plane} and no block GC could reclaim")]
    NoSpace { plane: u32 },
    #[error(
        "device full: the translation pages GC left stale kept starting more GC (one request \
         wrote back more of them than the device has pages); give the device more spare space \
         (geometry.over_provisioning) or cache more of the mapping (ftl.dftl_cached_fraction)"
    )]
    NoSpaceForMapping,
}

/// Why a flash command was issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Host,
    Gc,
}

/// A flash command the FTL needs beyond the host page's own read or program. (A cached-mapping
/// FTL will add translation-page reads and programs here, with the device honouring their
/// completion before the data access that depends on them.)
///
/// Addresses are physical pages except in `MoveUnit`, which names physical mapping units.
/// With one mapping unit per page GC moves whole pages (`Move`); with several, GC reads each
/// victim page that holds valid units into the controller (`GcRead`), packs the units into
/// pages of the GC frontier (`MoveUnit`, data only) and programs each page once it is full or
/// its victim is done (`GcProgram`, after the reads before it in the list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashOp {
    /// GC relocation of a valid page (copyback inside the die, or through the controller).
    Move {
        src: u32,
        dst: u32,
    },
    /// GC reads a victim page into the controller.
    GcRead {
        src: u32,
    },
    /// A valid mapping unit moves from `src` to `dst` (physical units): its data follows.
    MoveUnit {
        src: u32,
        dst: u32,
    },
    /// GC programs a page of relocated units.
    GcProgram {
        dst: u32,
    },
    Erase {
        block: u32,
        purpose: Purpose,
    },
    /// A cached-mapping FTL reads a translation page (a mapping-cache miss, or the merge of a
    /// write-back). Translation work is a chain in list order: each step, and the host access
    /// that needs the mapping, waits for the one before.
    TranslationRead {
        ppa: u32,
    },
    /// A cached-mapping FTL programs a translation page (a write-back of dirty entries).
    TranslationProgram {
        ppa: u32,
    },
    /// FTL work on the device CPU (mapping lookups, cache maintenance), in the chain.
    DeviceCpu {
        ns: u64,
    },
}

/// One host mapping unit to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitWrite {
    /// Logical mapping unit.
    pub unit: u64,
    /// Placement handle (write frontier) resolved from the request's hints.
    pub handle: u32,
    /// Plane chosen by the device's allocation policy.
    pub plane: u32,
    /// Simulated time of the write (block age for cost-benefit GC).
    pub now_ns: u64,
    /// Bytes of this unit the host actually wrote (less than a unit for sub-unit writes).
    pub host_bytes: u32,
}

/// Where a host unit write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The physical unit that held the logical unit before (now invalid), if any. Equal to
    /// `new` when the write merged into the copy still in the write buffer (nothing invalid).
    pub old: Option<u32>,
    /// The physical unit it now occupies.
    pub new: u32,
    /// It is the first unit of its page: the page takes a write-buffer slot.
    pub opens_page: bool,
    /// It is the last unit of its page: the page is complete and can be programmed.
    pub fills_page: bool,
}

/// Cumulative FTL counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FtlCounters {
    /// Bytes the host wrote (sub-unit writes count what they wrote).
    pub host_bytes_written: u64,
    pub host_units_written: u64,
    /// Pages programmed with host data (filled, or padded by a write-through or flush).
    pub host_pages_programmed: u64,
    pub gc_units_moved: u64,
    /// Pages programmed by GC relocation.
    pub gc_pages_programmed: u64,
    /// Unit slots left empty when a page was programmed before it was full.
    pub padded_units: u64,
    /// Unit writes that merged into their unit's copy still in the page being filled (a
    /// write-buffer hit: no new slot, no read of old data).
    pub buffer_merged_units: u64,
    /// Victim blocks reclaimed.
    pub gc_invocations: u64,
    pub gc_background_invocations: u64,
    pub erases: u64,
    pub trimmed_units: u64,
}

impl FtlCounters {
    /// Flash page programs: host pages plus GC relocations.
    pub fn flash_pages_programmed(&self) -> u64 {
        self.host_pages_programmed + self.gc_pages_programmed
    }

    /// Write amplification: media bytes programmed over host bytes written (0 before any write).
    pub fn waf(&self, page_bytes: u32) -> f64 {
        if self.host_bytes_written == 0 {
            return 0.0;
        }
        (self.flash_pages_programmed() * page_bytes as u64) as f64 / self.host_bytes_written as f64
    }
}

pub trait Ftl: Send {
    fn name(&self) -> &'static str;
    /// The physical unit holding logical unit `unit`, if mapped; translation work goes into
    /// `ops`.
    fn lookup(&mut self, unit: u64, ops: &mut Vec<FlashOp>) -> Option<u32>;
    /// The physical unit holding logical unit `unit`, if mapped, with no translation work and
    /// no change of state (an untimed inspection, such as [`crate::host::Device::peek`]).
    fn mapped(&self, unit: u64) -> Option<u32>;
    /// Is the page holding physical unit `unit` programmed (not still filling in the write
    /// buffer)?
    fn is_programmed(&self, unit: u32) -> bool;
    /// Does physical unit `unit` hold the current copy of its logical unit (valid)?
    fn holds_current_copy(&self, unit: u32) -> bool;
    /// Map `write.unit` to the next unit of its placement handle's frontier; foreground GC
    /// goes into `ops`.
    fn write(&mut self, write: UnitWrite, ops: &mut Vec<FlashOp>)
        -> Result<WriteOutcome, FtlError>;
    /// A write whose unit's current copy, physical unit `current`, is in a host page still in
    /// the controller's write buffer (its program made and not started, as the caller knows):
    /// it merges into that copy, as a controller's buffer absorbs an overwrite. The mapping
    /// does not change (a cached-mapping FTL loads and dirties no entry); counted as a host
    /// write merged in the buffer.
    fn merge_into_buffered(&mut self, write: &UnitWrite, current: u32) -> WriteOutcome;
    /// Does the host frontier of (`plane`, `handle`) have a partly filled page?
    fn host_page_filling(&self, plane: u32, handle: u32) -> bool;
    /// Units the host frontier of (`plane`, `handle`) has written into its open block (0 with
    /// none open), for placement that lines data up with wordlines; `None` if the FTL does not
    /// keep frontiers this way.
    fn host_frontier_units(&self, _plane: u32, _handle: u32) -> Option<u32> {
        None
    }
    /// The host unit just written at physical unit `unit` belongs to read group `group` (a
    /// nonzero compact id): GC keeps the group's units on whole wordlines when it moves them.
    fn note_read_group(&mut self, _unit: u32, _group: u32) {}
    /// Units of read groups GC moved, and those of them it kept on whole wordlines of their
    /// group (since the counters were reset).
    fn gc_read_group_units(&self) -> (u64, u64) {
        (0, 0)
    }
    /// Program the host page `ppa` before it is full (a write-through or a flush): its empty
    /// unit slots stay empty. False if it is not a partly filled page.
    fn pad_page(&mut self, ppa: u32) -> bool;
    /// Speed hint: `unit` will be looked up or written soon (stage 1: its mapping entry).
    fn prefetch(&self, _unit: u64) {}
    /// Speed hint, a few requests later than [`Ftl::prefetch`]: the entries that depend on the
    /// mapping (the old unit's reverse entry).
    fn prefetch_dependent(&self, _unit: u64) {}
    /// Deallocate logical unit `unit` at `now_ns`; GC will never copy it. A cached-mapping
    /// FTL's translation work for it goes to `ops`.
    fn trim(&mut self, unit: u64, now_ns: u64, ops: &mut Vec<FlashOp>);
    /// Does `plane` want background GC (below its watermark, or a victim half collected)?
    fn wants_background_gc(&self, plane: u32) -> bool;
    /// Does any of `planes` want background GC? (One virtual call where a die's planes are
    /// asked: inside it, each FTL's own `wants_background_gc` is called directly.)
    fn any_wants_background_gc(&self, planes: std::ops::Range<u32>) -> bool {
        planes
            .into_iter()
            .any(|plane| self.wants_background_gc(plane))
    }
    /// One background GC step in `plane`: at most `max_moves` pages' worth of moves, and the erase of the
    /// victim if the step empties it. False if there was nothing to do.
    fn background_gc(
        &mut self,
        plane: u32,
        now_ns: u64,
        max_moves: u32,
        ops: &mut Vec<FlashOp>,
    ) -> Result<bool, FtlError>;
    /// From now on (`deferred`), a collected victim joins its plane's free pool only when
    /// [`Ftl::block_erased`] says its erase ran, so that frontiers open erased blocks while
    /// there are any; until then it counts as free (GC has done its work) and is opened only
    /// if the pool is empty. Off: victims join the pool at once. Either way, victims still
    /// waiting join the pool now (whoever deferred them has run or dropped their erases).
    /// The event engine defers erases; the reservation path orders each die's operations
    /// as they are made, so an erase always precedes the block's next programs there.
    fn defer_erases(&mut self, deferred: bool);

    /// While on, the FTL may update its map with streaming (non-temporal) stores, which are
    /// ordered only later; turning it off orders them all (Rust requires the storing thread
    /// to). The device turns it on for the span of one run step, which one thread runs from
    /// start to end. Off by default; an FTL without such stores ignores it.
    fn stream_map_updates(&mut self, _on: bool) {}
    /// The erase of `block` (a collected victim) ran.
    fn block_erased(&mut self, block: u32);
    /// Free blocks of `plane` now (collected victims waiting for their erase included).
    fn free_blocks(&self, plane: u32) -> usize;
    /// Fewest free blocks any plane has kept after a host write opened a block, since the
    /// counters were reset (never below the GC reserve).
    fn min_free_blocks(&self) -> usize;
    fn counters(&self) -> FtlCounters;
    /// DFTL's cache and translation counters (None for other FTLs).
    fn dftl_counters(&self) -> Option<DftlCounters> {
        None
    }
    fn handle_counters(&self) -> &[HandleCounters];
    fn reset_counters(&mut self);
    fn erase_counts(&self) -> &[u32];
    /// Program/erase cycles of the block holding `ppa` (drives the RBER model).
    fn erase_count_of(&self, ppa: u32) -> u32;
    /// SEA-SSD settings hint: the `dyn` segment's quota of blocks per plane; from now on GC
    /// chooses victims per segment (see [`segments`]).
    fn sea_size(&mut self, dyn_blocks_per_plane: u32);
    /// SEA-SSD prediction hint: logical unit `unit` will be written soon.
    fn sea_predict(&mut self, unit: u64);
    /// The SEA-SSD segments and prediction counters now.
    fn sea_state(&self) -> SeaState;
    /// The placement handle that owns the block holding physical unit `unit`.
    fn block_handle_of(&self, unit: u32) -> u32;
    /// After a power loss: drop the volatile state (mapping caches) and rebuild the mapping
    /// from what is on flash (the OOB of programmed pages, translation pages); `lost(unit)`
    /// names physical units whose program never completed. Returns what was read.
    fn recover(&mut self, lost: &dyn Fn(u32) -> bool) -> RecoveryScan;
    /// FlexECC's page states (see [`crate::ecc::flex`]), when `flexecc.mode` is not off.
    fn flex_pages(&self) -> Option<&FlexPages> {
        None
    }
    fn flex_pages_mut(&mut self) -> Option<&mut FlexPages> {
        None
    }
    /// Check the logical-to-physical map and the physical units' validity agree and valid counts
    /// close; a description of the first violation.
    fn check_invariants(&self) -> Result<(), String>;
}

/// What recovery after a power loss read from flash: the pages whose OOB area it scanned and
/// the pages it read whole (DFTL's translation pages). Physical page numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryScan {
    pub oob_pages: Vec<u32>,
    pub full_pages: Vec<u32>,
}

/// The FTL registry.
pub fn build_ftl(config: &Config, geometry: &Geometry, derived: &Derived) -> Box<dyn Ftl> {
    match config.ftl.kind {
        FtlKind::PageMap => Box::new(PageMapFtl::new(
            config,
            geometry,
            derived.logical_units,
            derived.units_per_page,
        )),
        FtlKind::Dftl => Box::new(DftlFtl::new(config, geometry, derived.logical_units)),
    }
}
