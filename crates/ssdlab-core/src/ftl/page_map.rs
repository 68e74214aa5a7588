//! Ideal page-mapping FTL: the whole logical→physical table in controller RAM.
//!
//! Writes go to write frontiers, one per (plane, placement handle) for host data and one more per
//! (plane, handle) for GC relocations, so data of different lifetimes never share an erase block
//! (FDP's persistently isolated handles). The device chooses the plane of each host page (its
//! allocation policy); the FTL fills that plane's frontier.
//!
//! GC is incremental and resumable (Lee et al., "Preemptible I/O scheduling of garbage
//! collection for SSDs", IEEE TCAD 2013): each plane has at most one victim in collection, and a
//! *step* moves at most a given number of its valid pages; the step that empties the victim
//! erases it. At or below `gc_fg_free_blocks` free blocks, every host page written to the plane
//! first runs a foreground step of `gc_step_pages` × (shortage + 1) moves, so host writes are
//! slowed in proportion to the shortage rather than stalled behind a whole victim. The device
//! runs background steps in idle time below `gc_bg_free_blocks`. One free block per plane is a
//! hard reserve for the GC frontier: a host frontier never takes it, and a plane reaching it
//! collects whole victims until it has more. Free blocks are allocated by the wear-levelling
//! [`FreeBlockPool`]. State is kept in flat arrays (4 bytes per logical page, 4 per physical page
//! plus a few dozen per block) so that a 1 TiB device fits in about 2 GB.

use super::{FlashOp, Ftl, FtlCounters, FtlError, PageWrite, Purpose, WriteOutcome};
use crate::config::Config;
use crate::gc::{victim_policy, BlockState, PlaneView, VictimPolicy};
use crate::nand::prefetch::prefetch;
use crate::nand::table::huge_table;
use crate::nand::{Geometry, NONE};
use crate::placement::HandleCounters;
use crate::wear::{free_pool, FreeBlockPool};

/// Frontier kinds: host writes and GC relocations.
const HOST: usize = 0;
const GC: usize = 1;

/// Free blocks per plane that only the GC frontier may take: collection can always make
/// progress, because one victim at a time per plane needs at most one new GC block.
pub const GC_RESERVE_BLOCKS: usize = 1;

/// A victim in collection.
#[derive(Debug, Clone, Copy)]
struct GcJob {
    victim: u32,
    /// Page offset in the victim from which valid pages are still to be moved.
    next_offset: u32,
}

pub struct PageMapFtl {
    geo: Geometry,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    valid_pages: Vec<u32>,
    write_ptr: Vec<u32>,
    state: Vec<BlockState>,
    closed_seq: Vec<u64>,
    last_write_ns: Vec<u64>,
    erase_count: Vec<u32>,
    block_handle: Vec<u8>,
    /// Open block per (plane, handle, kind).
    open: Vec<u32>,
    pools: Vec<Box<dyn FreeBlockPool>>,
    /// The victim being collected in each plane and the next page offset to look at.
    gc_jobs: Vec<Option<GcJob>>,
    handles: u32,
    next_seq: u64,
    victim: Box<dyn VictimPolicy>,
    fg_free_blocks: usize,
    bg_free_blocks: usize,
    step_pages: u32,
    /// Fewest free blocks any plane has kept after a host frontier took one (the hard reserve
    /// must hold: only the GC frontier may go below it).
    min_free_blocks: usize,
    counters: FtlCounters,
    handle_counters: Vec<HandleCounters>,
    /// (source page, lpa) of the victim being collected; reused to avoid allocation.
    victim_pages: Vec<(u32, u32)>,
}

impl PageMapFtl {
    pub fn new(config: &Config, geo: &Geometry, logical_pages: u64) -> Self {
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
        PageMapFtl {
            geo: geo.clone(),
            l2p: huge_table(logical_pages as usize, NONE),
            p2l: huge_table(geo.physical_pages as usize, NONE),
            valid_pages: vec![0; blocks],
            write_ptr: vec![0; blocks],
            state: vec![BlockState::Free; blocks],
            closed_seq: vec![0; blocks],
            last_write_ns: vec![0; blocks],
            erase_count: vec![0; blocks],
            block_handle: vec![0; blocks],
            open: vec![NONE; geo.planes as usize * handles as usize * 2],
            pools,
            gc_jobs: vec![None; geo.planes as usize],
            handles,
            next_seq: 0,
            victim: victim_policy(config.ftl.gc_policy),
            fg_free_blocks: config.ftl.gc_fg_free_blocks as usize,
            bg_free_blocks: config.ftl.gc_bg_free_blocks as usize,
            step_pages: config.ftl.gc_step_pages,
            min_free_blocks: usize::MAX,
            counters: FtlCounters::default(),
            handle_counters: vec![HandleCounters::default(); handles as usize],
            victim_pages: Vec::with_capacity(geo.pages_per_block as usize),
        }
    }

