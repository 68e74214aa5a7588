//! Statistics: per-job latency and throughput in fio's JSON layout, device counters, the
//! per-interval time series and the optional per-request log.
//!
//! Latency means and standard deviations are computed from exact integer sums; percentiles come
//! from an HDR histogram with three significant digits (fio's own percentiles are bucketed too).

mod report;

pub use report::{job_json, ssd_json, SeaReportInputs, SsdReportInputs};

use crate::request::Op;
use hdrhistogram::Histogram;
use serde::Serialize;

/// fio's default percentile list (`"%f"` keys in its JSON).
pub const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// Min, max, mean and standard deviation of a latency, optionally with a histogram.
#[derive(Debug, Clone)]
pub struct LatencyStats {
    pub n: u64,
    pub min: u64,
    pub max: u64,
    sum: u128,
    sum_squares: u128,
    histogram: Option<Histogram<u64>>,
}

impl LatencyStats {
    pub fn new(with_histogram: bool) -> Self {
        LatencyStats {
            n: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            sum_squares: 0,
            // From 1 ns at 3 significant digits, its buckets allocated as values reach them:
            // up to 3 ms, 104 KB; up to 3 hours, 280 KB (a job's three directions 0.8 MB,
            // which made a group of 1,024 jobs take a gigabyte); none recorded, 16 KB.
            histogram: with_histogram.then(|| Histogram::new(3).expect("valid digits")),
        }
    }

    #[inline]
    pub fn record(&mut self, value: u64) {
        self.n += 1;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.sum += value as u128;
        self.sum_squares += value as u128 * value as u128;
        if let Some(h) = &mut self.histogram {
            // It grows to any u64; only the room to count 2^64 values could fail.
            let _ = h.record(value.max(1));
        }
    }

    /// Add another set of samples (histograms merge when both have one).
    pub fn merge(&mut self, other: &LatencyStats) {
        if other.n == 0 {
            return;
        }
        self.n += other.n;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
        if let (Some(mine), Some(theirs)) = (&mut self.histogram, &other.histogram) {
            // Same lowest value and digits on both sides; `mine` grows to `theirs` if need be.
            let _ = mine.add(theirs);
        }
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// Sample standard deviation, as fio reports it.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as f64;
        let mean = self.sum as f64 / n;
        let var = (self.sum_squares as f64 - n * mean * mean) / (n - 1.0);
        var.max(0.0).sqrt()
    }

    pub fn percentile(&self, p: f64) -> u64 {
        match &self.histogram {
            Some(h) if self.n > 0 => h.value_at_quantile(p / 100.0).min(self.max).max(self.min),
            _ => 0,
        }
    }

    pub fn has_histogram(&self) -> bool {
        self.histogram.is_some()
    }
}

/// Count, mean, extremes and percentiles (two significant digits: 1 % resolution) of the
/// queueing / service split recorded on every completion, at a fraction of the cost of an HDR
/// histogram's recording: bucket counts are kept directly and turned into an HDR histogram
/// (with the same buckets, so the same percentiles) only when a report asks.
#[derive(Debug, Clone)]
pub struct SplitStats {
    /// Count, extremes and mean (without a histogram of its own).
    pub moments: LatencyStats,
    /// Counts per bucket of an HDR histogram of 1 ns .. ~3 hours at two significant digits:
    /// 256 unit buckets, then 128 per power of two; only up to the highest bucket recorded.
    counts: Vec<u64>,
}

impl SplitStats {
    const SIGNIFICANT_DIGITS: u8 = 2;
    const HIGHEST_NS: u64 = 10_000_000_000_000;
    /// The buckets of that histogram (its `distinct_values`), and the bucket of its highest
    /// trackable value, where values past the last bucket go (as `saturating_record` puts
    /// them); a test checks both against the histogram.
    const BUCKETS: usize = 4864;
    const CLAMP_INDEX: usize = 4753;

    pub fn new() -> Self {
        SplitStats {
            moments: LatencyStats::new(false),
            counts: Vec::new(),
        }
    }

