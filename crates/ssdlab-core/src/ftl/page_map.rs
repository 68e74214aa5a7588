//! Ideal page-mapping FTL: the whole logical→physical table in controller RAM.
//!
//! The FTL maps *mapping units* (`ftl.mapping_unit_bytes`, 4 KiB by default), as controllers
//! do: a flash page holds one or more units, and the units written to a frontier fill its open
//! page slot by slot through the controller's write buffer, so a 4 KiB write on a 16 KiB-page
//! device neither reads nor rewrites the rest of the page. A page is programmed once its last
//! slot is taken, or earlier when the device pads it (write-through, or the end of a GC victim).
//! Addresses in the tables are physical units: page × units per page + slot.
//!
//! Writes go to write frontiers, one per (plane, placement handle) for host data and one more per
//! (plane, handle) for GC relocations, so data of different lifetimes never share an erase block
//! (FDP's persistently isolated handles). The device chooses the plane of each host page (its
//! allocation policy); the FTL fills that plane's frontier.
//!
//! GC is incremental and resumable (Lee et al., "Preemptible I/O scheduling of garbage
//! collection for SSDs", IEEE TCAD 2013): each plane has at most one victim in collection, and a
//! *step* moves at most a given number of pages' worth of its valid units, whole source pages
//! at a time (each is read once); the step that empties the victim erases it. At or below
//! `gc_fg_free_blocks` free blocks, every host page opened in the plane first runs a foreground
//! step of `gc_step_pages` × (shortage + 1) pages, so host writes are slowed in proportion to
//! the shortage rather than stalled behind a whole victim. The device runs background steps in
//! idle time below `gc_bg_free_blocks`. One free block per plane is a hard reserve for the GC
//! frontier: a host frontier never takes it, and a plane reaching it collects whole victims
//! until it has more. Free blocks are allocated by the wear-levelling [`FreeBlockPool`]. SEA-SSD's
//! segments ([`super::segments`]) narrow a victim's choice to one segment once sized and send
//! predicted units from `stat` victims to the `dyn` handle's GC frontier. State
//! is kept in flat arrays (4 bytes per logical unit, 4 per physical unit plus a few dozen per
//! block) so that a 1 TiB device with 4 KiB units fits in about 2 GB.

use std::collections::VecDeque;

use super::l2p::L2p;
use super::segments::{SeaState, Segments};
use super::{FlashOp, Ftl, FtlCounters, FtlError, Purpose, UnitWrite, WriteOutcome};
use crate::config::Config;
use crate::ecc::flex::FlexPages;
use crate::gc::destination::{gc_destination, FreeBlocks, GcDestination, MostFree};
use crate::gc::{victim_policy, BlockState, PlaneView, VictimPolicy};
use crate::nand::prefetch::prefetch;
use crate::nand::table::huge_zeroed_table;
use crate::nand::{Geometry, NONE};
use crate::placement::wordline::gc_wordline_order;
use crate::placement::HandleCounters;
use crate::wear::{free_pool, FreeBlockPool};

/// Frontier kinds: host writes and GC relocations.
const HOST: usize = 0;
const GC: usize = 1;

/// Free blocks per plane that only the GC frontier may take: collection can always make
/// progress, because one victim at a time per plane needs at most one new GC block.
pub const GC_RESERVE_BLOCKS: usize = 1;

/// How many units ahead a GC step prefetches the random L2P entries it will update, so that
/// their cache misses overlap each other and the work in between.
const GC_PREFETCH_AHEAD: usize = 16;

/// A victim in collection.
#[derive(Debug, Clone, Copy)]
struct GcJob {
    victim: u32,
    /// The plane whose GC frontier receives its valid units.
    destination: u32,
    /// Page offset in the victim from which valid units are still to be moved.
    next_offset: u32,
    /// Some of its units went to the SEA `dyn` handle's GC frontier (predicted units).
    migrated: bool,
}

/// A unit slot taken in a frontier.
#[derive(Debug, Clone, Copy)]
struct Slot {
    unit: u32,
    opens_page: bool,
    fills_page: bool,
}

pub struct PageMapFtl {
    geo: Geometry,
    /// log2(units per page): physical unit = page << shift | slot.
    unit_shift: u32,
    units_per_block: u32,
    page_bytes: u64,
    l2p: L2p,
    /// One bit per physical unit: it holds the current copy of its logical unit (whose
    /// address is in the unit's OOB, `oob_unit`). A bitmap and the OOB instead of a P2L table:
    /// 0.125 bytes a unit instead of 4, and a GC victim's scan reads 32 units a word.
    valid_bits: Vec<u32>,
    valid_units: Vec<u32>,
    /// Unit slots taken in each block (programmed pages, and the open page's filled slots).
    write_ptr: Vec<u32>,
    state: Vec<BlockState>,
    closed_seq: Vec<u64>,
    last_write_ns: Vec<u64>,
    erase_count: Vec<u32>,
    block_handle: Vec<u8>,
    /// Open block per (plane, handle, kind).
    open: Vec<u32>,
    pools: Vec<Box<dyn FreeBlockPool>>,
    /// Per plane: collected victims whose erase has not run yet, oldest first (only while
    /// erases are deferred, see [`Ftl::defer_erases`]). A frontier opens one of them only
    /// when its pool is empty; its programs then wait for the erase.
    erasing: Vec<VecDeque<u32>>,
    erases_deferred: bool,
    /// Free blocks per plane (the pools' lengths and the erasing ones, read on every host page
    /// and idle die without a call through the pool's trait object).
    free: Vec<u32>,
    /// The victim being collected in each plane and the next page offset to look at.
    gc_jobs: Vec<Option<GcJob>>,
    handles: u32,
    next_seq: u64,
    victim: Box<dyn VictimPolicy>,
    destination: Box<dyn GcDestination>,
    fg_free_blocks: usize,
    bg_free_blocks: usize,
    step_pages: u32,
    /// Fewest free blocks any plane has kept after a host frontier took one (the hard reserve
    /// must hold: only the GC frontier may go below it).
    min_free_blocks: usize,
    counters: FtlCounters,
    handle_counters: Vec<HandleCounters>,
    /// (source unit, logical unit) of the victim being collected; reused to avoid allocation.
    victim_units: Vec<(u32, u32)>,
    /// SEA-SSD: per-segment victim choice and the predicted units GC migrates.
    segments: Segments,
    /// The OOB area of every physical unit programmed since its block's erase: its logical
    /// unit + 1 (0: none) and the sequence number of the write, stale copies included. What
    /// recovery after a power loss scans, and where GC and `logical_of` find a valid unit's
    /// logical address. Zero-initialised, so untouched memory costs nothing.
    /// Sequence numbers are u32 (4 B a unit, not 8) compared by wrapping distance: right while
    /// two copies of one unit are fewer than 2^31 unit writes apart.
    oob_unit: Vec<u32>,
    oob_seq: Vec<u32>,
    oob_next_seq: u32,
    /// FlexECC: page states; GC re-protects flushed units in the EDC region.
    flex: Option<FlexPages>,
    /// The read group of every physical unit (a compact id, 0: none), allocated at the first
    /// grouped write (4 B a unit); cleared when its block is erased, carried by GC moves.
    unit_group: Vec<u32>,
    /// Grouped units GC moved, and those it kept on whole wordlines of their group.
    gc_group_units: (u64, u64),
    /// Tests: move every unit one by one (the reference for `move_runs`).
    #[cfg(test)]
    unit_by_unit: bool,
}

/// Does physical unit `unit` hold the current copy of its logical unit?
#[inline]
fn is_valid(bits: &[u32], unit: u32) -> bool {
    bits[(unit / 32) as usize] >> (unit % 32) & 1 != 0
}

/// Gather the valid units of a GC victim from `range.start` on into `units`, as (physical
/// unit, logical unit from the OOB), until `wanted` are found and then to the end of that page
/// (whole source pages are read). Returns how many, and where the scan stopped. Its own small
/// function: the loop keeps its state in registers.
#[inline(never)]
fn scan_victim(
    (bits, oob): (&[u32], &[u32]),
    range: std::ops::Range<u32>,
    wanted: usize,
    per_page: u32,
    units: &mut [(u32, u32)],
) -> (usize, u32) {
    let mut found = 0;
    // Where the scan stops: the end of the page in which the wanted count is reached.
    let mut limit = if wanted == 0 { range.start } else { range.end };
    if range.start >= limit {
        return (0, limit);
    }
    let oob = &oob[..range.end as usize];
    let mut word = (range.start / 32) as usize;
    let mut base = range.start & !31;
    let mut current = bits[word] & (!0 << (range.start % 32));
    loop {
        // In a word wholly inside the limit, the set bits that stay below the wanted count
        // (all but the last one wanted) need no checks per unit.
        if base + 32 <= limit {
            let n = (current.count_ones() as usize).min(wanted.saturating_sub(found + 1));
            for slot in &mut units[found..found + n] {
                let unit = base + current.trailing_zeros();
                current &= current - 1;
                *slot = (unit, oob[unit as usize] - 1);
            }
            found += n;
        }
        while current != 0 {
            let unit = base + current.trailing_zeros();
            if unit >= limit {
                return (found, limit);
            }
            current &= current - 1;
            units[found] = (unit, oob[unit as usize] - 1);
            found += 1;
            if found == wanted {
                limit = (unit | (per_page - 1)) + 1;
            }
        }
        base = base.saturating_add(32);
        if base >= limit {
            return (found, limit);
        }
        word += 1;
        current = bits[word];
    }
}

