//! A write-back SSD cache in front of a disk, flashcache-like, that names every block access
//! for the SSD (FlexECC's four request types), and a scrubber for the EDC region.
//!
//! **Layout.** The cache's SSD space is cut into blocks of the SSD's page size, grouped into
//! sets of `associativity` blocks; a disk block maps to set (block / associativity) mod sets,
//! as flashcache hashes runs of consecutive blocks to one set. Each set keeps its blocks in LRU
//! order (an intrusive doubly linked list: O(1) per hit) and a dirty count. A direct table from
//! disk block to cache block makes a lookup one array read.
//!
//! **Requests.** A read hit is a *host read* of the SSD; a miss reads the disk and fills a
//! cache block with a *clean write* (after the data came back: the fill is off the read's
//! critical path). A write is a *dirty write* of the SSD (write-back). A victim is the set's
//! LRU clean block, else its LRU dirty block, which is first written back: a *flush read* of
//! the SSD, then a disk write. When a set is more than `dirty_threshold` dirty after a write,
//! its LRU dirty blocks are cleaned the same way until it is not, and in idle time (no request
//! for `idle_clean_ns`) up to `idle_clean_blocks` dirty blocks are cleaned in LRU order.
//!
//! **Errors.** A clean block the SSD cannot deliver (a CRC mismatch in the EDC region) is a
//! miss: the disk copy is read, returned and written back into the cache. A dirty block the
//! SSD cannot deliver (BCH beyond t: the only copy is gone) is an uncorrectable error returned
//! to the application, never data.
//!
//! **Scrubber.** In idle time the scrubber reads the cache's EDC pages round robin at
//! `scrub_pages_per_s`, each while the disk is idle; a corrupt one is fetched again from the
//! disk before the host asks.
//!
//! Time: every SSD access is timed by the device's reservation path at its issue time; the
//! disk is timed by [`disk::Disk`]. A request's response time is from its arrival to the last
//! of its blocks. The cache issues its work in arrival order, so the device sees issue times
//! that never go back.

pub mod disk;
mod divisor;
pub mod ssd;
pub mod workload;

use crate::host::{Completion, Device, DeviceError};
use crate::nand::prefetch::prefetch;
use crate::request::{Hint, HostRequest, Op, Reliability};
use disk::{Disk, DiskConfig, DiskCounters};
use divisor::Divisor;
use serde::{Deserialize, Serialize};
pub use ssd::{CacheSsd, RecordingSsd, ReplaySsd};
use std::collections::VecDeque;
use thiserror::Error;

const NONE: u32 = u32::MAX;

#[derive(Debug, Error)]
pub enum CacheError {
    #[error("cache.{key}: {message}")]
    Invalid { key: &'static str, message: String },
    #[error("SSD: {0}")]
    Device(#[from] DeviceError),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("{0}")]
    Workload(#[from] workload::WorkloadError),
    #[error("request for disk blocks {first}..{end}: the disk has {blocks} blocks (cache.disk.capacity_bytes)")]
    OutOfRange { first: u64, end: u64, blocks: u64 },
    #[error("request data is {given} bytes, expected {expected}")]
    DataLength { given: usize, expected: usize },
}

/// The `[cache]` configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// SSD bytes used as cache, from offset 0; 0 takes the SSD's whole logical space.
    pub cache_bytes: u64,
    /// Cache blocks per set.
    pub associativity: u32,
    /// Fraction of a set's blocks that may be dirty before the set is cleaned.
    pub dirty_threshold: f64,
    /// A pause of this long between requests is idle time (cleaning, scrubbing).
    pub idle_clean_ns: u64,
    /// Dirty blocks cleaned per idle period.
    pub idle_clean_blocks: u32,
    /// Scrubber reads of EDC pages per second of idle time; 0 turns it off.
    pub scrub_pages_per_s: f64,
    pub disk: DiskConfig,
    /// Keep the SSD request trace (the four types) for [`FlashCache::trace`].
    pub record_trace: bool,
}

impl CacheConfig {
    pub fn is_default(&self) -> bool {
        *self == CacheConfig::default()
    }

    /// The table's own ranges (the sizes against the SSD are checked by [`FlashCache::new`]).
    pub fn validate(
        &self,
        invalid: &dyn Fn(&str, String) -> crate::config::ConfigError,
    ) -> Result<(), crate::config::ConfigError> {
        if self.associativity == 0 {
            return Err(invalid(
                "cache.associativity",
                "expected a positive number of blocks per set, got 0".into(),
            ));
        }
        if !(self.dirty_threshold > 0.0 && self.dirty_threshold <= 1.0) {
            return Err(invalid(
                "cache.dirty_threshold",
                format!(
                    "expected a fraction in (0, 1], got {}",
                    self.dirty_threshold
                ),
            ));
        }
        if !(self.scrub_pages_per_s.is_finite() && self.scrub_pages_per_s >= 0.0) {
            return Err(invalid(
                "cache.scrub_pages_per_s",
                format!("expected a rate >= 0, got {}", self.scrub_pages_per_s),
            ));
        }
        let d = &self.disk;
        for (key, v) in [
            ("cache.disk.capacity_bytes", d.capacity_bytes),
            ("cache.disk.rpm", d.rpm as u64),
            ("cache.disk.blocks_per_track", d.blocks_per_track as u64),
            ("cache.disk.heads", d.heads as u64),
            ("cache.disk.transfer_mbps", d.transfer_mbps as u64),
        ] {
            if v == 0 {
                return Err(invalid(key, "expected a positive integer, got 0".into()));
            }
        }
        if d.seek_min_ns > d.seek_max_ns {
            return Err(invalid(
                "cache.disk.seek_min_ns",
                format!(
                    "expected at most cache.disk.seek_max_ns ({}), got {}",
                    d.seek_max_ns, d.seek_min_ns
                ),
            ));
        }
        Ok(())
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            cache_bytes: 0,
            associativity: 512,
            dirty_threshold: 0.2,
            idle_clean_ns: 1_000_000,
            idle_clean_blocks: 64,
            scrub_pages_per_s: 0.0,
            disk: DiskConfig::default(),
            record_trace: false,
        }
    }
}

/// The four kinds of SSD request a cache issues (FlexECC's vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SsdRequestKind {
    DirtyWrite,
    CleanWrite,
    HostRead,
    FlushRead,
}

