//! NoFTL's storage manager: database pages mapped straight onto native flash by the host.
//!
//! The SQLite coupling's store (`ssdlab.sqlite.hostftl`) hands every device request of a
//! database on native flash to a [`HostFtl`]: a page map in host RAM over a logical page space
//! (one logical page = one flash page), out-of-place writes to open blocks kept per stream
//! (database, logs, temporary files, GC) and die, foreground GC when free blocks run low
//! (greedy or cost-benefit victims by the host's own valid counts), dynamic wear levelling
//! (least-worn free block first) and static wear levelling (the coldest block becomes the victim
//! once wear drifts `wear_gap` apart), worn-out blocks retired, and the map rebuilt after a
//! power loss from each page's out-of-band area (file id, page within the file, sequence
//! number). The Python module's documentation describes the design; this is its
//! implementation, called without a Python frame by the VFS's compiled file object.

use ssdlab_core::native::NandError;
use ssdlab_core::NativeFlash;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

/// OOB layout: file id (u32), page within the file (u32), sequence number (u64), little endian.
pub const OOB_BYTES: usize = 16;
/// The file id of a page no file owns.
pub const NO_FILE: u32 = u32::MAX;
/// Log tails kept in host RAM (pages that recent writes ended inside).
pub const TAIL_PAGES: usize = 16;
/// Static wear levelling's default gap between the most- and least-erased blocks.
pub const DEFAULT_WEAR_GAP: u32 = 16;

const NONE: i64 = -1;

/// Where a write goes: one open block per stream and die.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Db = 0,
    Log = 1,
    Temp = 2,
    Gc = 3,
}

impl Stream {
    pub const ALL: [Stream; 4] = [Stream::Db, Stream::Log, Stream::Temp, Stream::Gc];

    pub fn name(self) -> &'static str {
        ["db", "log", "temp", "gc"][self as usize]
    }

    pub fn parse(name: &str) -> Option<Stream> {
        Stream::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// How GC picks a victim among the closed blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcPolicy {
    /// Fewest valid pages.
    Greedy,
    /// LFS's cost-benefit: age x (1 - u) / 2u, age in sequence numbers since the block closed.
    CostBenefit,
}

impl GcPolicy {
    pub const NAMES: [&'static str; 2] = ["greedy", "cost_benefit"];

    pub fn parse(name: &str) -> Option<GcPolicy> {
        match name {
            "greedy" => Some(GcPolicy::Greedy),
            "cost_benefit" => Some(GcPolicy::CostBenefit),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GcPolicy::Greedy => "greedy",
            GcPolicy::CostBenefit => "cost_benefit",
        }
    }
}

/// What the host FTL did, in pages and blocks, and the simulated time it waited for GC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub host_page_writes: u64,
    pub host_page_reads: u64,
    pub unmapped_reads: u64,
    pub read_modify_writes: u64,
    /// Partial-page writes merged with a log tail kept in host RAM (no flash read).
    pub tail_hits: u64,
    pub trimmed_pages: u64,
    pub gc_runs: u64,
    pub gc_page_copies: u64,
    pub gc_ns: u64,
    pub erases: u64,
    /// Victims taken for static wear levelling (cold blocks moved to worn ones).
    pub wear_moves: u64,
    pub retired_blocks: u64,
    pub recoveries: Vec<Recovery>,
}

/// What one recovery from OOB cost and found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    pub scanned_pages: u64,
    pub live_pages: u64,
    pub scan_ns: u64,
    pub free_blocks: u64,
}

/// Who owns a logical page: a file's page and the stream its writes go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub file_id: u32,
    pub file_page: u32,
    pub stream: Stream,
}

/// A live file as the store's durable catalog has it, for recovery: its extents (in units of
/// `extent_pages` logical pages) and its size in pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    pub extents: Vec<u64>,
    pub extent_pages: u64,
    pub size_pages: u64,
}