#[inline]
fn set_valid(bits: &mut [u32], unit: u32) {
    bits[(unit / 32) as usize] |= 1 << (unit % 32);
}

#[inline]
fn clear_valid(bits: &mut [u32], unit: u32) {
    bits[(unit / 32) as usize] &= !(1 << (unit % 32));
}

/// Set (`on`) or clear the bits of the units `range` (not empty): word by word, not unit by
/// unit.
#[inline]
fn set_valid_range(bits: &mut [u32], range: std::ops::Range<u32>, on: bool) {
    debug_assert!(!range.is_empty());
    let (first, last) = (range.start / 32, (range.end - 1) / 32);
    let low = !0u32 << (range.start % 32);
    let high = !0u32 >> (31 - (range.end - 1) % 32);
    let words = &mut bits[first as usize..=last as usize];
    let n = words.len();
    for (i, word) in words.iter_mut().enumerate() {
        let mut mask = !0u32;
        if i == 0 {
            mask &= low;
        }
        if i == n - 1 {
            mask &= high;
        }
        if on {
            *word |= mask;
        } else {
            *word &= !mask;
        }
    }
}

impl PageMapFtl {
    pub fn new(config: &Config, geo: &Geometry, logical_units: u64, units_per_page: u32) -> Self {
        debug_assert!(units_per_page.is_power_of_two());
        let blocks = geo.blocks as usize;
        let handles = config.placement.handles;
        let mut pools: Vec<Box<dyn FreeBlockPool>> = Vec::with_capacity(geo.planes as usize);
        for plane in 0..geo.planes {
            let mut pool = free_pool(config.ftl.wear_leveling);
            for block in geo.plane_blocks(plane) {
                pool.push(block as u32, 0);
            }
            pools.push(pool);
        }
        let unit_shift = units_per_page.trailing_zeros();
        PageMapFtl {
            geo: geo.clone(),
            unit_shift,
            units_per_block: geo.pages_per_block << unit_shift,
            page_bytes: config.geometry.page_size_bytes as u64,
            l2p: L2p::new(logical_units as usize, NONE),
            valid_bits: huge_zeroed_table(
                ((geo.physical_pages as usize) << unit_shift).div_ceil(32),
            ),
            valid_units: vec![0; blocks],
            write_ptr: vec![0; blocks],
            state: vec![BlockState::Free; blocks],
            closed_seq: vec![0; blocks],
            last_write_ns: vec![0; blocks],
            erase_count: vec![0; blocks],
            block_handle: vec![0; blocks],
            open: vec![NONE; geo.planes as usize * handles as usize * 2],
            free: pools.iter().map(|p| p.len() as u32).collect(),
            pools,
            erasing: vec![VecDeque::new(); geo.planes as usize],
            erases_deferred: false,
            gc_jobs: vec![None; geo.planes as usize],
            handles,
            next_seq: 0,
            victim: victim_policy(config.ftl.gc_policy),
            destination: gc_destination(config.ftl.gc_destination),
            fg_free_blocks: config.ftl.gc_fg_free_blocks as usize,
            bg_free_blocks: config.ftl.gc_bg_free_blocks as usize,
            step_pages: config.ftl.gc_step_pages,
            min_free_blocks: usize::MAX,
            counters: FtlCounters::default(),
            handle_counters: vec![HandleCounters::default(); handles as usize],
            victim_units: Vec::with_capacity(geo.pages_per_block as usize),
            segments: Segments::new(config, geo.planes),
            oob_unit: huge_zeroed_table((geo.physical_pages as usize) << unit_shift),
            oob_seq: huge_zeroed_table((geo.physical_pages as usize) << unit_shift),
            oob_next_seq: 1,
            flex: FlexPages::new(config, logical_units, geo.physical_pages << unit_shift),
            unit_group: Vec::new(),
            gc_group_units: (0, 0),
            #[cfg(test)]
            unit_by_unit: false,
        }
    }

    /// Write the OOB of physical unit `unit`: it holds logical unit `lun`, written now.
    #[inline]
    fn write_oob(&mut self, unit: u32, lun: u32) {
        self.write_oob_run(unit, [lun]);
    }

    /// Write the OOB of the physical units from `first` on, one per logical unit of `luns`, in
    /// the order they are written.
    #[inline]
    fn write_oob_run(&mut self, first: u32, luns: impl IntoIterator<Item = u32>) {
        let units = self.oob_unit[first as usize..].iter_mut();
        let seqs = self.oob_seq[first as usize..].iter_mut();
        for ((unit, seq), lun) in units.zip(seqs).zip(luns) {
            *unit = lun + 1;
            *seq = self.oob_next_seq;
            self.oob_next_seq = self.oob_next_seq.wrapping_add(1);
        }
    }

    /// The OOB of physical unit `unit`: (logical unit, sequence number), if programmed.
    pub fn oob_of(&self, unit: u32) -> Option<(u64, u32)> {
        let lun = *self.oob_unit.get(unit as usize)?;
        (lun != 0).then(|| (lun as u64 - 1, self.oob_seq[unit as usize]))
    }

    /// Was sequence number `a` written after `b` (serial-number arithmetic, RFC 1982)?
    pub fn seq_after(a: u32, b: u32) -> bool {
        (a.wrapping_sub(b) as i32) > 0
    }

    /// The sequence number the next write's OOB gets.
    pub fn next_seq(&self) -> u32 {
        self.oob_next_seq
    }

