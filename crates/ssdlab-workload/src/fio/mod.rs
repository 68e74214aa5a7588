//! A fio job-file subset: parse real fio job files into typed [`JobSpec`]s.
//!
//! The file is INI as fio reads it: `[section]` headers, `key=value` lines (whitespace around
//! `=` allowed), bare boolean keys (`norandommap`, `time_based`), comments starting with `;`
//! or `#`. A `[global]` section applies to the job sections that follow it; a later `[global]`
//! updates the options for the jobs after it, as in fio. Options in a job section override the
//! global ones; when an option is set twice the later line wins.
//!
//! **Jobs run side by side, as in fio.** The jobs of a file form run groups: a job with
//! `stonewall` (or `wait_for_previous`) starts a new group, which begins once every earlier job
//! is done, and the jobs of a group run at the same time on the one simulated device, each with
//! its own queue depth or rate, runtime and statistics. `numjobs=N` makes N clones of a section
//! (same name, numbered 0..N: each draws its own random stream, and starts at `offset +
//! n * offset_increment`). Each job is reported on its own unless `group_reporting` merges the
//! jobs of a reporting group (a run group, split further by `new_group`) into one report. A
//! think-time job beside others pauses on its own: while it waits for its requests and idles,
//! the other jobs go on.
//!
//! **Supported keys** (see [`SUPPORTED_OPTIONS`]): `rw`/`readwrite`, `bs`/`blocksize`,
//! `bssplit`, `blocksize_range`/`bsrange`, `size`, `offset`, `io_size`/`io_limit`,
//! `number_ios`, `iodepth`, `numjobs`, `offset_increment`, `stonewall`/`wait_for_previous`,
//! `rwmixread`/`rwmixwrite`,
//! `random_distribution`, `norandommap`, `randseed`, `runtime`, `time_based`, `ramp_time`,
//! `write_hint`, `read_group` (ssdlab's own: the melded-pages read group of every write), `name`,
//! the rate limits `rate`, `rate_iops` and `rate_process`, and think time `thinktime`,
//! `thinktime_blocks`, `thinktime_blocks_type`, `thinktime_spin` (see below), and the syncs
//! `fsync`, `fdatasync`, `end_fsync`, `fsync_on_close` and `sync` (see below).
//! Options that only matter to a real device or to fio's reporting are
//! accepted and ignored ([`IGNORED_OPTIONS`]); any other option is an error naming it, so that
//! a job file never silently means something else here than under fio.
//!
//! **Units** follow fio with its default `kb_base=1024`: sizes take `k`, `m`, `g`, `t`, `p`
//! suffixes in any case, optionally followed by `b` or `ib` (`4k` = `4K` = `4KiB` = `4kb` =
//! 4096); a plain number is bytes. `size` and `offset` also take a percentage of the device
//! (`size=50%`). Times (`runtime`, `ramp_time`) are seconds unless suffixed by `us`, `ms`, `s`,
//! `m`, `h` or `d`.
//!
//! **Rate limits.** `rate` (bytes/s) and `rate_iops` cap each direction as in fio (per-direction
//! comma syntax; `rate` wins over `rate_iops` for a direction that has both; 0 or an empty field
//! leaves a direction unlimited). A rate-limited job's requests carry arrival times, spaced as
//! fio spaces its submissions: `rate_process=linear` (the default) issues a direction's next I/O
//! when the bytes (for `rate`) or I/Os (for `rate_iops`) issued so far are due at that rate;
//! `poisson` draws exponential gaps with the rate's mean, per I/O (`rate` counts I/Os of the
//! direction's smallest block size, as fio). In a mixed job, an I/O drawn for a direction that is
//! ahead of its rate goes to the other direction if that one is due, else waits for whichever is
//! due first (fio's `rate_ddir`). The core runs such a job open loop: requests issue at their
//! arrival times, at most `iodepth` outstanding, and a late one issues as soon as a slot frees
//! (fio catches up the same way). In a mixed job both directions must be limited: fio lets an
//! unlimited direction run as fast as the device completes it, which a stream generated ahead of
//! the device's clock cannot follow, so that is an error.
//!
//! **Think time.** `thinktime` (microseconds unless suffixed) stalls the job as fio does: after
//! an I/O is issued (and, with a full queue, one completion reaped), when the count of
//! `thinktime_blocks` (default 1) I/Os is reached — counted as they complete
//! (`thinktime_blocks_type=complete`, fio's default) or as they are issued (`issue`) — every
//! outstanding I/O is waited for and the device is left idle for `thinktime`. With `iodepth=1`
//! that is one I/O, then the pause. `thinktime_spin` is the part of the pause fio spends
//! spinning a CPU: the same idle time for the device. A job cannot have both a think time and a
//! rate here.
//!
//! **Syncs.** `fsync=N` and `fdatasync=N` issue a flush after every N writes, as fio does: the
//! flush follows the write that makes the count a multiple of N, and is queued like any other
//! request (it covers every write issued before it; with a write-back buffer it completes once
//! their pages are on flash). A block device has one volatile cache, so both options flush it
//! alike; with both set, a write that is due for either is followed by one flush. Flushes do not
//! count toward `number_ios` or `io_size`, and are reported as fio reports syncs (`sync`:
//! `total_ios` and `lat_ns`). `end_fsync` (or `fsync_on_close`: one file, one cache) ends a job
//! that writes with a flush once all its requests are done; as in fio its latency joins
//! `sync.lat_ns` but it is not counted in `total_ios`. It needs a closed loop (no rate limit).
//! `sync=1` (or `sync`, `dsync`) makes every write synchronous, as opening the device with
//! `O_SYNC` or `O_DSYNC` does: the kernel sends each such direct write with Force Unit Access,
//! and the write completes once its data is on flash (its latency includes what a flush issued
//! with it would wait for). fio reports such writes as writes, with no `sync` entries.
//!
//! **Simulated time.** `runtime`, `time_based` and `ramp_time` are exposed on the spec in
//! nanoseconds of simulated time: the source of a `time_based` job never ends and the core is
//! expected to stop it at `runtime_ns` (and to exclude the first `ramp_time_ns` from its
//! statistics). Without `time_based`, `runtime` is only an upper bound the core may enforce.

pub mod generator;
mod pacing;

use std::collections::BTreeMap;
use std::path::Path;

use ssdlab_core::request::WriteLife;

use crate::distribution::DistributionSpec;
use crate::error::WorkloadError;

pub use generator::FioSource;

/// The most clones `numjobs` may ask for.
pub const MAX_NUMJOBS: u32 = 1024;

