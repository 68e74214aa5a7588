//! The request generator of a fio job: a [`RequestSource`] that issues the job's I/Os.
//!
//! Everything a request needs is precomputed when the source is built (the region, the
//! alignment unit, cumulative block-size thresholds, the distribution's constants, the random
//! map), so that `next_request` is a handful of PRNG draws and integer operations with no
//! allocation: the simulator replays more than four million requests per second and the
//! generator must not be what limits it.
//!
//! **Semantics (as fio's, with the differences stated).**
//! - The region is `[offset, offset + size)` with `size` rounded down to a multiple of the
//!   *unit*, the smallest block size the job can issue; offsets are `offset + k·unit` (fio's
//!   default `blockalign` is the minimum block size). A random I/O that would cross the end of
//!   the region moves back to the last aligned offset where it fits (its length is kept); a
//!   sequential one is shortened to end there (the next pass starts at the region's start).
//! - Without `io_size`/`number_ios` a job transfers `size` bytes: one sequential pass, or
//!   `size/bs` random I/Os. `io_size` larger than `size` makes more passes (sequential offsets
//!   wrap to the region's start). `number_ios` stops after that many requests; without
//!   `io_size` it lifts the byte limit, with it the first limit reached ends the job.
//!   `time_based` jobs never end (the core stops them at `runtime_ns`); `number_ios` still caps
//!   them.
//! - `rw=rw`/`randrw` draw each I/O's direction independently: a read with probability
//!   `rwmixread` %. Sequential mixed jobs keep one position per direction, like fio's
//!   per-direction `last_pos`.
//! - Uniform random jobs use fio's *random map* unless `norandommap`: a bitmap of units, where a
//!   pick that lands on a used unit moves to the next free one (wrapping), so that one pass
//!   touches every unit exactly once; the map is cleared when full, which starts the next pass.
//!   The map is hierarchical (one summary bit per full 64-bit word, level above level, like
//!   fio's `axmap`), so finding the next free unit costs O(log₆₄ n) even on a nearly full map.
//!   Zipf, Pareto and normal jobs do not use the map (a map would flatten the skew they exist
//!   to create), i.e. they behave as if `norandommap` were set.
//! - Block sizes: `bs` fixed; `bssplit` chooses a size by its percentage; `bsrange` chooses a
//!   multiple of its minimum uniformly in `[min, max]`.
//! - Rate limits (`rate`, `rate_iops`, `rate_process`) give each request an arrival time, as
//!   fio spaces its submissions (see `pacing.rs`); they may switch a mixed job's I/O to the other
//!   direction (fio's `rate_ddir`), and otherwise leave the offsets and sizes as without them.
//! - Determinism: the PRNG is `Xoshiro256PlusPlus` seeded from SplitMix64 of
//!   `(randseed if set, else the run's seed) XOR (job index · odd constant)`; the same spec and
//!   seed give the same sequence, and two jobs of one file differ.

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::request::{Hint, HostRequest, Op, RequestSource, SourceError};

use super::pacing::Pacer;
use super::{BlockSize, JobSpec};
use crate::distribution::{splitmix64, uniform_below, OffsetDistribution};
use crate::error::WorkloadError;

const OPS: [Op; 3] = [Op::Read, Op::Write, Op::Trim];

/// The job's region and limits resolved against a device size.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    start: u64,
    unit: u64,
    nunits: u64,
    /// Directions the job issues (indices into [`OPS`]).
    directions: &'static [usize],
    sizes: [BlockSize; 3],
    bytes_limit: Option<u64>,
    count_limit: Option<u64>,
    time_based: bool,
}