    fn empty_histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, Self::HIGHEST_NS, Self::SIGNIFICANT_DIGITS)
            .expect("valid bounds")
    }

    /// Make room for bucket `index` (a value past the last bucket goes to `CLAMP_INDEX`);
    /// returns the bucket to count in.
    #[cold]
    fn grow_to(&mut self, index: usize) -> usize {
        let index = if index >= Self::BUCKETS {
            Self::CLAMP_INDEX
        } else {
            index
        };
        if index >= self.counts.len() {
            self.counts.resize(index + 1, 0);
        }
        index
    }

    /// The HDR bucket of `value` (at least 1) for unit 1 and two significant digits: 256
    /// sub-buckets (sub-bucket magnitude 8), as `Histogram::index_for` computes it.
    #[inline]
    fn index_of(value: u64) -> usize {
        let bucket = 56 - (value | 255).leading_zeros();
        let sub = (value >> bucket) as usize;
        ((bucket as usize + 1) << 7) + sub - 128
    }

    /// The lowest value of bucket `index` (which [`SplitStats::index_of`] maps back to it).
    fn value_of(index: usize) -> u64 {
        if index < 256 {
            index as u64
        } else {
            let bucket = (index >> 7) - 1;
            (((index & 127) + 128) as u64) << bucket
        }
    }

    #[inline]
    pub fn record(&mut self, value: u64) {
        self.moments.record(value);
        let mut index = Self::index_of(value.max(1));
        if index >= self.counts.len() {
            index = self.grow_to(index);
        }
        self.counts[index] += 1;
    }

    /// Add another set of samples.
    pub fn merge(&mut self, other: &SplitStats) {
        self.moments.merge(&other.moments);
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
    }

    /// Percentiles `ps` (0..=100) as [`LatencyStats::percentile`] gives them, clamped to the
    /// exact extremes; 0 when nothing was recorded.
    pub fn percentiles<const N: usize>(&self, ps: [f64; N]) -> [u64; N] {
        let m = &self.moments;
        if m.n == 0 {
            return [0; N];
        }
        let mut h = Self::empty_histogram();
        for (index, &count) in self.counts.iter().enumerate() {
            if count > 0 {
                h.saturating_record_n(Self::value_of(index), count);
            }
        }
        ps.map(|p| h.value_at_quantile(p / 100.0).min(m.max).max(m.min))
    }
}

impl Default for SplitStats {
    fn default() -> Self {
        Self::new()
    }
}

/// One direction (read, write or trim) of a job.
#[derive(Debug, Clone)]
pub struct OpStats {
    pub ios: u64,
    pub bytes: u64,
    /// Submission latency: waiting for a free queue slot.
    pub slat: LatencyStats,
    /// Completion latency: from issue to completion.
    pub clat: LatencyStats,
    /// Total latency: arrival to completion.
    pub lat: LatencyStats,
    /// The part of `clat` spent waiting in die queues, and the rest (service).
    pub queue: SplitStats,
    pub service: SplitStats,
    pub errors: u64,
}

impl OpStats {
    pub fn new() -> Self {
        OpStats {
            ios: 0,
            bytes: 0,
            slat: LatencyStats::new(false),
            clat: LatencyStats::new(true),
            lat: LatencyStats::new(false),
            queue: SplitStats::new(),
            service: SplitStats::new(),
            errors: 0,
        }
    }

    /// Add another job's figures of the same direction (fio's `group_reporting`).
    pub fn merge(&mut self, other: &OpStats) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.slat.merge(&other.slat);
        self.clat.merge(&other.clat);
        self.lat.merge(&other.lat);
        self.queue.merge(&other.queue);
        self.service.merge(&other.service);
        self.errors += other.errors;
    }
}

impl Default for OpStats {
    fn default() -> Self {
        Self::new()
    }
}

/// What one job measured.
#[derive(Debug, Clone)]
pub struct JobStats {
    pub name: String,
    pub read: OpStats,
    pub write: OpStats,
    pub trim: OpStats,
    pub first_issue_ns: Option<u64>,
    pub last_complete_ns: u64,
    /// Flushes (fio's `sync` direction): how many were issued as the job's I/O, and the
    /// completion latency of every flush, from issue (a closing `end_fsync` flush included, as
    /// fio counts it). A split histogram: nothing allocated for the jobs that issue none.
    pub sync_ios: u64,
    pub sync: SplitStats,
}