impl SsdRequestKind {
    pub fn name(self) -> &'static str {
        match self {
            SsdRequestKind::DirtyWrite => "dirty_write",
            SsdRequestKind::CleanWrite => "clean_write",
            SsdRequestKind::HostRead => "host_read",
            SsdRequestKind::FlushRead => "flush_read",
        }
    }

    /// The request and hint the SSD receives.
    pub fn request(self, offset: u64, length: u64) -> HostRequest {
        let (op, reliability, flush_read) = match self {
            SsdRequestKind::DirtyWrite => (Op::Write, Some(Reliability::Dirty), false),
            SsdRequestKind::CleanWrite => (Op::Write, Some(Reliability::Clean), false),
            SsdRequestKind::HostRead => (Op::Read, None, false),
            SsdRequestKind::FlushRead => (Op::Read, None, true),
        };
        let mut req = HostRequest::new(op, offset, length);
        req.hint = Hint {
            reliability,
            flush_read,
            ..Default::default()
        };
        req
    }
}

/// One SSD request of the cache's trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRow {
    pub time_ns: u64,
    pub kind: SsdRequestKind,
    pub offset: u64,
    pub length: u64,
}

/// An application request: `blocks` cache-sized blocks from disk block `block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppRequest {
    pub arrival_ns: u64,
    pub write: bool,
    pub block: u64,
    pub blocks: u32,
}

/// What the application got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppCompletion {
    pub complete_ns: u64,
    /// A dirty block was lost (BCH beyond t): EIO, the data is not returned.
    pub error: bool,
}

/// The cache's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheCounters {
    /// Application requests.
    pub reads: u64,
    pub writes: u64,
    /// Blocks of those requests found in the cache or not.
    pub read_hits: u64,
    pub read_misses: u64,
    pub write_hits: u64,
    pub write_misses: u64,
    pub evictions: u64,
    pub dirty_evictions: u64,
    /// Dirty blocks written back: on eviction, over the threshold, in idle time.
    pub cleaned_threshold: u64,
    pub cleaned_idle: u64,
    /// SSD requests by kind.
    pub dirty_writes: u64,
    pub clean_writes: u64,
    pub host_reads: u64,
    pub flush_reads: u64,
    /// Clean blocks the SSD could not deliver: each a disk read (a miss).
    pub corruption_disk_reads: u64,
    /// Dirty blocks lost (reported to the application, or found lost at write-back).
    pub dirty_blocks_lost: u64,
    pub scrub_reads: u64,
    /// Corruptions planned (N = RBER × device data bits, `flexecc.injection = "points"`) and
    /// those that hit a stored page.
    pub corruptions_planned: u64,
    pub corruptions_injected: u64,
    /// Corrupt blocks the scrubber found and fetched again from the disk.
    pub scrub_prefetched: u64,
    /// Application response time sums (ns) and request counts by direction.
    pub read_response_ns: u64,
    pub write_response_ns: u64,
    pub errors_returned: u64,
    /// SSD latency sums (ns) by request kind, in the order of the counts above (dirty write,
    /// clean write, host read, flush read): what the SSD's codecs change.
    pub ssd_latency_ns: [u64; 4],
}

/// One cache block's state.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    /// The disk block held (u64::MAX: empty).
    tag: u64,
    /// A fill (clean write) pending until this time (0: none).
    fill_at_ns: u64,
    /// LRU neighbours in the set (towards the MRU head and the LRU tail).
    prev: u32,
    next: u32,
    /// Bumped by a rewrite or eviction: cancels a pending fill or a stale dirty-order entry.
    generation: u32,
    dirty: bool,
}

impl Slot {
    const EMPTY: Slot = Slot {
        tag: u64::MAX,
        fill_at_ns: 0,
        prev: NONE,
        next: NONE,
        generation: 0,
        dirty: false,
    };
}