/// Options with a meaning here.
pub const SUPPORTED_OPTIONS: &[&str] = &[
    "rw",
    "readwrite",
    "bs",
    "blocksize",
    "bssplit",
    "blocksize_range",
    "bsrange",
    "size",
    "offset",
    "offset_increment",
    "numjobs",
    "stonewall",
    "wait_for_previous",
    "group_reporting",
    "new_group",
    "io_size",
    "io_limit",
    "number_ios",
    "iodepth",
    "rwmixread",
    "rwmixwrite",
    "random_distribution",
    "norandommap",
    "randseed",
    "runtime",
    "time_based",
    "ramp_time",
    "write_hint",
    "read_group",
    "name",
    "rate",
    "rate_iops",
    "rate_process",
    "thinktime",
    "thinktime_blocks",
    "thinktime_blocks_type",
    "thinktime_spin",
    "fsync",
    "fdatasync",
    "end_fsync",
    "fsync_on_close",
    "sync",
];

/// fio options accepted and ignored because they do not change the request stream a simulated
/// device sees: the I/O engine and page-cache options (`direct`, `buffered`, `invalidate`,
/// `fadvise_hint`) concern the host's path to a real device, `filename` names that device (we
/// have one), and file handling (`unlink`, `create_on_open`) has no device to act on; where
/// fio runs (`thread`, `cpus_allowed`, `cpumask`, NUMA, `nice`, `prio`, `ioscheduler`, I/O
/// memory, `clocksource`, `gtod_reduce`) changes the host, not the requests; the buffers'
/// contents (`refill_buffers`, `zero_buffers`, `buffer_pattern`, compression and dedupe
/// ratios) do not matter to a device that models no compression; fio's log files and
/// `disk_util` are reports of its own (ssdlab's are `--request-log` and `--time-series`), as is
/// `description`. `randrepeat` and `allrandrepeat` are accepted because ssdlab's random streams
/// always follow the run's seed: a job is repeatable whatever they say. The `verify` family is
/// deliberately absent: it would add reads we do not generate, so it is rejected; so are options
/// that change the stream or the report (`exitall`, `kb_base`, `iodepth_batch_*`,
/// `unified_rw_reporting`, ...).
pub const IGNORED_OPTIONS: &[&str] = &[
    // The host's path to a real device.
    "ioengine",
    "direct",
    "filename",
    "buffered",
    "invalidate",
    "fadvise_hint",
    "unlink",
    "create_on_open",
    // Where and how fio itself runs.
    "thread",
    "cpus_allowed",
    "cpus_allowed_policy",
    "cpumask",
    "numa_cpu_nodes",
    "numa_mem_policy",
    "nice",
    "prio",
    "prioclass",
    "ioscheduler",
    "iomem",
    "mem",
    "iomem_align",
    "mem_align",
    "hugepage-size",
    "lockmem",
    "clocksource",
    "gtod_reduce",
    "gtod_cpu",
    // The contents of the write buffers.
    "refill_buffers",
    "scramble_buffers",
    "zero_buffers",
    "buffer_pattern",
    "buffer_compress_percentage",
    "buffer_compress_chunk",
    "dedupe_percentage",
    // fio's own reports and log files.
    "description",
    "disk_util",
    "write_bw_log",
    "write_lat_log",
    "write_iops_log",
    "write_hist_log",
    "log_avg_msec",
    "log_hist_msec",
    "log_hist_coarseness",
    "per_job_logs",
    "log_offset",
    "log_compression",
    "log_unix_epoch",
    // Always repeatable here (the run's seed).
    "randrepeat",
    "allrandrepeat",
];

/// A parsed job file.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFile {
    pub path: String,
    /// The jobs in file order, each `numjobs` clone on its own; see [`JobSpec::group`] for
    /// which run side by side.
    pub jobs: Vec<JobSpec>,
}

/// The most requests jobs side by side may keep outstanding together (the core's bound).
pub const MAX_GROUP_DEPTH: u64 = 1 << 16;

impl JobFile {
    /// The run groups in order, each the indices (into `jobs`) of the jobs that run side by
    /// side. Error, naming the key and line, for a group whose queue depths add up to more
    /// than [`MAX_GROUP_DEPTH`].
    pub fn groups(&self) -> Result<Vec<Vec<usize>>, WorkloadError> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (i, job) in self.jobs.iter().enumerate() {
            match groups.last_mut() {
                Some(group) if self.jobs[group[0]].group == job.group => group.push(i),
                _ => groups.push(vec![i]),
            }
        }
        for group in &groups {
            if group.len() == 1 {
                continue;
            }
            let depth: u64 = group.iter().map(|&i| self.jobs[i].iodepth as u64).sum();
            if depth > MAX_GROUP_DEPTH {
                let last = &self.jobs[*group.last().expect("a job")];
                return Err(last.option_error(
                    "iodepth",
                    format!(
                        "the {} jobs side by side keep {depth} requests outstanding together; \
                         at most {MAX_GROUP_DEPTH} can be",
                        group.len()
                    ),
                ));
            }
        }
        Ok(groups)
    }

    /// How fio reports the jobs: `reports[i]` is job `i`'s report, numbered from 0 in file
    /// order. A job shares the report of the job before it when both set `group_reporting`,
    /// both run in one group, and it sets no `new_group` (its clones share its report); every
    /// other job has its own.
    pub fn reports(&self) -> Vec<usize> {
        let mut reports: Vec<usize> = Vec::with_capacity(self.jobs.len());
        for (i, job) in self.jobs.iter().enumerate() {
            let together = i > 0 && {
                let before = &self.jobs[i - 1];
                job.group_reporting
                    && before.group_reporting
                    && before.group == job.group
                    && (job.job_number > 0 || !job.new_group)
            };
            reports.push(match reports.last() {
                None => 0,
                Some(&last) if together => last,
                Some(&last) => last + 1,
            });
        }
        reports
    }
}

/// fio's `rw` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwMode {
    Read,
    Write,
    Trim,
    RandRead,
    RandWrite,
    RandTrim,
    /// `rw` / `readwrite`: sequential mixed reads and writes.
    ReadWrite,
    /// `randrw`: random mixed reads and writes.
    RandRw,
}

impl RwMode {
    /// Offsets are drawn at random rather than walked.
    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead | RwMode::RandWrite | RwMode::RandTrim | RwMode::RandRw
        )
    }

    /// Reads and writes are mixed according to `rwmixread`.
    pub fn is_mixed(self) -> bool {
        matches!(self, RwMode::ReadWrite | RwMode::RandRw)
    }

    /// The job writes (alone or mixed with reads).
    pub fn writes(self) -> bool {
        matches!(
            self,
            RwMode::Write | RwMode::RandWrite | RwMode::ReadWrite | RwMode::RandRw
        )
    }

    fn parse(value: &str) -> Result<RwMode, String> {
        if let Some((mode, suffix)) = value.split_once(':') {
            return Err(format!(
                "the ':{suffix}' suffix of '{mode}' (fio's sequential skip/random repeat count) \
                 is not supported by ssdlab; use '{mode}' alone"
            ));
        }
        Ok(match value {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "trim" => RwMode::Trim,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "randtrim" => RwMode::RandTrim,
            "rw" | "readwrite" => RwMode::ReadWrite,
            "randrw" => RwMode::RandRw,
            other => {
                return Err(format!(
                    "'{other}' not supported by ssdlab (supported: read, write, trim, randread, \
                     randwrite, randtrim, rw, readwrite, randrw)"
                ))
            }
        })
    }
}