impl JobStats {
    pub fn new(name: &str) -> Self {
        JobStats {
            name: name.to_string(),
            read: OpStats::new(),
            write: OpStats::new(),
            trim: OpStats::new(),
            first_issue_ns: None,
            last_complete_ns: 0,
            sync_ios: 0,
            sync: SplitStats::new(),
        }
    }

    pub fn runtime_ns(&self) -> u64 {
        self.first_issue_ns
            .map_or(0, |start| self.last_complete_ns.saturating_sub(start))
    }

    /// Take in another job's figures, as fio's `group_reporting` reports jobs together: counts
    /// and latency samples add up, and the runtime spans both. The name stays this job's.
    pub fn merge(&mut self, other: &JobStats) {
        self.read.merge(&other.read);
        self.write.merge(&other.write);
        self.trim.merge(&other.trim);
        self.first_issue_ns = match (self.first_issue_ns, other.first_issue_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_complete_ns = self.last_complete_ns.max(other.last_complete_ns);
        self.sync_ios += other.sync_ios;
        self.sync.merge(&other.sync);
    }
}

/// Flash-level counters of the device (the FTL's own counters live in the FTL).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FlashCounters {
    pub array_reads: u64,
    pub melded_reads: u64,
    pub programs: u64,
    pub erases: u64,
    pub bytes_transferred: u64,
    pub codewords_decoded: u64,
    pub codewords_encoded: u64,
    pub corrected_codewords: u64,
    pub uncorrectable_pages: u64,
    pub read_retries: u64,
    pub multi_plane_ops: u64,
    pub rmw_reads: u64,
    /// Host-read mapping units served from the controller without an array read: staged in a
    /// page still filling, or in a page whose program is not done.
    pub controller_reads: u64,
    /// GC moves whose source page's host program was not done (a victim taken soon after it
    /// filled): its data came from the controller, without a read (event engine).
    pub gc_controller_reads: u64,
    /// Programs (and erases) that waited for their block's previous erase: a plane with no
    /// erased block left opened a collected victim whose erase had not run (event engine).
    pub programs_awaiting_erase: u64,
    /// Out-of-band area reads (GC reads each moved page's logical address) and writes (every
    /// program writes the page's logical address with it).
    pub oob_reads: u64,
    pub oob_writes: u64,
    /// Array and bus time of GC work, and the part of it done in background (idle) steps.
    pub gc_busy_ns: u64,
    pub gc_background_ns: u64,
    /// Program and erase suspensions for reads.
    pub suspensions: u64,
}

/// What the device reports to the time series when an interval closes: cumulative host bytes
/// written, flash pages programmed, GC pages programmed and erases (each row gets the deltas),
/// then the SEA `dyn` and `stat` blocks in use (gauges: each row gets the value at its end).
pub type SeriesCounters = [u64; 6];

/// One interval of the time series.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IntervalRow {
    pub start_ns: u64,
    /// Width of this row: the configured interval, doubled each time the series was coarsened.
    pub interval_ns: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_lat_mean_ns: f64,
    pub write_lat_mean_ns: f64,
    pub host_bytes_written: u64,
    pub flash_pages_programmed: u64,
    pub gc_pages_programmed: u64,
    pub erases: u64,
    /// Media bytes programmed over host bytes written in this interval (0 without writes).
    pub waf: f64,
    /// SEA-SSD segment sizes at the end of the interval: blocks in use of the `dyn` handle and
    /// of the others (`stat`).
    pub dyn_blocks: u64,
    pub stat_blocks: u64,
    #[serde(skip)]
    page_bytes: u64,
    #[serde(skip)]
    read_lat_sum: u128,
    #[serde(skip)]
    write_lat_sum: u128,
}

impl IntervalRow {
    fn is_empty(&self) -> bool {
        self.reads + self.writes == 0
            && self.host_bytes_written
                + self.flash_pages_programmed
                + self.gc_pages_programmed
                + self.erases
                == 0
    }