/// A write-back SSD cache over a disk model, on a simulated [`Device`] (or, to measure the
/// cache layer alone, on a [`ReplaySsd`]).
pub struct FlashCache<S: CacheSsd = Device> {
    config: CacheConfig,
    ssd: S,
    disk: Disk,
    block_bytes: u64,
    sets: u32,
    ways: u32,
    set_count: Divisor,
    way_count: Divisor,
    /// Per cache block: its tag, LRU links, dirty flag, pending fill (one cache line's half:
    /// a request touches one line per block it looks at).
    slots: Vec<Slot>,
    /// Per set: MRU head, LRU tail, dirty count, empty blocks left (taken in order).
    head: Vec<u32>,
    tail: Vec<u32>,
    dirty_count: Vec<u32>,
    filled: Vec<u32>,
    /// Per disk block: its cache block or NONE.
    map: Vec<u32>,
    /// Fills waiting for their disk reads: (time, slot, generation), by time then issue order.
    /// The disk serves in arrival order, so their times never go back: a queue is a heap.
    pending: VecDeque<(u64, u32, u32)>,
    counters: CacheCounters,
    /// Latest arrival and latest SSD completion: idle time starts `idle_clean_ns` after both
    /// (the disk may still be busy: cleaning and scrubbing are SSD work).
    last_arrival_ns: u64,
    busy_until_ns: u64,
    scrub_cursor: u32,
    /// Scrub credit carried between idle periods (fractions of a page).
    scrub_credit: f64,
    trace: Option<Vec<TraceRow>>,
    scratch: Vec<u8>,
    clean_batch: Vec<(u64, u32)>,
    /// Dirty writes in time order, (slot, generation): idle cleaning takes the oldest still
    /// valid; stale entries are skipped, and dropped when the queue outgrows the cache.
    dirty_order: VecDeque<(u32, u32)>,
    /// Planned corruptions (`flexecc.injection = "points"`): (time, logical page), by time.
    points: Vec<(u64, u64)>,
    next_point: usize,
}

impl FlashCache {
    /// A cache over `ssd` with the SSD configuration's `[cache]` table.
    pub fn from_device(ssd: Device) -> Result<FlashCache, CacheError> {
        let config = ssd.config().cache.clone();
        FlashCache::new(ssd, config)
    }
}

impl<S: CacheSsd> FlashCache<S> {
    /// A cache over `ssd` (whose data mode decides the cache's) with `config`.
    pub fn new(ssd: S, config: CacheConfig) -> Result<FlashCache<S>, CacheError> {
        config.validate(&|key: &str, message| crate::config::ConfigError::Invalid {
            source_name: "cache".into(),
            key: key.into(),
            message,
        })?;
        let invalid = |key, message| CacheError::Invalid { key, message };
        let page = ssd.page_size() as u64;
        let logical = ssd.logical_bytes();
        let cache_bytes = if config.cache_bytes == 0 {
            logical
        } else {
            config.cache_bytes
        };
        if cache_bytes > logical {
            return Err(invalid(
                "cache_bytes",
                format!(
                    "expected at most the SSD's logical capacity ({logical} bytes), got {cache_bytes}"
                ),
            ));
        }
        if config.associativity == 0 || cache_bytes / page < config.associativity as u64 {
            return Err(invalid(
                "associativity",
                format!(
                    "expected 1 to {} blocks per set (the cache holds {} blocks of {page} B), got {}",
                    cache_bytes / page,
                    cache_bytes / page,
                    config.associativity
                ),
            ));
        }
        let d = &config.disk;
        if d.capacity_bytes < cache_bytes {
            return Err(invalid(
                "disk.capacity_bytes",
                format!(
                    "expected a disk at least as large as the cache ({cache_bytes} bytes), got {}",
                    d.capacity_bytes
                ),
            ));
        }
        let ways = config.associativity;
        let sets = (cache_bytes / page / ways as u64) as u32;
        let slots = sets as usize * ways as usize;
        let disk = Disk::new(d, page as u32, ssd.stores_data());
        let blocks = disk.blocks() as usize;
        Ok(FlashCache {
            slots: vec![Slot::EMPTY; slots],
            head: vec![NONE; sets as usize],
            tail: vec![NONE; sets as usize],
            dirty_count: vec![0; sets as usize],
            filled: vec![0; sets as usize],
            map: vec![NONE; blocks],
            pending: VecDeque::new(),
            counters: CacheCounters::default(),
            last_arrival_ns: 0,
            busy_until_ns: 0,
            scrub_cursor: 0,
            scrub_credit: 0.0,
            trace: config.record_trace.then(Vec::new),
            scratch: vec![0; page as usize],
            clean_batch: Vec::new(),
            dirty_order: VecDeque::new(),
            points: Vec::new(),
            next_point: 0,
            block_bytes: page,
            sets,
            ways,
            set_count: Divisor::new(sets as u64),
            way_count: Divisor::new(ways as u64),
            disk,
            ssd,
            config,
        })
    }