impl Layout {
    pub(crate) fn resolve(job: &JobSpec, device_bytes: u64) -> Result<Layout, WorkloadError> {
        use super::RwMode::*;
        // fio's sub-job n starts at offset + n * offset_increment.
        let increment = job.offset_increment.resolve(device_bytes);
        let start = (increment as u128 * job.job_number as u128)
            .saturating_add(job.offset.resolve(device_bytes) as u128)
            .min(u64::MAX as u128) as u64;
        let offset_key = if increment > 0 && job.job_number > 0 {
            "offset_increment"
        } else {
            "offset"
        };
        if start >= device_bytes {
            return Err(job.option_error(
                offset_key,
                format!(
                    "offset {start} (job number {}) is at or past the end of the device \
                     ({device_bytes} bytes)",
                    job.job_number
                ),
            ));
        }
        let size = match job.size {
            Some(s) => s.resolve(device_bytes),
            None => device_bytes - start,
        };
        if start
            .checked_add(size)
            .map_or(true, |end| end > device_bytes)
        {
            let key = if offset_key == "offset" {
                "size"
            } else {
                offset_key
            };
            return Err(job.option_error(
                key,
                format!(
                    "offset + size = {start} + {size} exceeds the device's {device_bytes} logical \
                     bytes (job number {})",
                    job.job_number
                ),
            ));
        }
        let directions: &'static [usize] = match job.rw {
            Read | RandRead => &[0],
            Write | RandWrite => &[1],
            Trim | RandTrim => &[2],
            ReadWrite | RandRw => &[0, 1],
        };
        let unit = directions
            .iter()
            .map(|&d| job.block_size[d].min())
            .min()
            .unwrap_or(4096);
        let nunits = size / unit;
        if nunits == 0 {
            let key = if job.size.is_some() { "size" } else { "offset" };
            return Err(job.option_error(
                key,
                format!("the job's region of {size} bytes is smaller than its block size {unit}"),
            ));
        }
        let region = nunits * unit;
        let bytes_limit = if job.time_based {
            None
        } else {
            match (job.io_size, job.number_ios) {
                (Some(b), _) => Some(b),
                (None, Some(_)) => None,
                (None, None) => Some(region),
            }
        };
        Ok(Layout {
            start,
            unit,
            nunits,
            directions,
            sizes: job.block_size.clone(),
            bytes_limit,
            count_limit: job.number_ios,
            time_based: job.time_based,
        })
    }

    /// The requests the job issues, its flushes (`fsync`, `fdatasync`, `end_fsync`) included,
    /// when known.
    pub(crate) fn requests_with_flushes(&self, job: &JobSpec) -> Option<u64> {
        Some(self.periodic_flushes(job)? + job.ends_with_flush() as u64)
    }

    /// The requests of the job with its `fsync` / `fdatasync` flushes, when known.
    fn periodic_flushes(&self, job: &JobSpec) -> Option<u64> {
        let ios = self.request_count()?;
        let [a, b] = job.fsync_every;
        if a == 0 && b == 0 {
            return Some(ios);
        }
        // Only a job that writes alone knows how many writes it makes.
        if self.directions != [1] {
            return None;
        }
        // A flush follows each write due for one, but the last (the job ends with it).
        let writes = ios.saturating_sub(1);
        let due = |n: u64| writes.checked_div(n).unwrap_or(0);
        let both = if a == 0 || b == 0 { 0 } else { due(lcm(a, b)) };
        Some(ios + due(a) + due(b) - both)
    }

    pub(crate) fn request_count(&self) -> Option<u64> {
        if self.time_based {
            return None;
        }
        // A byte limit converts to a count only when every request has the same length
        // (no truncation happens then: the region is a multiple of the unit = that length).
        let fixed = {
            let mut it = self.directions.iter().map(|&d| &self.sizes[d]);
            match it.next() {
                Some(BlockSize::Fixed(b)) if it.all(|s| *s == BlockSize::Fixed(*b)) => Some(*b),
                _ => None,
            }
        };
        let by_bytes = match (self.bytes_limit, fixed) {
            (Some(limit), Some(b)) => Some(limit.div_ceil(b)),
            (Some(_), None) => None,
            (None, _) => Some(u64::MAX),
        };
        match (by_bytes, self.count_limit) {
            (Some(b), Some(c)) => Some(b.min(c)),
            (Some(b), None) if b != u64::MAX => Some(b),
            (None, Some(_)) | (Some(_), None) | (None, None) => None,
        }
    }
}

/// How one direction picks a request length.
#[derive(Debug, Clone)]
enum SizeTable {
    Fixed(u64),
    /// Cumulative thresholds out of 2^32 and their sizes.
    Split {
        thresholds: Box<[u64]>,
        sizes: Box<[u64]>,
    },
    /// `min · k` with `k` uniform in `[1, steps]`.
    Range {
        min: u64,
        steps: u64,
    },
}