/// A host FTL refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostFtlError {
    /// A setting out of range; the message names it.
    Option(String),
    /// A logical page past the space.
    OutOfRange { lpage: u64, logical_pages: u64 },
    /// No free block left (GC could not keep up), or GC made no progress.
    Full(&'static str),
    /// The flash refused an operation the host FTL issued.
    Nand(NandError),
}

impl std::fmt::Display for HostFtlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostFtlError::Option(message) => f.write_str(message),
            HostFtlError::OutOfRange {
                lpage,
                logical_pages,
            } => write!(
                f,
                "host FTL: logical page {lpage} outside 0..{}",
                logical_pages.saturating_sub(1)
            ),
            HostFtlError::Full(what) => write!(f, "host FTL: {what}"),
            HostFtlError::Nand(e) => write!(f, "host FTL: the flash refused: {e}"),
        }
    }
}

impl std::error::Error for HostFtlError {}

impl From<NandError> for HostFtlError {
    fn from(e: NandError) -> Self {
        HostFtlError::Nand(e)
    }
}

type Result<T> = std::result::Result<T, HostFtlError>;

/// Settings of a [`HostFtl`].
#[derive(Debug, Clone)]
pub struct Options {
    pub gc_policy: GcPolicy,
    /// Spare blocks as a fraction of the usable ones, in (0, 0.9); None: as many as the
    /// device's block interface keeps (its over-provisioning).
    pub spare_fraction: Option<f64>,
    /// Free blocks below which GC runs before a write; None: one per stream and die, plus 2.
    pub gc_free_blocks: Option<u64>,
    pub wear_gap: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            gc_policy: GcPolicy::Greedy,
            spare_fraction: None,
            gc_free_blocks: None,
            wear_gap: DEFAULT_WEAR_GAP,
        }
    }
}

/// The host's page map over one device's native flash.
pub struct HostFtl {
    pub page_bytes: u64,
    pub pages_per_block: u64,
    pub total_blocks: u64,
    pub dies: usize,
    pub gc_policy: GcPolicy,
    pub gc_free_blocks: u64,
    pub wear_gap: u32,
    pub logical_pages: u64,
    pub spare_blocks: u64,
    pub counters: Counters,
    /// Sequence number of the last program or deallocation.
    pub seq: u64,
    die_of: Vec<usize>,
    /// Deallocations: logical page -> sequence number when it was trimmed (durable metadata).
    trimmed_at: HashMap<u64, u64>,
    /// Extent -> its owner (file id, extent index within the file, stream), kept by the store.
    owners: HashMap<u64, (u32, u32, Stream)>,
    extent_pages: u64,
    /// Every page not in an extent belongs to this file as its own page number (tests).
    default_owner: Option<(u32, Stream)>,
    // Volatile state: what a power loss drops.
    l2p: Vec<i64>,
    p2l: Vec<i64>,
    valid: Vec<u32>,
    /// Sequence number when each block was closed (cost-benefit's age); NONE while not closed.
    closed_seq: Vec<i64>,
    retired: HashSet<u64>,
    /// The stream whose open block each block last was.
    block_stream: Vec<Option<Stream>>,
    /// Erase counts as the host keeps them (the flash's, read at start).
    erases: Vec<u32>,
    free: Vec<BinaryHeap<Reverse<(u32, u64)>>>,
    free_count: u64,
    /// Open block and next page index per stream and die.
    open: Vec<Vec<Option<(u64, u64)>>>,
    cursor: [usize; 4],
    /// The last page of recent writes that ended inside a page, as written, oldest first.
    tails: VecDeque<(u64, Vec<u8>)>,
    pub mapped: u64,
    /// A page's worth of scratch for reads the host merges.
    scratch: Vec<u8>,
}