    pub fn device(&self) -> &S {
        &self.ssd
    }

    pub fn device_mut(&mut self) -> &mut S {
        &mut self.ssd
    }

    /// The SSD, giving up the cache.
    pub fn into_ssd(self) -> S {
        self.ssd
    }

    pub fn disk_counters(&self) -> DiskCounters {
        self.disk.counters()
    }

    pub fn counters(&self) -> CacheCounters {
        self.counters
    }

    pub fn disk_blocks(&self) -> u64 {
        self.disk.blocks()
    }

    pub fn cache_blocks(&self) -> u64 {
        self.slots.len() as u64
    }

    pub fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    /// The SSD requests issued so far (with `record_trace`).
    pub fn trace(&self) -> Option<&[TraceRow]> {
        self.trace.as_deref()
    }

    #[inline]
    fn set_of(&self, block: u64) -> u32 {
        self.set_count.rem(self.way_count.div(block)) as u32
    }

    fn unlink(&mut self, slot: u32, set: u32) {
        let (p, n) = (
            self.slots[slot as usize].prev,
            self.slots[slot as usize].next,
        );
        if p == NONE {
            self.head[set as usize] = n;
        } else {
            self.slots[p as usize].next = n;
        }
        if n == NONE {
            self.tail[set as usize] = p;
        } else {
            self.slots[n as usize].prev = p;
        }
    }

    fn push_front(&mut self, slot: u32, set: u32) {
        let h = self.head[set as usize];
        self.slots[slot as usize].prev = NONE;
        self.slots[slot as usize].next = h;
        if h == NONE {
            self.tail[set as usize] = slot;
        } else {
            self.slots[h as usize].prev = slot;
        }
        self.head[set as usize] = slot;
    }

    #[inline]
    fn touch(&mut self, slot: u32, set: u32) {
        if self.head[set as usize] != slot {
            self.unlink(slot, set);
            self.push_front(slot, set);
        }
    }