/// How one data direction picks its block sizes.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockSize {
    /// `bs=4k`.
    Fixed(u64),
    /// `bssplit=4k/50:64k/50`: (size, percent) pairs whose percentages sum to 100.
    Split(Vec<(u64, u32)>),
    /// `bsrange=4k-64k`: a uniformly chosen multiple of `min` in `[min, max]`.
    Range { min: u64, max: u64 },
}

impl BlockSize {
    /// The smallest size this direction can issue.
    pub fn min(&self) -> u64 {
        match self {
            BlockSize::Fixed(b) => *b,
            BlockSize::Split(v) => v.iter().map(|&(b, _)| b).min().unwrap_or(0),
            BlockSize::Range { min, .. } => *min,
        }
    }

    /// The largest size this direction can issue.
    pub fn max(&self) -> u64 {
        match self {
            BlockSize::Fixed(b) => *b,
            BlockSize::Split(v) => v.iter().map(|&(b, _)| b).max().unwrap_or(0),
            BlockSize::Range { max, .. } => *max,
        }
    }
}

/// fio's `rate_process`: how a rate-limited direction spaces its I/Os.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateProcess {
    /// Each I/O when the work issued before it is due at the rate.
    #[default]
    Linear,
    /// Exponential gaps with the rate's mean (a Poisson arrival process).
    Poisson,
}

/// The rate limit of one direction (`rate` or `rate_iops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimit {
    /// `rate`: bytes per second.
    Bytes(u64),
    /// `rate_iops`: I/Os per second.
    Iops(u64),
}

/// A byte quantity that may be relative to the device (`size=50%`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Extent {
    Bytes(u64),
    /// Percent of the device's logical bytes, 0–100.
    Percent(f64),
}

impl Extent {
    /// Bytes on a device of `device_bytes`.
    pub fn resolve(self, device_bytes: u64) -> u64 {
        match self {
            Extent::Bytes(b) => b,
            Extent::Percent(p) => ((device_bytes as f64) * p / 100.0) as u64,
        }
    }
}

/// One `[job]` section with its inherited `[global]` options, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// The section name, or the `name=` option when set.
    pub name: String,
    /// Position of the job in its file (0-based), each `numjobs` clone counted; mixed into
    /// the seed so that jobs differ.
    pub index: usize,
    /// Which clone of its section this job is (0 .. `numjobs`): fio's sub-job number, which
    /// scales `offset_increment`.
    pub job_number: u32,
    /// `numjobs`: how many clones of the section run side by side.
    pub numjobs: u32,
    /// Added to `offset` once per clone number (`offset_increment`).
    pub offset_increment: Extent,
    /// The run group: jobs of one group run side by side; a job with `stonewall` (or
    /// `wait_for_previous`) starts a new group, which begins when every earlier job is done.
    pub group: usize,
    /// `stonewall`/`wait_for_previous` was set on this job.
    pub stonewall: bool,
    /// `group_reporting`: report this job together with the jobs before it in its reporting
    /// group (those that set it too).
    pub group_reporting: bool,
    /// `new_group`: this job starts a new reporting group (as a stonewall does).
    pub new_group: bool,
    /// The job file's path, for error messages.
    pub path: String,
    /// Queue depth the core should keep outstanding (fio default 1).
    pub iodepth: u32,
    /// `runtime` in simulated ns.
    pub runtime_ns: Option<u64>,
    /// `time_based`: keep issuing until `runtime_ns`; the source is unbounded.
    pub time_based: bool,
    /// `ramp_time` in simulated ns: the core should not count this initial period.
    pub ramp_time_ns: Option<u64>,
    /// `rw` (default `read`, as fio).
    pub rw: RwMode,
    /// Block sizes for reads, writes and trims, in that order (default 4 KiB each).
    pub block_size: [BlockSize; 3],
    /// `size`: the region the job works on; `None` = the device from `offset` to its end.
    pub size: Option<Extent>,
    /// `offset`: start of the region (default 0).
    pub offset: Extent,
    /// `io_size`: bytes to transfer (default: `size`, one pass).
    pub io_size: Option<u64>,
    /// `number_ios`: requests to issue; with `io_size` too, the first limit reached wins.
    pub number_ios: Option<u64>,
    /// `rwmixread`: percent of reads in mixed modes (default 50).
    pub rwmixread: u8,
    /// `random_distribution` (default `random`).
    pub random_distribution: DistributionSpec,
    /// `norandommap`: random picks may repeat within a pass.
    pub norandommap: bool,
    /// `randseed`: overrides the run's seed for this job.
    pub randseed: Option<u64>,
    /// `write_hint`: the Linux write-life hint put on every write.
    pub write_hint: Option<WriteLife>,
    /// `read_group` (ssdlab's own option): the melded-pages read group put on every write,
    /// so a job's data fills whole wordlines and its large reads can meld.
    pub read_group: Option<u64>,
    /// `rate` / `rate_iops` of reads, writes and trims; `None` = unlimited.
    pub rate: [Option<RateLimit>; 3],
    /// `rate_process` (default `linear`).
    pub rate_process: RateProcess,
    /// `thinktime` in ns (0: none), `thinktime_blocks` and whether they are counted as they
    /// complete (`thinktime_blocks_type=complete`, the default) or as they are issued.
    pub thinktime_ns: u64,
    pub thinktime_blocks: u32,
    pub thinktime_counts_completions: bool,
    /// `fsync` and `fdatasync`: a flush after every this many writes (0: none). A block
    /// device has one cache to flush, so both are the same command here.
    pub fsync_every: [u64; 2],
    /// `end_fsync` and `fsync_on_close`, each as its last line sets it: either makes a
    /// writing job end with a flush once its requests are done (one device, one cache: the
    /// same flush); see [`JobSpec::ends_with_flush`].
    pub end_fsync: [bool; 2],
    /// `sync=1` (`sync`, `dsync`): the job's writes are synchronous, each done once its data is
    /// on flash. On a block device the kernel sends an `O_SYNC` or `O_DSYNC` direct write
    /// with Force Unit Access, so both are [`HostRequest::fua`] writes here.
    ///
    /// [`HostRequest::fua`]: ssdlab_core::HostRequest::fua
    pub sync_writes: bool,
    /// Line where each option was last set (for errors raised after parsing).
    pub option_lines: BTreeMap<String, usize>,
}