impl HostFtl {
    /// Take over `flash`: `block_logical_bytes` is the logical space the device's block
    /// interface would export (the default spare space matches its over-provisioning).
    pub fn new(
        flash: &NativeFlash<'_>,
        block_logical_bytes: u64,
        options: Options,
    ) -> Result<Self> {
        if options.wear_gap < 1 {
            return Err(HostFtlError::Option(format!(
                "wear_gap: expected an integer >= 1, got {}",
                options.wear_gap
            )));
        }
        if let Some(f) = options.spare_fraction {
            if !(f > 0.0 && f < 0.9) {
                return Err(HostFtlError::Option(format!(
                    "spare_fraction: expected a number in (0, 0.9), got {f}"
                )));
            }
        }
        let g = flash.geometry().clone();
        if (g.oob_bytes as usize) < OOB_BYTES {
            return Err(HostFtlError::Option(format!(
                "the flash's OOB area holds {} bytes; the host FTL needs {OOB_BYTES} (file id, \
                 page, sequence number)",
                g.oob_bytes
            )));
        }
        let total_blocks = u64::from(g.total_blocks);
        let dies = (g.channels * g.dies_per_channel) as usize;
        let mut die_of = Vec::with_capacity(total_blocks as usize);
        for block in 0..g.total_blocks {
            let at = flash.locate(block)?;
            die_of.push((at.channel * g.dies_per_channel + at.die) as usize);
        }
        let bad: HashSet<u64> = flash.bad_blocks().into_iter().map(u64::from).collect();
        let usable = total_blocks - bad.len() as u64;
        let streams = Stream::ALL.len() as u64;
        let gc_free_blocks = options.gc_free_blocks.unwrap_or(streams * dies as u64 + 2);
        let reserve = gc_free_blocks + streams * dies as u64;
        let ppb = u64::from(g.pages_per_block);
        let page_bytes = u64::from(g.page_bytes);
        let spare = match options.spare_fraction {
            None => {
                let logical_blocks = block_logical_bytes / (page_bytes * ppb);
                usable.saturating_sub(logical_blocks).max(reserve)
            }
            Some(f) => ((usable as f64 * f).round_ties_even() as u64).max(reserve),
        };
        if spare >= usable {
            return Err(HostFtlError::Option(format!(
                "the flash has {usable} usable blocks; the host FTL keeps {spare} spare (open \
                 blocks per stream and die, and GC's reserve): too small a device"
            )));
        }
        let mut ftl = HostFtl {
            page_bytes,
            pages_per_block: ppb,
            total_blocks,
            dies,
            gc_policy: options.gc_policy,
            gc_free_blocks,
            wear_gap: options.wear_gap,
            logical_pages: (usable - spare) * ppb,
            spare_blocks: spare,
            counters: Counters::default(),
            seq: 0,
            die_of,
            trimmed_at: HashMap::new(),
            owners: HashMap::new(),
            extent_pages: 1,
            default_owner: None,
            l2p: Vec::new(),
            p2l: Vec::new(),
            valid: Vec::new(),
            closed_seq: Vec::new(),
            retired: HashSet::new(),
            block_stream: Vec::new(),
            erases: Vec::new(),
            free: Vec::new(),
            free_count: 0,
            open: Vec::new(),
            cursor: [0; 4],
            tails: VecDeque::new(),
            mapped: 0,
            scratch: vec![0; page_bytes as usize],
        };
        ftl.reset_volatile(flash, bad);
        for block in 0..total_blocks {
            if !ftl.retired.contains(&block) {
                ftl.give_free(block);
            }
        }
        Ok(ftl)
    }

    fn reset_volatile(&mut self, flash: &NativeFlash<'_>, bad: HashSet<u64>) {
        let total_pages = (self.total_blocks * self.pages_per_block) as usize;
        let blocks = self.total_blocks as usize;
        self.l2p = vec![NONE; self.logical_pages as usize];
        self.p2l = vec![NONE; total_pages];
        self.valid = vec![0; blocks];
        self.closed_seq = vec![NONE; blocks];
        self.retired = bad;
        self.block_stream = vec![None; blocks];
        self.erases = flash.erase_counts().to_vec();
        self.free = vec![BinaryHeap::new(); self.dies];
        self.free_count = 0;
        self.open = vec![vec![None; self.dies]; Stream::ALL.len()];
        // Each stream starts on a die of its own, so streams written together use different dies.
        for (index, cursor) in self.cursor.iter_mut().enumerate() {
            *cursor = index % self.dies;
        }
        self.tails.clear();
        self.mapped = 0;
    }