    /// Add `other`'s counts to this row (adjacent rows merged into one wider interval).
    fn absorb(&mut self, other: &IntervalRow) {
        self.reads += other.reads;
        self.writes += other.writes;
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
        self.read_lat_sum += other.read_lat_sum;
        self.write_lat_sum += other.write_lat_sum;
        self.host_bytes_written += other.host_bytes_written;
        self.flash_pages_programmed += other.flash_pages_programmed;
        self.gc_pages_programmed += other.gc_pages_programmed;
        self.erases += other.erases;
        // Gauges: the later row's end is the merged row's end.
        self.dyn_blocks = other.dyn_blocks;
        self.stat_blocks = other.stat_blocks;
        self.update_means();
    }

    fn update_means(&mut self) {
        if self.reads > 0 {
            self.read_lat_mean_ns = self.read_lat_sum as f64 / self.reads as f64;
        }
        if self.writes > 0 {
            self.write_lat_mean_ns = self.write_lat_sum as f64 / self.writes as f64;
        }
        if self.host_bytes_written > 0 {
            self.waf = (self.flash_pages_programmed * self.page_bytes) as f64
                / self.host_bytes_written as f64;
        }
    }
}

/// Per-interval rows, filled as completions advance the clock, in bounded memory.
///
/// Only intervals in which something happened (a completion, or device work such as GC) get a
/// row; an idle stretch costs nothing, however long, because a completion after it starts its
/// interval directly instead of stepping through the empty ones. The rows never exceed a
/// budget ([`TimeSeries::DEFAULT_MAX_ROWS`]): when it is reached the interval doubles and
/// adjacent rows that now share an interval merge (counts and sums add, means are recomputed),
/// so a long run keeps its whole span at a coarser resolution. Every row is aligned to a
/// multiple of its own `interval_ns`; rows are in time order.
#[derive(Debug, Clone, Default)]
pub struct TimeSeries {
    /// The configured width, restored by [`TimeSeries::reset`].
    base_interval_ns: u64,
    /// The width now (the configured one times a power of two).
    interval_ns: u64,
    max_rows: usize,
    pub rows: Vec<IntervalRow>,
    current: IntervalRow,
    /// FTL counters when the current row was last closed: the deltas since then belong to it.
    baseline: SeriesCounters,
    /// Bytes of a flash page (for each row's write amplification).
    page_bytes: u64,
}

impl TimeSeries {
    /// Rows kept before the series halves its resolution: about 0.5 MB.
    pub const DEFAULT_MAX_ROWS: usize = 4096;

    pub fn new(interval_ns: u64) -> Self {
        Self::with_max_rows(interval_ns, Self::DEFAULT_MAX_ROWS)
    }