impl JobSpec {
    /// A job with fio's defaults, before any option is applied.
    fn with_defaults(name: &str, index: usize, path: &str) -> JobSpec {
        JobSpec {
            name: name.to_string(),
            index,
            path: path.to_string(),
            iodepth: 1,
            runtime_ns: None,
            time_based: false,
            ramp_time_ns: None,
            rw: RwMode::Read,
            block_size: [
                BlockSize::Fixed(4096),
                BlockSize::Fixed(4096),
                BlockSize::Fixed(4096),
            ],
            size: None,
            offset: Extent::Bytes(0),
            job_number: 0,
            numjobs: 1,
            offset_increment: Extent::Bytes(0),
            group: 0,
            stonewall: false,
            group_reporting: false,
            new_group: false,
            io_size: None,
            number_ios: None,
            rwmixread: 50,
            random_distribution: DistributionSpec::Random,
            norandommap: false,
            randseed: None,
            write_hint: None,
            read_group: None,
            rate: [None; 3],
            rate_process: RateProcess::Linear,
            thinktime_ns: 0,
            thinktime_blocks: 1,
            thinktime_counts_completions: true,
            fsync_every: [0; 2],
            end_fsync: [false; 2],
            sync_writes: false,
            option_lines: BTreeMap::new(),
        }
    }

    /// A generator of this job's requests against a device exporting `device_bytes` logical
    /// bytes; `seed` is the run's seed, used unless the job sets randseed. Error if the job's
    /// range falls outside the device (offset+size > device_bytes) naming the key.
    pub fn source(
        &self,
        device_bytes: u64,
        seed: u64,
    ) -> Result<Box<dyn ssdlab_core::RequestSource>, WorkloadError> {
        Ok(Box::new(FioSource::new(self, device_bytes, seed)?))
    }

    /// Does the job end with a flush once its requests are done (`end_fsync` or
    /// `fsync_on_close` on a job that writes; as in fio, a job that does not write has nothing
    /// to sync)?
    pub fn ends_with_flush(&self) -> bool {
        self.end_fsync.contains(&true) && self.rw.writes()
    }

    /// Is any direction rate-limited? Its requests then carry arrival times.
    pub fn is_rate_limited(&self) -> bool {
        self.rate.iter().any(Option::is_some)
    }

    /// How the core should pace this job: open loop at the arrival times a rate limit gives
    /// (at most `iodepth` outstanding), closed loop with pauses for a think time, else closed
    /// loop (`iodepth` kept outstanding).
    pub fn pacing(&self) -> ssdlab_core::Loop {
        if self.is_rate_limited() {
            ssdlab_core::Loop::Open { time_scale: 1.0 }
        } else if self.thinktime_ns > 0 {
            ssdlab_core::Loop::Think {
                think_ns: self.thinktime_ns,
                blocks: self.thinktime_blocks,
                count_completions: self.thinktime_counts_completions,
            }
        } else {
            ssdlab_core::Loop::Closed
        }
    }

    /// Number of requests the job will issue when known (io_size/number_ios/size bounded; None
    /// when time_based), its flushes included.
    pub fn request_count(&self, device_bytes: u64) -> Option<u64> {
        generator::Layout::resolve(self, device_bytes)
            .ok()?
            .requests_with_flushes(self)
    }

    /// The line where `key` was set, 0 if it was not.
    pub(crate) fn line_of(&self, key: &str) -> usize {
        self.option_lines.get(key).copied().unwrap_or(0)
    }

    /// Build the error of option `key` with this job's file and line.
    pub(crate) fn option_error(&self, key: &str, message: String) -> WorkloadError {
        WorkloadError::JobOption {
            path: self.path.clone(),
            line: self.line_of(key),
            key: key.to_string(),
            message: format!("job '{}': {message}", self.name),
        }
    }
}

/// One `key[=value]` line as read.
#[derive(Debug, Clone)]
struct RawOption {
    key: String,
    value: Option<String>,
    line: usize,
}

/// Parse a job file held in memory; `path` names it in errors.
pub fn parse_job_file(text: &str, path: &str) -> Result<JobFile, WorkloadError> {
    let parse_err = |line: usize, message: String| WorkloadError::Parse {
        path: path.to_string(),
        line,
        message,
    };
    let mut global: Vec<RawOption> = Vec::new();
    // (section name, line of its header, its options); `None` while in [global].
    let mut sections: Vec<(String, usize, Vec<RawOption>)> = Vec::new();
    let mut jobs = Vec::new();
    let mut in_global = false;
    let mut any_section = false;

    // A section becomes `numjobs` clones; a stonewall starts a new run group.
    let finish = |jobs: &mut Vec<JobSpec>, name: &str, opts: &[RawOption]| {
        let job = build_job(name, jobs.len(), path, opts)?;
        let group = match jobs.last() {
            None => 0,
            Some(last) if job.stonewall => last.group + 1,
            Some(last) => last.group,
        };
        for number in 0..job.numjobs {
            let mut clone = job.clone();
            clone.index = jobs.len();
            clone.job_number = number;
            clone.group = group;
            jobs.push(clone);
        }
        Ok::<(), WorkloadError>(())
    };

    for (i, raw_line) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw_line.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(parse_err(
                    line_no,
                    format!("expected a section header '[name]', found '{line}'"),
                ));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(parse_err(line_no, "empty section name '[]'".to_string()));
            }
            // Close the previous job section with the global options as they stood when it
            // started (a later [global] must not leak backwards).
            if let Some((prev, _, opts)) = sections.pop() {
                finish(&mut jobs, &prev, &opts)?;
            }
            any_section = true;
            if name == "global" {
                in_global = true;
            } else {
                in_global = false;
                sections.push((name.to_string(), line_no, global.clone()));
            }
            continue;
        }
        if !any_section {
            return Err(parse_err(
                line_no,
                format!("option '{line}' appears before any '[section]' header"),
            ));
        }
        // Inline comments after a value are fio-legal only with ';' or '#' preceded by space.
        let line = strip_inline_comment(line);
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (line, None),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(parse_err(
                line_no,
                format!("expected 'key=value' or a bare option, found '{line}'"),
            ));
        }
        let opt = RawOption {
            key: key.to_ascii_lowercase(),
            value,
            line: line_no,
        };
        // Check the option against the known lists early, so that a mistake in [global]
        // points at its line even if no job follows.
        check_known(&opt, path)?;
        if in_global {
            global.push(opt);
        } else if let Some((_, _, opts)) = sections.last_mut() {
            opts.push(opt);
        }
    }
    if let Some((prev, _, opts)) = sections.pop() {
        finish(&mut jobs, &prev, &opts)?;
    }
    if jobs.is_empty() {
        return Err(parse_err(
            text.lines().count().max(1),
            "expected at least one job section ('[name]' other than '[global]')".to_string(),
        ));
    }
    Ok(JobFile {
        path: path.to_string(),
        jobs,
    })
}

/// Read and parse a job file from disk.
pub fn read_job_file(path: &Path) -> Result<JobFile, WorkloadError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Io {
        path: name.clone(),
        source,
    })?;
    parse_job_file(&text, &name)
}

fn strip_inline_comment(line: &str) -> &str {
    for pat in [" ;", " #", "\t;", "\t#"] {
        if let Some(pos) = line.find(pat) {
            return line[..pos].trim_end();
        }
    }
    line
}