    fn give_free(&mut self, block: u64) {
        let die = self.die_of[block as usize];
        self.free[die].push(Reverse((self.erases[block as usize], block)));
        self.free_count += 1;
    }

    // -- owners --------------------------------------------------------------------------------

    /// Logical pages per extent of the store's layout (the owner table's unit).
    pub fn set_extent_pages(&mut self, extent_pages: u64) {
        self.extent_pages = extent_pages.max(1);
    }

    /// Extent `extent` is the `index`-th extent of file `file_id`, written to `stream`.
    pub fn set_owner(&mut self, extent: u64, file_id: u32, index: u32, stream: Stream) {
        self.owners.insert(extent, (file_id, index, stream));
    }

    /// Extent `extent` no longer belongs to a file.
    pub fn clear_owner(&mut self, extent: u64) {
        self.owners.remove(&extent);
    }

    /// Pages outside every extent belong to `file_id` as its own page numbers (a bare FTL).
    pub fn set_default_owner(&mut self, owner: Option<(u32, Stream)>) {
        self.default_owner = owner;
    }

    pub fn owner(&self, lpage: u64) -> Owner {
        let extent = lpage / self.extent_pages;
        let within = lpage % self.extent_pages;
        if let Some(&(file_id, index, stream)) = self.owners.get(&extent) {
            return Owner {
                file_id,
                file_page: (u64::from(index) * self.extent_pages + within) as u32,
                stream,
            };
        }
        match self.default_owner {
            Some((file_id, stream)) => Owner {
                file_id,
                file_page: lpage as u32,
                stream,
            },
            None => Owner {
                file_id: NO_FILE,
                file_page: 0,
                stream: Stream::Temp,
            },
        }
    }

    // -- what tests and reports read -----------------------------------------------------------

    /// The physical page of each logical page (-1: unmapped).
    pub fn l2p(&self) -> &[i64] {
        &self.l2p
    }

    /// The stream whose open block `block` last was.
    pub fn block_stream(&self, block: u64) -> Option<Stream> {
        self.block_stream.get(block as usize).copied().flatten()
    }

    pub fn free_blocks(&self) -> u64 {
        self.free_count
    }

    // -- the block interface the store calls ---------------------------------------------------

    /// Read `out.len()` bytes at logical byte `offset` issued at `at_ns`; returns when the
    /// data is there.
    pub fn read(
        &mut self,
        flash: &mut NativeFlash<'_>,
        offset: u64,
        out: &mut [u8],
        at_ns: u64,
    ) -> Result<u64> {
        let page_bytes = self.page_bytes;
        let length = out.len() as u64;
        if length == 0 {
            return Ok(at_ns);
        }
        let first = offset / page_bytes;
        let last = (offset + length - 1) / page_bytes;
        let mut done = at_ns;
        for lpage in first..=last {
            let start = lpage * page_bytes;
            let lo = offset.max(start);
            let hi = (offset + length).min(start + page_bytes);
            let dst = &mut out[(lo - offset) as usize..(hi - offset) as usize];
            let t = if hi - lo == page_bytes {
                self.read_page(flash, lpage, dst, at_ns)?
            } else {
                let mut scratch = std::mem::take(&mut self.scratch);
                let t = self.read_page(flash, lpage, &mut scratch, at_ns);
                dst.copy_from_slice(&scratch[(lo - start) as usize..(hi - start) as usize]);
                self.scratch = scratch;
                t?
            };
            done = done.max(t);
        }
        Ok(done)
    }

