//! DFTL: a page-mapping FTL that caches only part of its mapping table in device RAM (Gupta,
//! Kim, Urgaonkar, "DFTL: a flash translation layer employing demand-based selective caching
//! of page-level address mappings", ASPLOS 2009), as in the FlashSim DFTL that the NoFTL
//! emulator descends from.
//!
//! The whole mapping table lives on flash in *translation pages* of `page_bytes / 4` four-byte
//! entries; the *global translation directory* (GTD, in RAM) says where each translation page
//! is. The *cached mapping table* (CMT) holds `ftl.dftl_cached_fraction` of all entries. A
//! lookup that hits costs device-CPU time; a miss also reads the entry's translation page.
//! Making room evicts the least recently used entry, after a victim search that costs CPU time
//! per entry scanned (`scan`: FlashSim's scan of the whole cached table) or nothing extra
//! (`lru`: an O(1) list); both find the same victim, so they differ only in time. A dirty
//! victim is written back with every other dirty cached entry of its translation page at once
//! (batch update): the translation page is read, merged and programmed to a new location.
//! GC that moves a data page updates its entry in the CMT if it is cached (making it dirty),
//! or else its translation page on flash (one read and program per translation page touched
//! by the GC step).
//!
//! Data and translation pages are mapped by one page-mapping FTL ([`PageMapFtl`]): translation
//! page `t` is its logical unit `data_units + t`, written through a placement handle of its own
//! (so translation pages live in their own blocks) and garbage-collected like data, with the
//! GTD being that FTL's map of those units. The full table it keeps for the data units is what
//! the translation pages on flash say once every dirty CMT entry is written back: the
//! simulator uses it for the data a translation read returns, and charges the flash work.
//!
//! Translation work reaches the device as `TranslationRead`, `TranslationProgram` and
//! `DeviceCpu` operations, a chain in list order that the host access waits for.

use super::{FlashOp, Ftl, FtlCounters, FtlError, PageMapFtl, SeaState, UnitWrite, WriteOutcome};
use crate::config::{Config, DftlVictimSearch};
use crate::nand::Geometry;
use crate::placement::HandleCounters;
use serde::Serialize;
use std::collections::VecDeque;

const NONE: u32 = u32::MAX;

/// Bytes of one mapping entry in a translation page.
pub const DFTL_ENTRY_BYTES: u64 = 4;

/// DFTL's own counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DftlCounters {
    pub lookups: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub dirty_evictions: u64,
    pub translation_reads: u64,
    pub translation_writes: u64,
    /// Translation-page updates forced by GC moving data whose entries were not cached.
    pub gc_translation_updates: u64,
    pub entries_scanned: u64,
    pub cpu_ns: u64,
}

/// The cached mapping table: a fixed number of slots in an LRU list (head = most recent).
#[derive(Debug)]
struct Cmt {
    capacity: u32,
    len: u32,
    unit: Vec<u32>,
    dirty: Vec<bool>,
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    /// Slot of each data unit's entry, or NONE.
    slot_of: Vec<u32>,
    /// The slot an eviction just freed.
    free_slot: u32,
}

impl Cmt {
    fn new(capacity: u32, data_units: u64) -> Cmt {
        let c = capacity as usize;
        Cmt {
            capacity,
            len: 0,
            unit: vec![NONE; c],
            dirty: vec![false; c],
            prev: vec![NONE; c],
            next: vec![NONE; c],
            head: NONE,
            tail: NONE,
            slot_of: vec![NONE; data_units as usize],
            free_slot: NONE,
        }
    }

    fn unlink(&mut self, s: u32) {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        if p != NONE {
            self.next[p as usize] = n;
        } else {
            self.head = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        } else {
            self.tail = p;
        }
    }

    fn push_front(&mut self, s: u32) {
        self.prev[s as usize] = NONE;
        self.next[s as usize] = self.head;
        if self.head != NONE {
            self.prev[self.head as usize] = s;
        }
        self.head = s;
        if self.tail == NONE {
            self.tail = s;
        }
    }

    fn touch(&mut self, s: u32) {
        if self.head != s {
            self.unlink(s);
            self.push_front(s);
        }
    }