fn check_known(opt: &RawOption, path: &str) -> Result<(), WorkloadError> {
    let key = opt.key.as_str();
    if SUPPORTED_OPTIONS.contains(&key) || IGNORED_OPTIONS.contains(&key) {
        return Ok(());
    }
    let message = if key == "verify" || key == "do_verify" || key.starts_with("verify_") {
        "data verification is not simulated (the simulator stores no data); remove it".to_string()
    } else if key.starts_with("thinktime_") {
        "not supported by ssdlab (supported: thinktime, thinktime_blocks, \
         thinktime_blocks_type, thinktime_spin)"
            .to_string()
    } else if key == "exitall" || key == "exit_what" {
        "not supported by ssdlab: the jobs of a group each end with their own work; give the \
         jobs runtimes instead"
            .to_string()
    } else if key == "include" || key.starts_with("include ") {
        "include files are not supported by ssdlab; inline the options".to_string()
    } else {
        format!(
            "unknown or unsupported fio option (supported: {}; accepted and ignored: {})",
            SUPPORTED_OPTIONS.join(", "),
            IGNORED_OPTIONS.join(", ")
        )
    };
    Err(WorkloadError::JobOption {
        path: path.to_string(),
        line: opt.line,
        key: opt.key.clone(),
        message,
    })
}

/// Pending block-size options, resolved after all lines are read: `bssplit` wins over
/// `bsrange`, which wins over `bs`, whatever their order (as in fio, where the more specific
/// option takes precedence).
#[derive(Default)]
struct BlockSizeOptions {
    bs: Option<[BlockSize; 3]>,
    split: Option<[BlockSize; 3]>,
    range: Option<[BlockSize; 3]>,
}

fn build_job(
    name: &str,
    index: usize,
    path: &str,
    opts: &[RawOption],
) -> Result<JobSpec, WorkloadError> {
    let mut job = JobSpec::with_defaults(name, index, path);
    let mut sizes = BlockSizeOptions::default();
    // `rate` wins over `rate_iops` per direction, whatever their order (as in fio).
    let mut rate_bytes = [0u64; 3];
    let mut rate_iops = [0u64; 3];
    let mut thinktime_spin_ns = 0;
    for opt in opts {
        let err = |message: String| WorkloadError::JobOption {
            path: path.to_string(),
            line: opt.line,
            key: opt.key.clone(),
            message,
        };
        let key = opt.key.as_str();
        job.option_lines.insert(key.to_string(), opt.line);
        let flag = || {
            opt.value
                .as_deref()
                .map_or(Ok(true), parse_bool)
                .map_err(err)
        };
        match key {
            "stonewall" | "wait_for_previous" => job.stonewall = flag()?,
            "group_reporting" => job.group_reporting = flag()?,
            "new_group" => job.new_group = flag()?,
            _ => {}
        }
        if matches!(
            key,
            "stonewall" | "wait_for_previous" | "group_reporting" | "new_group"
        ) {
            continue;
        }
        if IGNORED_OPTIONS.contains(&key) {
            continue;
        }
        // Bare keys are booleans; only boolean options may be bare.
        let value = match (&opt.value, key) {
            (None, "norandommap" | "time_based" | "end_fsync" | "fsync_on_close") => "1",
            (None, _) => return Err(err("expects a value ('key=value')".to_string())),
            (Some(v), _) => v.as_str(),
        };
        match key {
            "rw" | "readwrite" => job.rw = RwMode::parse(value).map_err(err)?,
            "bs" | "blocksize" => sizes.bs = Some(per_direction(value, parse_bs).map_err(err)?),
            "bssplit" => sizes.split = Some(per_direction(value, parse_bssplit).map_err(err)?),
            "rate" => rate_bytes = per_direction_or(value, parse_size, 0).map_err(err)?,
            "rate_iops" => rate_iops = per_direction_or(value, parse_uint, 0).map_err(err)?,
            "rate_process" => job.rate_process = parse_rate_process(value).map_err(err)?,
            "thinktime" => job.thinktime_ns = parse_time_ns_in(value, 1_000).map_err(err)?,
            "thinktime_spin" => thinktime_spin_ns = parse_time_ns_in(value, 1_000).map_err(err)?,
            "thinktime_blocks" => {
                job.thinktime_blocks = match parse_uint(value).map_err(err)? {
                    n @ 1..=0xFFFF_FFFF => n as u32,
                    _ => {
                        return Err(err(format!(
                            "expected a block count from 1 to {}, found '{value}'",
                            u32::MAX
                        )))
                    }
                }
            }
            "thinktime_blocks_type" => {
                job.thinktime_counts_completions = match value {
                    "complete" => true,
                    "issue" => false,
                    other => {
                        return Err(err(format!(
                            "'{other}' is not a thinktime_blocks_type (expected complete or issue)"
                        )))
                    }
                }
            }
            "blocksize_range" | "bsrange" => {
                sizes.range = Some(per_direction(value, parse_bsrange).map_err(err)?)
            }
            "size" => job.size = Some(parse_extent(value).map_err(err)?),
            "offset" => job.offset = parse_extent(value).map_err(err)?,
            "io_size" | "io_limit" => job.io_size = Some(parse_size_nonzero(value).map_err(err)?),
            "number_ios" => job.number_ios = Some(parse_uint(value).map_err(err)?),
            "iodepth" => {
                let d = parse_uint(value).map_err(err)?;
                if d == 0 || d > u32::MAX as u64 {
                    return Err(err(format!(
                        "expected a queue depth from 1 to {}, found '{value}'",
                        u32::MAX
                    )));
                }
                job.iodepth = d as u32;
            }
            "numjobs" => {
                let n = parse_uint(value).map_err(err)?;
                if n == 0 || n > MAX_NUMJOBS as u64 {
                    return Err(err(format!(
                        "expected a number of jobs from 1 to {MAX_NUMJOBS}, found '{value}'"
                    )));
                }
                job.numjobs = n as u32;
            }
            "offset_increment" => job.offset_increment = parse_extent(value).map_err(err)?,
            "rwmixread" => job.rwmixread = parse_percent(value).map_err(err)?,
            "rwmixwrite" => job.rwmixread = 100 - parse_percent(value).map_err(err)?,
            "random_distribution" => {
                job.random_distribution = parse_distribution(value).map_err(err)?
            }
            "norandommap" => job.norandommap = parse_bool(value).map_err(err)?,
            "randseed" => job.randseed = Some(parse_uint(value).map_err(err)?),
            "runtime" => job.runtime_ns = Some(parse_time_ns(value).map_err(err)?),
            "time_based" => job.time_based = parse_bool(value).map_err(err)?,
            "ramp_time" => job.ramp_time_ns = Some(parse_time_ns(value).map_err(err)?),
            "write_hint" => job.write_hint = Some(parse_write_hint(value).map_err(err)?),
            "read_group" => job.read_group = Some(parse_read_group(value).map_err(err)?),
            "fsync" => job.fsync_every[0] = parse_uint(value).map_err(err)?,
            "fdatasync" => job.fsync_every[1] = parse_uint(value).map_err(err)?,
            "end_fsync" => job.end_fsync[0] = parse_bool(value).map_err(err)?,
            "fsync_on_close" => job.end_fsync[1] = parse_bool(value).map_err(err)?,
            "sync" => job.sync_writes = parse_sync(value).map_err(err)?,
            "name" => job.name = value.to_string(),
            _ => unreachable!("check_known let '{key}' through"),
        }
    }
    job.block_size = sizes
        .split
        .or(sizes.range)
        .or(sizes.bs)
        .unwrap_or(job.block_size);
    resolve_rates(&mut job, rate_bytes, rate_iops)?;
    if thinktime_spin_ns > job.thinktime_ns {
        return Err(job.option_error(
            "thinktime_spin",
            format!(
                "{} us of spinning is longer than the think time it is part of (thinktime={} us)",
                thinktime_spin_ns / 1_000,
                job.thinktime_ns / 1_000
            ),
        ));
    }
    if job.end_fsync.contains(&true) && job.is_rate_limited() {
        let key = if job.end_fsync[0] {
            "end_fsync"
        } else {
            "fsync_on_close"
        };
        return Err(job.option_error(
            key,
            "a closing flush with a rate limit is not supported by ssdlab: the job would wait \
             for its last arrival; use one or the other"
                .to_string(),
        ));
    }
    if job.thinktime_ns > 0 && job.is_rate_limited() {
        return Err(job.option_error(
            "thinktime",
            "a think time with a rate limit is not supported by ssdlab: use one or the other"
                .to_string(),
        ));
    }
    if job.time_based && job.runtime_ns.is_none() {
        return Err(WorkloadError::JobOption {
            path: path.to_string(),
            line: job.line_of("time_based"),
            key: "time_based".to_string(),
            message: format!("job '{}': time_based needs 'runtime' to be set", job.name),
        });
    }
    Ok(job)
}