    /// Physical units taken in block `block` (its write pointer, in unit slots).
    pub fn units_written(&self, block: u32) -> u32 {
        self.write_ptr[block as usize]
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The placement handle whose frontier opened block `block`.
    pub fn handle_of_block(&self, block: u32) -> u32 {
        self.block_handle[block as usize] as u32
    }

    /// After a power loss: rebuild the mapping (L2P, validity, valid counts) from the OOB of every
    /// unit on flash, the newest copy of each logical unit winning; `lost(unit)` names
    /// physical units whose program never completed. Returns the units scanned.
    pub fn recover_from_oob(&mut self, lost: &dyn Fn(u32) -> bool) -> u64 {
        self.l2p.fill(NONE);
        self.valid_bits.iter_mut().for_each(|w| *w = 0);
        self.valid_units.iter_mut().for_each(|v| *v = 0);
        let mut scanned = 0;
        for block in 0..self.geo.blocks {
            let first = self.first_unit(block);
            for unit in first..first + self.write_ptr[block as usize] {
                scanned += 1;
                if lost(unit) {
                    // A program cut by the power loss: the page holds no readable OOB.
                    self.oob_unit[unit as usize] = 0;
                    continue;
                }
                let Some((lun, seq)) = self.oob_of(unit) else {
                    continue;
                };
                let Some(current) = self.l2p.get(lun as usize) else {
                    continue;
                };
                if current != NONE {
                    if Self::seq_after(self.oob_seq[current as usize], seq) {
                        continue;
                    }
                    clear_valid(&mut self.valid_bits, current);
                    let old_block = self.block_of_unit(current);
                    self.valid_units[old_block] -= 1;
                }
                self.l2p.set(lun as usize, unit);
                set_valid(&mut self.valid_bits, unit);
                self.valid_units[block as usize] += 1;
            }
        }
        // A victim being collected restarts its scan: copies may have come back to life.
        for job in self.gc_jobs.iter_mut().flatten() {
            job.next_offset = 0;
        }
        scanned
    }

    /// The logical unit physical unit `unit` holds, if valid.
    pub fn logical_of(&self, unit: u32) -> Option<u64> {
        let lun = *self.oob_unit.get(unit as usize)?;
        is_valid(&self.valid_bits, unit).then(|| lun as u64 - 1)
    }

    /// Can `handle`'s host frontier in `plane` take a unit without any GC: its open block has
    /// room, or the plane has a free block beyond the hard reserve?
    pub fn has_room_without_gc(&self, plane: u32, handle: u32) -> bool {
        self.frontier_has_room(plane, handle, HOST)
    }

    /// Can the (plane, handle, kind) frontier take a unit without the hard reserve: its open
    /// block has room, or the plane has a free block beyond the reserve?
    fn frontier_has_room(&self, plane: u32, handle: u32, kind: usize) -> bool {
        let block = self.open[self.slot(plane, handle, kind)];
        (block != NONE && self.write_ptr[block as usize] < self.units_per_block)
            || self.free[plane as usize] as usize > GC_RESERVE_BLOCKS
    }

    /// Write a unit as [`Ftl::write`] does, but without the foreground GC step: for writes that
    /// are themselves GC's bookkeeping (DFTL's translation updates). With
    /// [`PageMapFtl::has_room_without_gc`] true no GC runs at all; at the hard reserve the
    /// allocation still collects whole victims, as every host frontier's does.
    pub fn write_without_foreground_gc(
        &mut self,
        write: UnitWrite,
        ops: &mut Vec<FlashOp>,
    ) -> Result<WriteOutcome, FtlError> {
        self.write_unit(write, false, ops)
    }

    #[inline]
    fn write_unit(
        &mut self,
        write: UnitWrite,
        foreground_gc: bool,
        ops: &mut Vec<FlashOp>,
    ) -> Result<WriteOutcome, FtlError> {
        let UnitWrite {
            unit,
            handle,
            plane,
            now_ns,
            ..
        } = write;
        if let Some(merged) = self.merge_in_buffer(&write) {
            return Ok(merged);
        }
        if foreground_gc && self.at_page_start(plane, handle, HOST) {
            self.foreground_gc(plane, now_ns, ops)?;
        }
        let slot = self.allocate(plane, handle, HOST, now_ns, ops)?;
        // Read the old mapping only now: foreground GC above may have moved it.
        let old = self.l2p.at(unit as usize);
        if old != NONE {
            self.invalidate(old);
        }
        self.l2p.set(unit as usize, slot.unit);
        set_valid(&mut self.valid_bits, slot.unit);
        self.write_oob(slot.unit, unit as u32);
        let block = self.block_of_unit(slot.unit);
        self.valid_units[block] += 1;
        self.count_host_write(block, &write);
        if slot.fills_page {
            self.handle_counters[handle as usize].media_bytes_written += self.page_bytes;
            self.counters.host_pages_programmed += 1;
        }
        Ok(WriteOutcome {
            old: (old != NONE).then_some(old),
            new: slot.unit,
            opens_page: slot.opens_page,
            fills_page: slot.fills_page,
        })
    }

    /// Is physical unit `unit` in the page `handle`'s host frontier is filling? That page is
    /// still in the controller's memory (staged, not programmed).
    #[inline]
    fn in_filling_host_page(&self, unit: u32, handle: u32) -> bool {
        let block = self.block_of_unit(unit) as u32;
        let plane = self.geo.plane_of_block(block);
        self.open[self.slot(plane, handle, HOST)] == block && !self.is_programmed(unit)
    }

    /// A write whose unit's current copy is still in its handle's filling page merges into
    /// that copy in the write buffer, as a controller merges writes that hit its buffer: no
    /// slot is taken and nothing is invalidated, a partial write needs no read of old data,
    /// and the page is programmed once, when full. None (and nothing done) otherwise.
    #[inline(always)]
    pub fn merge_in_buffer(&mut self, write: &UnitWrite) -> Option<WriteOutcome> {
        if self.unit_shift == 0 {
            return None; // one unit per page: nothing waits in a filling page
        }
        let current = self.l2p.get(write.unit as usize)?;
        if current == NONE || !self.in_filling_host_page(current, write.handle) {
            return None;
        }
        Some(self.merge_into(write, current))
    }

    /// `write` merged into its unit's copy at `current`, in the controller's memory.
    #[inline]
    pub fn merge_into(&mut self, write: &UnitWrite, current: u32) -> WriteOutcome {
        self.count_host_write(self.block_of_unit(current), write);
        self.counters.buffer_merged_units += 1;
        WriteOutcome {
            old: Some(current),
            new: current,
            opens_page: false,
            fills_page: false,
        }
    }

    /// The counters of a host unit write that landed in `block` (a new slot or a merge).
    #[inline]
    fn count_host_write(&mut self, block: usize, write: &UnitWrite) {
        let host_bytes = write.host_bytes as u64;
        self.last_write_ns[block] = write.now_ns;
        self.counters.host_units_written += 1;
        self.counters.host_bytes_written += host_bytes;
        self.segments.host_written(write.unit);
        self.handle_counters[write.handle as usize].host_bytes_written += host_bytes;
    }

    #[inline]
    fn slot(&self, plane: u32, handle: u32, kind: usize) -> usize {
        (plane as usize * self.handles as usize + handle as usize) * 2 + kind
    }

    #[inline]
    fn units_per_page(&self) -> u32 {
        1 << self.unit_shift
    }

    #[inline]
    fn block_of_unit(&self, unit: u32) -> usize {
        self.geo.block_of(unit >> self.unit_shift) as usize
    }

    /// The first physical unit of `block`.
    #[inline]
    fn first_unit(&self, block: u32) -> u32 {
        self.geo.first_page(block) << self.unit_shift
    }

    /// Does the next unit of the (plane, handle, kind) frontier start a new page?
    #[inline]
    fn at_page_start(&self, plane: u32, handle: u32, kind: usize) -> bool {
        let block = self.open[self.slot(plane, handle, kind)];
        block == NONE || self.write_ptr[block as usize] & (self.units_per_page() - 1) == 0
    }

    /// Next unit of the (plane, handle, kind) frontier, opening a block when needed. A host
    /// frontier never takes the GC reserve: a plane at it collects whole victims first.
    fn allocate(
        &mut self,
        plane: u32,
        handle: u32,
        kind: usize,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<Slot, FtlError> {
        let slot = self.slot(plane, handle, kind);
        let mut block = self.open[slot];
        if block == NONE || self.write_ptr[block as usize] == self.units_per_block {
            if block != NONE {
                self.close(block);
                self.open[slot] = NONE;
            }
            if kind == HOST && !self.collect_until_above(plane, GC_RESERVE_BLOCKS, now_ns, ops)? {
                return Err(FtlError::NoSpace { plane });
            }
            block = self.pools[plane as usize]
                .pop()
                .or_else(|| self.erasing[plane as usize].pop_front())
                .ok_or(FtlError::NoSpace { plane })?;
            self.free[plane as usize] -= 1;
            if kind == HOST {
                let free = self.free[plane as usize] as usize;
                self.min_free_blocks = self.min_free_blocks.min(free);
            }
            let b = block as usize;
            debug_assert_eq!(self.state[b], BlockState::Free);
            debug_assert_eq!(self.valid_units[b], 0);
            self.state[b] = BlockState::Open;
            self.block_handle[b] = handle as u8;
            self.segments.block_opened(plane, handle);
            self.write_ptr[b] = 0;
            self.open[slot] = block;
        }
        let b = block as usize;
        let offset = self.write_ptr[b];
        self.write_ptr[b] += 1;
        let mask = self.units_per_page() - 1;
        Ok(Slot {
            unit: self.first_unit(block) + offset,
            opens_page: offset & mask == 0,
            fills_page: (offset + 1) & mask == 0,
        })
    }

    /// Erased `block` joins the free pool of `plane`, ranked by its wear.
    fn pool_block(&mut self, plane: usize, block: u32) {
        self.pools[plane].push(block, self.erase_count[block as usize]);
    }

    fn close(&mut self, block: u32) {
        self.state[block as usize] = BlockState::Full;
        self.closed_seq[block as usize] = self.next_seq;
        self.next_seq += 1;
    }

    #[inline]
    fn invalidate(&mut self, unit: u32) {
        clear_valid(&mut self.valid_bits, unit);
        let block = self.block_of_unit(unit);
        debug_assert!(self.valid_units[block] > 0);
        self.valid_units[block] -= 1;
    }

    /// Close the partly filled page of `block` (its empty slots stay empty); the page it was.
    fn pad(&mut self, block: u32) -> Option<u32> {
        let b = block as usize;
        let mask = self.units_per_page() - 1;
        let filled = self.write_ptr[b] & mask;
        if filled == 0 {
            return None;
        }
        let empty = self.units_per_page() - filled;
        self.write_ptr[b] += empty;
        self.counters.padded_units += empty as u64;
        Some((self.first_unit(block) + self.write_ptr[b] - 1) >> self.unit_shift)
    }

    /// Foreground GC before a host page is opened in `plane`: at or below the watermark, a
    /// step whose size grows with the shortage (smooth back-pressure on host writes).
    fn foreground_gc(
        &mut self,
        plane: u32,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<(), FtlError> {
        let free = self.free[plane as usize] as usize;
        if free <= self.fg_free_blocks {
            let shortage = (self.fg_free_blocks - free) as u32 + 1;
            self.gc_step(plane, self.step_pages * shortage, now_ns, ops)?;
        }
        Ok(())
    }

    /// A plane other than the victim's receives GC data only while it keeps more free blocks
    /// than this: a step takes at most two of its blocks, which leaves it at its foreground
    /// watermark at worst, above the hard reserve its own GC needs.
    fn foreign_gc_floor(&self) -> usize {
        self.fg_free_blocks + 1
    }

    /// Program the partly filled pages of the GC frontiers a victim of `handle` fills in
    /// `plane`: its own, and the SEA `dyn` one if it `migrated` units there.
    fn pad_gc_frontiers(
        &mut self,
        plane: u32,
        handle: u32,
        migrated: bool,
        ops: &mut Vec<FlashOp>,
    ) {
        self.pad_gc_frontier(plane, handle, ops);
        if migrated {
            self.pad_gc_frontier(plane, self.segments.dyn_handle(), ops);
            if let Some(edc) = self.flex.as_ref().map(FlexPages::edc_handle) {
                self.pad_gc_frontier(plane, edc, ops);
            }
        }
    }

    /// May a victim's unit go to the (plane, handle) GC frontier other than its own (a SEA
    /// migration)? If its open block has room, or the plane has a free block beyond the hard
    /// reserve: the reserve then remains for the victim's own frontier, which needs at most one
    /// new block per victim (host frontiers never take the reserve), and a frontier that may
    /// not open a block sends the unit home. At the reserve GC works as without SEA.
    fn gc_frontier_can_take(&self, plane: u32, handle: u32) -> bool {
        self.frontier_has_room(plane, handle, GC)
    }

    /// Collect victims in the plane other than `plane` with the most invalid data until it
    /// keeps free blocks above the floor for foreign GC data after taking one more; that
    /// plane, or `None` if no other plane has invalid data or its GC stops gaining space.
    fn make_room_beside(
        &mut self,
        plane: u32,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<Option<u32>, FtlError> {
        let invalid = |p: u32| -> u64 {
            self.geo
                .plane_blocks(p)
                .filter(|&b| self.state[b] == BlockState::Full)
                .map(|b| (self.units_per_block - self.valid_units[b]) as u64)
                .sum()
        };
        let Some((other, reclaimable)) = (0..self.geo.planes)
            .filter(|&p| p != plane)
            .map(|p| (p, invalid(p)))
            .max_by_key(|&(p, units)| (units, std::cmp::Reverse(p)))
        else {
            return Ok(None);
        };
        if reclaimable < self.units_per_block as u64 {
            return Ok(None);
        }
        let floor = self.foreign_gc_floor() + 1;
        Ok(self
            .collect_until_above(other, floor, now_ns, ops)?
            .then_some(other))
    }

    /// Collect whole victims in `plane` until it has more than `floor` free blocks; false if
    /// GC finds no victim or stops gaining space. A victim with invalid pages frees net space;
    /// FIFO may pick a fully valid one that frees nothing, so a bound on rounds turns a plane
    /// that stops gaining space into `false`, not a spin.
    fn collect_until_above(
        &mut self,
        plane: u32,
        floor: usize,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<bool, FtlError> {
        let mut rounds = 0;
        while self.free[plane as usize] as usize <= floor {
            if !self.gc_step(plane, self.geo.pages_per_block, now_ns, ops)? {
                return Ok(false);
            }
            rounds += 1;
            if rounds > 2 * self.geo.blocks_per_plane {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The victim policy's choice of a full block in `plane` (an index in the plane), within
    /// the SEA segment due for collection once segments are sized; among all blocks when that
    /// segment has no block with space to gain or the plane is at its hard reserve (where
    /// collection must free the most it can), so that GC always makes progress.
    fn select_victim(&mut self, plane: u32, now_ns: u64) -> Option<usize> {
        let range = self.geo.plane_blocks(plane);
        let all = &self.state[range.clone()];
        let ratio = self.segments.cross_segment_ratio();
        let segment = if self.free[plane as usize] as usize > GC_RESERVE_BLOCKS {
            self.segments
                .candidates(plane, all, &self.block_handle[range.clone()])
        } else {
            None
        };
        let mut view = PlaneView {
            valid_pages: &self.valid_units[range.clone()],
            state: segment.unwrap_or(all),
            closed_seq: &self.closed_seq[range.clone()],
            last_write_ns: &self.last_write_ns[range.clone()],
            erase_count: &self.erase_count[range],
            pages_per_block: self.units_per_block,
            now_ns,
        };
        let mut index = self.victim.select(&view);
        if segment.is_some() {
            view.state = all;
            // The quota's segment has no victim worth taking, or the best of all blocks is
            // much cheaper (`sea.cross_segment_ratio`) in units copied per unit freed: take it.
            let block = self.units_per_block;
            let cost = |i: Option<usize>| match i {
                Some(i) if view.valid_pages[i] < block => {
                    let valid = view.valid_pages[i] as f64;
                    valid / (block as f64 - valid)
                }
                _ => f64::INFINITY,
            };
            if let Some(best) = self.victim.select(&view) {
                if cost(Some(best)) <= ratio * cost(index) {
                    index = Some(best);
                }
            }
        }
        index
    }

    /// Program the partly filled page of the (plane, handle) GC frontier, if any.
    fn pad_gc_frontier(&mut self, plane: u32, handle: u32, ops: &mut Vec<FlashOp>) {
        let block = self.open[self.slot(plane, handle, GC)];
        if block != NONE {
            if let Some(dst) = self.pad(block) {
                ops.push(FlashOp::GcProgram { dst });
                self.count_gc_page(handle);
            }
        }
    }

    /// A page of relocated units is programmed.
    fn count_gc_page(&mut self, handle: u32) {
        self.count_gc_pages(handle, 1);
    }

    /// `pages` pages of relocated units are programmed.
    fn count_gc_pages(&mut self, handle: u32, pages: u64) {
        self.counters.gc_pages_programmed += pages;
        self.handle_counters[handle as usize].media_bytes_written += pages * self.page_bytes;
    }

    /// Read groups in a GC step: add the victim's other valid units of the groups in `units`
    /// (from page `offset` on), so that a group moves in one step, and order them all so that
    /// each group fills whole wordlines of the (`destination`, `handle`) GC frontier
    /// ([`gc_wordline_order`]). Returns each unit's chunk (0: ungrouped).
    fn order_by_read_group(
        &mut self,
        units: &mut Vec<(u32, u32)>,
        first: u32,
        offset: u32,
        destination: u32,
        handle: u32,
    ) -> Vec<u32> {
        let groups = &self.unit_group;
        let mut present: Vec<u32> = units
            .iter()
            .map(|&(src, _)| groups[src as usize])
            .filter(|&g| g != 0)
            .collect();
        if present.is_empty() {
            return vec![0; units.len()];
        }
        present.sort_unstable();
        present.dedup();
        let rest = first + (offset << self.unit_shift)..first + self.units_per_block;
        for (src, lun) in rest.filter_map(|src| Some((src, self.logical_of(src)?))) {
            if present.binary_search(&groups[src as usize]).is_ok() {
                units.push((src, lun as u32));
            }
        }
        let upw = self.geo.bits_per_cell.max(1) << self.unit_shift;
        let block = self.open[self.slot(destination, handle, GC)];
        let position = if block == NONE {
            0
        } else {
            self.write_ptr[block as usize] % self.units_per_block
        };
        let (order, chunks) = gc_wordline_order(units, |src| groups[src as usize], upw, position);
        *units = order;
        chunks
    }

    /// A chunk of a read group moved by GC: counted kept if it filled one wordline from its
    /// start (a group's last, short chunk: the start of one).
    fn count_gc_chunk(&mut self, (id, _, units, kept): (u32, u32, u64, bool)) {
        if id != 0 {
            self.gc_group_units.0 += units;
            if kept {
                self.gc_group_units.1 += units;
            }
        }
    }

    /// The operations of moving unit `src` to `dst` in the `handle` GC frontier: a whole-page
    /// move, or (with several units per page) a read of the source page unless it is
    /// `last_read`, the unit's move, and the destination page's program once it is full.
    #[inline]
    fn push_move_ops(
        &mut self,
        src: u32,
        dst: u32,
        handle: u32,
        last_read: &mut u32,
        ops: &mut Vec<FlashOp>,
    ) {
        if self.unit_shift == 0 {
            ops.push(FlashOp::Move { src, dst });
            self.count_gc_page(handle);
            return;
        }
        let src_page = src >> self.unit_shift;
        if src_page != *last_read {
            ops.push(FlashOp::GcRead { src: src_page });
            *last_read = src_page;
        }
        ops.push(FlashOp::MoveUnit { src, dst });
        if (dst + 1) & (self.units_per_page() - 1) == 0 {
            ops.push(FlashOp::GcProgram {
                dst: dst >> self.unit_shift,
            });
            self.count_gc_page(handle);
        }
    }

    /// Move `units` of victim `v` to the `handle` GC frontier of plane `destination` when no
    /// unit needs a frontier, read group or protection of its own (the common case): in runs
    /// that fill the open block, each one allocation and one tight loop of table updates. The
    /// same slots, tables and operations, in the same order, as moving them one by one.
    fn move_runs(
        &mut self,
        units: &[(u32, u32)],
        v: usize,
        destination: u32,
        handle: u32,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<(), FtlError> {
        let mut last_read = NONE;
        let mut i = 0;
        while i < units.len() {
            // The run's first slot (it may open a block), then the rest of that block.
            let first = self.allocate(destination, handle, GC, now_ns, ops)?.unit;
            let db = self.block_of_unit(first);
            let room = (self.units_per_block - self.write_ptr[db]) as usize;
            let run = &units[i..units.len().min(i + 1 + room)];
            let n = run.len() as u32;
            self.write_ptr[db] += n - 1;
            let l2p = &mut self.l2p;
            if l2p.streamed() {
                // Streamed updates need no lines in the cache: nothing to prefetch.
                l2p.stream_run(run, first);
            } else {
                let ahead = units.get(i + GC_PREFETCH_AHEAD..).unwrap_or(&[]);
                for (k, &(_, lun)) in run.iter().enumerate() {
                    if let Some(&(_, next)) = ahead.get(k) {
                        l2p.prefetch(next as usize);
                    }
                    l2p.set(lun as usize, first + k as u32);
                }
            }
            // The run holds every valid unit between its first and last source (the scan
            // took them all, in order): their bits go at once, and the run's slots' come on.
            let (src_first, src_last) = (run[0].0, run[run.len() - 1].0);
            set_valid_range(&mut self.valid_bits, src_first..src_last + 1, false);
            set_valid_range(&mut self.valid_bits, first..first + n, true);
            debug_assert!(self.valid_units[v] >= n);
            self.valid_units[v] -= n;
            self.valid_units[db] += n;
            self.last_write_ns[db] = self.last_write_ns[db].max(self.last_write_ns[v]);
            self.counters.gc_units_moved += n as u64;
            self.write_oob_run(first, run.iter().map(|&(_, lun)| lun));
            if self.unit_shift == 0 {
                // Whole-page moves, one list extension for the run.
                ops.extend(
                    run.iter()
                        .zip(first..)
                        .map(|(&(src, _), dst)| FlashOp::Move { src, dst }),
                );
                self.count_gc_pages(handle, n as u64);
            } else {
                for (&(src, _), dst) in run.iter().zip(first..) {
                    self.push_move_ops(src, dst, handle, &mut last_read, ops);
                }
            }
            i += run.len();
        }
        Ok(())
    }

    /// One step of GC in `plane`: choose a victim if none is in collection, move at most
    /// `max_pages` pages' worth of its valid units (whole source pages), and erase it once it
    /// holds none. False when the plane has no full block to collect.
    fn gc_step(
        &mut self,
        plane: u32,
        max_pages: u32,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<bool, FtlError> {
        let mut job = match self.gc_jobs[plane as usize] {
            Some(mut job) => {
                if job.destination != plane
                    && self.free[job.destination as usize] as usize <= self.foreign_gc_floor()
                {
                    // The other plane's free blocks ran low (other victims' data went there
                    // too): the rest comes home, and what went there is programmed first.
                    let handle = self.block_handle[job.victim as usize] as u32;
                    self.pad_gc_frontiers(job.destination, handle, job.migrated, ops);
                    job.destination = plane;
                }
                job
            }
            None => {
                let Some(index) = self.select_victim(plane, now_ns) else {
                    return Ok(false);
                };
                let victim = self.geo.plane_blocks(plane).start as u32 + index as u32;
                // Out of the candidates while it is collected: never chosen twice.
                self.state[victim as usize] = BlockState::Victim;
                // Its reverse map is read in order through its steps: ask for it now, so that
                // each step's scan and the L2P prefetches that depend on it do not wait.
                let first = self.first_unit(victim) as usize;
                for unit in (first..first + self.units_per_block as usize).step_by(16) {
                    prefetch(&self.oob_unit, unit);
                }
                let free_blocks = &self.free;
                let of = |p: u32| free_blocks[p as usize] as usize;
                let free = FreeBlocks {
                    of: &of,
                    planes: self.geo.planes,
                    keep: self.foreign_gc_floor(),
                };
                let mut destination = self.destination.choose(plane, &free);
                // At the hard reserve with no block holding a page's worth of invalid data,
                // collecting in place frees nothing (the padding of the victim's last page
                // takes back what less than a page frees): the plane holds more live data than
                // it can (a static stripe, or sub-unit writes, can send a plane more than its
                // share). Only sending the victim's data to another plane frees a block,
                // whatever the policy: to the one with the most free blocks, if it has one
                // beyond its own hard reserve and the block this takes (it is then below its
                // watermark, and its own GC, which has invalid data to reclaim, makes the
                // room back).
                if destination == plane
                    && self.free[plane as usize] as usize <= GC_RESERVE_BLOCKS
                    && self.valid_units[victim as usize]
                        > self.units_per_block - self.units_per_page()
                {
                    let rescue = FreeBlocks {
                        keep: GC_RESERVE_BLOCKS + 1,
                        ..free
                    };
                    destination = MostFree.choose(plane, &rescue);
                    if destination == plane {
                        // Every other plane is at its reserve too: collect in the one with the
                        // most to reclaim until it can take the victim.
                        if let Some(other) = self.make_room_beside(plane, now_ns, ops)? {
                            destination = other;
                        }
                    }
                }
                GcJob {
                    victim,
                    destination,
                    next_offset: 0,
                    migrated: false,
                }
            }
        };
        let victim = job.victim;
        let v = victim as usize;
        let handle = self.block_handle[v] as u32;
        let first = self.first_unit(victim);
        let per_page = self.units_per_page();
        // Gather this step's valid units first (whole source pages), then update their random
        // L2P entries with prefetches a fixed distance ahead: misses overlap each other and the
        // work in between.
        let mut units = std::mem::take(&mut self.victim_units);
        units.clear();
        let wanted = self.valid_units[v].min(max_pages.saturating_mul(per_page)) as usize;
        // Unit by unit until enough are found, then to the end of that page: written in place
        // into room for all of them (no capacity check per unit).
        let end = first + self.units_per_block;
        let start = first + job.next_offset * per_page;
        units.resize(wanted + per_page as usize, (0, 0));
        let (found, stop) = scan_victim(
            (&self.valid_bits, &self.oob_unit),
            start..end,
            wanted,
            per_page,
            &mut units,
        );
        units.truncate(found);
        let offset = (stop - first) >> self.unit_shift;
        let chunks = if self.unit_group.is_empty() {
            Vec::new()
        } else {
            self.order_by_read_group(&mut units, first, offset, job.destination, handle)
        };
        let upw = self.geo.bits_per_cell.max(1) << self.unit_shift;
        // The chunk being moved: (id, wordline of its first unit, units, on one wordline).
        let mut chunk = (0u32, 0u32, 0u64, true);
        // Streamed updates need no lines in the cache; the last step's are ordered now.
        self.l2p.begin_far_updates();
        let ahead = if self.l2p.streamed() {
            0
        } else {
            GC_PREFETCH_AHEAD
        };
        for &(_, lun) in units.iter().take(ahead) {
            self.l2p.prefetch(lun as usize);
        }
        let mut result = Ok(());
        let mut last_read = NONE;
        let plain = chunks.is_empty() && self.flex.is_none() && !self.segments.may_migrate(handle);
        #[cfg(test)]
        let plain = plain && !self.unit_by_unit;
        if plain {
            result = self.move_runs(&units, v, job.destination, handle, now_ns, ops);
        }
        // Otherwise unit by unit: each may need a frontier, read group or protection of its own.
        let one_by_one = if plain { &units[..0] } else { &units[..] };
        for (i, &(src, lun)) in one_by_one.iter().enumerate() {
            if let Some(&(_, next)) = units.get(i + ahead).filter(|_| ahead > 0) {
                self.l2p.prefetch(next as usize);
            }
            // A predicted unit leaving `stat` goes to the `dyn` frontier (SEA-SSD); a flushed
            // unit leaving the ECC region to the EDC frontier (FlexECC).
            let target = match &self.flex {
                Some(flex) => flex.gc_target(handle, lun as u64),
                None => self.segments.migration_target(handle, lun),
            };
            let to = match target {
                Some(other) if self.gc_frontier_can_take(job.destination, other) => {
                    if self.flex.is_none() {
                        self.segments.note_migrated();
                    }
                    job.migrated = true;
                    other
                }
                _ => handle,
            };
            let dst = match self.allocate(job.destination, to, GC, now_ns, ops) {
                Ok(dst) => dst,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            self.invalidate(src);
            self.l2p.set_far(lun as usize, dst.unit);
            set_valid(&mut self.valid_bits, dst.unit);
            self.write_oob(dst.unit, lun);
            let db = self.block_of_unit(dst.unit);
            self.valid_units[db] += 1;
            self.last_write_ns[db] = self.last_write_ns[db].max(self.last_write_ns[v]);
            self.counters.gc_units_moved += 1;
            if let Some(&id) = chunks.get(i) {
                self.unit_group[dst.unit as usize] = self.unit_group[src as usize];
                if id != chunk.0 {
                    self.count_gc_chunk(chunk);
                    chunk = (id, dst.unit / upw, 0, dst.unit % upw == 0);
                }
                chunk.2 += 1;
                chunk.3 &= dst.unit / upw == chunk.1;
            }
            if let Some(flex) = &mut self.flex {
                flex.on_gc_move(lun as u64, (handle, to), (src, dst.unit), now_ns);
            }
            self.push_move_ops(src, dst.unit, to, &mut last_read, ops);
        }
        self.count_gc_chunk(chunk);
        self.victim_units = units;
        self.gc_jobs[plane as usize] = Some(GcJob {
            next_offset: offset,
            ..job
        });
        result?;
        if self.valid_units[v] > 0 {
            if !self.l2p.streamed() {
                // The next step of this victim starts with its next units' L2P entries:
                // prefetch them now, so that they arrive while other work runs instead of
                // stalling that step's first units (a hint only: nothing simulated changes).
                let rest = first + (offset << self.unit_shift)..end;
                for lun in rest
                    .filter_map(|unit| self.logical_of(unit))
                    .take(GC_PREFETCH_AHEAD)
                {
                    self.l2p.prefetch(lun as usize);
                }
            } else {
                // The next step's scan reads the victim's OOB from here on: its lines (those
                // asked for when the victim was chosen may be gone by then).
                let next = (first + (offset << self.unit_shift)) as usize;
                let wanted = (self.step_pages << self.unit_shift) as usize + 16;
                let ahead = wanted.min(end as usize - next);
                for unit in (next..next + ahead).step_by(16) {
                    prefetch(&self.oob_unit, unit);
                }
            }
            return Ok(true);
        }
        self.gc_jobs[plane as usize] = None;
        // The victim's last units must be on flash before it is erased.
        self.pad_gc_frontiers(job.destination, handle, job.migrated, ops);
        ops.push(FlashOp::Erase {
            block: victim,
            purpose: Purpose::Gc,
        });
        let units = first as usize..(first + self.units_per_block) as usize;
        if let Some(groups) = self.unit_group.get_mut(units.clone()) {
            groups.iter_mut().for_each(|g| *g = 0);
        }
        self.oob_unit[units].iter_mut().for_each(|u| *u = 0);
        self.erase_count[v] += 1;
        self.state[v] = BlockState::Free;
        self.segments.block_freed(plane, handle);
        self.write_ptr[v] = 0;
        self.last_write_ns[v] = 0;
        if self.erases_deferred {
            self.erasing[plane as usize].push_back(victim);
        } else {
            self.pool_block(plane as usize, victim);
        }
        self.free[plane as usize] += 1;
        self.counters.gc_invocations += 1;
        self.counters.erases += 1;
        self.handle_counters[handle as usize].media_bytes_erased +=
            self.page_bytes * self.geo.pages_per_block as u64;
        Ok(true)
    }
}

impl Ftl for PageMapFtl {
    fn name(&self) -> &'static str {
        "page_map"
    }

    #[inline]
    fn lookup(&mut self, unit: u64, _ops: &mut Vec<FlashOp>) -> Option<u32> {
        let pu = self.l2p.at(unit as usize);
        (pu != NONE).then_some(pu)
    }

    fn mapped(&self, unit: u64) -> Option<u32> {
        let pu = self.l2p.get(unit as usize)?;
        (pu != NONE).then_some(pu)
    }

    #[inline]
    fn holds_current_copy(&self, unit: u32) -> bool {
        is_valid(&self.valid_bits, unit)
    }

    #[inline]
    fn is_programmed(&self, unit: u32) -> bool {
        if self.unit_shift == 0 {
            return true;
        }
        let block = self.block_of_unit(unit);
        let offset = unit - self.first_unit(block as u32);
        // Slots are taken in order and a page is programmed when its last slot is taken (or
        // it is padded): the page is on flash once the write pointer has passed its end.
        let page_end = (offset | (self.units_per_page() - 1)) + 1;
        self.write_ptr[block] >= page_end
    }

    fn write(
        &mut self,
        write: UnitWrite,
        ops: &mut Vec<FlashOp>,
    ) -> Result<WriteOutcome, FtlError> {
        self.write_unit(write, true, ops)
    }

    fn merge_into_buffered(&mut self, write: &UnitWrite, current: u32) -> WriteOutcome {
        self.merge_into(write, current)
    }

    #[inline]
    fn host_page_filling(&self, plane: u32, handle: u32) -> bool {
        !self.at_page_start(plane, handle, HOST)
    }

    fn host_frontier_units(&self, plane: u32, handle: u32) -> Option<u32> {
        let block = self.open[self.slot(plane, handle, HOST)];
        Some(if block == NONE {
            0
        } else {
            self.write_ptr[block as usize]
        })
    }

    fn note_read_group(&mut self, unit: u32, group: u32) {
        if self.unit_group.is_empty() {
            self.unit_group = vec![0; self.oob_unit.len()];
        }
        self.unit_group[unit as usize] = group;
    }

    fn gc_read_group_units(&self) -> (u64, u64) {
        self.gc_group_units
    }

    fn pad_page(&mut self, ppa: u32) -> bool {
        let block = self.geo.block_of(ppa);
        let b = block as usize;
        let page_first = (ppa << self.unit_shift) - self.first_unit(block);
        // Only the page the write pointer is inside of is partly filled.
        if self.state[b] != BlockState::Open
            || self.write_ptr[b] <= page_first
            || self.write_ptr[b] >= page_first + self.units_per_page()
        {
            return false;
        }
        if self.pad(block).is_none() {
            return false;
        }
        self.counters.host_pages_programmed += 1;
        let handle = self.block_handle[b] as usize;
        self.handle_counters[handle].media_bytes_written += self.page_bytes;
        true
    }

    #[inline]
    fn prefetch(&self, unit: u64) {
        self.l2p.prefetch(unit as usize);
    }

    #[inline]
    fn prefetch_dependent(&self, unit: u64) {
        if let Some(pu) = self.l2p.get(unit as usize) {
            if pu != NONE {
                prefetch(&self.valid_bits, pu as usize / 32);
                prefetch(&self.valid_units, self.block_of_unit(pu));
            }
        }
    }

    fn trim(&mut self, unit: u64, _now_ns: u64, _ops: &mut Vec<FlashOp>) {
        let old = self.l2p.at(unit as usize);
        if old != NONE {
            self.invalidate(old);
            self.l2p.set(unit as usize, NONE);
            self.counters.trimmed_units += 1;
        }
    }

    #[inline]
    fn wants_background_gc(&self, plane: u32) -> bool {
        (self.free[plane as usize] as usize) < self.bg_free_blocks
            || self.gc_jobs[plane as usize].is_some()
    }

    fn background_gc(
        &mut self,
        plane: u32,
        now_ns: u64,
        max_moves: u32,
        ops: &mut Vec<FlashOp>,
    ) -> Result<bool, FtlError> {
        if !self.wants_background_gc(plane) {
            return Ok(false);
        }
        let erases = self.counters.erases;
        let done = self.gc_step(plane, max_moves, now_ns, ops)?;
        if self.counters.erases > erases {
            self.counters.gc_background_invocations += 1;
        }
        Ok(done)
    }

    fn stream_map_updates(&mut self, on: bool) {
        self.l2p.allow_streaming(on);
    }

    fn defer_erases(&mut self, deferred: bool) {
        self.erases_deferred = deferred;
        for plane in 0..self.erasing.len() {
            while let Some(block) = self.erasing[plane].pop_front() {
                self.pool_block(plane, block);
            }
        }
    }

    fn block_erased(&mut self, block: u32) {
        let plane = self.geo.plane_of_block(block) as usize;
        // Usually the oldest: erases mostly finish in the order GC made them.
        if let Some(at) = self.erasing[plane].iter().position(|&b| b == block) {
            self.erasing[plane].remove(at);
            self.pool_block(plane, block);
        }
    }

    fn free_blocks(&self, plane: u32) -> usize {
        self.free[plane as usize] as usize
    }

    fn min_free_blocks(&self) -> usize {
        self.min_free_blocks
    }

    fn counters(&self) -> FtlCounters {
        self.counters
    }

    fn handle_counters(&self) -> &[HandleCounters] {
        &self.handle_counters
    }

    fn reset_counters(&mut self) {
        self.counters = FtlCounters::default();
        self.gc_group_units = (0, 0);
        self.segments.reset_counters();
        self.min_free_blocks = usize::MAX;
        self.handle_counters
            .iter_mut()
            .for_each(|c| *c = HandleCounters::default());
    }

    fn erase_counts(&self) -> &[u32] {
        &self.erase_count
    }

    fn sea_size(&mut self, dyn_blocks_per_plane: u32) {
        self.segments.size(dyn_blocks_per_plane);
    }

    fn sea_predict(&mut self, unit: u64) {
        self.segments.predict(unit);
    }

    fn sea_state(&self) -> SeaState {
        self.segments.state()
    }

    fn block_handle_of(&self, unit: u32) -> u32 {
        self.block_handle[self.block_of_unit(unit)] as u32
    }

    #[inline]
    fn erase_count_of(&self, ppa: u32) -> u32 {
        self.erase_count[self.geo.block_of(ppa) as usize]
    }

    fn recover(&mut self, lost: &dyn Fn(u32) -> bool) -> super::RecoveryScan {
        self.recover_from_oob(lost);
        // The whole flash is scanned: every programmed page's OOB once.
        let mut scan = super::RecoveryScan::default();
        for block in 0..self.geo.blocks {
            let pages = self.write_ptr[block as usize].div_ceil(self.units_per_page());
            let first = self.geo.first_page(block);
            scan.oob_pages.extend(first..first + pages);
        }
        scan
    }

    fn flex_pages(&self) -> Option<&FlexPages> {
        self.flex.as_ref()
    }

    fn flex_pages_mut(&mut self) -> Option<&mut FlexPages> {
        self.flex.as_mut()
    }

    fn check_invariants(&self) -> Result<(), String> {
        for (lun, &pu) in self.l2p.entries().iter().enumerate() {
            if pu != NONE && self.logical_of(pu) != Some(lun as u64) {
                return Err(format!(
                    "unit {lun} maps to physical unit {pu}, which holds {:?}",
                    self.logical_of(pu)
                ));
            }
        }
        let mut valid = vec![0u32; self.valid_units.len()];
        for pu in 0..self.oob_unit.len() {
            if let Some(lun) = self.logical_of(pu as u32) {
                if self.l2p.at(lun as usize) != pu as u32 {
                    return Err(format!(
                        "physical unit {pu} claims unit {lun}, which maps to {}",
                        self.l2p.at(lun as usize)
                    ));
                }
                let block = self.block_of_unit(pu as u32);
                if pu as u32 - self.first_unit(block as u32) >= self.write_ptr[block] {
                    return Err(format!(
                        "physical unit {pu} is valid past its block's write pointer"
                    ));
                }
                valid[block] += 1;
            }
        }
        if valid != self.valid_units {
            return Err("per-block valid counts disagree with the validity bitmap".into());
        }
        for plane in 0..self.geo.planes {
            let range = self.geo.plane_blocks(plane);
            let free = self.state[range.clone()]
                .iter()
                .filter(|&&s| s == BlockState::Free)
                .count();
            let victims = self.state[range]
                .iter()
                .filter(|&&s| s == BlockState::Victim)
                .count();
            if victims != self.gc_jobs[plane as usize].is_some() as usize {
                return Err(format!("plane {plane}: {victims} blocks in collection"));
            }
            let (pooled, erasing) = (
                self.pools[plane as usize].len(),
                self.erasing[plane as usize].len(),
            );
            if free != pooled + erasing || free != self.free[plane as usize] as usize {
                return Err(format!(
                    "plane {plane}: {free} free blocks but {pooled} in the pool and \
                     {erasing} waiting for their erase"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    fn small() -> (Config, Geometry, u64) {
        small_with(4096, 4096)
    }

    /// A small SLC device with `page` B pages mapped in `unit` B units.
    fn small_with(page: u32, unit: u32) -> (Config, Geometry, u64) {
        let cfg = Config::from_toml(
            &format!("[geometry]\nchannels=2\nchips_per_channel=1\ndies_per_chip=1\nplanes_per_die=2\nblocks_per_plane=32\npages_per_block=16\npage_size_bytes={page}\nover_provisioning=0.35\n[cell]\ntype=\"slc\"\n[placement]\nhandles=2\n[ftl]\nmapping_unit_bytes={unit}\n"),
            "t",
            &[],
        )
        .unwrap();
        let d = cfg.derived();
        let g = Geometry::new(&cfg, &d);
        (cfg, g, d.logical_units)
    }

    fn ftl_for(cfg: &Config, geo: &Geometry, logical: u64) -> PageMapFtl {
        let units_per_page = cfg.derived().units_per_page;
        PageMapFtl::new(cfg, geo, logical, units_per_page)
    }

    /// The word-at-a-time victim scan finds what a unit-by-unit scan finds: every valid unit
    /// until `wanted`, then to the end of that page, and stops where it does.
    #[test]
    fn a_range_of_bits_set_and_cleared_at_once_matches_bit_by_bit() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        for _ in 0..2_000 {
            let mut bits: Vec<u32> = (0..6).map(|_| rng.gen()).collect();
            let mut reference = bits.clone();
            let start = rng.gen_range(0..190u32);
            let end = rng.gen_range(start + 1..=192);
            let on = rng.gen_bool(0.5);
            set_valid_range(&mut bits, start..end, on);
            for unit in start..end {
                match on {
                    true => set_valid(&mut reference, unit),
                    false => clear_valid(&mut reference, unit),
                }
            }
            assert_eq!(bits, reference, "{start}..{end} {on}");
        }
    }

    #[test]
    fn the_victim_scan_matches_a_unit_by_unit_scan() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        for round in 0..2000 {
            let per_page = 1u32 << rng.gen_range(0..3);
            let units_per_block = per_page * rng.gen_range(1..40);
            let blocks = 3;
            let total = units_per_block * blocks;
            let density = rng.gen_range(0.0..1.0);
            let valid: Vec<bool> = (0..total).map(|_| rng.gen_bool(density)).collect();
            let mut bits = vec![0u32; total.div_ceil(32) as usize];
            for (unit, _) in valid.iter().enumerate().filter(|(_, &v)| v) {
                set_valid(&mut bits, unit as u32);
            }
            let oob: Vec<u32> = (0..total).map(|u| 1000 + u).collect();
            let first = units_per_block * rng.gen_range(0..blocks);
            let end = first + units_per_block;
            let start = first + per_page * rng.gen_range(0..=units_per_block / per_page);
            let wanted = rng.gen_range(0..=units_per_block as usize);
            // The reference: unit by unit.
            let mut expected = Vec::new();
            let mut stop = start;
            for unit in start..end {
                if expected.len() >= wanted && unit % per_page == 0 {
                    break;
                }
                if valid[unit as usize] {
                    expected.push((unit, oob[unit as usize] - 1));
                }
                stop = unit + 1;
            }
            let mut units = vec![(0, 0); wanted + per_page as usize];
            let (found, at) = scan_victim((&bits, &oob), start..end, wanted, per_page, &mut units);
            assert_eq!(&units[..found], &expected[..], "round {round}: units");
            assert_eq!(at, stop, "round {round}: where the scan stopped");
        }
    }

    /// GC in runs (`move_runs`) gives what moving unit by unit gives: the same operations in
    /// the same order, the same tables and counters, after every host write and background
    /// step, across block boundaries, with pages of one or several units. Both again with the
    /// L2P updates of a map too large for the caches (streaming stores) give the same.
    #[test]
    fn runs_move_what_unit_by_unit_moves() {
        for (page, unit, destination) in [
            (4096, 4096, "victim_plane"),
            (16384, 4096, "victim_plane"),
            (8192, 512, "victim_plane"),
            (16384, 4096, "most_free"),
        ] {
            let (mut cfg, geo, logical) = small_with(page, unit);
            if destination == "most_free" {
                cfg.ftl.gc_destination = crate::config::GcDestinationKind::MostFree;
            }
            let mut runs = ftl_for(&cfg, &geo, logical);
            let mut one_by_one = ftl_for(&cfg, &geo, logical);
            one_by_one.unit_by_unit = true;
            // The same two with the updates of a large map.
            let mut streamed = [ftl_for(&cfg, &geo, logical), ftl_for(&cfg, &geo, logical)];
            streamed[1].unit_by_unit = true;
            assert!(!runs.l2p.streamed(), "a small map is updated in the cache");
            for ftl in &mut streamed {
                ftl.l2p.set_large(true);
                ftl.stream_map_updates(true);
                assert!(ftl.l2p.streamed());
            }
            let mut ops_streamed = Vec::new();
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
            let (mut ops_runs, mut ops_one) = (Vec::new(), Vec::new());
            let mut gc_ops = 0;
            for step in 0..(4 * logical).max(20_000) {
                let ctx = format!("{page}/{unit} {destination} step {step}");
                ops_runs.clear();
                ops_one.clear();
                let plane = geo.stripe_order[(step % geo.planes as u64) as usize];
                if rng.gen_bool(0.05) {
                    let max_moves = rng.gen_range(1..40);
                    let a = runs.background_gc(plane, step, max_moves, &mut ops_runs);
                    let b = one_by_one.background_gc(plane, step, max_moves, &mut ops_one);
                    assert_eq!(a, b, "{ctx}");
                    for ftl in &mut streamed {
                        ops_streamed.clear();
                        let c = ftl.background_gc(plane, step, max_moves, &mut ops_streamed);
                        assert_eq!(a, c, "{ctx}: streamed");
                        assert_eq!(ops_runs, ops_streamed, "{ctx}: streamed");
                    }
                } else {
                    let write = UnitWrite {
                        unit: rng.gen_range(0..logical),
                        handle: rng.gen_range(0..2),
                        plane,
                        now_ns: step,
                        host_bytes: unit,
                    };
                    let a = runs.write(write, &mut ops_runs);
                    let b = one_by_one.write(write, &mut ops_one);
                    assert_eq!(a, b, "{ctx}");
                    for ftl in &mut streamed {
                        ops_streamed.clear();
                        let c = ftl.write(write, &mut ops_streamed);
                        assert_eq!(a, c, "{ctx}: streamed");
                        assert_eq!(ops_runs, ops_streamed, "{ctx}: streamed");
                    }
                }
                assert_eq!(ops_runs, ops_one, "{ctx}");
                gc_ops += ops_runs.len();
                assert!(runs.l2p.entries() == one_by_one.l2p.entries(), "{ctx}: L2P");
                assert!(runs.valid_bits == one_by_one.valid_bits, "{ctx}: validity");
                assert!(runs.oob_unit == one_by_one.oob_unit, "{ctx}: OOB units");
                assert!(runs.oob_seq == one_by_one.oob_seq, "{ctx}: OOB sequence");
                assert_eq!(runs.valid_units, one_by_one.valid_units, "{ctx}");
                assert_eq!(runs.write_ptr, one_by_one.write_ptr, "{ctx}");
                assert_eq!(runs.last_write_ns, one_by_one.last_write_ns, "{ctx}");
                assert_eq!(runs.counters, one_by_one.counters, "{ctx}");
                assert_eq!(runs.handle_counters, one_by_one.handle_counters, "{ctx}");
                for ftl in &streamed {
                    assert!(
                        runs.l2p.entries() == ftl.l2p.entries(),
                        "{ctx}: streamed L2P"
                    );
                    assert!(
                        runs.valid_bits == ftl.valid_bits,
                        "{ctx}: streamed validity"
                    );
                    assert_eq!(runs.valid_units, ftl.valid_units, "{ctx}: streamed");
                    assert_eq!(runs.counters, ftl.counters, "{ctx}: streamed");
                }
            }
            // The comparison covered GC, not only host writes.
            assert!(
                runs.counters.gc_units_moved > logical,
                "{page}/{unit}: GC ran"
            );
            assert!(gc_ops > 1000, "{page}/{unit}: GC operations compared");
        }
    }

    /// Model-based test: the real FTL against a map that remembers each lpa's last write.
    #[test]
    fn random_operations_match_a_reference_model() {
        for (page, unit, destination, sea) in [
            (4096, 4096, "victim_plane", false),
            (16384, 4096, "victim_plane", false),
            (8192, 512, "victim_plane", false),
            (4096, 4096, "most_free", false),
            (16384, 4096, "most_free", false),
            // SEA-SSD: sized segments and predicted units migrating from stat to dyn.
            (4096, 4096, "victim_plane", true),
            (16384, 4096, "victim_plane", true),
            (16384, 4096, "most_free", true),
        ] {
            random_operations_match_a_reference_model_with(page, unit, destination, sea);
        }
    }

    fn random_operations_match_a_reference_model_with(
        page: u32,
        unit: u32,
        destination: &str,
        sea: bool,
    ) {
        let (mut cfg, geo, logical) = small_with(page, unit);
        cfg.ftl.gc_destination = match destination {
            "most_free" => crate::config::GcDestinationKind::MostFree,
            _ => crate::config::GcDestinationKind::VictimPlane,
        };
        let mut moved_across = 0u64;
        let shift = (page / unit).trailing_zeros();
        for seed in 0..4u64 {
            let mut ftl = ftl_for(&cfg, &geo, logical);
            if sea {
                ftl.sea_size(3);
            }
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut reference: HashMap<u64, ()> = HashMap::new();
            // What the ops say each physical unit holds, and the pages programmed since their
            // block's last erase (NAND programs a page once).
            let mut holds: HashMap<u32, u64> = HashMap::new();
            let mut programmed: std::collections::HashSet<u32> = Default::default();
            let mut programs = 0u64;
            let mut merged = 0u64;
            let mut ops = Vec::new();
            let ctx = |seed: u64, step: u64| format!("{page}/{unit} seed {seed} step {step}");
            // Enough overwrites for GC to run a while whatever the unit count.
            for step in 0..(4 * logical).max(20_000) {
                let lpa = rng.gen_range(0..logical);
                if sea && rng.gen_bool(0.2) {
                    ftl.sea_predict(rng.gen_range(0..logical));
                }
                if rng.gen_bool(0.1) {
                    ftl.trim(lpa, 0, &mut ops);
                    reference.remove(&lpa);
                } else {
                    let handle = rng.gen_range(0..2);
                    // Under most_free, the first plane takes two shares of the writes, so that
                    // planes differ in free blocks and GC has a reason to move data across.
                    let stripe = match destination {
                        "most_free" => (step % (geo.planes as u64 + 1)).saturating_sub(1),
                        _ => step % geo.planes as u64,
                    };
                    let out = ftl
                        .write(
                            UnitWrite {
                                unit: lpa,
                                handle,
                                plane: geo.stripe_order[stripe as usize],
                                now_ns: step,
                                host_bytes: unit,
                            },
                            &mut ops,
                        )
                        .unwrap_or_else(|e| panic!("{}: {e}", ctx(seed, step)));
                    assert_eq!(
                        out.old.is_some(),
                        reference.contains_key(&lpa),
                        "{}",
                        ctx(seed, step)
                    );
                    reference.insert(lpa, ());
                    // The FTL's own work comes first in time, then this unit.
                    let mut last_read = NONE;
                    for op in &ops {
                        match *op {
                            FlashOp::Move { src, dst } => {
                                moved_across += (geo.plane_of(src) != geo.plane_of(dst)) as u64;
                                holds.insert(dst, holds[&src]);
                                assert!(
                                    programmed.insert(dst),
                                    "{}: page {dst} twice",
                                    ctx(seed, step)
                                );
                                programs += 1;
                            }
                            FlashOp::GcRead { src } => last_read = src,
                            FlashOp::MoveUnit { src, dst } => {
                                assert_eq!(
                                    src >> shift,
                                    last_read,
                                    "{}: unit moved unread",
                                    ctx(seed, step)
                                );
                                moved_across += (geo.plane_of(src >> shift)
                                    != geo.plane_of(dst >> shift))
                                    as u64;
                                holds.insert(dst, holds[&src]);
                            }
                            FlashOp::GcProgram { dst } => {
                                assert!(
                                    programmed.insert(dst),
                                    "{}: page {dst} twice",
                                    ctx(seed, step)
                                );
                                programs += 1;
                            }
                            FlashOp::Erase { block, .. } => {
                                for p in geo.block_pages(block) {
                                    programmed.remove(&p);
                                }
                            }
                            FlashOp::TranslationRead { .. }
                            | FlashOp::TranslationProgram { .. }
                            | FlashOp::DeviceCpu { .. } => {
                                unreachable!("the page map has no translation work")
                            }
                        }
                    }
                    let page_of_new = out.new >> shift;
                    if out.old == Some(out.new) {
                        // Merged in the write buffer: the unit's copy is in a page not yet
                        // programmed, of this write's handle.
                        assert!(!programmed.contains(&page_of_new), "{}", ctx(seed, step));
                        assert_eq!(holds[&out.new], lpa, "{}", ctx(seed, step));
                        assert!(!out.opens_page && !out.fills_page);
                        merged += 1;
                    } else {
                        assert_eq!(out.opens_page, out.new & ((1 << shift) - 1) == 0);
                    }
                    holds.insert(out.new, lpa);
                    if out.fills_page || (rng.gen_bool(0.05) && ftl.pad_page(page_of_new)) {
                        assert!(
                            programmed.insert(page_of_new),
                            "{}: host page twice",
                            ctx(seed, step)
                        );
                        programs += 1;
                    }
                    assert_eq!(
                        ftl.is_programmed(out.new),
                        programmed.contains(&page_of_new)
                    );
                }
                ops.clear();
                if step % 997 == 0 {
                    ftl.check_invariants()
                        .unwrap_or_else(|e| panic!("{}: {e}", ctx(seed, step)));
                }
            }
            for lpa in 0..logical {
                let found = ftl.lookup(lpa, &mut ops);
                assert_eq!(found.is_some(), reference.contains_key(&lpa), "seed {seed}");
                if let Some(pu) = found {
                    assert_eq!(
                        holds[&pu], lpa,
                        "{page}/{unit} seed {seed}: data of unit {lpa}"
                    );
                }
            }
            ftl.check_invariants().unwrap();
            let c = ftl.counters();
            assert!(c.gc_invocations > 0 && c.erases == c.gc_invocations);
            assert_eq!(c.flash_pages_programmed(), programs);
            let media: u64 = ftl
                .handle_counters()
                .iter()
                .map(|h| h.media_bytes_written)
                .sum();
            assert_eq!(media, programs * page as u64);
            assert_eq!(
                moved_across > 0,
                destination == "most_free",
                "{page}/{unit} {destination}: {moved_across} moves to other planes"
            );
            assert_eq!(c.buffer_merged_units, merged);
            // Random writes hit a unit still in its filling page now and then.
            assert_eq!(merged > 0, shift > 0, "{page}/{unit}: {merged} merged");
            let migrated = ftl.sea_state().counters.migrated_units;
            assert_eq!(
                migrated > 0,
                sea,
                "{page}/{unit} sea {sea}: {migrated} migrated"
            );
        }
    }

    /// With erases deferred, a collected victim counts as free but is opened only when its
    /// plane has no erased block; the test completes erases late, in random order.
    #[test]
    fn victims_are_opened_before_their_erase_only_when_no_erased_block_is_left() {
        let (cfg, geo, logical) = small();
        let mut ftl = ftl_for(&cfg, &geo, logical);
        ftl.defer_erases(true);
        let mut ops = Vec::new();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let mut erasing: Vec<u32> = Vec::new();
        let (mut early, mut erased) = (0, 0);
        for i in 0..60_000u64 {
            let lpa = rng.gen_range(0..logical);
            let plane = geo.stripe_order[(i % geo.planes as u64) as usize];
            let write = UnitWrite {
                unit: lpa,
                handle: (lpa % 2) as u32,
                plane,
                now_ns: i,
                host_bytes: 4096,
            };
            let outcome = ftl.write(write, &mut ops).unwrap();
            let mut opened = vec![ftl.block_of_unit(outcome.new) as u32];
            for op in &ops {
                match *op {
                    FlashOp::Move { dst, .. } | FlashOp::GcProgram { dst } => {
                        opened.push(geo.block_of(dst))
                    }
                    FlashOp::MoveUnit { dst, .. } => opened.push(ftl.block_of_unit(dst) as u32),
                    _ => {}
                }
            }
            for block in opened {
                if let Some(at) = erasing.iter().position(|&b| b == block) {
                    // Taken before its erase ran: its plane had no erased block (nothing
                    // joins a pool during a call, so it is still empty).
                    let plane = geo.plane_of_block(block) as usize;
                    assert!(ftl.pools[plane].is_empty(), "write {i}: block {block}");
                    erasing.swap_remove(at);
                    early += 1;
                }
            }
            for op in &ops {
                if let FlashOp::Erase { block, .. } = *op {
                    erasing.push(block);
                }
            }
            ops.clear();
            // Erases end late and out of order.
            while !erasing.is_empty() && rng.gen_bool(0.3) {
                let block = erasing.swap_remove(rng.gen_range(0..erasing.len()));
                ftl.block_erased(block);
                erased += 1;
            }
            if i % 5000 == 0 {
                ftl.check_invariants().unwrap();
            }
        }
        assert!(
            early > 0 && erased > 1000,
            "{early} opened early, {erased} erased"
        );
        let free: Vec<usize> = (0..geo.planes).map(|p| ftl.free_blocks(p)).collect();
        ftl.defer_erases(false);
        assert!(ftl.erasing.iter().all(|e| e.is_empty()));
        let pooled: Vec<usize> = ftl.pools.iter().map(|p| p.len()).collect();
        assert_eq!(free, pooled, "waiting victims join their pools");
        ftl.check_invariants().unwrap();
    }

    #[test]
    fn gc_keeps_handles_apart() {
        let (cfg, geo, logical) = small();
        let mut ftl = ftl_for(&cfg, &geo, logical);
        let mut ops = Vec::new();
        let half = logical / 2;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        for i in 0..50_000u64 {
            let lpa = rng.gen_range(0..logical);
            let handle = (lpa >= half) as u32;
            ftl.write(
                UnitWrite {
                    unit: lpa,
                    handle,
                    plane: geo.stripe_order[(i % geo.planes as u64) as usize],
                    now_ns: i,
                    host_bytes: 4096,
                },
                &mut ops,
            )
            .unwrap();
            ops.clear();
        }
        for lpa in 0..logical {
            if let Some(unit) = ftl.lookup(lpa, &mut ops) {
                let block = ftl.block_of_unit(unit);
                assert_eq!(
                    ftl.block_handle[block] as u64,
                    (lpa >= half) as u64,
                    "lpa {lpa}"
                );
            }
        }
    }
}