    fn check_range(&self, lpage: u64) -> Result<()> {
        if lpage >= self.logical_pages {
            return Err(HostFtlError::OutOfRange {
                lpage,
                logical_pages: self.logical_pages,
            });
        }
        Ok(())
    }

    fn read_page(
        &mut self,
        flash: &mut NativeFlash<'_>,
        lpage: u64,
        out: &mut [u8],
        at_ns: u64,
    ) -> Result<u64> {
        self.check_range(lpage)?;
        let ppage = self.l2p[lpage as usize];
        if ppage == NONE {
            self.counters.unmapped_reads += 1;
            out.fill(0);
            return Ok(at_ns);
        }
        self.counters.host_page_reads += 1;
        let read = flash.read_page(ppage as u64, Some(at_ns))?;
        match read.data {
            Some(data) => out.copy_from_slice(data),
            None => out.fill(0),
        }
        Ok(read.done_ns)
    }

    /// Write `data` at logical byte `offset` issued at `at_ns`; returns when it is on flash
    /// (after any GC the write had to wait for).
    pub fn write(
        &mut self,
        flash: &mut NativeFlash<'_>,
        offset: u64,
        data: &[u8],
        mut at_ns: u64,
    ) -> Result<u64> {
        let page_bytes = self.page_bytes;
        let length = data.len() as u64;
        if length == 0 {
            return Ok(at_ns);
        }
        let first = offset / page_bytes;
        let last = (offset + length - 1) / page_bytes;
        let pages = last - first + 1;
        if self.free_count < self.gc_free_blocks + pages.div_ceil(self.pages_per_block) {
            at_ns = self.ensure_free(flash, pages, at_ns)?;
        }
        if length == page_bytes && offset == first * page_bytes {
            return self.program(flash, first, data, at_ns); // a database page
        }
        let mut done = at_ns;
        let mut merged = vec![0u8; page_bytes as usize];
        for lpage in first..=last {
            let start = lpage * page_bytes;
            let lo = offset.max(start);
            let hi = (offset + length).min(start + page_bytes);
            let piece = &data[(lo - offset) as usize..(hi - offset) as usize];
            let mut ready = at_ns;
            let partial = hi - lo < page_bytes;
            if partial {
                // Merge with what the page holds: a kept tail, or the page read back.
                match self.take_tail(lpage) {
                    Some(old) => {
                        merged.copy_from_slice(&old);
                        self.counters.tail_hits += 1;
                    }
                    None => {
                        ready = self.read_page(flash, lpage, &mut merged, at_ns)?;
                        self.counters.read_modify_writes += 1;
                    }
                }
                merged[(lo - start) as usize..(hi - start) as usize].copy_from_slice(piece);
            } else {
                merged.copy_from_slice(piece);
            }
            done = done.max(self.program(flash, lpage, &merged, ready)?);
            if partial && hi == offset + length {
                // Ends inside the page: keep the tail for the next append.
                self.tails.push_back((lpage, merged.clone()));
                if self.tails.len() > TAIL_PAGES {
                    self.tails.pop_front();
                }
            }
        }
        Ok(done)
    }

    fn take_tail(&mut self, lpage: u64) -> Option<Vec<u8>> {
        let at = self.tails.iter().position(|(page, _)| *page == lpage)?;
        self.tails.remove(at).map(|(_, data)| data)
    }

    /// Deallocate the whole pages of `length` bytes at logical byte `offset`.
    pub fn trim(&mut self, offset: u64, length: u64) {
        let page_bytes = self.page_bytes;
        let first = offset.div_ceil(page_bytes);
        let last = ((offset + length) / page_bytes).min(self.logical_pages); // exclusive
        self.seq += 1;
        for lpage in first..last {
            self.trimmed_at.insert(lpage, self.seq);
            let ppage = self.l2p[lpage as usize];
            self.take_tail(lpage);
            if ppage != NONE {
                self.invalidate(ppage as u64);
                self.l2p[lpage as usize] = NONE;
                self.mapped -= 1;
                self.counters.trimmed_pages += 1;
            }
        }
    }