/// Apply fio's per-direction comma syntax `read[,write[,trim]]`: a missing trailing value
/// copies the previous one, an empty value keeps the default (4 KiB), so `bs=8k,32k` gives
/// 8k reads and 32k writes and trims and `bs=,8k` keeps reads at 4k.
fn per_direction(
    value: &str,
    parse: fn(&str) -> Result<BlockSize, String>,
) -> Result<[BlockSize; 3], String> {
    per_direction_or(value, parse, BlockSize::Fixed(4096))
}

/// [`per_direction`] with `default` for an empty value.
fn per_direction_or<T: Clone>(
    value: &str,
    parse: fn(&str) -> Result<T, String>,
    default: T,
) -> Result<[T; 3], String> {
    let parts: Vec<&str> = value.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(format!(
            "expected at most 3 comma-separated values (read,write,trim), found {}",
            parts.len()
        ));
    }
    let mut out: [T; 3] = [default.clone(), default.clone(), default.clone()];
    for i in 0..3 {
        out[i] = match parts.get(i) {
            Some(&"") => default.clone(),
            Some(p) => parse(p)?,
            None => out[i - 1].clone(),
        };
    }
    Ok(out)
}

fn parse_rate_process(value: &str) -> Result<RateProcess, String> {
    match value.trim() {
        "linear" => Ok(RateProcess::Linear),
        "poisson" => Ok(RateProcess::Poisson),
        other => Err(format!(
            "'{other}' is not a rate process (expected linear or poisson)"
        )),
    }
}

/// Each direction's limit from `rate` (bytes/s, which wins) and `rate_iops`, checked: a mixed
/// job limits both directions or neither, and a Poisson rate in bytes covers at least one I/O
/// of the direction's smallest block size per second (fio's "rate lower than supported").
fn resolve_rates(job: &mut JobSpec, bytes: [u64; 3], iops: [u64; 3]) -> Result<(), WorkloadError> {
    let key = if job.option_lines.contains_key("rate") {
        "rate"
    } else {
        "rate_iops"
    };
    for d in 0..3 {
        job.rate[d] = match (bytes[d], iops[d]) {
            (0, 0) => None,
            (0, n) => Some(RateLimit::Iops(n)),
            (b, _) => {
                let min_bs = job.block_size[d].min();
                if job.rate_process == RateProcess::Poisson && b < min_bs {
                    return Err(job.option_error(
                        "rate",
                        format!(
                            "{b} bytes/s is less than one {min_bs}-byte I/O per second \
                             (fio: rate lower than supported)"
                        ),
                    ));
                }
                Some(RateLimit::Bytes(b))
            }
        };
    }
    let both_drawn = job.rw.is_mixed() && job.rwmixread > 0 && job.rwmixread < 100;
    if both_drawn && job.rate[0].is_some() != job.rate[1].is_some() {
        let (limited, free) = if job.rate[0].is_some() {
            ("reads", "writes")
        } else {
            ("writes", "reads")
        };
        return Err(job.option_error(
            key,
            format!(
                "a mixed job limits {limited} but not {free}: give both a rate (fio would run \
                 the unlimited {free} as fast as the device completes them, which ssdlab's \
                 request stream, generated ahead of the simulated clock, cannot follow)"
            ),
        ));
    }
    Ok(())
}

fn parse_bs(value: &str) -> Result<BlockSize, String> {
    parse_size_nonzero(value).map(BlockSize::Fixed)
}

fn parse_size_nonzero(value: &str) -> Result<u64, String> {
    let v = parse_size(value)?;
    if v == 0 {
        return Err(format!("expected a size above 0, found '{value}'"));
    }
    Ok(v)
}

fn parse_bssplit(value: &str) -> Result<BlockSize, String> {
    let mut entries: Vec<(u64, Option<u32>)> = Vec::new();
    for item in value.split(':') {
        let (size, pct) = match item.split_once('/') {
            Some((s, p)) => (s.trim(), p.trim()),
            None => (item.trim(), ""),
        };
        let size = parse_size_nonzero(size)
            .map_err(|e| format!("bssplit entry '{item}': {e} (expected 'size/percent')"))?;
        let pct = if pct.is_empty() {
            None
        } else {
            let p: u32 = pct.parse().map_err(|_| {
                format!("bssplit entry '{item}': expected a percentage from 0 to 100 after '/', found '{pct}'")
            })?;
            if p > 100 {
                return Err(format!("bssplit entry '{item}': percentage {p} above 100"));
            }
            Some(p)
        };
        entries.push((size, pct));
    }
    // fio shares what the given percentages leave among the entries without one.
    let given: u32 = entries.iter().filter_map(|e| e.1).sum();
    let unset = entries.iter().filter(|e| e.1.is_none()).count() as u32;
    if given > 100 || (unset == 0 && given != 100) {
        return Err(format!(
            "bssplit percentages must add up to 100, they add up to {given}"
        ));
    }
    let mut out = Vec::with_capacity(entries.len());
    let mut left = 100 - given;
    let mut remaining_unset = unset;
    for (size, pct) in entries {
        let p = match pct {
            Some(p) => p,
            None => {
                let share = left / remaining_unset;
                remaining_unset -= 1;
                left -= share;
                share
            }
        };
        if p > 0 {
            out.push((size, p));
        }
    }
    if out.is_empty() {
        return Err("bssplit gives every size 0 %".to_string());
    }
    Ok(BlockSize::Split(out))
}

