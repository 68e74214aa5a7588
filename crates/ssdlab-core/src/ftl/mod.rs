//! Flash translation layers behind one trait.
//!
//! An FTL owns the mapping and the block life cycle and decides; it never computes time. For each
//! host page it returns where the data goes and pushes the flash commands its own bookkeeping
//! needs (GC moves and erases) into a
//! [`FlashOp`] list that the device then times on the hardware and applies to stored data.
//! The page-mapping FTL is the one built; DFTL, a hybrid FTL and the host-managed (NoFTL) mode
//! are meant to implement the same trait.

mod page_map;

pub use page_map::{PageMapFtl, GC_RESERVE_BLOCKS};

use crate::config::{Config, FtlKind};
use crate::nand::Geometry;
use crate::placement::HandleCounters;
use serde::Serialize;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FtlError {
    #[error("device full: no free block in plane {plane} and no block GC could reclaim")]
    NoSpace { plane: u32 },
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashOp {
    /// GC relocation of a valid page (copyback inside the die, or through the controller).
    Move {
        src: u32,
        dst: u32,
    },
    Erase {
        block: u32,
        purpose: Purpose,
    },
}

/// One host page to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageWrite {
    pub lpa: u64,
    /// Placement handle (write frontier) resolved from the request's hints.
    pub handle: u32,
    /// Plane chosen by the device's allocation policy.
    pub plane: u32,
    /// Simulated time of the write (block age for cost-benefit GC).
    pub now_ns: u64,
    /// Bytes of this page the host actually wrote (less than a page for sub-page writes).
    pub host_bytes: u32,
}

/// Where a host page write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The page that held the logical page before (now invalid), if any.
    pub old: Option<u32>,
    pub new: u32,
}

/// Cumulative FTL counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FtlCounters {
    pub host_pages_written: u64,
    pub gc_pages_moved: u64,
    /// Victim blocks reclaimed.
    pub gc_invocations: u64,
    pub gc_background_invocations: u64,
    pub erases: u64,
    pub trimmed_pages: u64,
}

impl FtlCounters {
    /// Flash page programs: host pages plus GC relocations.
    pub fn flash_pages_programmed(&self) -> u64 {
        self.host_pages_written + self.gc_pages_moved
    }
}

pub trait Ftl: Send {
    fn name(&self) -> &'static str;
    /// The physical page holding `lpa`, if mapped; translation work goes into `ops`.
    fn lookup(&mut self, lpa: u64, ops: &mut Vec<FlashOp>) -> Option<u32>;
    /// Map `page.lpa` to a fresh page of its placement handle; foreground GC goes into `ops`.
    fn write(&mut self, page: PageWrite, ops: &mut Vec<FlashOp>) -> Result<WriteOutcome, FtlError>;
    /// Speed hint: `lpa` will be looked up or written soon (stage 1: its mapping entry).
    fn prefetch(&self, _lpa: u64) {}
    /// Speed hint, a few requests later than [`Ftl::prefetch`]: the entries that depend on the
    /// mapping (the old page's reverse entry).
    fn prefetch_dependent(&self, _lpa: u64) {}
    /// Deallocate `lpa`; GC will never copy it.
    fn trim(&mut self, lpa: u64, ops: &mut Vec<FlashOp>);
    /// Does `plane` want background GC (below its watermark, or a victim half collected)?
    fn wants_background_gc(&self, plane: u32) -> bool;
    /// One background GC step in `plane`: at most `max_moves` page moves, and the erase of the
    /// victim if the step empties it. False if there was nothing to do.
    fn background_gc(
        &mut self,
        plane: u32,
        now_ns: u64,
        max_moves: u32,
        ops: &mut Vec<FlashOp>,
    ) -> Result<bool, FtlError>;
    /// Free blocks of `plane` now.
    fn free_blocks(&self, plane: u32) -> usize;
    /// Fewest free blocks any plane has kept after a host write opened a block, since the
    /// counters were reset (never below the GC reserve).
    fn min_free_blocks(&self) -> usize;
    fn counters(&self) -> FtlCounters;
    fn handle_counters(&self) -> &[HandleCounters];
    fn reset_counters(&mut self);
    fn erase_counts(&self) -> &[u32];
    /// Program/erase cycles of the block holding `ppa` (drives the RBER model).
    fn erase_count_of(&self, ppa: u32) -> u32;
    /// Check L2P and P2L agree and valid counts close; a description of the first violation.
    fn check_invariants(&self) -> Result<(), String>;
}

/// The FTL registry.
pub fn build_ftl(config: &Config, geometry: &Geometry, logical_pages: u64) -> Box<dyn Ftl> {
    match config.ftl.kind {
        FtlKind::PageMap => Box::new(PageMapFtl::new(config, geometry, logical_pages)),
    }
}