impl SizeTable {
    fn new(bs: &BlockSize) -> SizeTable {
        match bs {
            BlockSize::Fixed(b) => SizeTable::Fixed(*b),
            BlockSize::Split(entries) => {
                let mut acc = 0u64;
                let mut thresholds = Vec::with_capacity(entries.len());
                for &(_, pct) in entries {
                    acc += pct as u64;
                    thresholds.push((acc << 32) / 100);
                }
                // The percentages sum to 100, so the last threshold is 2^32: every draw matches.
                SizeTable::Split {
                    thresholds: thresholds.into_boxed_slice(),
                    sizes: entries.iter().map(|e| e.0).collect(),
                }
            }
            BlockSize::Range { min, max } => SizeTable::Range {
                min: *min,
                steps: max / min,
            },
        }
    }

    #[inline]
    fn pick<R: RngCore>(&self, rng: &mut R) -> u64 {
        match self {
            SizeTable::Fixed(b) => *b,
            SizeTable::Split { thresholds, sizes } => {
                let r = rng.next_u32() as u64;
                let i = thresholds
                    .iter()
                    .position(|&t| r < t)
                    .unwrap_or(sizes.len() - 1);
                sizes[i]
            }
            SizeTable::Range { min, steps } => min * (1 + uniform_below(rng, *steps)),
        }
    }
}

/// fio's random map: which units the current pass has touched, with summary levels so that
/// the next free unit is found in O(levels).
#[derive(Debug, Clone)]
struct RandomMap {
    n: u64,
    /// `levels[0]` has one bit per unit; a bit of `levels[i + 1]` is set when the matching
    /// word of `levels[i]` is full. Bits past the end are kept set so that "full" is `!0`.
    levels: Vec<Vec<u64>>,
}

impl RandomMap {
    fn new(n: u64) -> RandomMap {
        let mut sizes = Vec::new();
        let mut bits = n;
        loop {
            let words = bits.div_ceil(64);
            sizes.push((bits, words));
            if words <= 1 {
                break;
            }
            bits = words;
        }
        let mut map = RandomMap {
            n,
            levels: sizes.iter().map(|&(_, w)| vec![0; w as usize]).collect(),
        };
        map.clear();
        map
    }

    fn clear(&mut self) {
        let mut bits = self.n;
        for level in &mut self.levels {
            level.fill(0);
            let words = level.len() as u64;
            let tail = bits % 64;
            if tail != 0 {
                level[(words - 1) as usize] = !0u64 << tail;
            }
            bits = words;
        }
    }