    /// A series that coarsens when it holds `max_rows` rows (at least 2).
    pub fn with_max_rows(interval_ns: u64, max_rows: usize) -> Self {
        TimeSeries {
            base_interval_ns: interval_ns,
            interval_ns,
            max_rows: max_rows.max(2),
            current: IntervalRow {
                interval_ns,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The flash page size each row's write amplification counts programmed pages in.
    pub fn with_page_bytes(mut self, page_bytes: u32) -> Self {
        self.page_bytes = page_bytes as u64;
        self
    }

    pub fn enabled(&self) -> bool {
        self.interval_ns > 0
    }

    /// The width of an interval now (it doubles each time the row budget is reached).
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Account a completion of `op` at `time_ns`; `counters` gives (host pages, flash pages, gc
    /// moves, erases) now, so that device work lands in the interval in which it happened. It is
    /// only called when an interval closes, which keeps the per-completion cost to a comparison.
    /// Rows count reads and writes: a trim's range is not written bytes, nor is a flush's wait a
    /// write's latency (their device work still lands in the counters).
    #[inline]
    pub fn record(
        &mut self,
        time_ns: u64,
        op: Op,
        bytes: u64,
        latency_ns: u64,
        counters: impl FnOnce() -> SeriesCounters,
    ) {
        if self.interval_ns == 0 {
            return;
        }
        if time_ns >= self.current.start_ns.saturating_add(self.interval_ns) {
            self.close(counters());
            // Straight to the interval of `time_ns`: the empty ones in between get no row.
            self.current.start_ns = time_ns - time_ns % self.interval_ns;
        }
        let row = &mut self.current;
        match op {
            Op::Read => {
                row.reads += 1;
                row.read_bytes += bytes;
                row.read_lat_sum += latency_ns as u128;
            }
            Op::Write => {
                row.writes += 1;
                row.write_bytes += bytes;
                row.write_lat_sum += latency_ns as u128;
            }
            Op::Trim | Op::Flush => {}
        }
    }

    /// End the current row with the counters now; keep it if anything happened in it. A row
    /// for an interval that already has one (after [`TimeSeries::flush`]) merges into it.
    fn close(&mut self, counters: SeriesCounters) {
        let start_ns = self.current.start_ns;
        let mut row = std::mem::replace(
            &mut self.current,
            IntervalRow {
                start_ns,
                interval_ns: self.interval_ns,
                ..Default::default()
            },
        );
        row.host_bytes_written += counters[0] - self.baseline[0];
        row.flash_pages_programmed += counters[1] - self.baseline[1];
        row.gc_pages_programmed += counters[2] - self.baseline[2];
        row.erases += counters[3] - self.baseline[3];
        row.dyn_blocks = counters[4];
        row.stat_blocks = counters[5];
        self.baseline = counters;
        if row.is_empty() {
            return;
        }
        row.interval_ns = self.interval_ns;
        row.page_bytes = self.page_bytes;
        row.update_means();
        match self.rows.last_mut() {
            Some(last) if last.start_ns == row.start_ns => last.absorb(&row),
            _ => self.rows.push(row),
        }
        while self.rows.len() >= self.max_rows && self.coarsen() {}
    }

    /// Double the interval and merge the rows that fall into one; false when the interval
    /// cannot grow any more (then every row already shares one of two intervals).
    fn coarsen(&mut self) -> bool {
        let Some(wider) = self.interval_ns.checked_mul(2) else {
            return false;
        };
        self.interval_ns = wider;
        let mut kept = 0;
        for i in 0..self.rows.len() {
            let mut row = std::mem::take(&mut self.rows[i]);
            row.start_ns -= row.start_ns % wider;
            row.interval_ns = wider;
            if kept > 0 && self.rows[kept - 1].start_ns == row.start_ns {
                self.rows[kept - 1].absorb(&row);
            } else {
                self.rows[kept] = row;
                kept += 1;
            }
        }
        self.rows.truncate(kept);
        self.current.start_ns -= self.current.start_ns % wider;
        self.current.interval_ns = wider;
        true
    }

    /// Close the partial interval so that the rows cover everything recorded.
    pub fn flush(&mut self, counters: SeriesCounters) {
        if self.interval_ns > 0 {
            self.close(counters);
        }
    }

    pub fn reset(&mut self) {
        *self = TimeSeries::with_max_rows(self.base_interval_ns, self.max_rows)
            .with_page_bytes(self.page_bytes as u32);
    }
}

/// One row of the per-request log (the NoFTL emulator's statistics log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RequestLogRow {
    pub request: u64,
    pub op: &'static str,
    pub logical_sector: u64,
    pub size_bytes: u64,
    pub duration_ns: u64,
    pub flash_reads: u32,
    pub flash_writes: u32,
    pub oob_reads: u32,
    pub oob_writes: u32,
    pub erases: u32,
    /// First physical sector touched (512 B units), or -1 when no flash page was touched.
    pub physical_sector: i64,
    /// Array and bus time spent on this request's flash commands.
    pub flash_duration_ns: u64,
    /// The part of `duration_ns` spent waiting in die queues (the longest wait of one of its
    /// flash operations for its die), and the rest: `queue_ns + service_ns = duration_ns`,
    /// the split the job's `ssd_job` section sums per direction.
    pub queue_ns: u64,
    pub service_ns: u64,
    /// A cached-mapping FTL's (DFTL) work for the request: translation pages read and
    /// written (also counted in `flash_reads`/`flash_writes`), mapping-cache hits and misses,
    /// and device-CPU time; 0 under an FTL that keeps every mapping in RAM.
    pub translation_reads: u32,
    pub translation_writes: u32,
    pub mapping_hits: u32,
    pub mapping_misses: u32,
    pub device_cpu_ns: u64,
}

impl RequestLogRow {
    pub const CSV_HEADER: &'static str = "request,op,logical_sector,size_bytes,duration_ns,flash_reads,flash_writes,oob_reads,oob_writes,erases,physical_sector,flash_duration_ns,queue_ns,service_ns,translation_reads,translation_writes,mapping_hits,mapping_misses,device_cpu_ns";

    /// Set the duration (issue to completion) and its split into queueing time (`queue_ns`,
    /// capped at the duration) and service time.
    pub fn set_duration(&mut self, duration_ns: u64, queue_ns: u64) {
        self.duration_ns = duration_ns;
        self.queue_ns = queue_ns.min(duration_ns);
        self.service_ns = duration_ns - self.queue_ns;
    }

    pub fn csv_line(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.request,
            self.op,
            self.logical_sector,
            self.size_bytes,
            self.duration_ns,
            self.flash_reads,
            self.flash_writes,
            self.oob_reads,
            self.oob_writes,
            self.erases,
            self.physical_sector,
            self.flash_duration_ns,
            self.queue_ns,
            self.service_ns,
            self.translation_reads,
            self.translation_writes,
            self.mapping_hits,
            self.mapping_misses,
            self.device_cpu_ns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_moments_are_exact() {
        let mut s = LatencyStats::new(true);
        for v in [10, 20, 30, 40] {
            s.record(v);
        }
        assert_eq!((s.min, s.max, s.n), (10, 40, 4));
        assert_eq!(s.mean(), 25.0);
        assert!((s.stddev() - 12.909944).abs() < 1e-5);
        assert_eq!(s.percentile(50.0), 20);
        assert_eq!(s.percentile(99.99), 40);
    }

    #[test]
    fn merged_latencies_equal_one_recording() {
        let (mut a, mut b, mut all) = (
            LatencyStats::new(true),
            LatencyStats::new(true),
            LatencyStats::new(true),
        );
        for v in 1..=100u64 {
            if v % 3 == 0 {
                a.record(v * 7)
            } else {
                b.record(v * 7)
            }
            all.record(v * 7);
        }
        a.merge(&b);
        assert_eq!((a.n, a.min, a.max), (all.n, all.min, all.max));
        assert_eq!(a.mean(), all.mean());
        assert_eq!(a.stddev(), all.stddev());
        assert_eq!(a.percentile(99.0), all.percentile(99.0));
        a.merge(&LatencyStats::new(true));
        assert_eq!(a.n, 100);
    }

    /// Latencies of every magnitude from 1 ns to hours, bucket edges, and values past a
    /// histogram's range of 1 ns .. `HIGHEST_NS` (there they are clamped to its highest).
    fn every_magnitude() -> Vec<u64> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut values = vec![0, 1, 2, 127, 128, 255, 256, 257, 511, 512, 1_000_000];
        values.extend([9_999_999_999_999, 10_000_000_000_000, 1 << 50, 1 << 60]);
        values.extend([(1 << 44) - 1, 1 << 44]);
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64).max(i as u64 % 20 + 20));
        }
        values
    }