    /// Remove the least recently used entry: (unit, dirty).
    fn pop_lru(&mut self) -> (u32, bool) {
        let s = self.tail;
        self.unlink(s);
        let unit = self.unit[s as usize];
        self.slot_of[unit as usize] = NONE;
        self.unit[s as usize] = NONE;
        self.len -= 1;
        // The freed slot is reused at once by `insert` (slots are handed out densely).
        self.free_slot = s;
        (unit, self.dirty[s as usize])
    }

    fn insert(&mut self, unit: u32, dirty: bool) {
        let s = if self.free_slot != NONE {
            std::mem::replace(&mut self.free_slot, NONE)
        } else {
            self.len
        };
        self.unit[s as usize] = unit;
        self.dirty[s as usize] = dirty;
        self.slot_of[unit as usize] = s;
        self.len += 1;
        self.push_front(s);
    }
}

pub struct DftlFtl {
    inner: PageMapFtl,
    data_units: u64,
    entries_per_page: u64,
    translation_handle: u32,
    user_handles: usize,
    cmt: Cmt,
    search: DftlVictimSearch,
    lookup_ns: u64,
    eviction_ns: u64,
    scan_entry_ns: u64,
    counters: DftlCounters,
    /// Next plane (index into the CWDP stripe) for a translation page.
    stripe_cursor: usize,
    stripe_order: Vec<u32>,
    /// Translation pages a GC step made stale (reused scratch).
    stale_pages: Vec<u64>,
    /// Per translation page: queued for a GC update (`update_on_flash`).
    update_queued: Vec<bool>,
    /// GC updates one call may write before the cascade counts as endless: the device's pages.
    update_limit: u64,
    /// Translation pages made stale by GC during a host write, written back at the start of
    /// the next FTL call: written at once, their own GC could move the host page whose data
    /// the device has not stored yet.
    deferred: Vec<u64>,
}

impl DftlFtl {
    /// `data_units` logical units; the configuration is validated (one unit per page).
    pub fn new(config: &Config, geo: &Geometry, data_units: u64) -> DftlFtl {
        let entries_per_page = config.geometry.page_size_bytes as u64 / DFTL_ENTRY_BYTES;
        let translation_pages = data_units.div_ceil(entries_per_page);
        let mut inner_config = config.clone();
        inner_config.placement.handles += 1;
        let inner = PageMapFtl::new(&inner_config, geo, data_units + translation_pages, 1);
        let d = config.ftl.dftl();
        let capacity =
            ((d.cached_fraction * data_units as f64).round() as u64).clamp(1, data_units);
        DftlFtl {
            inner,
            data_units,
            entries_per_page,
            translation_handle: config.placement.handles,
            user_handles: config.placement.handles as usize,
            cmt: Cmt::new(capacity as u32, data_units),
            search: d.victim_search,
            lookup_ns: d.cpu_lookup_ns,
            eviction_ns: d.cpu_eviction_ns,
            scan_entry_ns: d.cpu_scan_entry_ns,
            counters: DftlCounters::default(),
            stripe_cursor: 0,
            stripe_order: geo.stripe_order.clone(),
            stale_pages: Vec::new(),
            update_queued: vec![false; translation_pages as usize],
            update_limit: geo.physical_pages,
            deferred: Vec::new(),
        }
    }

    /// Entries the CMT holds at most.
    pub fn cached_entries(&self) -> u32 {
        self.cmt.capacity
    }

    #[inline]
    fn cpu(&mut self, ns: u64, ops: &mut Vec<FlashOp>) {
        if ns > 0 {
            self.counters.cpu_ns += ns;
            ops.push(FlashOp::DeviceCpu { ns });
        }
    }

    #[inline]
    fn translation_page_of(&self, unit: u64) -> u64 {
        unit / self.entries_per_page
    }

    /// Read translation page `t` if it is on flash (a page never written holds no mapping).
    fn read_translation_page(&mut self, t: u64, ops: &mut Vec<FlashOp>) {
        if let Some(ppa) = self.inner.mapped(self.data_units + t) {
            self.counters.translation_reads += 1;
            ops.push(FlashOp::TranslationRead { ppa });
        }
    }