fn parse_bsrange(value: &str) -> Result<BlockSize, String> {
    let Some((lo, hi)) = value.split_once('-') else {
        return Err(format!("expected 'min-max' (e.g. 4k-64k), found '{value}'"));
    };
    let min = parse_size_nonzero(lo.trim())?;
    let max = parse_size_nonzero(hi.trim())?;
    if max < min {
        return Err(format!("range '{value}' has its maximum below its minimum"));
    }
    Ok(BlockSize::Range { min, max })
}

/// A byte size the way fio reads it with `kb_base=1024`.
pub fn parse_size(value: &str) -> Result<u64, String> {
    let v = value.trim();
    let digits_end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, suffix) = v.split_at(digits_end);
    if num.is_empty() {
        return Err(format!(
            "expected a size like 4096, 4k, 1m, 2g, found '{value}'"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size '{value}' is too large"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        _ => {
            return Err(format!(
                "expected a size like 4096, 4k, 1m, 2g (suffixes k, m, g, t, p, base 1024), found '{value}'"
            ))
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size '{value}' overflows 64 bits"))
}

fn parse_extent(value: &str) -> Result<Extent, String> {
    if let Some(p) = value.strip_suffix('%') {
        let pct: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("expected a percentage like 50%, found '{value}'"))?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(format!("percentage must be from 0 to 100, found '{value}'"));
        }
        return Ok(Extent::Percent(pct));
    }
    parse_size(value).map(Extent::Bytes)
}

fn parse_uint(value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("expected a non-negative integer, found '{value}'"))
}

fn parse_percent(value: &str) -> Result<u8, String> {
    match value.trim().parse::<u8>() {
        Ok(p) if p <= 100 => Ok(p),
        _ => Err(format!(
            "expected a percentage from 0 to 100, found '{value}'"
        )),
    }
}

/// fio's `sync`: `none` or `0`, `sync` or `1`, `dsync` (booleans too, as older fio took them).
fn parse_sync(value: &str) -> Result<bool, String> {
    match value.trim() {
        "none" => Ok(false),
        "sync" | "dsync" => Ok(true),
        other => parse_bool(other)
            .map_err(|_| format!("expected none, sync or dsync (or 0 or 1), found '{value}'")),
    }
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value.trim() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!("expected a boolean (1 or 0), found '{value}'")),
    }
}

/// A duration in ns: seconds by default, or with a `us`/`ms`/`s`/`m`/`h`/`d` suffix.
pub fn parse_time_ns(value: &str) -> Result<u64, String> {
    parse_time_ns_in(value, 1_000_000_000)
}

/// [`parse_time_ns`] with a plain number in units of `ns_per_unit` (fio's think times are
/// microseconds).
fn parse_time_ns_in(value: &str, ns_per_unit: u64) -> Result<u64, String> {
    let v = value.trim();
    let digits_end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, suffix) = v.split_at(digits_end);
    let bad = || format!("expected a duration like 30, 30s, 500ms, 2m, found '{value}'");
    if num.is_empty() {
        return Err(bad());
    }
    let n: u64 = num.parse().map_err(|_| bad())?;
    let ns_per: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" => ns_per_unit,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return Err(bad()),
    };
    n.checked_mul(ns_per)
        .ok_or_else(|| format!("duration '{value}' overflows 64-bit ns"))
}

fn parse_distribution(value: &str) -> Result<DistributionSpec, String> {
    let (kind, param) = match value.split_once(':') {
        Some((k, p)) => (k.trim(), Some(p.trim())),
        None => (value.trim(), None),
    };
    let number = |what: &str| -> Result<f64, String> {
        let p = param.ok_or_else(|| format!("'{kind}' needs a parameter: '{kind}:{what}'"))?;
        if p.contains(':') {
            return Err(format!(
                "'{value}': a centre parameter ('{kind}:{what}:center') is not supported by ssdlab"
            ));
        }
        let p = p.strip_suffix('%').unwrap_or(p);
        p.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("'{value}': expected a number for {what}, found '{p}'"))
    };
    match kind {
        "random" if param.is_none() => Ok(DistributionSpec::Random),
        "zipf" => {
            let t = number("theta")?;
            if t <= 0.0 {
                return Err(format!("zipf theta must be above 0, found {t}"));
            }
            Ok(DistributionSpec::Zipf(t))
        }
        "pareto" => {
            let h = number("h")?;
            if !(h > 0.0 && h < 1.0) {
                return Err(format!("pareto h must be between 0 and 1 (exclusive), found {h}"));
            }
            Ok(DistributionSpec::Pareto(h))
        }
        "normal" | "gauss" => {
            let s = number("deviation%")?;
            if !(s > 0.0 && s <= 100.0) {
                return Err(format!("normal deviation must be above 0 and at most 100 (% of the range), found {s}"));
            }
            Ok(DistributionSpec::Normal(s))
        }
        _ => Err(format!(
            "'{value}' not supported by ssdlab (supported: random, zipf:theta, pareto:h, normal:dev%)"
        )),
    }
}

/// `read_group` takes what the hint vocabulary's `read_group` takes (a 64-bit integer), with
/// its message when it does not fit.
fn parse_read_group(value: &str) -> Result<u64, String> {
    let hint: ssdlab_core::request::Hint = format!("read_group={value}")
        .parse()
        .map_err(|e: ssdlab_core::hint::HintError| e.to_string())?;
    Ok(hint.read_group.expect("the one item given"))
}

