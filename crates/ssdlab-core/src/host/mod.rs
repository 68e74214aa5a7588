//! The device: host interface, controller and the glue that times FTL decisions on the NAND.
//!
//! A request arrives at an issue time, is split into page transactions, and each transaction
//! asks the FTL where its data is or goes. The FTL's own flash work (GC moves and erases) is
//! timed first, on the dies it touches; then the host pages' reads and programs are reserved on
//! dies and channels, grouped into multi-plane operations (pages at one page offset on different
//! planes of a die) or melded whole-wordline reads where allowed. Reads pay array + transfer +
//! ECC decode, writes host transfer + encode + bus transfer + program; the host link and the
//! device CPU are serial resources too. The request completes when its last piece does. All of
//! this happens at issue time (resources are reserved first come, first served), so the event
//! loop of [`run`] only has to order completions.

mod engine;
mod flexecc;
mod in_flight;
mod link;
mod logs;
mod meld;
mod native;
mod power;
pub mod run;
mod translation;

pub use native::{NativeFlash, PageRead};
pub use power::RecoveryReport;
pub use run::{ArrivalClock, Loop, Progress, RunSpec};

use link::LinkCalendar;

use crate::config::{Config, ConfigError, Derived, MeldedReads, UnmappedRead};
use crate::ecc;
use crate::ftl::segments::{dyn_quota, DynQuota, SegmentGeometry};
use crate::ftl::{build_ftl, FlashOp, Ftl, FtlError, Purpose, UnitWrite, WriteOutcome};
use crate::nand::store::UnitStore;
use crate::nand::timing::Timeline;
use crate::nand::Geometry;
use crate::native::{NandError, NativeFlashState};
use crate::placement::allocation::{plane_allocator, PlaneAllocator};
use crate::placement::wordline::ReadGroupPlacer;
use crate::placement::{sea_handles, PlacementError, PlacementTable};
use crate::request::{HostRequest, Op, SourceError};
use crate::stats::{FlashCounters, RequestLogRow, SeaReportInputs, SeriesCounters, TimeSeries};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use thiserror::Error;

/// Errors a device reports for a request or a run.
#[derive(Debug, Error)]
pub enum DeviceError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("request {offset}+{length} bytes is past the device's end ({capacity} bytes)")]
    OutOfRange {
        offset: u64,
        length: u64,
        capacity: u64,
    },
    #[error("{op} request of length 0 at offset {offset}")]
    ZeroLength { op: &'static str, offset: u64 },
    #[error("write of {length} bytes given {given} bytes of data")]
    DataLength { length: u64, given: usize },
    #[error("this device keeps no page data (create it with store_data to read data back)")]
    NoDataStore,
    #[error(transparent)]
    Placement(#[from] PlacementError),
    #[error(transparent)]
    Ftl(#[from] FtlError),
    #[error("workload: {0}")]
    Source(SourceError),
    #[error("request #{index}: {source}")]
    InRun {
        index: u64,
        source: Box<DeviceError>,
    },
    #[error("{0}")]
    Run(&'static str),
    #[error(
        "SEA-SSD hints need distinct dyn and stat handles, but placement.sea_dyn_handle and \
         placement.sea_stat_handle both resolve to handle {handle} with placement.handles = \
         {handles}: set placement.handles to 2 or more (or placement.honor_hints = false to \
         ignore the hints)"
    )]
    SeaHandles { handle: u32, handles: u32 },
    #[error(transparent)]
    Nand(#[from] NandError),
    #[error(
        "the flash is driven through its native interface (Device::native): the block \
         interface takes no requests"
    )]
    NativeOwned,
}

/// Outcome of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub issue_ns: u64,
    pub complete_ns: u64,
    /// A page of a read could not be decoded (EIO to the host).
    pub uncorrectable: bool,
    /// The longest wait of one of its flash operations for its die.
    pub queue_ns: u64,
}

impl Completion {
    pub fn latency_ns(&self) -> u64 {
        self.complete_ns - self.issue_ns
    }
}

/// Options of [`Device::precondition`].
#[derive(Debug, Clone, Copy)]
pub struct PreconditionOptions {
    /// Upper bound on random overwrites, in multiples of the logical capacity.
    pub max_random_passes: f64,
    /// Steady state: write amplification of two consecutive windows within this fraction.
    pub steady_tolerance: f64,
}