    // -- writing --------------------------------------------------------------------------------

    fn program(
        &mut self,
        flash: &mut NativeFlash<'_>,
        lpage: u64,
        data: &[u8],
        at_ns: u64,
    ) -> Result<u64> {
        self.check_range(lpage)?;
        let owner = self.owner(lpage);
        self.seq += 1;
        let stream = owner.stream as usize;
        let die = self.cursor[stream];
        self.cursor[stream] = (die + 1) % self.dies;
        let ppage = match &mut self.open[stream][die] {
            Some((block, next)) if *next < self.pages_per_block => {
                *next += 1;
                *block * self.pages_per_block + *next - 1
            }
            _ => self.allocate(owner.stream, die)?,
        };
        let mut oob = [0u8; OOB_BYTES];
        oob[..4].copy_from_slice(&owner.file_id.to_le_bytes());
        oob[4..8].copy_from_slice(&owner.file_page.to_le_bytes());
        oob[8..].copy_from_slice(&self.seq.to_le_bytes());
        let done = match flash.page_buffer() {
            Some(mut buffer) if buffer.len() == data.len() => {
                buffer.copy_from_slice(data);
                flash.program_owned(ppage, buffer, &oob, Some(at_ns))?
            }
            _ => flash.program(ppage, data, &oob, Some(at_ns))?,
        };
        let old = self.l2p[lpage as usize];
        if old != NONE {
            self.invalidate(old as u64);
        } else {
            self.mapped += 1;
        }
        if !self.tails.is_empty() {
            self.take_tail(lpage); // rewritten: a kept tail is stale
        }
        self.trimmed_at.remove(&lpage);
        self.l2p[lpage as usize] = ppage as i64;
        self.p2l[ppage as usize] = lpage as i64;
        self.valid[(ppage / self.pages_per_block) as usize] += 1;
        self.counters.host_page_writes += 1;
        Ok(done)
    }

    /// The next free page of `stream`'s open block on `die`, opening the die's least-worn free
    /// block when needed (or writing on the die with the most free blocks when this one has
    /// none).
    fn allocate(&mut self, stream: Stream, die: usize) -> Result<u64> {
        let ppb = self.pages_per_block;
        let s = stream as usize;
        let slot = self.open[s][die];
        let (block, next) = match slot {
            Some((block, next)) if next < ppb => (block, next),
            _ => {
                if let Some((block, _)) = slot {
                    self.closed_seq[block as usize] = self.seq as i64;
                    self.open[s][die] = None;
                }
                let Some(Reverse((_, block))) = self.free[die].pop() else {
                    let mut other = 0;
                    for d in 1..self.dies {
                        if self.free[d].len() > self.free[other].len() {
                            other = d;
                        }
                    }
                    if self.free[other].is_empty() {
                        return Err(HostFtlError::Full(
                            "no free block left (GC could not keep up)",
                        ));
                    }
                    return self.allocate(stream, other);
                };
                self.free_count -= 1;
                self.block_stream[block as usize] = Some(stream);
                (block, 0)
            }
        };
        self.open[s][die] = Some((block, next + 1));
        Ok(block * ppb + next)
    }

    fn invalidate(&mut self, ppage: u64) {
        self.p2l[ppage as usize] = NONE;
        self.valid[(ppage / self.pages_per_block) as usize] -= 1;
    }

    // -- garbage collection ---------------------------------------------------------------------