    #[inline]
    fn slot(&self, plane: u32, handle: u32, kind: usize) -> usize {
        (plane as usize * self.handles as usize + handle as usize) * 2 + kind
    }

    /// Next page of the (plane, handle, kind) frontier, opening a block when needed. A host
    /// frontier never takes the GC reserve: a plane at it collects whole victims first.
    fn allocate(
        &mut self,
        plane: u32,
        handle: u32,
        kind: usize,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<u32, FtlError> {
        let slot = self.slot(plane, handle, kind);
        let mut block = self.open[slot];
        if block == NONE || self.write_ptr[block as usize] == self.geo.pages_per_block {
            if block != NONE {
                self.close(block);
                self.open[slot] = NONE;
            }
            if kind == HOST {
                let mut rounds = 0;
                while self.pools[plane as usize].len() <= GC_RESERVE_BLOCKS {
                    if !self.gc_step(plane, self.geo.pages_per_block, now_ns, ops)? {
                        return Err(FtlError::NoSpace { plane });
                    }
                    rounds += 1;
                    // A victim with invalid pages frees net space; FIFO may pick a fully valid
                    // one that frees nothing, so the bound turns a plane that stops gaining
                    // space into an error, not a spin.
                    if rounds > 2 * self.geo.blocks_per_plane {
                        return Err(FtlError::NoSpace { plane });
                    }
                }
            }
            block = self.pools[plane as usize]
                .pop()
                .ok_or(FtlError::NoSpace { plane })?;
            if kind == HOST {
                let free = self.pools[plane as usize].len();
                self.min_free_blocks = self.min_free_blocks.min(free);
            }
            let b = block as usize;
            debug_assert_eq!(self.state[b], BlockState::Free);
            debug_assert_eq!(self.valid_pages[b], 0);
            self.state[b] = BlockState::Open;
            self.block_handle[b] = handle as u8;
            self.write_ptr[b] = 0;
            self.open[slot] = block;
        }
        let b = block as usize;
        let ppa = self.geo.first_page(block) + self.write_ptr[b];
        self.write_ptr[b] += 1;
        Ok(ppa)
    }

    fn close(&mut self, block: u32) {
        self.state[block as usize] = BlockState::Full;
        self.closed_seq[block as usize] = self.next_seq;
        self.next_seq += 1;
    }

    #[inline]
    fn invalidate(&mut self, ppa: u32) {
        self.p2l[ppa as usize] = NONE;
        let block = self.geo.block_of(ppa) as usize;
        debug_assert!(self.valid_pages[block] > 0);
        self.valid_pages[block] -= 1;
    }

    /// Foreground GC before a host page goes to `plane`: at or below the watermark, a step
    /// whose size grows with the shortage (smooth back-pressure on host writes).
    fn foreground_gc(
        &mut self,
        plane: u32,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<(), FtlError> {
        let free = self.pools[plane as usize].len();
        if free <= self.fg_free_blocks {
            let shortage = (self.fg_free_blocks - free) as u32 + 1;
            self.gc_step(plane, self.step_pages * shortage, now_ns, ops)?;
        }
        Ok(())
    }

    /// One step of GC in `plane`: choose a victim if none is in collection, move at most
    /// `max_moves` of its valid pages, and erase it once it holds none. False when the plane
    /// has no full block to collect.
    fn gc_step(
        &mut self,
        plane: u32,
        max_moves: u32,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) -> Result<bool, FtlError> {
        let job = match self.gc_jobs[plane as usize] {
            Some(job) => job,
            None => {
                let range = self.geo.plane_blocks(plane);
                let base = range.start;
                let view = PlaneView {
                    valid_pages: &self.valid_pages[range.clone()],
                    state: &self.state[range.clone()],
                    closed_seq: &self.closed_seq[range.clone()],
                    last_write_ns: &self.last_write_ns[range.clone()],
                    erase_count: &self.erase_count[range],
                    pages_per_block: self.geo.pages_per_block,
                    now_ns,
                };
                let Some(index) = self.victim.select(&view) else {
                    return Ok(false);
                };
                let victim = (base + index) as u32;
                // Out of the candidates while it is collected: never chosen twice.
                self.state[victim as usize] = BlockState::Victim;
                GcJob {
                    victim,
                    next_offset: 0,
                }
            }
        };
        let victim = job.victim;
        let v = victim as usize;
        let handle = self.block_handle[v] as u32;
        let first = self.geo.first_page(victim);
        // Gather this step's valid pages first, then update their random L2P entries with
        // prefetches a fixed distance ahead: misses overlap each other and the work in between.
        let mut pages = std::mem::take(&mut self.victim_pages);
        pages.clear();
        let mut offset = job.next_offset;
        let wanted = self.valid_pages[v].min(max_moves) as usize;
        while pages.len() < wanted {
            let src = first + offset;
            offset += 1;
            let lpa = self.p2l[src as usize];
            if lpa != NONE {
                pages.push((src, lpa));
            }
        }
        const AHEAD: usize = 16;
        for &(_, lpa) in pages.iter().take(AHEAD) {
            prefetch(&self.l2p, lpa as usize);
        }
        let mut result = Ok(());
        for (i, &(src, lpa)) in pages.iter().enumerate() {
            if let Some(&(_, next)) = pages.get(i + AHEAD) {
                prefetch(&self.l2p, next as usize);
            }
            let dst = match self.allocate(plane, handle, GC, now_ns, ops) {
                Ok(dst) => dst,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            self.invalidate(src);
            self.l2p[lpa as usize] = dst;
            self.p2l[dst as usize] = lpa;
            let db = self.geo.block_of(dst) as usize;
            self.valid_pages[db] += 1;
            self.last_write_ns[db] = self.last_write_ns[db].max(self.last_write_ns[v]);
            ops.push(FlashOp::Move { src, dst });
            self.counters.gc_pages_moved += 1;
            self.handle_counters[handle as usize].media_bytes_written +=
                self.geo.page_size_bytes as u64;
        }
        self.victim_pages = pages;
        self.gc_jobs[plane as usize] = Some(GcJob {
            victim,
            next_offset: offset,
        });
        result?;
        if self.valid_pages[v] > 0 {
            return Ok(true);
        }
        self.gc_jobs[plane as usize] = None;
        ops.push(FlashOp::Erase {
            block: victim,
            purpose: Purpose::Gc,
        });
        self.erase_count[v] += 1;
        self.state[v] = BlockState::Free;
        self.write_ptr[v] = 0;
        self.last_write_ns[v] = 0;
        self.pools[plane as usize].push(victim, self.erase_count[v]);
        self.counters.gc_invocations += 1;
        self.counters.erases += 1;
        self.handle_counters[handle as usize].media_bytes_erased +=
            self.geo.page_size_bytes as u64 * self.geo.pages_per_block as u64;
        Ok(true)
    }
}

impl Ftl for PageMapFtl {
    fn name(&self) -> &'static str {
        "page_map"
    }

    #[inline]
    fn lookup(&mut self, lpa: u64, _ops: &mut Vec<FlashOp>) -> Option<u32> {
        let ppa = self.l2p[lpa as usize];
        (ppa != NONE).then_some(ppa)
    }

    fn write(&mut self, page: PageWrite, ops: &mut Vec<FlashOp>) -> Result<WriteOutcome, FtlError> {
        let PageWrite {
            lpa,
            handle,
            plane,
            now_ns,
            host_bytes,
        } = page;
        let h = handle as usize;
        self.foreground_gc(plane, now_ns, ops)?;
        let ppa = self.allocate(plane, handle, HOST, now_ns, ops)?;
        // Read the old mapping only now: foreground GC above may have moved it.
        let old = self.l2p[lpa as usize];
        if old != NONE {
            self.invalidate(old);
        }
        self.l2p[lpa as usize] = ppa;
        self.p2l[ppa as usize] = lpa as u32;
        let block = self.geo.block_of(ppa) as usize;
        self.valid_pages[block] += 1;
        self.last_write_ns[block] = now_ns;
        self.counters.host_pages_written += 1;
        let counters = &mut self.handle_counters[h];
        counters.host_bytes_written += host_bytes as u64;
        counters.media_bytes_written += self.geo.page_size_bytes as u64;
        Ok(WriteOutcome {
            old: (old != NONE).then_some(old),
            new: ppa,
        })
    }

    #[inline]
    fn prefetch(&self, lpa: u64) {
        prefetch(&self.l2p, lpa as usize);
    }

    #[inline]
    fn prefetch_dependent(&self, lpa: u64) {
        if let Some(&ppa) = self.l2p.get(lpa as usize) {
            if ppa != NONE {
                prefetch(&self.p2l, ppa as usize);
                prefetch(&self.valid_pages, self.geo.block_of(ppa) as usize);
            }
        }
    }

    fn trim(&mut self, lpa: u64, _ops: &mut Vec<FlashOp>) {
        let old = self.l2p[lpa as usize];
        if old != NONE {
            self.invalidate(old);
            self.l2p[lpa as usize] = NONE;
            self.counters.trimmed_pages += 1;
        }
    }

    #[inline]
    fn wants_background_gc(&self, plane: u32) -> bool {
        self.pools[plane as usize].len() < self.bg_free_blocks
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

    fn free_blocks(&self, plane: u32) -> usize {
        self.pools[plane as usize].len()
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
        self.min_free_blocks = usize::MAX;
        self.handle_counters
            .iter_mut()
            .for_each(|c| *c = HandleCounters::default());
    }

    fn erase_counts(&self) -> &[u32] {
        &self.erase_count
    }

    #[inline]
    fn erase_count_of(&self, ppa: u32) -> u32 {
        self.erase_count[self.geo.block_of(ppa) as usize]
    }

    fn check_invariants(&self) -> Result<(), String> {
        for (lpa, &ppa) in self.l2p.iter().enumerate() {
            if ppa != NONE && self.p2l[ppa as usize] != lpa as u32 {
                return Err(format!(
                    "lpa {lpa} maps to ppa {ppa}, whose p2l is {}",
                    self.p2l[ppa as usize]
                ));
            }
        }
        let mut valid = vec![0u32; self.valid_pages.len()];
        for (ppa, &lpa) in self.p2l.iter().enumerate() {
            if lpa != NONE {
                if self.l2p[lpa as usize] != ppa as u32 {
                    return Err(format!(
                        "ppa {ppa} claims lpa {lpa}, which maps to {}",
                        self.l2p[lpa as usize]
                    ));
                }
                valid[self.geo.block_of(ppa as u32) as usize] += 1;
            }
        }
        if valid != self.valid_pages {
            return Err("per-block valid counts disagree with the P2L table".into());
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
            if free != self.pools[plane as usize].len() {
                return Err(format!(
                    "plane {plane}: {free} free blocks but {} in the pool",
                    self.pools[plane as usize].len()
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
        let cfg = Config::from_toml(
            "[geometry]\nchannels=2\nchips_per_channel=1\ndies_per_chip=1\nplanes_per_die=2\nblocks_per_plane=32\npages_per_block=16\nover_provisioning=0.35\n[cell]\ntype=\"slc\"\n[placement]\nhandles=2\n",
            "t",
            &[],
        )
        .unwrap();
        let d = cfg.derived();
        let g = Geometry::new(&cfg, &d);
        (cfg, g, d.logical_pages)
    }

    /// Model-based test: the real FTL against a map that remembers each lpa's last write.
    #[test]
    fn random_operations_match_a_reference_model() {
        let (cfg, geo, logical) = small();
        for seed in 0..4u64 {
            let mut ftl = PageMapFtl::new(&cfg, &geo, logical);
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut reference: HashMap<u64, ()> = HashMap::new();
            let mut ops = Vec::new();
            for step in 0..20_000u64 {
                let lpa = rng.gen_range(0..logical);
                if rng.gen_bool(0.1) {
                    ftl.trim(lpa, &mut ops);
                    reference.remove(&lpa);
                } else {
                    let handle = rng.gen_range(0..2);
                    let out = ftl
                        .write(
                            PageWrite {
                                lpa,
                                handle,
                                plane: geo.stripe_order[(step % geo.planes as u64) as usize],
                                now_ns: step,
                                host_bytes: 4096,
                            },
                            &mut ops,
                        )
                        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    assert_eq!(
                        out.old.is_some(),
                        reference.contains_key(&lpa),
                        "seed {seed} step {step}"
                    );
                    reference.insert(lpa, ());
                }
                ops.clear();
                if step % 997 == 0 {
                    ftl.check_invariants()
                        .unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                }
            }
            for lpa in 0..logical {
                assert_eq!(
                    ftl.lookup(lpa, &mut ops).is_some(),
                    reference.contains_key(&lpa),
                    "seed {seed}"
                );
            }
            ftl.check_invariants().unwrap();
            let c = ftl.counters();
            assert!(c.gc_invocations > 0 && c.erases == c.gc_invocations);
        }
    }

    #[test]
    fn gc_keeps_handles_apart() {
        let (cfg, geo, logical) = small();
        let mut ftl = PageMapFtl::new(&cfg, &geo, logical);
        let mut ops = Vec::new();
        let half = logical / 2;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        for i in 0..50_000u64 {
            let lpa = rng.gen_range(0..logical);
            let handle = (lpa >= half) as u32;
            ftl.write(
                PageWrite {
                    lpa,
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
            if let Some(ppa) = ftl.lookup(lpa, &mut ops) {
                let block = geo.block_of(ppa) as usize;
                assert_eq!(
                    ftl.block_handle[block] as u64,
                    (lpa >= half) as u64,
                    "lpa {lpa}"
                );
            }
        }
    }
}