impl Default for PreconditionOptions {
    fn default() -> Self {
        PreconditionOptions {
            max_random_passes: 2.0,
            steady_tolerance: 0.02,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreconditionReport {
    /// Mapping units written (sequential fill plus random overwrites).
    pub units_written: u64,
    pub waf_last_window: f64,
    pub steady: bool,
}

/// One host page of a read or program, waiting to be grouped.
#[derive(Debug, Clone, Copy)]
struct PageTxn {
    die: u32,
    page_in_block: u32,
    plane: u32,
    ppa: u32,
    ready_ns: u64,
    /// The codewords the host wants of the page (capped at the page's when it is read).
    codewords: u32,
}

/// SEA-SSD hints received, honoured or not (the `received` figures of `ssd.sea`).
#[derive(Debug, Clone, Copy, Default)]
struct SeaReceived {
    settings: u64,
    wal_bytes: u64,
    cache_bytes: u64,
    /// The quota of the last settings hint honoured.
    quota: Option<DynQuota>,
    predicted_units: u64,
}

/// Flash work done for the request being processed (per-request log).
#[derive(Debug, Clone, Copy, Default)]
struct RequestWork {
    /// Longest wait of one of its operations for its die (reservation path).
    queue_ns: u64,
    oob_reads: u32,
    reads: u32,
    programs: u32,
    erases: u32,
    flash_ns: u64,
    first_ppa: Option<u32>,
    /// DFTL's work for the request (see `translation.rs`).
    translation_reads: u32,
    translation_writes: u32,
    mapping_hits: u32,
    mapping_misses: u32,
    device_cpu_ns: u64,
}

pub struct Device {
    config: Config,
    derived: Derived,
    geo: Geometry,
    config_hash: String,
    seed: u64,
    ftl: Box<dyn Ftl>,
    placement: PlacementTable,
    timeline: Timeline,
    allocator: Box<dyn PlaneAllocator>,
    store: Option<UnitStore>,
    /// Bytes of a mapping unit and their log2 (units are a power of two: a request's units
    /// come from shifts, not from 64-bit divisions, which cost tens of cycles on some cores),
    /// and log2 of the units per page.
    unit_bytes: u64,
    unit_bytes_log2: u32,
    unit_shift: u32,
    /// Host pages of the write frontiers still filling (their units wait in the controller's
    /// staging buffer), with the time the data of their units is all there, encoded.
    staged: BTreeMap<u32, u64>,
    /// The plane each placement handle's host page is filling in: the units of one page come
    /// from the write buffer in arrival order, so a new plane is chosen once per page.
    active_plane: Vec<u32>,
    flash: FlashCounters,
    series: TimeSeries,
    request_log: Option<Vec<RequestLogRow>>,
    requests_seen: u64,
    rng: Xoshiro256PlusPlus,
    now_ns: u64,
    /// Host-to-device direction of the link (write data), in issue order.
    link_in_free_ns: u64,
    /// Device-to-host direction (read data), shared by the order data becomes ready.
    link_out: LinkCalendar,
    cpu_free_ns: u64,
    buffer_ends: BinaryHeap<Reverse<u64>>,
    buffer_last_end_ns: u64,
    /// Host programs reserved on the timeline and not yet done: their pages are read from the
    /// controller.
    programs_in_flight: in_flight::ProgramsInFlight,
    ops: Vec<FlashOp>,
    txns: Vec<PageTxn>,
    /// Pages of a multi-page read left after melding (reused scratch).
    scratch_txns: Vec<PageTxn>,
    /// Scratch list of a read's pages, sorted to find a page listed twice.
    scratch_ppas: Vec<u32>,
    groups: Vec<(u64, u64)>,
    bg_cursor: u32,
    /// Host-link time of one full page and of one mapping unit (the common cases, without a
    /// division).
    page_link_ns: u64,
    unit_link_ns: u64,
    work: RequestWork,
    /// DFTL's (hits, misses) when the last request's work was noted.
    mapping_cache_seen: (u64, u64),
    sea: SeaReceived,
    /// The wordline-aware scheduler of read-group writes (TLC only).
    read_groups: Option<ReadGroupPlacer>,
    run: Option<Box<run::Run>>,
    /// The event engine of a run whose scheduling is not plain FCFS reservation.
    engine: Option<Box<engine::Engine>>,
    /// The flash's state once a native host owns it (`Device::native`).
    native: Option<Box<NativeFlashState>>,
    /// The block interface has taken a request or preconditioning (the flash is the FTL's).
    block_interface_used: bool,
    /// After a power loss, until recovery: what it took.
    powered_off: Option<power::PowerLost>,
    /// FlexECC is on (`flexecc.mode`): per-page codes and bit errors; scratch for its reads.
    flex: bool,
    flex_scratch: (Vec<u8>, Vec<u32>),
    /// Data mode: pages of the current read that failed, with their flipped bits.
    flex_failed: Vec<(u32, Vec<u32>)>,
}

impl Device {
    /// Build a device from TOML text (a preset or a file) with `key=value` overrides.
    pub fn from_toml(
        text: &str,
        source_name: &str,
        overrides: &[(String, String)],
        seed: u64,
        store_data: bool,
    ) -> Result<Device, DeviceError> {
        let config = Config::from_toml(text, source_name, overrides)?;
        Ok(Device::new(config, seed, store_data))
    }

    pub fn new(config: Config, seed: u64, store_data: bool) -> Device {
        let mut derived = config.derived();
        flexecc::adjust_derived(&config, &mut derived);
        let geo = Geometry::new(&config, &derived);
        let link_ns_of = |bytes: u64| match config.host.link_mbps {
            0 => 0,
            mbps => (bytes * 1000).div_ceil(mbps),
        };
        let page_link_ns = link_ns_of(config.geometry.page_size_bytes as u64);
        let unit_link_ns = link_ns_of(derived.mapping_unit_bytes as u64);
        let ftl = build_ftl(&config, &geo, &derived);
        let timeline = Timeline::new(
            derived.dies,
            config.geometry.channels,
            config.channel.cache_read,
            config.channel.cache_program,
        );
        let read_groups = meld::read_group_placer(&config, &geo, &derived);
        let dies = derived.dies;
        Device {
            allocator: plane_allocator(config.placement.allocation, &geo, config.placement.handles),
            placement: PlacementTable::new(&config.placement),
            store: store_data.then(|| UnitStore::new(derived.mapping_unit_bytes as usize)),
            unit_bytes: derived.mapping_unit_bytes as u64,
            unit_bytes_log2: derived.mapping_unit_bytes.trailing_zeros(),
            unit_shift: derived.units_per_page.trailing_zeros(),
            staged: BTreeMap::new(),
            active_plane: vec![u32::MAX; config.placement.handles as usize],
            series: TimeSeries::new(config.stats.interval_ns)
                .with_page_bytes(config.geometry.page_size_bytes),
            request_log: config.stats.request_log.then(Vec::new),
            flex: config.flexecc.mode != crate::ecc::flex::FlexEccMode::Off,
            config_hash: config.hash_hex(),
            // The ECC error stream is derived from the seed in a fixed way, apart from any
            // workload stream, so adding a workload never shifts the error pattern.
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x0ECC_0ECC_0ECC_0ECC),
            seed,
            ftl,
            timeline,
            geo,
            derived,
            config,
            flash: FlashCounters::default(),
            requests_seen: 0,
            now_ns: 0,
            link_in_free_ns: 0,
            link_out: LinkCalendar::default(),
            cpu_free_ns: 0,
            buffer_ends: BinaryHeap::new(),
            buffer_last_end_ns: 0,
            programs_in_flight: in_flight::ProgramsInFlight::new(dies),
            ops: Vec::with_capacity(1024),
            txns: Vec::with_capacity(64),
            scratch_txns: Vec::with_capacity(64),
            scratch_ppas: Vec::new(),
            groups: Vec::with_capacity(64),
            bg_cursor: 0,
            page_link_ns,
            unit_link_ns,
            work: RequestWork::default(),
            mapping_cache_seen: (0, 0),
            sea: SeaReceived::default(),
            read_groups,
            run: None,
            engine: None,
            native: None,
            block_interface_used: false,
            powered_off: None,
            flex_scratch: (Vec::new(), Vec::new()),
            flex_failed: Vec::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn derived(&self) -> &Derived {
        &self.derived
    }
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    pub fn config_hash(&self) -> &str {
        &self.config_hash
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }
    pub fn logical_bytes(&self) -> u64 {
        self.derived.logical_bytes
    }
    pub fn page_size(&self) -> u32 {
        self.config.geometry.page_size_bytes
    }
    pub fn ftl(&self) -> &dyn Ftl {
        self.ftl.as_ref()
    }
    pub fn flash_counters(&self) -> FlashCounters {
        self.flash
    }
    pub fn stores_data(&self) -> bool {
        self.store.is_some()
    }
    pub fn time_series(&self) -> &TimeSeries {
        &self.series
    }
    pub fn request_log(&self) -> Option<&[RequestLogRow]> {
        self.request_log.as_deref()
    }

    #[inline]
    fn link_ns(&self, bytes: u64) -> u64 {
        if bytes == self.unit_bytes {
            return self.unit_link_ns;
        }
        if bytes == self.page_size() as u64 {
            return self.page_link_ns;
        }
        match self.config.host.link_mbps {
            0 => 0,
            mbps => (bytes * 1000).div_ceil(mbps),
        }
    }

    /// When `bytes` of write data sent at `start_ns` have crossed the host link: write data
    /// crosses page by page in issue order; with the link model off it waits for nothing.
    #[inline]
    fn host_data_in(&mut self, start_ns: u64, bytes: u64) -> u64 {
        let link = self.link_ns(bytes);
        if link == 0 {
            return start_ns;
        }
        let arrive = self.link_in_free_ns.max(start_ns) + link;
        self.link_in_free_ns = arrive;
        arrive
    }

    fn check_range(&self, req: &HostRequest) -> Result<(), DeviceError> {
        if req.op == Op::Flush {
            return Ok(());
        }
        self.check_extent(req.op.as_str(), req.offset, req.length)
    }

    /// Submit one request at the current simulated time, run it to completion and advance the
    /// clock to its completion. `data` is the write payload; reads fill `out` (data mode).
    pub fn submit(
        &mut self,
        req: &HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        let completion = self.submit_at(self.now_ns, req, data, out)?;
        self.now_ns = completion.complete_ns;
        Ok(completion)
    }

    /// Submit one request issued at `issue_ns` by a host that keeps its own clock (the NBD
    /// emulator: wall time in real-time mode, a closed-loop estimate in virtual mode). Unlike
    /// [`Device::submit`] the clock moves only to the issue time, so that requests issued
    /// before this one completes overlap with it on the flash. Issue times earlier than the
    /// device's clock are raised to it: resources are reserved in issue order.
    pub fn submit_at(
        &mut self,
        issue_ns: u64,
        req: &HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        if self.run.is_some() {
            return Err(DeviceError::Run(
                "a run is in progress: finish it before submitting requests directly",
            ));
        }
        let issue = issue_ns.max(self.now_ns);
        self.now_ns = issue;
        let completion = self.execute(req, issue, data, out)?;
        let ftl = &self.ftl;
        self.series.record(
            completion.complete_ns,
            req.op,
            req.length,
            completion.latency_ns(),
            || series_counters(ftl.as_ref()),
        );
        Ok(completion)
    }

    /// The per-request log row of the request just executed (what [`Device::request_log`]
    /// keeps when `stats.request_log` is on), for hosts that stream the log themselves.
    pub fn last_request_log_row(
        &self,
        req: &HostRequest,
        completion: &Completion,
    ) -> RequestLogRow {
        request_log_row(
            self.requests_seen,
            req,
            completion.issue_ns,
            completion.complete_ns,
            self.page_size() as u64,
            &self.work,
        )
    }

    /// Move the clock forward (idle time, in which background GC may run).
    pub fn advance_to(&mut self, time_ns: u64) {
        self.now_ns = self.now_ns.max(time_ns);
    }

    /// SEA-SSD settings hint: the storage engine's WAL (redo log) and cache (buffer pool)
    /// sizes, which size the `dyn` segment (see `ftl::segments`). Untimed. With
    /// `placement.honor_hints = false` it is only counted.
    pub fn sea_settings(&mut self, wal_bytes: u64, cache_bytes: u64) -> Result<(), DeviceError> {
        let honor = self.config.placement.honor_hints;
        if honor {
            self.check_sea_handles()?;
        }
        self.sea.settings += 1;
        self.sea.wal_bytes = wal_bytes;
        self.sea.cache_bytes = cache_bytes;
        if !honor {
            return Ok(());
        }
        let quota = dyn_quota(
            &self.config.sea,
            wal_bytes,
            cache_bytes,
            &SegmentGeometry::new(&self.config, &self.derived),
        );
        self.sea.quota = Some(quota);
        self.ftl.sea_size(quota.blocks_per_plane);
        Ok(())
    }

    /// SEA-SSD prediction hint: the logical units of bytes `offset..offset + length` will be
    /// written soon (a page entering the engine's flush list; in SQLite, a page in the WAL).
    /// Untimed. With `placement.honor_hints = false` it is only counted.
    pub fn sea_predict(&mut self, offset: u64, length: u64) -> Result<(), DeviceError> {
        self.check_extent("sea_predict", offset, length)?;
        let honor = self.config.placement.honor_hints;
        if honor {
            self.check_sea_handles()?;
        }
        let (first, units) = self.unit_span(offset, length);
        self.sea.predicted_units += units;
        if honor {
            for unit in first..first + units {
                self.ftl.sea_predict(unit);
            }
        }
        Ok(())
    }

    /// SEA hints act on segments, which need two distinct handles.
    fn check_sea_handles(&self) -> Result<(), DeviceError> {
        let (dyn_handle, stat_handle) = sea_handles(&self.config.placement);
        if dyn_handle == stat_handle {
            return Err(DeviceError::SeaHandles {
                handle: dyn_handle,
                handles: self.config.placement.handles,
            });
        }
        Ok(())
    }

    /// The data a read of `offset..offset + length` would return now (unwritten bytes read
    /// as zeros), without timing it: no flash work, no statistics, no clock change. For hosts
    /// that inspect the device's contents, such as a coupling that simulates a crash. Needs a
    /// device that stores data.
    pub fn peek(&self, offset: u64, length: u64) -> Result<Vec<u8>, DeviceError> {
        self.check_extent("peek", offset, length)?;
        if self.store.is_none() {
            return Err(DeviceError::NoDataStore);
        }
        let mut out = vec![0u8; length as usize];
        self.peek_into(offset, &mut out)?;
        Ok(out)
    }

    /// [`Device::peek`] into a buffer the caller allocated: its length is the extent's.
    pub fn peek_into(&self, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        self.check_block_interface()?;
        let length = out.len() as u64;
        self.check_extent("peek", offset, length)?;
        let store = self.store.as_ref().ok_or(DeviceError::NoDataStore)?;
        let (first, units) = self.unit_span(offset, length);
        for unit in first..first + units {
            let start = unit * self.unit_bytes;
            let lo = offset.max(start);
            let hi = (offset + length).min(start + self.unit_bytes);
            let dst = &mut out[(lo - offset) as usize..(hi - offset) as usize];
            match self.ftl.mapped(unit).and_then(|pu| store.get(pu)) {
                Some(data) => {
                    dst.copy_from_slice(&data[(lo - start) as usize..(hi - start) as usize])
                }
                None => dst.fill(0),
            }
        }
        Ok(())
    }

    /// A byte extent a call names must be non-empty and inside the device.
    pub fn check_extent(
        &self,
        op: &'static str,
        offset: u64,
        length: u64,
    ) -> Result<(), DeviceError> {
        if length == 0 {
            return Err(DeviceError::ZeroLength { op, offset });
        }
        let capacity = self.derived.logical_bytes;
        if offset.checked_add(length).is_none_or(|end| end > capacity) {
            return Err(DeviceError::OutOfRange {
                offset,
                length,
                capacity,
            });
        }
        Ok(())
    }

    /// The mapping unit holding byte `offset`.
    #[inline]
    fn unit_of(&self, offset: u64) -> u64 {
        offset >> self.unit_bytes_log2
    }

    /// The first mapping unit that bytes `offset..offset + length` touch, and how many.
    #[inline]
    fn unit_span(&self, offset: u64, length: u64) -> (u64, u64) {
        let first = self.unit_of(offset);
        if length == 0 {
            return (first, 0);
        }
        (first, self.unit_of(offset + length - 1) - first + 1)
    }

    /// Speed hint from the run loop: `req` will be issued soon. Stage 1 fetches its mapping
    /// entry, stage 2 (later) the entries that depend on it.
    #[inline]
    pub(crate) fn prefetch_request(&self, req: &HostRequest, dependent: bool) {
        let unit = self.unit_of(req.offset);
        if unit >= self.derived.logical_units {
            return;
        }
        if !dependent {
            self.ftl.prefetch(unit);
        } else if req.op == Op::Write {
            self.ftl.prefetch_dependent(unit);
        }
    }

    /// Process one request issued at `issue_ns` and return when it completes. The clock is
    /// not moved: the caller (direct submission or the run loop) owns it.
    pub(crate) fn execute(
        &mut self,
        req: &HostRequest,
        issue_ns: u64,
        data: Option<&[u8]>,
        mut out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        self.check_block_interface()?;
        self.check_range(req)?;
        self.block_interface_used = true;
        self.requests_seen += 1;
        self.work = RequestWork::default();
        self.maybe_background_gc(issue_ns)?;
        let page = self.page_size() as u64;
        let (first_unit, units, start) = self.split_and_charge_cpu(req, issue_ns);
        let (complete_ns, uncorrectable) = match req.op {
            Op::Read => {
                let read = self.execute_read(req, start, first_unit, units, out.as_deref_mut())?;
                if self.flex {
                    self.flex_note_read(req, first_unit, units, out);
                }
                read
            }
            Op::Write => {
                let written = self.execute_write(req, start, first_unit, units, data)?;
                let durable = if self.write_waits_for_flash(req) {
                    self.durable_ns(start)
                } else {
                    0
                };
                (written.max(durable), false)
            }
            Op::Trim => {
                self.execute_trim(req, first_unit, units);
                (start, false)
            }
            // Without a volatile cache every completed write is durable already.
            Op::Flush if !self.config.controller.volatile_write_cache => (start, false),
            Op::Flush => (self.durable_ns(start), false),
        };
        self.note_mapping_cache();
        if let Some(log) = &mut self.request_log {
            let row = request_log_row(
                self.requests_seen,
                req,
                issue_ns,
                complete_ns,
                page,
                &self.work,
            );
            log.push(row);
        }
        Ok(Completion {
            issue_ns,
            complete_ns,
            uncorrectable,
            queue_ns: self.work.queue_ns,
        })
    }

    /// The request's first logical mapping unit and unit count, and when the device CPU has
    /// handled it (per request and per page spanned), for a request issued at `issue_ns`.
    fn split_and_charge_cpu(&mut self, req: &HostRequest, issue_ns: u64) -> (u64, u64, u64) {
        let (first_unit, units) = self.unit_span(req.offset, req.length);
        let cpu = &self.config.controller;
        let mut start = issue_ns;
        if cpu.cpu_ns_per_request > 0 || cpu.cpu_ns_per_page > 0 {
            let (_, pages) = span_count(req, self.page_size() as u64);
            start =
                start.max(self.cpu_free_ns) + cpu.cpu_ns_per_request + cpu.cpu_ns_per_page * pages;
            self.cpu_free_ns = start;
        }
        (first_unit, units, start)
    }

    /// Background GC: one plane per request is checked (round robin, cheap and deterministic).
    /// If it wants collection and its die has been idle for `gc_bg_idle_ns`, GC steps fill the
    /// idle window up to the request's issue time: each step starts when the die is free, and
    /// no step starts after the request arrived, so host work waits at most for one step.
    fn maybe_background_gc(&mut self, issue_ns: u64) -> Result<(), DeviceError> {
        let plane = self.bg_cursor;
        self.bg_cursor = if plane + 1 == self.geo.planes {
            0
        } else {
            plane + 1
        };
        if !self.ftl.wants_background_gc(plane) {
            return Ok(());
        }
        let die = self.geo.die_of_plane(plane);
        let idle_ns = self.config.ftl.gc_bg_idle_ns;
        let mut start = self.timeline.die_free_ns(die) + idle_ns;
        let step = self.config.ftl.gc_step_pages;
        // Bounded: a plane has at most blocks_per_plane victims' worth of work to do.
        for _ in 0..self.geo.blocks_per_plane * self.geo.pages_per_block {
            if start > issue_ns || !self.ftl.wants_background_gc(plane) {
                break;
            }
            self.ops.clear();
            let mut ops = std::mem::take(&mut self.ops);
            let result = self.ftl.background_gc(plane, start, step, &mut ops);
            let busy_before = self.flash.gc_busy_ns;
            self.apply_ftl_ops(&ops, start);
            self.flash.gc_background_ns += self.flash.gc_busy_ns - busy_before;
            let did_work = !ops.is_empty();
            ops.clear();
            self.ops = ops;
            if !result? || !did_work {
                break;
            }
            start = self.timeline.die_free_ns(die);
        }
        Ok(())
    }

    /// Time and apply the FTL's own flash work, starting no earlier than `ready_ns`. Returns
    /// when the translation chain (if any) is done: the host access that needed it starts then.
    fn apply_ftl_ops(&mut self, ops: &[FlashOp], ready_ns: u64) -> u64 {
        let xfer = self.derived.page_transfer_ns;
        let mut chain = ready_ns;
        // When the units of the GC page being filled are all in the controller, encoded.
        let mut gc_data_ready = ready_ns;
        for op in ops {
            match *op {
                FlashOp::Move { src, dst } => {
                    let (die_src, die_dst) = (self.geo.die_of(src), self.geo.die_of(dst));
                    let t_read = self.derived.read_ns[self.geo.page_type(src) as usize];
                    let t_prog = self.derived.program_ns[self.geo.page_type(dst) as usize];
                    let copyback = self.config.ftl.gc_copyback && die_src == die_dst;
                    if copyback {
                        let r = self.timeline.read(die_src, ready_ns, t_read, 1, 0);
                        self.timeline.program(die_dst, r.end_ns, t_prog, 1, 0);
                    } else {
                        let r = self.timeline.read(die_src, ready_ns, t_read, 1, xfer);
                        let ready = r.end_ns + self.flex_gc_codec_ns(src, dst);
                        self.timeline.program(die_dst, ready, t_prog, 1, xfer);
                    }
                    self.count_gc_read(t_read, !copyback, false);
                    self.count_gc_program(t_prog, !copyback, false);
                    self.relocate_data(src, dst);
                }
                FlashOp::GcRead { src } => {
                    let t_read = self.derived.read_ns[self.geo.page_type(src) as usize];
                    let r = self
                        .timeline
                        .read(self.geo.die_of(src), ready_ns, t_read, 1, xfer);
                    gc_data_ready = gc_data_ready
                        .max(r.end_ns + self.derived.decode_ns + self.derived.encode_ns);
                    self.count_gc_read(t_read, true, false);
                }
                FlashOp::MoveUnit { src, dst } => {
                    self.relocate_data(src, dst);
                }
                FlashOp::GcProgram { dst } => {
                    let t_prog = self.derived.program_ns[self.geo.page_type(dst) as usize];
                    self.timeline
                        .program(self.geo.die_of(dst), gc_data_ready, t_prog, 1, xfer);
                    self.count_gc_program(t_prog, true, false);
                }
                FlashOp::Erase { block, purpose } => {
                    let die = self.geo.die_of_block(block);
                    self.timeline
                        .erase(die, ready_ns, self.config.cell.erase_ns);
                    self.count_erase(block, purpose == Purpose::Gc, false);
                    // Reserved on its die before any later program there.
                    self.ftl.block_erased(block);
                }
                FlashOp::TranslationRead { .. }
                | FlashOp::TranslationProgram { .. }
                | FlashOp::DeviceCpu { .. } => chain = self.reserve_translation_step(op, chain),
            }
        }
        chain
    }

    /// Count a GC read of a page (with its OOB: the logical addresses of its units), through
    /// the controller or not, for the device and the request log. GC time is the die's array
    /// time, a part of the busy time behind `die_utilisation`; the request log's flash time
    /// also has the transfer.
    fn count_gc_read(&mut self, t_read: u64, through_controller: bool, background: bool) {
        let mut busy = t_read;
        if through_controller {
            busy += self.derived.page_transfer_ns;
            self.flash.codewords_decoded += self.derived.codewords_per_page as u64;
            self.flash.bytes_transferred += self.page_size() as u64;
        }
        self.flash.array_reads += 1;
        self.flash.oob_reads += 1;
        self.count_gc_busy(t_read, background);
        self.work.reads += 1;
        self.work.oob_reads += 1;
        self.work.flash_ns += busy;
    }

    /// Count a GC program of a page (with its OOB), as `count_gc_read` counts a read.
    fn count_gc_program(&mut self, t_prog: u64, through_controller: bool, background: bool) {
        let mut busy = t_prog;
        if through_controller {
            busy += self.derived.page_transfer_ns;
            self.flash.codewords_encoded += self.derived.codewords_per_page as u64;
            self.flash.bytes_transferred += self.page_size() as u64;
        }
        self.flash.programs += 1;
        self.flash.oob_writes += 1;
        self.count_gc_busy(t_prog, background);
        self.work.programs += 1;
        self.work.flash_ns += busy;
    }

    #[inline]
    fn count_gc_busy(&mut self, busy_ns: u64, background: bool) {
        self.flash.gc_busy_ns += busy_ns;
        if background {
            self.flash.gc_background_ns += busy_ns;
        }
    }

    /// Count an erase and drop the block's stored data.
    pub(super) fn count_erase(&mut self, block: u32, gc: bool, background: bool) {
        let erase_ns = self.config.cell.erase_ns;
        self.flash.erases += 1;
        if gc {
            self.count_gc_busy(erase_ns, background);
        }
        self.work.erases += 1;
        self.work.flash_ns += erase_ns;
        self.drop_block_data(block);
    }

    /// Data mode: the data of a GC-moved unit is copied; the source keeps its copy until its
    /// block is erased, as on flash (recovery after a power loss may find it the newest).
    #[inline]
    pub(super) fn relocate_data(&mut self, src: u32, dst: u32) {
        if let Some(store) = &mut self.store {
            if let Some(data) = store.get(src) {
                let copy: Box<[u8]> = data.into();
                store.put(dst, copy);
            }
        }
    }

    /// Data mode: an erased block holds no data.
    fn drop_block_data(&mut self, block: u32) {
        if let Some(store) = &mut self.store {
            store.erase(
                self.geo.first_page(block) << self.unit_shift,
                self.geo.pages_per_block << self.unit_shift,
            );
        }
    }

    /// The page a host read of logical unit `unit` (mapped to `found`) senses, or None when no
    /// flash read is needed: the unit is unmapped (zeros) or still in the controller (staged, or
    /// its page's program not done).
    /// With `unmapped_read = "flash"` an unmapped unit costs a read of a page in the stripe
    /// position it would have.
    #[inline(always)]
    fn page_to_read(&self, unit: u64, found: Option<u32>, at_ns: u64) -> Option<u32> {
        match found {
            Some(pu) => self.page_on_flash(pu, at_ns),
            None if self.config.host.unmapped_read == UnmappedRead::Flash => {
                let lpa = unit >> self.unit_shift;
                let plane = self.geo.stripe_order[(lpa % self.geo.planes as u64) as usize];
                Some(self.geo.first_page(plane * self.geo.blocks_per_plane))
            }
            None => None,
        }
    }

    /// Read one page from the array for the host (or for read-modify-write), with error
    /// sampling and read retries. Returns (time the decoded data is ready, uncorrectable).
    fn host_read_page(&mut self, ppa: u32, ready_ns: u64, codewords: u32) -> (u64, bool) {
        let die = self.geo.die_of(ppa);
        let t_read = self.derived.read_ns[self.geo.page_type(ppa) as usize];
        let codewords = codewords.min(self.derived.codewords_per_page);
        let xfer = self.derived.codeword_transfer_ns[codewords as usize];
        let r = self.timeline.read(die, ready_ns, t_read, 1, xfer);
        self.note_wait(r.array_start_ns, ready_ns);
        self.count_host_read_codewords(1, codewords, t_read + xfer);
        self.work.first_ppa.get_or_insert(ppa);
        self.decode_codewords(ppa, die, t_read, r.end_ns, codewords)
    }

    /// The codewords of a mapping unit that bytes `lo..hi` of it touch (a unit starts on a
    /// codeword boundary of its page; a unit smaller than a codeword takes one).
    #[inline]
    pub(super) fn unit_codewords(&self, lo: u64, hi: u64) -> u32 {
        if lo == 0 && hi == self.unit_bytes {
            return self.derived.unit_codewords;
        }
        self.part_codewords(lo, hi)
    }

    #[cold]
    fn part_codewords(&self, lo: u64, hi: u64) -> u32 {
        let codeword = self.config.ecc.codeword_bytes as u64;
        if self.unit_bytes <= codeword || hi <= lo {
            return self.derived.unit_codewords;
        }
        ((hi - 1) / codeword - lo / codeword + 1) as u32
    }

    /// The request's operation waited from `ready_ns` until `start_ns` for its die or channel.
    #[inline]
    fn note_wait(&mut self, start_ns: u64, ready_ns: u64) {
        self.work.queue_ns = self.work.queue_ns.max(start_ns.saturating_sub(ready_ns));
    }

    /// Count host reads of `pages` pages of which `codewords` in all cross the channel and are
    /// decoded.
    pub(super) fn count_host_read_codewords(&mut self, pages: u32, codewords: u32, flash_ns: u64) {
        self.flash.array_reads += pages as u64;
        self.flash.bytes_transferred += codewords as u64 * self.config.ecc.codeword_bytes as u64;
        self.flash.codewords_decoded += codewords as u64;
        self.work.reads += pages;
        self.work.flash_ns += flash_ns;
    }

    /// Count host reads of `pages` whole pages.
    pub(super) fn count_host_read(&mut self, pages: u32, flash_ns: u64) {
        let codewords = pages * self.derived.codewords_per_page;
        self.count_host_read_codewords(pages, codewords, flash_ns);
    }

    /// ECC decode of a page whose data left the die at `transferred_ns`; read retries re-sense
    /// it on `die`.
    #[inline]
    fn decode(&mut self, ppa: u32, die: u32, t_read: u64, transferred_ns: u64) -> (u64, bool) {
        let all = self.derived.codewords_per_page;
        self.decode_codewords(ppa, die, t_read, transferred_ns, all)
    }

    /// [`Device::decode`] of the first `codewords` of the page (those that crossed).
    #[inline]
    fn decode_codewords(
        &mut self,
        ppa: u32,
        die: u32,
        t_read: u64,
        transferred_ns: u64,
        codewords: u32,
    ) -> (u64, bool) {
        if self.flex {
            return self.flex_decode(ppa, transferred_ns);
        }
        let mut done = transferred_ns + self.derived.decode_ns;
        if self.config.ecc.rber_base > 0.0 {
            let erases = self.ftl.erase_count_of(ppa);
            let outcome = ecc::decode_page(&self.config.ecc, codewords, erases, &mut self.rng);
            let xfer = self.derived.codeword_transfer_ns[codewords as usize];
            for _ in 0..outcome.retries {
                let r = self.timeline.read(die, done, t_read, 1, xfer);
                self.count_host_read_codewords(1, codewords, t_read + xfer);
                done = r.end_ns + self.derived.decode_ns;
            }
            done += outcome.extra_decode_ns;
            self.flash.read_retries += outcome.retries as u64;
            self.flash.corrected_codewords += outcome.corrected_codewords as u64;
            if outcome.uncorrectable {
                self.flash.uncorrectable_pages += 1;
            }
            return (done, outcome.uncorrectable);
        }
        (done, false)
    }

    fn execute_read(
        &mut self,
        req: &HostRequest,
        start: u64,
        first_unit: u64,
        units: u64,
        mut out: Option<&mut [u8]>,
    ) -> Result<(u64, bool), DeviceError> {
        if out.is_some() && self.store.is_none() {
            return Err(DeviceError::NoDataStore);
        }
        self.learn_read_group(first_unit, units);
        let unit_bytes = self.unit_bytes;
        let mut complete = start;
        let mut uncorrectable = false;
        self.txns.clear();
        self.groups.clear();
        // Bytes that need no flash read: unmapped, or still in the staging buffer.
        let mut immediate_bytes = 0;
        for i in 0..units {
            let unit = first_unit + i;
            self.ops.clear();
            let mut ops = std::mem::take(&mut self.ops);
            let found = self.ftl.lookup(unit, &mut ops);
            let mut ready = start;
            if !ops.is_empty() {
                ready = self.apply_ftl_ops(&ops, start);
            }
            self.ops = ops;
            let (lo, hi) = page_span(req, unit, unit_bytes);
            if let Some(buf) = out.as_deref_mut() {
                let at = (unit * unit_bytes + lo - req.offset) as usize;
                let dst = &mut buf[at..at + (hi - lo) as usize];
                match found.and_then(|pu| self.store.as_ref().and_then(|s| s.get(pu))) {
                    Some(data) => dst.copy_from_slice(&data[lo as usize..hi as usize]),
                    None => dst.fill(0),
                }
            }
            let Some(ppa) = self.page_to_read(unit, found, ready) else {
                self.flash.controller_reads += found.is_some() as u64;
                immediate_bytes += hi - lo;
                continue;
            };
            let codewords = self.unit_codewords(lo, hi);
            // Units of one page read once (a sequentially written range).
            if let Some(last) = self.txns.last_mut().filter(|t| t.ppa == ppa) {
                last.codewords += codewords;
                continue;
            }
            self.txns.push(PageTxn {
                die: self.geo.die_of(ppa),
                page_in_block: self.geo.page_in_block(ppa),
                plane: self.geo.plane_of(ppa),
                ppa,
                ready_ns: ready,
                codewords,
            });
        }
        if immediate_bytes > 0 {
            self.groups.push((start, immediate_bytes));
        }
        // Bytes the host asked for from each page, in transaction order (for partial pages).
        let mut txns = std::mem::take(&mut self.txns);
        // Each page once, after the latest mapping it waits for.
        self.merge_repeated_pages(
            &mut txns,
            |t| t.ppa,
            |kept, t| {
                kept.ready_ns = kept.ready_ns.max(t.ready_ns);
                kept.codewords += t.codewords;
            },
        );
        if txns.len() == 1 {
            let t = txns[0];
            let (done, bad) = self.host_read_page(t.ppa, t.ready_ns, t.codewords);
            uncorrectable |= bad;
            let bytes = req.length - immediate_bytes;
            self.groups.push((done, bytes));
        } else if !txns.is_empty() {
            let per_page_bytes = (req.length - immediate_bytes).div_ceil(txns.len() as u64);
            uncorrectable |= self.read_grouped(&mut txns, start, per_page_bytes);
        }
        self.txns = txns;
        // The host link carries each group's bytes as its data becomes ready.
        self.groups.sort_unstable();
        for i in 0..self.groups.len() {
            let (ready, bytes) = self.groups[i];
            let duration = self.link_ns(bytes);
            let end = self.link_out.reserve(ready, duration, start);
            complete = complete.max(end);
        }
        Ok((complete, uncorrectable))
    }

    /// Merge the entries of `items` that name one page (by `page`) into the first of them, in
    /// place and in order. A read lists a page once per run of its units, and units of one page
    /// need not be adjacent in a request (units written out of order pack into one page); the
    /// page is sensed once. Nothing to do where a page holds one unit. Sorting a copy of the
    /// pages finds the rare repeat; only then are the entries merged, in quadratic time.
    pub(super) fn merge_repeated_pages<T>(
        &mut self,
        items: &mut Vec<T>,
        page: impl Fn(&T) -> u32,
        mut merge: impl FnMut(&mut T, &T),
    ) {
        if self.unit_shift == 0 || items.len() < 2 {
            return;
        }
        let pages = &mut self.scratch_ppas;
        pages.clear();
        pages.extend(items.iter().map(&page));
        pages.sort_unstable();
        if !pages.windows(2).any(|w| w[0] == w[1]) {
            return;
        }
        let mut kept = 0;
        for i in 0..items.len() {
            let p = page(&items[i]);
            match (0..kept).find(|&j| page(&items[j]) == p) {
                Some(j) => {
                    let (head, tail) = items.split_at_mut(i);
                    merge(&mut head[j], &tail[0]);
                }
                None => {
                    items.swap(kept, i);
                    kept += 1;
                }
            }
        }
        items.truncate(kept);
    }

    /// Multi-page read: melded whole-wordline reads where a request wants a whole wordline and
    /// melding is on, multi-plane reads for pages at one page offset on different planes of one
    /// die, single reads otherwise.
    fn read_grouped(&mut self, txns: &mut [PageTxn], start: u64, per_page_bytes: u64) -> bool {
        let xfer = self.derived.page_transfer_ns;
        let bits = self.geo.bits_per_cell as usize;
        let mut uncorrectable = false;
        let mut rest = std::mem::take(&mut self.scratch_txns);
        rest.clear();
        if self.config.host.melded_reads != MeldedReads::Off && bits > 1 {
            txns.sort_unstable_by_key(|t| t.ppa);
            let mut i = 0;
            while i < txns.len() {
                let (n, meld) = self.wordline_run(txns, i, |t| t.ppa);
                if meld {
                    let die = txns[i].die;
                    let t = self.derived.melded_read_ns;
                    // After any translation work its pages' mappings needed.
                    let ready = txns[i..i + n].iter().map(|t| t.ready_ns).max();
                    let ready = ready.unwrap_or(start);
                    let r = self.timeline.read(die, ready, t, bits as u32, xfer);
                    self.note_wait(r.array_start_ns, start);
                    self.count_melded_read(n as u32);
                    self.work.first_ppa.get_or_insert(txns[i].ppa);
                    let mut done = r.end_ns + self.derived.decode_ns;
                    for k in 0..n {
                        let (d, bad) = self.decode(txns[i + k].ppa, die, t, r.end_ns);
                        done = done.max(d);
                        uncorrectable |= bad;
                    }
                    self.groups.push((done, per_page_bytes * n as u64));
                } else {
                    rest.extend_from_slice(&txns[i..i + n]);
                }
                i += n;
            }
        } else {
            rest.extend_from_slice(txns);
        }
        let mut i = 0;
        while let Some(j) = next_multi_plane_group(&mut rest, i) {
            let n = (j - i) as u32;
            if n == 1 {
                let t = rest[i];
                let (done, bad) = self.host_read_page(t.ppa, t.ready_ns, t.codewords);
                uncorrectable |= bad;
                self.groups.push((done, per_page_bytes));
            } else {
                let t_read = rest[i..j]
                    .iter()
                    .map(|t| self.derived.read_ns[self.geo.page_type(t.ppa) as usize])
                    .max()
                    .unwrap_or(0);
                let ready = rest[i..j].iter().map(|t| t.ready_ns).max();
                let all = self.derived.codewords_per_page;
                for t in &mut rest[i..j] {
                    t.codewords = t.codewords.min(all);
                }
                // Each plane's page moves only the codewords wanted of it.
                let bus_ns: u64 = rest[i..j]
                    .iter()
                    .map(|t| self.derived.codeword_transfer_ns[t.codewords as usize])
                    .sum();
                let r = self
                    .timeline
                    .read(rest[i].die, ready.unwrap_or(start), t_read, 1, bus_ns);
                self.note_wait(r.array_start_ns, start);
                self.flash.multi_plane_ops += 1;
                let codewords = rest[i..j].iter().map(|t| t.codewords).sum();
                self.count_host_read_codewords(n, codewords, t_read + bus_ns);
                self.work.first_ppa.get_or_insert(rest[i].ppa);
                let mut done = r.end_ns + self.derived.decode_ns;
                for t in &rest[i..j] {
                    let (d, bad) =
                        self.decode_codewords(t.ppa, t.die, t_read, r.end_ns, t.codewords);
                    done = done.max(d);
                    uncorrectable |= bad;
                }
                self.groups.push((done, per_page_bytes * n as u64));
            }
            i = j;
        }
        self.scratch_txns = rest;
        uncorrectable
    }

    fn execute_write(
        &mut self,
        req: &HostRequest,
        start: u64,
        first_unit: u64,
        units: u64,
        data: Option<&[u8]>,
    ) -> Result<u64, DeviceError> {
        if let Some(d) = data {
            if d.len() as u64 != req.length {
                return Err(DeviceError::DataLength {
                    length: req.length,
                    given: d.len(),
                });
            }
        }
        let resolved = self.placement.resolve(&req.hint)?;
        let (handle, encode) = self.flex_write_handle(req, resolved);
        let unit_bytes = self.unit_bytes;
        let buffer_pages = self.config.controller.write_buffer_pages as usize;
        let mut accepted = start;
        self.txns.clear();
        for i in 0..units {
            let unit = first_unit + i;
            let (lo, hi) = page_span(req, unit, unit_bytes);
            let arrive = self.host_data_in(start, hi - lo);
            let mut ready = arrive + encode;
            let unit_write = UnitWrite {
                unit,
                handle,
                plane: 0,
                now_ns: start,
                host_bytes: (hi - lo) as u32,
            };
            if buffer_pages > 0 {
                if let Some(outcome) = self.merge_into_reserved_page(&unit_write, ready, start) {
                    self.note_read_group_written(&req.hint, unit, outcome.new);
                    self.store_unit_write(req, unit, (lo, hi), outcome, data);
                    accepted = accepted.max(arrive);
                    continue;
                }
            }
            self.ops.clear();
            let mut ops = std::mem::take(&mut self.ops);
            let plane = self.host_plane_for(&req.hint, unit, handle, start);
            let unit_write = UnitWrite {
                plane,
                ..unit_write
            };
            let outcome = self.ftl.write(unit_write, &mut ops);
            if !ops.is_empty() {
                // The program waits for the mapping's translation work (DFTL).
                ready = ready.max(self.apply_ftl_ops(&ops, start));
            }
            self.ops = ops;
            let outcome = outcome?;
            self.note_read_group_written(&req.hint, unit, outcome.new);
            // Write-through, a read-modify-write waits for the old data it merges with.
            let mut merged = arrive;
            if let Some(old) = self.rmw_source(outcome, hi - lo, start) {
                // The whole page, as the engine's read-modify-write reads it.
                let all = self.derived.codewords_per_page;
                let (done, _) = self.host_read_page(old, start, all);
                self.flash.rmw_reads += 1;
                ready = ready.max(done);
                if buffer_pages == 0 {
                    merged = merged.max(done);
                }
            }
            self.store_unit_write(req, unit, (lo, hi), outcome, data);
            let Some(mut ready) = self.stage_unit(outcome, ready) else {
                // The page is still filling: this unit waits in the staging buffer.
                accepted = accepted.max(merged);
                continue;
            };
            if buffer_pages > 0 {
                while self
                    .buffer_ends
                    .peek()
                    .is_some_and(|Reverse(end)| *end <= arrive)
                {
                    self.buffer_ends.pop();
                }
                let mut accept = arrive;
                if self.buffer_ends.len() >= buffer_pages {
                    // Full: wait for the oldest buffered page to reach flash.
                    let Reverse(end) = self.buffer_ends.pop().expect("buffer is full");
                    accept = accept.max(end);
                }
                accepted = accepted.max(accept);
                ready = ready.max(accept + encode);
            }
            self.push_program(outcome.new >> self.unit_shift, ready);
        }
        if self.flex {
            self.flex_note_write(req, first_unit, units, start);
        }
        let mut txns = std::mem::take(&mut self.txns);
        let programmed = self.program_grouped(&mut txns);
        self.txns = txns;
        if buffer_pages > 0 {
            Ok(accepted)
        } else {
            Ok(programmed.max(accepted))
        }
    }

    /// Reservation path, with a write-back buffer: a unit whose copy is in a host page whose
    /// program is reserved and has not yet taken its data (the channel transfer starts after
    /// `ready`, when this write's data is in) takes the write's data there, as the event engine
    /// merges into a buffered page whose program has not started. The reservation stays as it
    /// is: the data is in before the program reads it. The merge, if one was made.
    fn merge_into_reserved_page(
        &mut self,
        write: &UnitWrite,
        ready: u64,
        at_ns: u64,
    ) -> Option<WriteOutcome> {
        if !self.programs_in_flight.any_at(at_ns) {
            return None;
        }
        let (current, page) = self.own_handle_copy(write)?;
        let data_out = self
            .programs_in_flight
            .data_out_of(self.geo.die_of(page), page, at_ns)?;
        if data_out < ready {
            return None;
        }
        Some(self.ftl.merge_into_buffered(write, current))
    }

    /// The physical unit holding `write`'s unit and its page, if that copy is in a block of
    /// the write's own handle: a write merges only into a copy of its own placement (the write-
    /// back merges of both paths).
    fn own_handle_copy(&self, write: &UnitWrite) -> Option<(u32, u32)> {
        let current = self.ftl.mapped(write.unit)?;
        (self.ftl.block_handle_of(current) == write.handle)
            .then_some((current, current >> self.unit_shift))
    }

    /// The page a write of `host_bytes` into the unit `outcome` placed must read first at
    /// `at_ns`: the old copy's page when the write covers only part of the unit and that page
    /// is on flash (a unit still in the controller merges there).
    #[inline]
    fn rmw_source(&self, outcome: WriteOutcome, host_bytes: u64, at_ns: u64) -> Option<u32> {
        let old = outcome.old.filter(|_| host_bytes < self.unit_bytes)?;
        self.page_on_flash(old, at_ns)
    }

    /// The page holding physical unit `pu`, if its data is on flash at `at_ns`; None while it
    /// is in the controller: staged in a page still filling, or in a page whose program is not
    /// done (the event engine's pending programs, or the reservation path's programs that end
    /// after `at_ns`).
    #[inline(always)]
    fn page_on_flash(&self, pu: u32, at_ns: u64) -> Option<u32> {
        // With one unit per page nothing is staged: no need to ask the FTL.
        if self.unit_shift > 0 && !self.ftl.is_programmed(pu) {
            return None;
        }
        let ppa = pu >> self.unit_shift;
        let pending = match &self.engine {
            Some(e) => e.program_pending(ppa),
            None => {
                self.programs_in_flight.any_at(at_ns) && self.reserved_program_pending(ppa, at_ns)
            }
        };
        (!pending).then_some(ppa)
    }

    /// Reservation path: is the program of `ppa` reserved to end after `at_ns`? (Apart, so
    /// that the check inlined into every read stays small.)
    #[inline(never)]
    fn reserved_program_pending(&self, ppa: u32, at_ns: u64) -> bool {
        self.programs_in_flight
            .pending(self.geo.die_of(ppa), ppa, at_ns)
    }

    /// A host unit whose data is ready (encoded) at `ready_ns` joined its page: the time the
    /// whole page's data is ready if the unit completed it, None while the page is filling.
    #[inline]
    fn stage_unit(&mut self, outcome: WriteOutcome, ready_ns: u64) -> Option<u64> {
        if outcome.opens_page && outcome.fills_page {
            return Some(ready_ns);
        }
        let ppa = outcome.new >> self.unit_shift;
        if outcome.fills_page {
            return Some(
                self.staged
                    .remove(&ppa)
                    .map_or(ready_ns, |r| r.max(ready_ns)),
            );
        }
        self.stage_page(ppa, ready_ns);
        None
    }

    /// Host page `ppa` is staged, filling, its units' data all in by `ready_ns` (the latest
    /// such time given for it).
    pub(super) fn stage_page(&mut self, ppa: u32, ready_ns: u64) {
        let entry = self.staged.entry(ppa).or_insert(ready_ns);
        *entry = (*entry).max(ready_ns);
    }

    /// Queue the program of host page `ppa`, whose data is ready at `ready_ns`.
    fn push_program(&mut self, ppa: u32, ready_ns: u64) {
        self.flash.codewords_encoded += self.derived.codewords_per_page as u64;
        self.txns.push(PageTxn {
            die: self.geo.die_of(ppa),
            page_in_block: self.geo.page_in_block(ppa),
            plane: self.geo.plane_of(ppa),
            ppa,
            ready_ns,
            codewords: self.derived.codewords_per_page,
        });
    }

    /// Is write `req` done only once its data is on flash (Force Unit Access, or a drive
    /// without a volatile write cache)? Then it waits for what a flush issued with it would.
    #[inline]
    fn write_waits_for_flash(&self, req: &HostRequest) -> bool {
        req.fua || !self.config.controller.volatile_write_cache
    }

    /// When everything accepted by `start` is on flash: the staged pages are programmed
    /// (padded) and the write buffer drained. Accepted data is durable at once on a
    /// power-loss-protected drive.
    fn durable_ns(&mut self, start: u64) -> u64 {
        if self.config.controller.power_loss_protection {
            return start;
        }
        self.flush_staged(start).max(self.buffer_last_end_ns)
    }

    /// A flush: program every staged host page now, padded (their units are the host's only
    /// copy outside volatile controller memory). Returns when the last program ends.
    fn flush_staged(&mut self, start: u64) -> u64 {
        self.txns.clear();
        for (ppa, ready) in std::mem::take(&mut self.staged) {
            if self.ftl.pad_page(ppa) {
                self.push_program(ppa, ready.max(start));
            }
        }
        let mut txns = std::mem::take(&mut self.txns);
        let end = self.program_grouped(&mut txns).max(start);
        self.txns = txns;
        end
    }

    /// Data mode: store the bytes `span` of unit `unit` that `req` writes (from `data`, zeros
    /// without it) under the unit's new location, merged into its old contents, and drop the
    /// old copy, so that memory follows live data. (Nothing to do without a store: checked
    /// inline, the rest apart.)
    #[inline(always)]
    fn store_unit_write(
        &mut self,
        req: &HostRequest,
        unit: u64,
        span: (u64, u64),
        outcome: WriteOutcome,
        data: Option<&[u8]>,
    ) {
        if self.store.is_some() {
            self.store_unit_data(req, unit, span, outcome, data);
        }
    }

    #[inline(never)]
    fn store_unit_data(
        &mut self,
        req: &HostRequest,
        unit: u64,
        (lo, hi): (u64, u64),
        outcome: WriteOutcome,
        data: Option<&[u8]>,
    ) {
        let Some(store) = &mut self.store else {
            return;
        };
        let size = store.unit_size() as u64;
        let partial = hi - lo < size;
        let incoming = data.map(|d| {
            let from = (unit * size + lo - req.offset) as usize;
            &d[from..from + (hi - lo) as usize]
        });
        // A whole unit's new bytes are copied once, never zero-filled first (a calloc of
        // 4 KiB per write was 4,400 instructions under callgrind); a partial write starts from
        // the old copy's bytes.
        let mut content: Box<[u8]> = match (outcome.old.and_then(|old| store.get(old)), incoming) {
            (_, Some(bytes)) if !partial => return store.put_copy(outcome.new, bytes),
            (Some(old), _) if partial => old.into(),
            _ => vec![0u8; size as usize].into_boxed_slice(),
        };
        match incoming {
            Some(bytes) => content[lo as usize..hi as usize].copy_from_slice(bytes),
            None => content[lo as usize..hi as usize].fill(0),
        }
        store.put(outcome.new, content);
        // The old copy's data stays until its block is erased, as on flash: a power loss
        // before the new copy is programmed brings it back.
    }

    /// Program the request's pages, multi-plane where pages share a die and page offset.
    /// Returns when the last program ends.
    fn program_grouped(&mut self, txns: &mut [PageTxn]) -> u64 {
        let xfer = self.derived.page_transfer_ns;
        let buffered = self.config.controller.write_buffer_pages > 0;
        let mut end = 0;
        let mut i = 0;
        while let Some(j) = next_multi_plane_group(txns, i) {
            let n = (j - i) as u32;
            let group = &txns[i..j];
            let ready = group.iter().map(|t| t.ready_ns).max().unwrap_or(0);
            let t_prog = group
                .iter()
                .map(|t| self.derived.program_ns[self.geo.page_type(t.ppa) as usize])
                .max()
                .unwrap_or(0);
            let p = self.timeline.program(group[0].die, ready, t_prog, n, xfer);
            // The array phase starts after the data transfer: the rest is waiting.
            self.note_wait(p.array_start_ns.saturating_sub(xfer * n as u64), ready);
            if n > 1 {
                self.flash.multi_plane_ops += 1;
            }
            self.flash.programs += n as u64;
            self.flash.oob_writes += n as u64;
            self.flash.bytes_transferred += n as u64 * self.page_size() as u64;
            self.work.programs += n;
            self.work.flash_ns += t_prog + xfer * n as u64;
            self.work.first_ppa.get_or_insert(group[0].ppa);
            // Its data crosses the channel before the array phase, the group's pages in turn.
            let data_out = p.array_start_ns.saturating_sub(xfer * n as u64);
            for t in group {
                self.programs_in_flight
                    .push(t.die, t.ppa, (data_out, p.end_ns), self.now_ns);
            }
            end = end.max(p.end_ns);
            if buffered {
                for _ in 0..n {
                    self.buffer_ends.push(Reverse(p.end_ns));
                }
                self.buffer_last_end_ns = self.buffer_last_end_ns.max(p.end_ns);
            }
            i = j;
        }
        end
    }

    fn execute_trim(&mut self, req: &HostRequest, first_unit: u64, units: u64) {
        for i in 0..units {
            let unit = first_unit + i;
            self.ops.clear();
            let mut ops = std::mem::take(&mut self.ops);
            self.trim_unit(req, unit, self.now_ns, &mut ops);
            if !ops.is_empty() {
                self.apply_ftl_ops(&ops, self.now_ns);
            }
            self.ops = ops;
        }
    }

    /// Deallocate `unit` if `req` covers it whole (partial ranges keep their data); the FTL's
    /// flash work for it (a cached-mapping FTL's translation work) is left in `ops`.
    pub(super) fn trim_unit(
        &mut self,
        req: &HostRequest,
        unit: u64,
        now_ns: u64,
        ops: &mut Vec<FlashOp>,
    ) {
        let (lo, hi) = page_span(req, unit, self.unit_bytes);
        if hi - lo != self.unit_bytes {
            return;
        }
        if let Some(store) = &mut self.store {
            if let Some(old) = self.ftl.mapped(unit) {
                store.remove(old);
            }
        }
        self.ftl.trim(unit, now_ns, ops);
        if self.flex {
            self.flex_note_trim(unit);
        }
    }

    /// Fill the device sequentially, then overwrite uniformly at random until write
    /// amplification is steady (or `max_random_passes` capacities were written), without
    /// timing; then reset clock and statistics but keep the wear. What experiments ask for
    /// before measuring GC steady state.
    pub fn precondition(
        &mut self,
        options: PreconditionOptions,
    ) -> Result<PreconditionReport, DeviceError> {
        if self.run.is_some() {
            return Err(DeviceError::Run(
                "cannot precondition while a run is in progress",
            ));
        }
        self.check_block_interface()?;
        self.block_interface_used = true;
        let logical = self.derived.logical_units;
        let mut ops = Vec::with_capacity(1024);
        let mut written = 0u64;
        let write =
            |dev: &mut Device, unit: u64, ops: &mut Vec<FlashOp>| -> Result<(), DeviceError> {
                // Untimed: every die is equally idle, so the allocator stripes.
                let plane = dev.host_plane(0, 0);
                let outcome = dev.ftl.write(
                    UnitWrite {
                        unit,
                        handle: 0,
                        plane,
                        now_ns: 0,
                        host_bytes: dev.unit_bytes as u32,
                    },
                    ops,
                )?;
                dev.stage_unit(outcome, 0);
                if dev.store.is_some() {
                    // GC first (the old copy may have moved), then the overwrite.
                    for op in ops.iter() {
                        match *op {
                            FlashOp::Move { src, dst } | FlashOp::MoveUnit { src, dst } => {
                                dev.relocate_data(src, dst)
                            }
                            FlashOp::Erase { block, .. } => dev.drop_block_data(block),
                            FlashOp::GcRead { .. }
                            | FlashOp::GcProgram { .. }
                            | FlashOp::TranslationRead { .. }
                            | FlashOp::TranslationProgram { .. }
                            | FlashOp::DeviceCpu { .. } => {}
                        }
                    }
                    if let (Some(store), Some(old)) = (&mut dev.store, outcome.old) {
                        store.remove(old);
                    }
                }
                ops.clear();
                Ok(())
            };
        for unit in 0..logical {
            write(self, unit, &mut ops)?;
            written += 1;
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed ^ 0x9E37_79B9_7F4A_7C15);
        let window = (logical / 4).max(1);
        let max_writes = (options.max_random_passes * logical as f64) as u64;
        let mut last_waf: Option<f64> = None;
        let mut waf = 0.0;
        let mut steady = false;
        let mut done = 0;
        let page_bytes = self.page_size();
        while done < max_writes {
            let before = self.ftl.counters();
            for _ in 0..window.min(max_writes - done) {
                write(self, rng.gen_range(0..logical), &mut ops)?;
                done += 1;
                written += 1;
            }
            let after = self.ftl.counters();
            let host = after.host_bytes_written - before.host_bytes_written;
            let flash = after.flash_pages_programmed() - before.flash_pages_programmed();
            waf = (flash * page_bytes as u64) as f64 / host.max(1) as f64;
            // Steady once GC runs and two windows agree.
            if after.gc_invocations > before.gc_invocations {
                if let Some(prev) = last_waf {
                    if (waf - prev).abs() <= options.steady_tolerance * prev {
                        steady = true;
                        break;
                    }
                }
                last_waf = Some(waf);
            }
        }
        self.reset_measurements();
        Ok(PreconditionReport {
            units_written: written,
            waf_last_window: waf,
            steady,
        })
    }

    /// Zero the clock, the resources and every statistic, keeping the stored data, the mapping
    /// and the wear.
    pub fn reset_measurements(&mut self) {
        self.ftl.reset_counters();
        if let Some(p) = self.read_groups.as_mut() {
            p.reset_counters();
        }
        self.flash = FlashCounters::default();
        self.timeline.reset();
        self.series.reset();
        if let Some(log) = &mut self.request_log {
            log.clear();
        }
        self.requests_seen = 0;
        self.sea.predicted_units = 0;
        if let Some(flex) = self.ftl.flex_pages_mut() {
            flex.reset_counters();
        }
        self.now_ns = 0;
        self.link_in_free_ns = 0;
        self.link_out.reset();
        self.cpu_free_ns = 0;
        self.buffer_ends.clear();
        self.buffer_last_end_ns = 0;
        self.programs_in_flight.clear();
        // Staged pages keep filling; their data is there from time 0 of the new clock.
        self.staged.values_mut().for_each(|ready| *ready = 0);
    }

    /// Energy over the run so far, by component, in joules.
    pub fn energy_json(&self) -> serde_json::Value {
        let e = &self.config.energy;
        let f = &self.flash;
        let bits = self.geo.bits_per_cell as f64;
        // A melded read senses every reference voltage of the wordline once: charged as one
        // read per page it returns.
        let read = (f.array_reads as f64 - f.melded_reads as f64 * (bits - 1.0)) * e.read_nj * 1e-9;
        let program = f.programs as f64 * e.program_nj * 1e-9;
        let erase = f.erases as f64 * e.erase_nj * 1e-9;
        let transfer = f.bytes_transferred as f64 * e.transfer_pj_per_byte * 1e-12;
        let ecc = f.codewords_decoded as f64 * e.ecc_decode_nj * 1e-9;
        let idle = e.idle_w * self.now_ns as f64 * 1e-9;
        let total = read + program + erase + transfer + ecc + idle;
        let seconds = self.now_ns as f64 * 1e-9;
        serde_json::json!({
            "total": total, "read": read, "program": program, "erase": erase,
            "transfer": transfer, "ecc": ecc, "idle": idle,
            "average_power_w": if seconds > 0.0 { total / seconds } else { 0.0 },
        })
    }

    /// The cumulative `ssd` object.
    pub fn ssd_json(&self) -> serde_json::Value {
        let mut ssd = self.ssd_json_core();
        // DFTL's cache and translation counters, and the native interface's.
        if let Some(c) = self.ftl.dftl_counters() {
            let mut dftl = serde_json::to_value(c).unwrap_or_default();
            let lookups = c.lookups.max(1) as f64;
            dftl["miss_rate"] = serde_json::json!(c.misses as f64 / lookups);
            ssd["dftl"] = dftl;
        }
        if let Some(native) = &self.native {
            let c = native.counters;
            ssd["native"] = serde_json::json!({
                "reads": c.reads, "programs": c.programs, "erases": c.erases,
                "oob_reads": c.oob_reads, "rule_violations": c.rule_violations,
                "bad_blocks": c.worn_out_blocks,
            });
        }
        ssd
    }

    fn ssd_json_core(&self) -> serde_json::Value {
        let mut ssd = crate::stats::ssd_json(&crate::stats::SsdReportInputs {
            ftl: self.ftl.counters(),
            flash: self.flash,
            handles: self.ftl.handle_counters(),
            erase_counts: match &self.native {
                Some(native) => native.erase_counts(),
                None => self.ftl.erase_counts(),
            },
            energy_j: self.energy_json(),
            sim_time_ns: self.now_ns,
            seed: self.seed,
            config_hash: &self.config_hash,
            ftl_name: self.ftl.name(),
            gc_policy: self.config.ftl.gc_policy.name(),
            scheduler: self.config.controller.scheduler.name(),
            allocation: self.allocator.name(),
            die_busy_ns: &self.timeline.busy_per_die_ns,
            channel_busy_ns: self.timeline.channel_busy_ns,
            channels: self.config.geometry.channels,
            page_bytes: self.page_size(),
            mapping_unit_bytes: self.unit_bytes as u32,
            sea: SeaReportInputs {
                honor_hints: self.config.placement.honor_hints,
                planes: self.derived.planes,
                settings_received: self.sea.settings,
                wal_bytes: self.sea.wal_bytes,
                cache_bytes: self.sea.cache_bytes,
                quota: self.sea.quota,
                predicted_units_received: self.sea.predicted_units,
                state: self.ftl.sea_state(),
            },
        });
        self.add_read_group_json(&mut ssd);
        if let Some(flex) = self.flexecc_json() {
            ssd["flexecc"] = flex;
        }
        ssd
    }

    /// Close the time series' partial interval and return its rows.
    pub fn time_series_rows(&mut self) -> &[crate::stats::IntervalRow] {
        let counters = series_counters(self.ftl.as_ref());
        self.series.flush(counters);
        &self.series.rows
    }
}

/// Multi-plane grouping: pages of one die at one page offset on different planes run as one
/// array operation. At `start == 0` the transactions are sorted so that such pages are adjacent;
/// returns the end of the group that begins at `start`, or `None` past the last one.
fn next_multi_plane_group(txns: &mut [PageTxn], start: usize) -> Option<usize> {
    if start >= txns.len() {
        return None;
    }
    if start == 0 && txns.len() > 1 {
        txns.sort_unstable_by_key(|t| (t.die, t.page_in_block, t.plane, t.ppa));
    }
    let first = txns[start];
    let mut end = start + 1;
    while end < txns.len()
        && txns[end].die == first.die
        && txns[end].page_in_block == first.page_in_block
        && txns[end].plane != txns[end - 1].plane
    {
        end += 1;
    }
    Some(end)
}

/// The per-request log row of a request issued at `issue_ns` and complete at `complete_ns`.
fn request_log_row(
    request: u64,
    req: &HostRequest,
    issue_ns: u64,
    complete_ns: u64,
    page: u64,
    work: &RequestWork,
) -> RequestLogRow {
    let mut row = RequestLogRow {
        request,
        op: req.op.as_str(),
        logical_sector: req.offset / 512,
        size_bytes: req.length,
        duration_ns: 0,
        flash_reads: work.reads,
        flash_writes: work.programs,
        oob_reads: work.oob_reads,
        // Every program writes the page's OOB (logical address, sequence) with it.
        oob_writes: work.programs,
        erases: work.erases,
        physical_sector: work
            .first_ppa
            .map_or(-1, |p| p as i64 * (page as i64 / 512)),
        flash_duration_ns: work.flash_ns,
        queue_ns: 0,
        service_ns: 0,
        translation_reads: work.translation_reads,
        translation_writes: work.translation_writes,
        mapping_hits: work.mapping_hits,
        mapping_misses: work.mapping_misses,
        device_cpu_ns: work.device_cpu_ns,
    };
    row.set_duration(complete_ns - issue_ns, work.queue_ns);
    row
}

/// The FTL counters the time series tracks: host bytes, flash pages, GC pages, erases, and
/// the SEA segments' blocks in use.
pub(crate) fn series_counters(ftl: &dyn Ftl) -> SeriesCounters {
    let c = ftl.counters();
    let sea = ftl.sea_state();
    [
        c.host_bytes_written,
        c.flash_pages_programmed(),
        c.gc_pages_programmed,
        c.erases,
        sea.dyn_blocks,
        sea.stat_blocks,
    ]
}

/// The first page of `page_bytes` that `req` touches, and how many (pages need not be a
/// power of two; mapping units are, see [`Device::unit_span`]).
#[inline]
fn span_count(req: &HostRequest, page_bytes: u64) -> (u64, u64) {
    let first = req.offset / page_bytes;
    if req.length == 0 {
        return (first, 0);
    }
    (
        first,
        (req.offset + req.length - 1) / page_bytes - first + 1,
    )
}

/// Byte range [lo, hi) of unit (or page) `lpa` of `page` bytes that request `req` covers,
/// relative to its start.
#[inline]
fn page_span(req: &HostRequest, lpa: u64, page: u64) -> (u64, u64) {
    let page_start = lpa * page;
    let lo = req.offset.max(page_start) - page_start;
    let hi = (req.offset + req.length).min(page_start + page) - page_start;
    (lo, hi)
}