    /// Collect until a write of `pages` pages leaves `gc_free_blocks` free blocks; returns when
    /// the collection ends (the host waits for it).
    fn ensure_free(
        &mut self,
        flash: &mut NativeFlash<'_>,
        pages: u64,
        mut at_ns: u64,
    ) -> Result<u64> {
        let need = self.gc_free_blocks + pages.div_ceil(self.pages_per_block);
        let start = at_ns;
        let mut rounds = 0;
        while self.free_count < need {
            let Some(victim) = self.victim() else {
                break;
            };
            at_ns = self.collect(flash, victim, at_ns)?;
            rounds += 1;
            if rounds > self.total_blocks {
                return Err(HostFtlError::Full(
                    "GC makes no progress (every block is valid)",
                ));
            }
        }
        if rounds > 0 {
            self.counters.gc_runs += 1;
            self.counters.gc_ns += at_ns - start;
        }
        Ok(at_ns)
    }

    /// The next block to collect: the coldest closed block when wear has drifted `wear_gap`
    /// apart (static wear levelling), else the policy's choice among closed blocks with
    /// something to gain.
    fn victim(&mut self) -> Option<u64> {
        let open: HashSet<u64> = self
            .open
            .iter()
            .flatten()
            .filter_map(|slot| slot.map(|(block, _)| block))
            .collect();
        let ppb = self.pages_per_block;
        let mut best: Option<(u64, f64)> = None;
        let mut coldest: Option<(u64, u32)> = None;
        for block in 0..self.total_blocks {
            let closed = self.closed_seq[block as usize];
            if closed == NONE || open.contains(&block) || self.retired.contains(&block) {
                continue;
            }
            let erases = self.erases[block as usize];
            if coldest.map_or(true, |(_, e)| erases < e) {
                coldest = Some((block, erases));
            }
            let valid = u64::from(self.valid[block as usize]);
            if valid == ppb {
                continue;
            }
            let score = match self.gc_policy {
                GcPolicy::Greedy => -(valid as f64),
                GcPolicy::CostBenefit => {
                    let u = valid as f64 / ppb as f64;
                    let age = (self.seq as i64 - closed + 1) as f64;
                    if u == 0.0 {
                        f64::INFINITY
                    } else {
                        age * (1.0 - u) / (2.0 * u)
                    }
                }
            };
            if best.map_or(true, |(_, s)| score > s) {
                best = Some((block, score));
            }
        }
        if let Some((block, erases)) = coldest {
            let most = self.erases.iter().copied().max().unwrap_or(0);
            if most - erases > self.wear_gap {
                self.counters.wear_moves += 1;
                return Some(block);
            }
        }
        best.map(|(block, _)| block)
    }

    /// Move the victim's valid pages into the GC stream on its die, then erase it.
    fn collect(&mut self, flash: &mut NativeFlash<'_>, victim: u64, at_ns: u64) -> Result<u64> {
        let ppb = self.pages_per_block;
        let die = self.die_of[victim as usize];
        let mut done = at_ns;
        let mut data = vec![0u8; self.page_bytes as usize];
        let mut oob = [0u8; OOB_BYTES];
        for ppage in victim * ppb..(victim + 1) * ppb {
            let lpage = self.p2l[ppage as usize];
            if lpage == NONE {
                continue;
            }
            let read_done = {
                let read = flash.read_page(ppage, Some(at_ns))?;
                match read.data {
                    Some(d) => data.copy_from_slice(d),
                    None => data.fill(0),
                }
                oob.copy_from_slice(&read.oob[..OOB_BYTES]);
                read.done_ns
            };
            let target = self.allocate(Stream::Gc, die)?;
            // The copy keeps the page's sequence number: it never outranks a newer write.
            let written = flash.program(target, &data, &oob, Some(read_done))?;
            self.invalidate(ppage);
            self.l2p[lpage as usize] = target as i64;
            self.p2l[target as usize] = lpage;
            self.valid[(target / ppb) as usize] += 1;
            self.counters.gc_page_copies += 1;
            done = done.max(written);
        }
        self.erase(flash, victim, done)
    }