/// fio's `write_hint` takes Linux write-life names (none, short, medium, long, extreme); the
/// core's hint vocabulary parses them, so a job accepts the spellings a trace or Python does.
fn parse_write_hint(value: &str) -> Result<WriteLife, String> {
    ssdlab_core::hint::parse_write_life(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> JobSpec {
        let f = parse_job_file(text, "job.fio").unwrap();
        assert_eq!(f.jobs.len(), 1);
        f.jobs.into_iter().next().unwrap()
    }

    fn err(text: &str) -> String {
        parse_job_file(text, "job.fio").unwrap_err().to_string()
    }

    #[test]
    fn sizes_parse_like_fio() {
        for (s, v) in [
            ("4096", 4096),
            ("4k", 4096),
            ("4K", 4096),
            ("4KiB", 4096),
            ("4kb", 4096),
            ("1m", 1 << 20),
            ("2g", 2 << 30),
            ("1t", 1 << 40),
            ("512b", 512),
        ] {
            assert_eq!(parse_size(s), Ok(v), "{s}");
        }
        assert!(parse_size("4q").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("20000000p").is_err());
    }

    #[test]
    fn times_parse_to_ns() {
        assert_eq!(parse_time_ns("30"), Ok(30_000_000_000));
        assert_eq!(parse_time_ns("500ms"), Ok(500_000_000));
        assert_eq!(parse_time_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_time_ns("10us"), Ok(10_000));
        assert!(parse_time_ns("1x").is_err());
    }

    #[test]
    fn global_inheritance_and_later_global_updates() {
        let f = parse_job_file(
            "[global]\nbs=8k\nrw = randwrite\n[a]\nsize=1m\n[global]\nbs=16k\n[b]\nrw=read\n",
            "j.fio",
        )
        .unwrap();
        assert_eq!(f.jobs.len(), 2);
        assert_eq!(f.jobs[0].block_size[1], BlockSize::Fixed(8192));
        assert_eq!(f.jobs[0].rw, RwMode::RandWrite);
        assert_eq!(f.jobs[0].size, Some(Extent::Bytes(1 << 20)));
        assert_eq!(f.jobs[1].block_size[0], BlockSize::Fixed(16384));
        assert_eq!(f.jobs[1].rw, RwMode::Read);
        assert_eq!(f.jobs[1].size, None);
        assert_eq!((f.jobs[0].index, f.jobs[1].index), (0, 1));
        assert_eq!(f.jobs[1].name, "b");
    }

    #[test]
    fn comments_bare_booleans_and_ignored_options() {
        let j = one(
            "; a comment\n# another\n[job1]\nioengine=libaio\ndirect=1\nfilename=/dev/nvme0n1\n\
             norandommap\nrw=randread ; trailing comment\ntime_based\nruntime=10s\nramp_time=1\n\
             group_reporting\n",
        );
        assert!(j.norandommap);
        assert!(j.time_based);
        assert_eq!(j.rw, RwMode::RandRead);
        assert_eq!(j.runtime_ns, Some(10_000_000_000));
        assert_eq!(j.ramp_time_ns, Some(1_000_000_000));
    }

    #[test]
    fn bs_per_direction() {
        let j = one("[j]\nbs=8k,32k\n");
        assert_eq!(
            j.block_size,
            [
                BlockSize::Fixed(8192),
                BlockSize::Fixed(32768),
                BlockSize::Fixed(32768)
            ]
        );
        let j = one("[j]\nbs=,8k,\n");
        assert_eq!(
            j.block_size,
            [
                BlockSize::Fixed(4096),
                BlockSize::Fixed(8192),
                BlockSize::Fixed(4096)
            ]
        );
    }

    #[test]
    fn bssplit_and_bsrange() {
        let j = one("[j]\nbssplit=4k/50:64k/40:1m/10\nbs=8k\n");
        assert_eq!(
            j.block_size[0],
            BlockSize::Split(vec![(4096, 50), (65536, 40), (1 << 20, 10)])
        );
        let j = one("[j]\nbssplit=4k/:8k/:16k/40\n");
        assert_eq!(
            j.block_size[1],
            BlockSize::Split(vec![(4096, 30), (8192, 30), (16384, 40)])
        );
        let j = one("[j]\nbsrange=4k-64k\n");
        assert_eq!(
            j.block_size[2],
            BlockSize::Range {
                min: 4096,
                max: 65536
            }
        );
        assert!(err("[j]\nbssplit=4k/50:8k/40\n").contains("add up to 100"));
        assert!(err("[j]\nbsrange=64k-4k\n").contains("below its minimum"));
    }

    #[test]
    fn distributions_and_hints() {
        assert_eq!(
            one("[j]\nrandom_distribution=zipf:1.2\n").random_distribution,
            DistributionSpec::Zipf(1.2)
        );
        assert_eq!(
            one("[j]\nrandom_distribution=pareto:0.3\n").random_distribution,
            DistributionSpec::Pareto(0.3)
        );
        assert_eq!(
            one("[j]\nrandom_distribution=normal:5\n").random_distribution,
            DistributionSpec::Normal(5.0)
        );
        assert!(
            err("[j]\nrandom_distribution=zoned:50/5:50/95\n").contains("not supported by ssdlab")
        );
        assert!(err("[j]\nrandom_distribution=pareto:1.5\n").contains("between 0 and 1"));
        assert_eq!(
            one("[j]\nwrite_hint=short\n").write_hint,
            Some(WriteLife::Short)
        );
        assert_eq!(one("[j]\nrwmixwrite=30\n").rwmixread, 70);
        assert_eq!(one("[j]\nread_group=7\n").read_group, Some(7));
        let msg = err("[j]\nread_group=18446744073709551616\n");
        assert!(msg.contains("read_group"), "{msg}");
    }

    #[test]
    fn errors_name_line_and_key() {
        assert_eq!(
            err("[global]\nbs=4k\n[j]\nbs=4q\n"),
            "job.fio:4: option 'bs': expected a size like 4096, 4k, 1m, 2g (suffixes k, m, g, t, p, base 1024), found '4q'"
        );
        let e = err("[j]\nfrobnicate=3\n");
        assert!(
            e.starts_with("job.fio:2: option 'frobnicate': unknown or unsupported"),
            "{e}"
        );
        let e = err("[j]\nrw=randread:8\n");
        assert!(
            e.starts_with("job.fio:2: option 'rw':") && e.contains("':8' suffix"),
            "{e}"
        );
        for bad in ["0", "1025", "two"] {
            let e = err(&format!("[j]\nnumjobs={bad}\n"));
            assert!(e.contains("job.fio:2: option 'numjobs'"), "{e}");
        }
        let e = err("[j]\nexitall\n");
        assert!(
            e.contains("job.fio:2: option 'exitall'") && e.contains("runtimes instead"),
            "{e}"
        );
        assert!(err("[j]\nverify=md5\n").contains("verification is not simulated"));
        assert!(err("[j]\nthinktime_iotime=1s\n").contains("supported: thinktime, "));
        assert!(err("bs=4k\n[j]\n").starts_with("job.fio:1:"));
        assert!(err("[global]\nbs=4k\n").contains("at least one job"));
        assert!(err("[j]\nbs\n").contains("expects a value"));
        assert!(err("[j]\ntime_based\n").contains("needs 'runtime'"));
        assert!(err("[j\n").starts_with("job.fio:1: expected a section header"));
    }

    #[test]
    fn offsets_and_percent_sizes() {
        let j =
            one("[j]\nsize=50%\noffset=1m\nio_size=10m\nnumber_ios=5\niodepth=32\nrandseed=7\n");
        assert_eq!(j.size, Some(Extent::Percent(50.0)));
        assert_eq!(j.offset, Extent::Bytes(1 << 20));
        assert_eq!(j.io_size, Some(10 << 20));
        assert_eq!(j.number_ios, Some(5));
        assert_eq!(j.iodepth, 32);
        assert_eq!(j.randseed, Some(7));
        assert_eq!(j.line_of("iodepth"), 6);
    }
}