    /// Write translation page `t` back with every dirty cached entry of it (they become
    /// clean), then the translation pages that the GC making room for its program left stale
    /// (see [`DftlFtl::update_on_flash`]).
    fn write_back(&mut self, t: u64, now_ns: u64, ops: &mut Vec<FlashOp>) -> Result<(), FtlError> {
        let from = self.write_back_page(t, false, now_ns, ops)?;
        self.after_gc(from, now_ns, ops, false)
    }

    /// Write translation page `t` back alone: read the page on flash (the entries not
    /// cached), program the merged page (see [`DftlFtl::program_translation_page`]). Returns
    /// where the ops of its program (and of the GC that made room for it) start.
    fn write_back_page(
        &mut self,
        t: u64,
        gc_update: bool,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<usize, FtlError> {
        let first = t * self.entries_per_page;
        let last = (first + self.entries_per_page).min(self.data_units);
        for unit in first..last {
            let s = self.cmt.slot_of[unit as usize];
            if s != NONE {
                self.cmt.dirty[s as usize] = false;
            }
        }
        self.read_translation_page(t, ops);
        self.program_translation_page(t, gc_update, now_ns, ops)
    }

    /// Program translation page `t` at a new location, its handle's frontier on the next plane
    /// of the stripe; GC that makes room goes into `ops`, then the program. Returns where those
    /// ops start.
    ///
    /// A `gc_update` (entries GC moved) is part of that GC's work and starts no foreground GC
    /// step, as GC's own copies do not: it goes to the next plane of the stripe that has room
    /// without GC. Only where none has does it take the stripe's plane, whose allocation then
    /// collects whole victims at the hard reserve.
    fn program_translation_page(
        &mut self,
        t: u64,
        gc_update: bool,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<usize, FtlError> {
        let planes = self.stripe_order.len();
        let mut cursor = self.stripe_cursor;
        if gc_update {
            let handle = self.translation_handle;
            let inner = &self.inner;
            let order = &self.stripe_order;
            if let Some(offset) = (0..planes)
                .find(|&i| inner.has_room_without_gc(order[(cursor + i) % planes], handle))
            {
                cursor = (cursor + offset) % planes;
            }
        }
        let plane = self.stripe_order[cursor];
        self.stripe_cursor = (cursor + 1) % planes;
        let from = ops.len();
        let write = UnitWrite {
            unit: self.data_units + t,
            handle: self.translation_handle,
            plane,
            now_ns,
            host_bytes: 0,
        };
        let outcome = if gc_update {
            self.inner.write_without_foreground_gc(write, ops)?
        } else {
            self.inner.write(write, ops)?
        };
        self.counters.translation_writes += 1;
        ops.push(FlashOp::TranslationProgram { ppa: outcome.new });
        Ok(from)
    }

    /// GC moved data pages (ops from `from` on): update their entries, in the CMT if cached,
    /// else on flash, one translation page at a time (now, or at the next call if `defer`).
    fn after_gc(
        &mut self,
        from: usize,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
        defer: bool,
    ) -> Result<(), FtlError> {
        let mut stale = std::mem::take(&mut self.stale_pages);
        stale.clear();
        self.collect_stale(from, ops, &mut stale);
        let result = if defer {
            self.deferred.extend_from_slice(&stale);
            Ok(())
        } else {
            self.update_on_flash(&stale, now_ns, ops)
        };
        self.stale_pages = stale;
        result
    }

    /// The translation pages that GC moves in `ops[from..]` left stale, into `stale` (sorted,
    /// each once); moved units whose entries are cached only make them dirty.
    fn collect_stale(&mut self, from: usize, ops: &[FlashOp], stale: &mut Vec<u64>) {
        for op in &ops[from..] {
            let dst = match *op {
                FlashOp::Move { dst, .. } | FlashOp::MoveUnit { dst, .. } => dst,
                _ => continue,
            };
            let Some(unit) = self.inner.logical_of(dst) else {
                continue;
            };
            if unit >= self.data_units {
                continue; // a translation page moved: only the GTD (in RAM) changes
            }
            let s = self.cmt.slot_of[unit as usize];
            if s != NONE {
                self.cmt.dirty[s as usize] = true;
            } else {
                stale.push(self.translation_page_of(unit));
            }
        }
        stale.sort_unstable();
        stale.dedup();
    }

    /// Write back the translation pages `pages` that GC left stale (GC updates), then those
    /// that GC at the hard reserve, making room for one of them, left stale in turn. A page
    /// already queued is not queued again: its write-back carries every entry moved by then.
    ///
    /// Where little space is spare such a cascade may never end: each victim collected moves
    /// entries of more translation pages than the block it frees can hold. No request can
    /// need more write-backs than the device has pages, so that many is an error, not a hang.
    fn update_on_flash(
        &mut self,
        pages: &[u64],
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<(), FtlError> {
        let mut queue: VecDeque<u64> = VecDeque::with_capacity(pages.len());
        for &t in pages {
            if !std::mem::replace(&mut self.update_queued[t as usize], true) {
                queue.push_back(t);
            }
        }
        let mut written = 0u64;
        let mut stale = Vec::new();
        let mut result = Ok(());
        while let Some(t) = queue.pop_front() {
            self.update_queued[t as usize] = false;
            written += 1;
            if written > self.update_limit {
                result = Err(FtlError::NoSpaceForMapping);
                break;
            }
            self.counters.gc_translation_updates += 1;
            let from = match self.write_back_page(t, true, now_ns, ops) {
                Ok(from) => from,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            stale.clear();
            self.collect_stale(from, ops, &mut stale);
            for &s in &stale {
                if !std::mem::replace(&mut self.update_queued[s as usize], true) {
                    queue.push_back(s);
                }
            }
        }
        // On an error the pages still queued are left stale.
        for t in queue {
            self.update_queued[t as usize] = false;
        }
        result
    }

    /// Bring `unit`'s entry into the CMT (a hit or a miss), charging CPU and flash work.
    fn access(&mut self, unit: u64, now_ns: u64, ops: &mut Vec<FlashOp>) -> Result<(), FtlError> {
        self.write_back_deferred(now_ns, ops)?;
        self.counters.lookups += 1;
        self.cpu(self.lookup_ns, ops);
        let s = self.cmt.slot_of[unit as usize];
        if s != NONE {
            self.counters.hits += 1;
            self.cmt.touch(s);
            return Ok(());
        }
        self.counters.misses += 1;
        if self.cmt.len == self.cmt.capacity {
            self.counters.evictions += 1;
            let mut ns = self.eviction_ns;
            if self.search == DftlVictimSearch::Scan {
                self.counters.entries_scanned += self.cmt.len as u64;
                ns += self.scan_entry_ns * self.cmt.len as u64;
            }
            self.cpu(ns, ops);
            let (victim, dirty) = self.cmt.pop_lru();
            if dirty {
                self.counters.dirty_evictions += 1;
                self.write_back(self.translation_page_of(victim as u64), now_ns, ops)?;
            }
        }
        self.read_translation_page(self.translation_page_of(unit), ops);
        self.cmt.insert(unit as u32, false);
        Ok(())
    }

    /// Write back the translation pages GC of the last host write made stale.
    fn write_back_deferred(&mut self, now_ns: u64, ops: &mut Vec<FlashOp>) -> Result<(), FtlError> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let mut pages = std::mem::take(&mut self.deferred);
        pages.sort_unstable();
        pages.dedup();
        let result = self.update_on_flash(&pages, now_ns, ops);
        pages.clear();
        self.deferred = pages;
        result
    }

    pub fn dftl_counters(&self) -> DftlCounters {
        self.counters
    }
}

impl Ftl for DftlFtl {
    fn name(&self) -> &'static str {
        "dftl"
    }

    fn lookup(&mut self, unit: u64, ops: &mut Vec<FlashOp>) -> Option<u32> {
        // The lookup path has no error channel: a write-back that finds no space leaves the
        // entry dirty in RAM (the next write reports the full device).
        let _ = self.access(unit, 0, ops);
        self.inner.mapped(unit)
    }

    fn mapped(&self, unit: u64) -> Option<u32> {
        if unit >= self.data_units {
            return None;
        }
        self.inner.mapped(unit)
    }

    fn is_programmed(&self, unit: u32) -> bool {
        self.inner.is_programmed(unit)
    }

    fn holds_current_copy(&self, unit: u32) -> bool {
        self.inner.holds_current_copy(unit)
    }

    fn write(
        &mut self,
        write: UnitWrite,
        ops: &mut Vec<FlashOp>,
    ) -> Result<WriteOutcome, FtlError> {
        if write.unit < self.data_units {
            if let Some(merged) = self.inner.merge_in_buffer(&write) {
                // A write-buffer hit: the controller finds the unit by its buffer's own index,
                // the mapping does not change, so no translation entry is loaded or dirtied.
                return Ok(merged);
            }
        }
        self.access(write.unit, write.now_ns, ops)?;
        let from = ops.len();
        let outcome = self.inner.write(write, ops)?;
        let s = self.cmt.slot_of[write.unit as usize];
        // Written back by GC above? The access just cached it; it may have been evicted only
        // by a write-back's own GC, which cannot evict: it is still cached.
        if s != NONE {
            self.cmt.dirty[s as usize] = true;
        }
        self.after_gc(from, write.now_ns, ops, true)?;
        Ok(outcome)
    }

    fn merge_into_buffered(&mut self, write: &UnitWrite, current: u32) -> WriteOutcome {
        // As a hit in the filling page: found by the buffer's own index, no entry touched.
        self.inner.merge_into(write, current)
    }

    fn host_page_filling(&self, plane: u32, handle: u32) -> bool {
        self.inner.host_page_filling(plane, handle)
    }

    fn pad_page(&mut self, ppa: u32) -> bool {
        self.inner.pad_page(ppa)
    }

    fn trim(&mut self, unit: u64, now_ns: u64, ops: &mut Vec<FlashOp>) {
        let _ = self.access(unit, now_ns, ops);
        if self.inner.mapped(unit).is_some() {
            let s = self.cmt.slot_of[unit as usize];
            if s != NONE {
                self.cmt.dirty[s as usize] = true;
            }
        }
        self.inner.trim(unit, now_ns, ops);
    }

    fn wants_background_gc(&self, plane: u32) -> bool {
        self.inner.wants_background_gc(plane)
    }

    fn background_gc(
        &mut self,
        plane: u32,
        now_ns: u64,
        max_moves: u32,
        ops: &mut Vec<FlashOp>,
    ) -> Result<bool, FtlError> {
        let from = ops.len();
        self.write_back_deferred(now_ns, ops)?;
        let from = from.max(ops.len());
        let done = self.inner.background_gc(plane, now_ns, max_moves, ops)?;
        self.after_gc(from, now_ns, ops, false)?;
        Ok(done)
    }

    fn defer_erases(&mut self, deferred: bool) {
        self.inner.defer_erases(deferred)
    }

    fn block_erased(&mut self, block: u32) {
        self.inner.block_erased(block)
    }

    fn free_blocks(&self, plane: u32) -> usize {
        self.inner.free_blocks(plane)
    }

    fn min_free_blocks(&self) -> usize {
        self.inner.min_free_blocks()
    }

    fn counters(&self) -> FtlCounters {
        // Translation pages are media writes, not host writes: they raise WAF.
        let mut c = self.inner.counters();
        c.host_units_written -= self.counters.translation_writes;
        c
    }

    fn dftl_counters(&self) -> Option<DftlCounters> {
        Some(self.counters)
    }

    fn handle_counters(&self) -> &[HandleCounters] {
        &self.inner.handle_counters()[..self.user_handles]
    }

    fn reset_counters(&mut self) {
        self.inner.reset_counters();
        self.counters = DftlCounters::default();
    }

    fn erase_counts(&self) -> &[u32] {
        self.inner.erase_counts()
    }

    fn erase_count_of(&self, ppa: u32) -> u32 {
        self.inner.erase_count_of(ppa)
    }

    fn sea_size(&mut self, dyn_blocks_per_plane: u32) {
        self.inner.sea_size(dyn_blocks_per_plane)
    }

    fn sea_predict(&mut self, unit: u64) {
        self.inner.sea_predict(unit)
    }

    fn sea_state(&self) -> SeaState {
        self.inner.sea_state()
    }

    fn block_handle_of(&self, unit: u32) -> u32 {
        self.inner.block_handle_of(unit)
    }

    fn recover(&mut self, lost: &dyn Fn(u32) -> bool) -> super::RecoveryScan {
        // The CMT is RAM: gone, dirty entries and all.
        let c = &mut self.cmt;
        c.slot_of.iter_mut().for_each(|s| *s = NONE);
        c.unit.iter_mut().for_each(|u| *u = NONE);
        (c.len, c.head, c.tail, c.free_slot) = (0, NONE, NONE, NONE);
        self.deferred.clear();
        self.inner.recover_from_oob(lost);
        let mut scan = super::RecoveryScan::default();
        // 1. The GTD: the OOB of the translation blocks, then each translation page read.
        let translation_pages = self.data_units.div_ceil(self.entries_per_page);
        // Sequence numbers relative to the next one (so that wrapping compares right).
        let age = |seq: u32| self.inner.next_seq().wrapping_sub(seq);
        let mut oldest_age = 0u32;
        for t in 0..translation_pages {
            if let Some(pu) = self.inner.mapped(self.data_units + t) {
                scan.full_pages.push(pu);
                let (_, seq) = self.inner.oob_of(pu).expect("a mapped page has its OOB");
                oldest_age = oldest_age.max(age(seq));
            }
        }
        if translation_pages > 0 && scan.full_pages.len() < translation_pages as usize {
            oldest_age = u32::MAX; // some entries were never written back: scan everything
        }
        // 2. Data pages newer than their translation page: the OOB of every data block
        // written since the oldest translation page (older blocks are all in the table).
        let g = self.inner.geometry().clone();
        for block in 0..g.blocks {
            let units = self.inner.units_written(block);
            if units == 0 {
                continue;
            }
            let first = g.first_page(block);
            let translation = self.inner.handle_of_block(block) == self.translation_handle;
            let youngest = (first..first + units)
                .filter_map(|u| self.inner.oob_of(u).map(|(_, seq)| age(seq)))
                .min()
                .unwrap_or(u32::MAX);
            if translation || youngest < oldest_age {
                scan.oob_pages.extend(first..first + units);
            }
        }
        scan
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()?;
        let mut cached = 0;
        for (unit, &s) in self.cmt.slot_of.iter().enumerate() {
            if s != NONE {
                cached += 1;
                if self.cmt.unit[s as usize] != unit as u32 {
                    return Err(format!(
                        "CMT slot {s} of unit {unit} holds {}",
                        self.cmt.unit[s as usize]
                    ));
                }
            }
        }
        if cached != self.cmt.len || self.cmt.len > self.cmt.capacity {
            return Err(format!(
                "CMT holds {cached} entries, counts {} of {}",
                self.cmt.len, self.cmt.capacity
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dftl() -> DftlFtl {
        let cfg = Config::from_toml(
            "[geometry]\nchannels=1\nchips_per_channel=1\ndies_per_chip=1\nplanes_per_die=2\nblocks_per_plane=128\npages_per_block=64\npage_size_bytes=4096\nover_provisioning=0.35\n[cell]\ntype=\"slc\"\n[ftl]\nkind=\"dftl\"\n",
            "t",
            &[],
        )
        .unwrap();
        let derived = cfg.derived();
        let geo = Geometry::new(&cfg, &derived);
        DftlFtl::new(&cfg, &geo, derived.logical_units)
    }

    /// A cascade of GC updates longer than the limit (the device's pages) stops with
    /// `NoSpaceForMapping` rather than looping, and leaves no page marked queued: the next
    /// cascade queues them again.
    #[test]
    fn gc_updates_beyond_the_limit_are_an_error_that_leaves_nothing_queued() {
        let mut ftl = dftl();
        assert!(ftl.update_queued.len() >= 3, "translation pages to update");
        let mut ops = Vec::new();
        ftl.update_limit = 2;
        assert_eq!(
            ftl.update_on_flash(&[0, 1, 2], 0, &mut ops),
            Err(FtlError::NoSpaceForMapping)
        );
        assert_eq!(ftl.counters.gc_translation_updates, 2);
        assert_eq!(ftl.counters.translation_writes, 2);
        assert!(ftl.update_queued.iter().all(|&queued| !queued));
        ftl.update_limit = 3;
        assert_eq!(ftl.update_on_flash(&[0, 1, 2], 0, &mut ops), Ok(()));
        assert_eq!(ftl.counters.translation_writes, 5);
        ftl.check_invariants().unwrap();
    }
}