    fn erase(&mut self, flash: &mut NativeFlash<'_>, block: u64, at_ns: u64) -> Result<u64> {
        self.closed_seq[block as usize] = NONE;
        match flash.erase(block as u32, Some(at_ns)) {
            Ok(done) => {
                self.counters.erases += 1;
                self.erases[block as usize] += 1;
                self.give_free(block);
                Ok(done)
            }
            Err(e) if e.is_rule() => {
                self.retired.insert(block); // worn out: the block is bad from now on
                self.counters.retired_blocks += 1;
                Ok(at_ns)
            }
            Err(e) => Err(e.into()),
        }
    }

    // -- power loss and recovery ----------------------------------------------------------------

    /// Drop everything held in host RAM: the page map, valid counts, open blocks, pools.
    pub fn power_loss(&mut self, flash: &NativeFlash<'_>) {
        let bad = flash.bad_blocks().into_iter().map(u64::from).collect();
        self.reset_volatile(flash, bad);
    }

    /// Rebuild the page map from the OOB of every programmed page, issued together at `now`
    /// (the dies scan in parallel), with the store's durable catalog (file id -> its extents
    /// and size). Returns the report and when the scan ended.
    pub fn recover(
        &mut self,
        flash: &mut NativeFlash<'_>,
        catalog: &HashMap<u32, CatalogEntry>,
        now: u64,
    ) -> Result<(Recovery, u64)> {
        let started = now;
        let ppb = self.pages_per_block;
        let mut latest: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
        let mut done = started;
        let mut scanned = 0;
        let mut max_seq = self.seq;
        // The whole OOB area is read (the flash checks the buffer's size); the first
        // OOB_BYTES hold what the host wrote.
        let mut oob = vec![0u8; flash.geometry().oob_bytes as usize];
        for block in 0..self.total_blocks {
            if self.retired.contains(&block) {
                continue;
            }
            let programmed = u64::from(flash.next_page(block as u32)?);
            if programmed == 0 {
                self.give_free(block);
                continue;
            }
            // A partly written block stays closed until GC takes it.
            self.closed_seq[block as usize] = 0;
            for index in 0..programmed {
                let ppage = block * ppb + index;
                let t = flash.read_oob(ppage, &mut oob, Some(started))?;
                done = done.max(t);
                scanned += 1;
                let file_id = u32::from_le_bytes(oob[..4].try_into().expect("4 bytes"));
                let file_page = u32::from_le_bytes(oob[4..8].try_into().expect("4 bytes"));
                let seq = u64::from_le_bytes(oob[8..OOB_BYTES].try_into().expect("8 bytes"));
                if file_id == NO_FILE {
                    continue;
                }
                max_seq = max_seq.max(seq);
                let known = latest.entry((file_id, file_page)).or_insert((seq, ppage));
                if seq >= known.0 {
                    *known = (seq, ppage);
                }
            }
        }
        self.seq = max_seq;
        let mut live = 0;
        for (&(file_id, file_page), &(seq, ppage)) in &latest {
            let Some(entry) = catalog.get(&file_id) else {
                continue;
            };
            let file_page = u64::from(file_page);
            let index = file_page / entry.extent_pages;
            let within = file_page % entry.extent_pages;
            if file_page >= entry.size_pages || index >= entry.extents.len() as u64 {
                continue;
            }
            let lpage = entry.extents[index as usize] * entry.extent_pages + within;
            if lpage >= self.logical_pages {
                continue;
            }
            if self.trimmed_at.get(&lpage).is_some_and(|&at| at > seq) {
                continue;
            }
            self.l2p[lpage as usize] = ppage as i64;
            self.p2l[ppage as usize] = lpage as i64;
            self.valid[(ppage / ppb) as usize] += 1;
            live += 1;
        }
        self.mapped = live;
        let report = Recovery {
            scanned_pages: scanned,
            live_pages: live,
            scan_ns: done - started,
            free_blocks: self.free_count,
        };
        self.counters.recoveries.push(report);
        Ok((report, done))
    }
}