    #[test]
    fn growing_latency_histograms_give_the_full_histograms_percentiles() {
        // A histogram of every bucket to ~3 hours (to 2^44 - 1 ns), as the stats once kept.
        let mut full = Histogram::<u64>::new_with_bounds(1, 10_000_000_000_000, 3).unwrap();
        let top = full.iter_all().last().unwrap().value_iterated_to();
        assert_eq!(top, (1 << 44) - 1);
        let mut values = every_magnitude();
        values.retain(|&v| v <= top);
        let mut grown = LatencyStats::new(true);
        // Short-latency and long-latency halves, merged both ways.
        let (mut small, mut large) = (LatencyStats::new(true), LatencyStats::new(true));
        let mut small_first = LatencyStats::new(true);
        for (i, &v) in values.iter().enumerate() {
            full.saturating_record(v.max(1));
            grown.record(v);
            if v < 1 << 30 {
                small.record(v)
            } else {
                large.record(v)
            }
            let checkpoint = [1, 3, 14, 17, 200, values.len() - 1].contains(&i);
            if !checkpoint {
                continue;
            }
            let (min, max) = (grown.min, grown.max);
            let expected =
                FIO_PERCENTILES.map(|p| full.value_at_quantile(p / 100.0).min(max).max(min));
            assert_eq!(
                FIO_PERCENTILES.map(|p| grown.percentile(p)),
                expected,
                "{i}"
            );
            let mut merged = large.clone();
            merged.merge(&small);
            small_first = small.clone();
            small_first.merge(&large);
            assert_eq!(
                FIO_PERCENTILES.map(|p| merged.percentile(p)),
                expected,
                "{i}"
            );
            assert_eq!(
                FIO_PERCENTILES.map(|p| small_first.percentile(p)),
                expected,
                "{i}"
            );
        }
        assert_eq!(small_first.n, values.len() as u64);
        // Past that, values count in buckets of their own, not clamped to the highest.
        let mut long = LatencyStats::new(true);
        for v in [1 << 50, 1 << 50, 1 << 60] {
            long.record(v);
        }
        let p50 = long.percentile(50.0);
        assert!(
            p50 >= 1 << 50 && p50 - (1 << 50) <= (1 << 50) / 1000,
            "{p50}"
        );
        assert_eq!(long.percentile(99.0), 1 << 60);
        // Short latencies keep the histogram small: up to 3 ms, 13 k buckets, not 35 k; a
        // direction without any, 2 k.
        let mut reads = LatencyStats::new(true);
        reads.record(3_000_000);
        assert_eq!(
            reads.histogram.as_ref().unwrap().distinct_values(),
            13 * 1024
        );
        let unused = LatencyStats::new(true);
        assert_eq!(
            unused.histogram.as_ref().unwrap().distinct_values(),
            2 * 1024
        );
    }