    /// One SSD request of `kind` on cache block `slot`, issued at `at_ns`.
    fn ssd_io(
        &mut self,
        kind: SsdRequestKind,
        slot: u32,
        at_ns: u64,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, CacheError> {
        let done = self.ssd_io_uncounted(kind, slot, at_ns, data, out)?;
        let c = &mut self.counters;
        c.ssd_latency_ns[kind as usize] += done.latency_ns();
        match kind {
            SsdRequestKind::DirtyWrite => c.dirty_writes += 1,
            SsdRequestKind::CleanWrite => c.clean_writes += 1,
            SsdRequestKind::HostRead => c.host_reads += 1,
            SsdRequestKind::FlushRead => c.flush_reads += 1,
        }
        Ok(done)
    }

    /// An SSD request left out of the request-type counts and response times (the
    /// scrubber's reads, counted as `scrub_reads`); it is in the trace.
    fn ssd_io_uncounted(
        &mut self,
        kind: SsdRequestKind,
        slot: u32,
        at_ns: u64,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, CacheError> {
        let offset = slot as u64 * self.block_bytes;
        let req = kind.request(offset, self.block_bytes);
        if let Some(trace) = &mut self.trace {
            trace.push(TraceRow {
                time_ns: at_ns.max(self.ssd.now_ns()),
                kind,
                offset,
                length: self.block_bytes,
            });
        }
        let done = self.ssd.submit_at(at_ns, &req, data, out)?;
        self.busy_until_ns = self.busy_until_ns.max(done.complete_ns);
        Ok(done)
    }

    /// Write dirty cache block `slot` back to the disk from `at_ns`; returns when it is on disk.
    fn clean(&mut self, slot: u32, at_ns: u64) -> Result<u64, CacheError> {
        let block = self.slots[slot as usize].tag;
        let mut buf = std::mem::take(&mut self.scratch);
        let with_data = self.disk.stores_data();
        let c = self.ssd_io(
            SsdRequestKind::FlushRead,
            slot,
            at_ns,
            None,
            with_data.then_some(&mut buf[..]),
        )?;
        let done = if c.uncorrectable {
            // The only copy is lost: the block stays dirty, and a read of it reports the error.
            self.counters.dirty_blocks_lost += 1;
            c.complete_ns
        } else {
            if with_data {
                self.disk.write_data(block, &buf);
            }
            self.slots[slot as usize].dirty = false;
            let set = self.set_of(block);
            self.dirty_count[set as usize] -= 1;
            self.disk.access(block, 1, true, c.complete_ns)
        };
        self.scratch = buf;
        Ok(done)
    }

    /// A cache block for disk block `block` in its set, evicting (and writing back) the LRU
    /// clean block, else the LRU dirty one (the SSD writes out of place: the new data may be
    /// written while the old is read back).
    fn allocate(&mut self, block: u64, at_ns: u64) -> Result<u32, CacheError> {
        let set = self.set_of(block);
        let slot = if self.filled[set as usize] < self.ways {
            let slot = set * self.ways + self.filled[set as usize];
            self.filled[set as usize] += 1;
            slot
        } else {
            self.counters.evictions += 1;
            // LRU clean block, scanning from the tail; the LRU block if all are dirty.
            let mut victim = self.tail[set as usize];
            let mut s = victim;
            while s != NONE && self.slots[s as usize].dirty {
                s = self.slots[s as usize].prev;
            }
            if s != NONE {
                victim = s;
            } else {
                self.counters.dirty_evictions += 1;
                self.clean(victim, at_ns)?;
                if self.slots[victim as usize].dirty {
                    // Lost dirty data: dropped with the block (the loss is counted).
                    self.slots[victim as usize].dirty = false;
                    self.dirty_count[set as usize] -= 1;
                }
            }
            self.unlink(victim, set);
            self.map[self.slots[victim as usize].tag as usize] = NONE;
            victim
        };
        self.slots[slot as usize].tag = block;
        self.slots[slot as usize].dirty = false;
        self.slots[slot as usize].fill_at_ns = 0;
        self.slots[slot as usize].generation = self.slots[slot as usize].generation.wrapping_add(1);
        self.map[block as usize] = slot;
        self.push_front(slot, set);
        Ok(slot)
    }

    /// Fill cache block `slot` from the disk when its read completes at `at_ns`.
    fn schedule_fill(&mut self, slot: u32, at_ns: u64) {
        self.slots[slot as usize].fill_at_ns = at_ns;
        let entry = (at_ns, slot, self.slots[slot as usize].generation);
        match self.pending.back() {
            Some(&(last, _, _)) if last > at_ns => {
                // Not reached with the FCFS disk; kept exact for any other.
                let at = self.pending.partition_point(|&(t, _, _)| t <= at_ns);
                self.pending.insert(at, entry);
            }
            _ => self.pending.push_back(entry),
        }
    }

    /// Issue the fills due by `until_ns` (in time order), skipping those a rewrite cancelled.
    fn run_fills(&mut self, until_ns: u64) -> Result<(), CacheError> {
        let mut buf = std::mem::take(&mut self.scratch);
        while let Some(&(at, slot, generation)) = self.pending.front() {
            if at > until_ns {
                break;
            }
            self.pending.pop_front();
            if self.slots[slot as usize].generation != generation {
                continue;
            }
            self.slots[slot as usize].fill_at_ns = 0;
            let data = if self.disk.stores_data() {
                // The disk copy cannot have changed: a write to the block would have cancelled.
                self.disk.read_data(self.slots[slot as usize].tag, &mut buf);
                Some(&buf[..])
            } else {
                None
            };
            self.ssd_io(SsdRequestKind::CleanWrite, slot, at, data, None)?;
        }
        self.scratch = buf;
        Ok(())
    }

    /// Background work in the idle time before a request arriving at `arrival_ns`.
    fn idle_work(&mut self, arrival_ns: u64) -> Result<(), CacheError> {
        let idle_from = self.busy_until_ns.max(self.last_arrival_ns) + self.config.idle_clean_ns;
        if arrival_ns <= idle_from {
            return Ok(());
        }
        self.run_fills(idle_from)?;
        let mut t = idle_from;
        // Idle cleaning: the dirty blocks written longest ago first, one after the other (each
        // waits for the previous one's disk write), while the idle time lasts.
        let mut budget = self.config.idle_clean_blocks;
        while budget > 0 && t < arrival_ns {
            let Some((slot, generation)) = self.dirty_order.pop_front() else {
                break;
            };
            if !self.slots[slot as usize].dirty
                || self.slots[slot as usize].generation != generation
            {
                continue; // rewritten since (a newer entry follows) or already clean
            }
            t = self.clean(slot, t)?.max(t);
            self.counters.cleaned_idle += 1;
            budget -= 1;
        }
        if self.config.scrub_pages_per_s > 0.0 {
            self.scrub(idle_from, arrival_ns)?;
        }
        Ok(())
    }

    /// Scrub EDC pages in [from, until): evenly spaced at the configured rate.
    fn scrub(&mut self, from: u64, until: u64) -> Result<(), CacheError> {
        let Some(edc) = self.ssd.edc_handle() else {
            return Ok(());
        };
        self.scrub_credit += (until - from) as f64 * 1e-9 * self.config.scrub_pages_per_s;
        let pages = self.scrub_credit.floor() as u64;
        self.scrub_credit -= pages as f64;
        if pages == 0 {
            return Ok(());
        }
        let step = (until - from) / pages;
        let slots = self.slots.len() as u32;
        let mut buf = std::mem::take(&mut self.scratch);
        let with_data = self.disk.stores_data();
        for i in 0..pages {
            let at = from + i * step;
            if self.disk.free_ns() > at {
                // What the scrubber finds needs the disk, and the host's misses come first: it
                // waits for an idle disk (else, at a high RBER, its refetches queue without
                // bound in front of the host's).
                continue;
            }
            // The next cached clean block in the EDC region, at most one lap away.
            let mut found = None;
            for _ in 0..slots {
                let s = self.scrub_cursor;
                self.scrub_cursor = (self.scrub_cursor + 1) % slots;
                if self.slots[s as usize].tag != u64::MAX
                    && !self.slots[s as usize].dirty
                    && self.ssd.block_handle_of_offset(s as u64 * self.block_bytes) == Some(edc)
                {
                    found = Some(s);
                    break;
                }
            }
            let Some(slot) = found else {
                break;
            };
            self.counters.scrub_reads += 1;
            let c = self.ssd_io_uncounted(
                SsdRequestKind::HostRead,
                slot,
                at,
                None,
                with_data.then_some(&mut buf[..]),
            )?;
            if c.uncorrectable {
                self.counters.scrub_prefetched += 1;
                let block = self.slots[slot as usize].tag;
                let d = self.disk.access(block, 1, false, c.complete_ns);
                self.slots[slot as usize].generation =
                    self.slots[slot as usize].generation.wrapping_add(1);
                self.schedule_fill(slot, d);
            }
        }
        self.scratch = buf;
        Ok(())
    }

    /// Serve an application request; `data` is a write's payload, `out` a read's buffer (data
    /// mode), each `blocks` × block bytes.
    pub fn submit(
        &mut self,
        req: &AppRequest,
        data: Option<&[u8]>,
        mut out: Option<&mut [u8]>,
    ) -> Result<AppCompletion, CacheError> {
        let end = req.block + req.blocks as u64;
        if end > self.disk.blocks() {
            return Err(CacheError::OutOfRange {
                first: req.block,
                end,
                blocks: self.disk.blocks(),
            });
        }
        let bytes = req.blocks as usize * self.block_bytes as usize;
        for buf_len in [data.map(|d| d.len()), out.as_ref().map(|o| o.len())]
            .into_iter()
            .flatten()
        {
            if buf_len != bytes {
                return Err(CacheError::DataLength {
                    given: buf_len,
                    expected: bytes,
                });
            }
        }
        let t = req.arrival_ns.max(self.ssd.now_ns());
        self.inject_due(t);
        self.idle_work(t)?;
        self.run_fills(t)?;
        self.last_arrival_ns = t;
        let bb = self.block_bytes as usize;
        let mut done = t;
        let mut error = false;
        for i in 0..req.blocks as usize {
            let block = req.block + i as u64;
            let finished = if req.write {
                self.write_block(block, t, data.map(|d| &d[i * bb..(i + 1) * bb]))?
            } else {
                let chunk = out.as_deref_mut().map(|o| &mut o[i * bb..(i + 1) * bb]);
                let (finished, bad) = self.read_block(block, t, chunk)?;
                error |= bad;
                finished
            };
            done = done.max(finished);
        }
        let c = &mut self.counters;
        if req.write {
            c.writes += 1;
            c.write_response_ns += done - req.arrival_ns.min(done);
        } else {
            c.reads += 1;
            c.read_response_ns += done - req.arrival_ns.min(done);
        }
        c.errors_returned += error as u64;
        Ok(AppCompletion {
            complete_ns: done,
            error,
        })
    }

    fn write_block(&mut self, block: u64, t: u64, data: Option<&[u8]>) -> Result<u64, CacheError> {
        let set = self.set_of(block);
        let slot = match self.map[block as usize] {
            NONE => {
                self.counters.write_misses += 1;
                self.allocate(block, t)?
            }
            slot => {
                self.counters.write_hits += 1;
                self.touch(slot, set);
                // New data: a fill still waiting for the disk is obsolete.
                self.slots[slot as usize].fill_at_ns = 0;
                self.slots[slot as usize].generation =
                    self.slots[slot as usize].generation.wrapping_add(1);
                slot
            }
        };
        let c = self.ssd_io(SsdRequestKind::DirtyWrite, slot, t, data, None)?;
        if !self.slots[slot as usize].dirty {
            self.slots[slot as usize].dirty = true;
            self.dirty_count[set as usize] += 1;
        }
        self.dirty_order
            .push_back((slot, self.slots[slot as usize].generation));
        if self.dirty_order.len() > 2 * self.slots.len() {
            let slots = &self.slots;
            self.dirty_order.retain(|&(s, g)| {
                let slot = &slots[s as usize];
                slot.dirty && slot.generation == g
            });
        }
        // Over the threshold: write back the set's LRU dirty blocks (in the background), in
        // disk order as flashcache sorts them, so that runs of blocks cost one seek.
        let limit = (self.config.dirty_threshold * self.ways as f64) as u32;
        let excess = self.dirty_count[set as usize].saturating_sub(limit) as usize;
        if excess > 0 {
            let mut batch = std::mem::take(&mut self.clean_batch);
            batch.clear();
            let mut s = self.tail[set as usize];
            while batch.len() < excess && s != NONE {
                if self.slots[s as usize].dirty && s != slot {
                    batch.push((self.slots[s as usize].tag, s));
                }
                s = self.slots[s as usize].prev;
            }
            batch.sort_unstable();
            for &(_, s) in &batch {
                self.clean(s, t)?;
                self.counters.cleaned_threshold += 1;
            }
            self.clean_batch = batch;
        }
        Ok(c.complete_ns)
    }

    /// Returns (completion, dirty data lost).
    fn read_block(
        &mut self,
        block: u64,
        t: u64,
        mut out: Option<&mut [u8]>,
    ) -> Result<(u64, bool), CacheError> {
        let set = self.set_of(block);
        let slot = self.map[block as usize];
        if slot != NONE && self.slots[slot as usize].fill_at_ns > t {
            // Its fill is still on the way from the disk: the read waits for that data.
            self.counters.read_hits += 1;
            self.touch(slot, set);
            if let Some(o) = out.as_deref_mut() {
                self.disk.read_data(block, o);
            }
            return Ok((self.slots[slot as usize].fill_at_ns, false));
        }
        if slot != NONE {
            self.counters.read_hits += 1;
            self.touch(slot, set);
            let c = self.ssd_io(SsdRequestKind::HostRead, slot, t, None, out.as_deref_mut())?;
            if !c.uncorrectable {
                return Ok((c.complete_ns, false));
            }
            if self.slots[slot as usize].dirty {
                self.counters.dirty_blocks_lost += 1;
                return Ok((c.complete_ns, true));
            }
            // A corrupt clean copy: the disk has the data.
            self.counters.corruption_disk_reads += 1;
            let d = self.disk.access(block, 1, false, c.complete_ns);
            if let Some(o) = out.as_deref_mut() {
                self.disk.read_data(block, o);
            }
            self.slots[slot as usize].generation =
                self.slots[slot as usize].generation.wrapping_add(1);
            self.schedule_fill(slot, d);
            return Ok((d, false));
        }
        self.counters.read_misses += 1;
        let d = self.disk.access(block, 1, false, t);
        if let Some(o) = out {
            self.disk.read_data(block, o);
        }
        let slot = self.allocate(block, t)?;
        self.schedule_fill(slot, d);
        Ok((d, false))
    }

    /// Plan the corruptions of `flexecc.injection = "points"` over [`from_ns`, `until_ns`):
    /// N = RBER × the SSD's logical data bits single-bit flips, each at a seeded uniform time
    /// and logical page (the same count for every workload on the device). Nothing otherwise.
    pub fn plan_corruptions(&mut self, from_ns: u64, until_ns: u64) {
        use rand::{Rng, SeedableRng};
        let Some((rber, seed)) = self.ssd.point_injection() else {
            return;
        };
        if until_ns <= from_ns {
            return;
        }
        let pages = self.ssd.logical_bytes() / self.block_bytes;
        let n = (rber * self.ssd.logical_bytes() as f64 * 8.0).round() as u64;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xC022_0F71_1A5E);
        self.points = (0..n)
            .map(|_| (rng.gen_range(from_ns..until_ns), rng.gen_range(0..pages)))
            .collect();
        self.points.sort_unstable();
        self.next_point = 0;
        self.counters.corruptions_planned = n;
    }

    /// Apply the planned corruptions due by `t_ns`.
    fn inject_due(&mut self, t_ns: u64) {
        while let Some(&(at, page)) = self.points.get(self.next_point) {
            if at > t_ns {
                break;
            }
            self.next_point += 1;
            if self.ssd.inject_bit_flip(page * self.block_bytes) {
                self.counters.corruptions_injected += 1;
            }
        }
    }

    /// Serve `requests` in order (metadata mode: no data), then issue the fills still due.
    /// With `flexecc.injection = "points"` the corruptions are planned over their span.
    pub fn run(&mut self, requests: &[AppRequest]) -> Result<(), CacheError> {
        if let (Some(first), Some(last)) = (requests.first(), requests.last()) {
            if self.points.is_empty() {
                self.plan_corruptions(first.arrival_ns, last.arrival_ns + 1);
            }
        }
        // The tables are indexed at random and far larger than the CPU caches: ask for the
        // lines a request will touch ahead of time, in stages that follow the chain of loads
        // (block → cache block, or → its set's LRU victim → the victim's block), so that the
        // misses of consecutive requests overlap. Only hints: nothing changes but speed.
        const STAGES: [usize; 4] = [32, 24, 16, 8];
        for (i, req) in requests.iter().enumerate() {
            for (stage, distance) in STAGES.iter().enumerate() {
                if let Some(ahead) = requests.get(i + distance) {
                    self.prefetch_stage(ahead.block, ahead.write, stage);
                }
            }
            self.submit(req, None, None)?;
        }
        self.run_fills(u64::MAX)
    }

    /// One stage of [`FlashCache::run`]'s prefetching for a request to `block`.
    #[inline]
    fn prefetch_stage(&self, block: u64, write: bool, stage: usize) {
        if stage == 0 {
            prefetch(&self.map, block as usize);
            return;
        }
        let Some(&slot) = self.map.get(block as usize) else {
            return;
        };
        let target = if slot != NONE {
            slot
        } else {
            // A miss: the set's next empty block while it fills, then its LRU block.
            let set = self.set_of(block) as usize;
            if stage == 1 {
                prefetch(&self.tail, set);
                prefetch(&self.filled, set);
                return;
            }
            let victim = if self.filled[set] < self.ways {
                set as u32 * self.ways + self.filled[set]
            } else {
                self.tail[set]
            };
            if victim == NONE {
                return;
            }
            if stage == 2 {
                prefetch(&self.slots, victim as usize);
            } else if let Some(old) = self.slots.get(victim as usize) {
                // Its block's map entry is cleared, and its LRU neighbour becomes the tail.
                if old.tag != u64::MAX {
                    prefetch(&self.map, old.tag as usize);
                }
                prefetch(&self.slots, old.prev as usize);
            }
            victim
        };
        let s = target as usize;
        match stage {
            1 => prefetch(&self.slots, s),
            2 if slot != NONE => {
                // A hit moves the block to the MRU end: its LRU neighbours are relinked.
                let hit = &self.slots[s];
                prefetch(&self.slots, hit.prev as usize);
                prefetch(&self.slots, hit.next as usize);
            }
            2 => {}
            _ => {
                let op = if write || slot == NONE {
                    Op::Write
                } else {
                    Op::Read
                };
                let probe = HostRequest::new(op, s as u64 * self.block_bytes, self.block_bytes);
                self.ssd.prefetch_request(&probe, stage == 3);
            }
        }
    }

    /// Write every dirty block back (end of a run: the disk then holds everything).
    pub fn flush_all(&mut self) -> Result<u64, CacheError> {
        self.run_fills(u64::MAX)?;
        let mut t = self.busy_until_ns.max(self.ssd.now_ns());
        for slot in 0..self.slots.len() as u32 {
            if self.slots[slot as usize].dirty {
                t = t.max(self.clean(slot, t)?);
            }
        }
        Ok(t)
    }
}

impl FlashCache {
    /// Generate `spec`'s requests for this cache, serve them (metadata mode), issue the fills
    /// still due; the report: `{"cache": ..., "ssd": ...}`.
    pub fn run_workload(
        &mut self,
        spec: &workload::WorkloadSpec,
    ) -> Result<serde_json::Value, CacheError> {
        let requests = workload::generate(spec, self.cache_blocks(), self.disk_blocks())?;
        self.run(&requests)?;
        let mut cache = self.stats_json();
        let ssd = cache["ssd"].take();
        if let Some(map) = cache.as_object_mut() {
            map.remove("ssd");
            map.insert(
                "workload".into(),
                serde_json::to_value(spec).expect("spec serialises"),
            );
            map.insert("requests".into(), requests.len().into());
            map.insert("end_ns".into(), self.ssd.now_ns().into());
        }
        Ok(serde_json::json!({ "cache": cache, "ssd": ssd }))
    }