    #[inline]
    fn is_set(&self, i: u64) -> bool {
        self.levels[0][(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    #[inline]
    fn set(&mut self, i: u64) {
        let mut idx = i;
        for level in &mut self.levels {
            let w = (idx / 64) as usize;
            level[w] |= 1 << (idx % 64);
            if level[w] != !0 {
                break;
            }
            idx = w as u64;
        }
    }

    /// First clear bit of `level` at or after `start`.
    fn find(&self, level: usize, start: u64) -> Option<u64> {
        let words = &self.levels[level];
        let w = (start / 64) as usize;
        if w >= words.len() {
            return None;
        }
        let free = !words[w] & (!0u64 << (start % 64));
        if free != 0 {
            return Some(w as u64 * 64 + free.trailing_zeros() as u64);
        }
        if level + 1 == self.levels.len() {
            return None;
        }
        let next = self.find(level + 1, w as u64 + 1)?;
        Some(next * 64 + (!words[next as usize]).trailing_zeros() as u64)
    }

    /// The unit to use for a pick of `u`: `u` if free, else the next free one (wrapping); when
    /// the map is full the pass is over, so clear it and use `u`.
    #[inline]
    fn claim(&mut self, u: u64) -> u64 {
        if !self.is_set(u) {
            return u;
        }
        match self.find(0, u).or_else(|| self.find(0, 0)) {
            Some(i) => i,
            None => {
                self.clear();
                u
            }
        }
    }
}

/// A fio job's request stream. Build it with [`JobSpec::source`] or [`FioSource::new`].
#[derive(Debug, Clone)]
pub struct FioSource {
    rng: Xoshiro256PlusPlus,
    start: u64,
    end: u64,
    unit: u64,
    directions: &'static [usize],
    /// Read probability out of 2^32 for mixed jobs.
    read_threshold: u64,
    sizes: [SizeTable; 3],
    random: bool,
    dist: OffsetDistribution,
    map: Option<RandomMap>,
    seq_next: [u64; 3],
    bytes_limit: u64,
    count_limit: u64,
    bytes_done: u64,
    count: u64,
    write_hint: Hint,
    len_hint: Option<u64>,
    /// Arrival times of a rate-limited job.
    pacer: Option<Pacer>,
    /// `fsync` / `fdatasync` (0: none), the writes issued, and whether the last request
    /// issued was a write (a flush follows only a write, as in fio) and when it arrived.
    fsync_every: [u64; 2],
    /// [`JobSpec::ends_with_flush`].
    end_flush: bool,
    /// [`JobSpec::sync_writes`]: every write is a FUA write.
    sync_writes: bool,
    writes_issued: u64,
    last_write_arrival: Option<Option<u64>>,
}

impl FioSource {
    /// See [`JobSpec::source`].
    pub fn new(job: &JobSpec, device_bytes: u64, seed: u64) -> Result<FioSource, WorkloadError> {
        let layout = Layout::resolve(job, device_bytes)?;
        let mut state =
            job.randseed.unwrap_or(seed) ^ (job.index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(splitmix64(&mut state));
        let scatter_key = rng.next_u64();
        let pacer = Pacer::new(job, &mut state);
        let random = job.rw.is_random();
        let uniform = job.random_distribution.is_uniform();
        let dist = OffsetDistribution::new(job.random_distribution, layout.nunits, scatter_key);
        let map = (random && uniform && !job.norandommap).then(|| RandomMap::new(layout.nunits));
        let write_hint = Hint {
            write_life: job.write_hint,
            read_group: job.read_group,
            ..Hint::default()
        };
        let len_hint = layout.requests_with_flushes(job);
        Ok(FioSource {
            rng,
            start: layout.start,
            end: layout.start + layout.nunits * layout.unit,
            unit: layout.unit,
            directions: layout.directions,
            read_threshold: ((job.rwmixread as u64) << 32) / 100,
            sizes: [
                SizeTable::new(&layout.sizes[0]),
                SizeTable::new(&layout.sizes[1]),
                SizeTable::new(&layout.sizes[2]),
            ],
            random,
            dist,
            map,
            seq_next: [layout.start; 3],
            bytes_limit: layout.bytes_limit.unwrap_or(u64::MAX),
            count_limit: layout.count_limit.unwrap_or(u64::MAX),
            bytes_done: 0,
            count: 0,
            write_hint,
            len_hint,
            pacer,
            fsync_every: job.fsync_every,
            end_flush: job.ends_with_flush(),
            sync_writes: job.sync_writes,
            writes_issued: 0,
            last_write_arrival: None,
        })
    }

    /// The next request; the generator cannot fail once built.
    #[inline]
    pub fn next_host_request(&mut self) -> Option<HostRequest> {
        if self.bytes_done >= self.bytes_limit || self.count >= self.count_limit {
            return None;
        }
        if let Some(arrival_ns) = self.last_write_arrival.take() {
            let w = self.writes_issued;
            if self.fsync_every.iter().any(|&n| n > 0 && w % n == 0) {
                // Issued with the write it follows (a paced job's flush does not wait for the
                // rate: fio limits reads and writes, not syncs).
                return Some(HostRequest {
                    arrival_ns,
                    ..HostRequest::new(Op::Flush, 0, 0)
                });
            }
        }
        let d = if self.directions.len() == 1 {
            self.directions[0]
        } else if (self.rng.next_u32() as u64) < self.read_threshold {
            0
        } else {
            1
        };
        let (d, arrival_ns) = match &mut self.pacer {
            Some(pacer) => {
                let (d, at) = pacer.next(d);
                (d, Some(at))
            }
            None => (d, None),
        };
        let mut length = self.sizes[d].pick(&mut self.rng);
        let offset = if self.random {
            let pick = self.dist.sample(&mut self.rng);
            let unit_index = match &mut self.map {
                Some(map) => map.claim(pick),
                None => pick,
            };
            let mut offset = self.start + unit_index * self.unit;
            if offset + length > self.end {
                // Keep the chosen length (the block-size mix stays exact) and move the I/O back
                // to the last aligned position where it fits; only an I/O larger than the whole
                // region is shortened.
                length = length.min(self.end - self.start);
                offset = self.start + (self.end - length - self.start) / self.unit * self.unit;
            }
            if let Some(map) = &mut self.map {
                let first = (offset - self.start) / self.unit;
                let last = (first + length.div_ceil(self.unit)).min(map.n);
                for u in first..last {
                    map.set(u);
                }
            }
            offset
        } else {
            let mut offset = self.seq_next[d];
            if offset >= self.end {
                offset = self.start;
            }
            length = length.min(self.end - offset);
            self.seq_next[d] = offset + length;
            offset
        };
        self.bytes_done = self.bytes_done.saturating_add(length);
        self.count += 1;
        if let Some(pacer) = &mut self.pacer {
            pacer.issued(d, length);
        }
        let op = OPS[d];
        if op == Op::Write && self.fsync_every != [0, 0] {
            self.writes_issued += 1;
            self.last_write_arrival = Some(arrival_ns);
        }
        Some(HostRequest {
            arrival_ns,
            op,
            offset,
            length,
            hint: if op == Op::Write {
                self.write_hint
            } else {
                Hint::default()
            },
            fua: op == Op::Write && self.sync_writes,
        })
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    (a / x).saturating_mul(b)
}

impl RequestSource for FioSource {
    fn next_request(&mut self) -> Option<Result<HostRequest, SourceError>> {
        self.next_host_request().map(Ok)
    }

    fn len_hint(&self) -> Option<u64> {
        self.len_hint
    }

    fn ends_with_flush(&self) -> bool {
        self.end_flush
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_map_visits_every_unit_once_then_resets() {
        for n in [1u64, 63, 64, 65, 4096, 4097, 300_000] {
            let mut map = RandomMap::new(n);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(n);
            let mut seen = vec![false; n as usize];
            for _ in 0..n {
                let u = map.claim(uniform_below(&mut rng, n));
                assert!(!seen[u as usize], "unit {u} claimed twice (n={n})");
                seen[u as usize] = true;
                map.set(u);
            }
            assert!(
                map.find(0, 0).is_none(),
                "map must be full after a pass (n={n})"
            );
            let u = map.claim(0);
            assert_eq!(u, 0);
            assert!(
                !map.is_set(0) && !map.is_set(n - 1),
                "claim on a full map starts a new pass"
            );
        }
    }

    #[test]
    fn find_wraps_past_full_words() {
        let mut map = RandomMap::new(10_000);
        for u in 0..9_999 {
            map.set(u);
        }
        assert_eq!(map.claim(5), 9_999);
        map.set(9_999);
        map.levels[0][0] &= !1; // free unit 0 by hand
        map.levels[1][0] &= !1;
        map.levels[2][0] &= !1;
        assert_eq!(map.claim(9_000), 0);
    }

    #[test]
    fn split_table_respects_percentages() {
        let t = SizeTable::new(&BlockSize::Split(vec![
            (4096, 50),
            (65536, 40),
            (1 << 20, 10),
        ]));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut counts = [0u32; 3];
        for _ in 0..100_000 {
            match t.pick(&mut rng) {
                4096 => counts[0] += 1,
                65536 => counts[1] += 1,
                0x10_0000 => counts[2] += 1,
                other => panic!("unexpected size {other}"),
            }
        }
        assert!((counts[0] as i64 - 50_000).abs() < 1_000, "{counts:?}");
        assert!((counts[1] as i64 - 40_000).abs() < 1_000, "{counts:?}");
        assert!((counts[2] as i64 - 10_000).abs() < 1_000, "{counts:?}");
    }

    #[test]
    fn range_table_issues_multiples_of_min() {
        let t = SizeTable::new(&BlockSize::Range {
            min: 4096,
            max: 16384,
        });
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let mut seen = [false; 4];
        for _ in 0..1000 {
            let s = t.pick(&mut rng);
            assert!(s % 4096 == 0 && (4096..=16384).contains(&s));
            seen[(s / 4096 - 1) as usize] = true;
        }
        assert_eq!(seen, [true; 4]);
    }
}