    #[test]
    fn split_stats_give_the_percentiles_of_a_two_digit_hdr_histogram() {
        let reference = |values: &[u64]| {
            let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000_000, 2).unwrap();
            for &v in values {
                h.saturating_record(v.max(1));
            }
            let (min, max) = (*values.iter().min().unwrap(), *values.iter().max().unwrap());
            [50.0, 99.0, 99.9].map(|p| h.value_at_quantile(p / 100.0).min(max).max(min))
        };
        let values = every_magnitude();
        for take in [1, 3, 12, 200, values.len()] {
            let mut s = SplitStats::new();
            for &v in &values[..take] {
                s.record(v);
            }
            assert_eq!(
                s.percentiles([50.0, 99.0, 99.9]),
                reference(&values[..take]),
                "{take}"
            );
            assert_eq!(s.moments.n, take as u64);
        }
        // The bucket constants are the histogram's.
        let full = SplitStats::empty_histogram();
        assert_eq!(SplitStats::BUCKETS, full.distinct_values());
        assert_eq!(SplitStats::CLAMP_INDEX, SplitStats::index_of(full.high()));
        // Each bucket's lowest value maps back to the bucket.
        for index in 0..SplitStats::BUCKETS {
            assert_eq!(
                SplitStats::index_of(SplitStats::value_of(index).max(1)),
                index.max(1)
            );
        }
        assert_eq!(SplitStats::new().percentiles([50.0]), [0]);
    }

    #[test]
    fn time_series_rows_cover_intervals_with_activity() {
        let mut ts = TimeSeries::new(100);
        ts.record(5, Op::Read, 4096, 10, || [0, 0, 0, 0, 0, 0]);
        ts.record(150, Op::Write, 4096, 30, || [1, 1, 0, 0, 0, 0]);
        ts.record(370, Op::Write, 4096, 50, || [3, 5, 2, 1, 7, 9]);
        ts.flush([3, 5, 2, 1, 8, 9]);
        // Segment sizes are gauges: each row has the value at its end.
        assert_eq!(
            ts.rows.iter().map(|r| r.dyn_blocks).collect::<Vec<_>>(),
            vec![0, 7, 8]
        );
        // The interval 200..300 saw nothing: it has no row.
        let starts: Vec<u64> = ts.rows.iter().map(|r| r.start_ns).collect();
        assert_eq!(starts, vec![0, 100, 300]);
        assert_eq!(ts.rows[0].reads, 1);
        assert_eq!(ts.rows[1].writes, 1);
        assert_eq!(ts.rows[0].host_bytes_written, 1);
        assert_eq!(ts.rows[1].host_bytes_written, 2);
        assert_eq!(ts.rows[2].write_lat_mean_ns, 50.0);
        assert_eq!(
            ts.rows
                .iter()
                .map(|r| r.flash_pages_programmed)
                .sum::<u64>(),
            5
        );
        // A completion after a flush, in the flushed interval, joins its row.
        ts.record(390, Op::Read, 4096, 20, || [3, 5, 2, 1, 0, 0]);
        ts.flush([3, 5, 2, 1, 0, 0]);
        assert_eq!(ts.rows.len(), 3);
        assert_eq!((ts.rows[2].reads, ts.rows[2].writes), (1, 1));
    }

    #[test]
    fn time_series_rows_count_reads_and_writes_only() {
        // A trim's range is not written bytes, and a flush's wait is not a write's latency.
        let mut ts = TimeSeries::new(100);
        ts.record(5, Op::Write, 4096, 10, || [0; 6]);
        ts.record(6, Op::Trim, 1 << 20, 1, || [0; 6]);
        ts.record(7, Op::Flush, 0, 900, || [0; 6]);
        ts.record(150, Op::Flush, 0, 700, || [1, 1, 0, 0, 0, 0]);
        ts.flush([1, 2, 0, 0, 0, 0]);
        let row = &ts.rows[0];
        assert_eq!((row.reads, row.writes, row.write_bytes), (0, 1, 4096));
        assert_eq!(row.write_lat_mean_ns, 10.0);
        // An interval with a flush alone counts no I/O, but keeps its row for the device
        // work done in it (the padded page it programmed).
        let flushed = &ts.rows[1];
        assert_eq!((flushed.reads, flushed.writes), (0, 0));
        assert_eq!(flushed.flash_pages_programmed, 1);
    }

    #[test]
    fn idle_time_costs_no_rows() {
        // Two completions a week apart at 10 ms intervals: two rows, not 60 million.
        let week_ns = 7 * 24 * 3600 * 1_000_000_000u64;
        let mut ts = TimeSeries::new(10_000_000);
        ts.record(1_000, Op::Write, 4096, 1_000, || [0; 6]);
        ts.record(week_ns, Op::Write, 4096, 1_000, || [1, 1, 0, 0, 0, 0]);
        ts.flush([2, 2, 0, 0, 0, 0]);
        assert_eq!(ts.rows.len(), 2);
        assert_eq!(ts.rows[1].start_ns, week_ns - week_ns % 10_000_000);
    }

    #[test]
    fn a_full_series_doubles_its_interval_and_keeps_every_count() {
        let mut ts = TimeSeries::with_max_rows(10, 64);
        let mut pages = 0u64;
        for t in 0..100_000u64 {
            pages += 1;
            ts.record(
                t,
                if t % 3 == 0 { Op::Read } else { Op::Write },
                512,
                t % 7,
                || [pages - 1, pages - 1, 0, 0, 0, 0],
            );
        }
        ts.flush([pages, pages, 0, 0, 0, 0]);
        assert!(ts.rows.len() < 64, "{} rows", ts.rows.len());
        let width = ts.interval_ns();
        // 100 000 ns in fewer than 64 rows: 10 ns doubled 8 times (39 rows of 2560 ns).
        assert_eq!(width, 2560);
        for pair in ts.rows.windows(2) {
            assert!(pair[0].start_ns < pair[1].start_ns);
        }
        for row in &ts.rows {
            assert_eq!(row.start_ns % row.interval_ns, 0);
        }
        let reads: u64 = ts.rows.iter().map(|r| r.reads).sum();
        let writes: u64 = ts.rows.iter().map(|r| r.writes).sum();
        let host: u64 = ts.rows.iter().map(|r| r.host_bytes_written).sum();
        assert_eq!((reads, writes, host), (33_334, 66_666, 100_000));
        // Means stay exact through merges: reads at t = 0, 3, 6, ... have latency t % 7.
        let sum: u64 = (0..100_000u64).filter(|t| t % 3 == 0).map(|t| t % 7).sum();
        let merged: f64 = ts
            .rows
            .iter()
            .map(|r| r.read_lat_mean_ns * r.reads as f64)
            .sum();
        assert!((merged - sum as f64).abs() < 1e-6 * sum as f64);
        ts.reset();
        assert_eq!((ts.rows.len(), ts.interval_ns()), (0, 10));
    }
}