    /// The SSD requests issued so far as ssdlab's CSV trace with a `type` column
    /// (`time_ns,op,offset,length,hint,type`), which `ssdlab run --trace` replays.
    pub fn trace_csv(&self) -> Option<String> {
        use std::fmt::Write;
        let rows = self.trace.as_ref()?;
        let mut out = String::with_capacity(rows.len() * 48 + 40);
        out.push_str("time_ns,op,offset,length,hint,type\n");
        for r in rows {
            let req = r.kind.request(r.offset, r.length);
            let _ = writeln!(
                out,
                "{},{},{},{},{},{}",
                r.time_ns,
                req.op.as_str(),
                r.offset,
                r.length,
                req.hint,
                r.kind.name()
            );
        }
        Some(out)
    }

    /// The cache's counters and mean response times, the disk's counters and the SSD's report
    /// (`ssd`).
    pub fn stats_json(&self) -> serde_json::Value {
        let c = &self.counters;
        let mean = |sum: u64, n: u64| if n == 0 { 0.0 } else { sum as f64 / n as f64 };
        let l = &c.ssd_latency_ns;
        let ssd_requests = c.dirty_writes + c.clean_writes + c.host_reads + c.flush_reads;
        let mut out = serde_json::to_value(c).expect("counters serialise");
        let extra = serde_json::json!({
            "mean_response_ns": mean(c.read_response_ns + c.write_response_ns, c.reads + c.writes),
            "read_hit_ratio": mean(c.read_hits, c.read_hits + c.read_misses),
            "mean_read_response_ns": mean(c.read_response_ns, c.reads),
            "mean_write_response_ns": mean(c.write_response_ns, c.writes),
            "mean_ssd_response_ns": mean(l.iter().sum(), ssd_requests),
            "mean_ssd_read_response_ns": mean(l[2] + l[3], c.host_reads + c.flush_reads),
            "mean_ssd_write_response_ns": mean(l[0] + l[1], c.dirty_writes + c.clean_writes),
            "cache_blocks": self.slots.len(),
            "sets": self.sets,
            "associativity": self.ways,
            "disk": serde_json::to_value(self.disk.counters()).expect("counters serialise"),
            "ssd": self.ssd.ssd_json(),
        });
        if let (Some(map), serde_json::Value::Object(more)) = (out.as_object_mut(), extra) {
            map.extend(more);
        }
        out
    }
}
