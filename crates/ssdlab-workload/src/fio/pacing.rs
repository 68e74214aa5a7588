//! Arrival times of a rate-limited fio job (`rate`, `rate_iops`, `rate_process`), as fio spaces
//! its submissions.
//!
//! fio keeps, per direction, the time its next I/O may be submitted (`rate_next_io_time`, from
//! `usec_for_io`): with `rate_process=linear`, the bytes issued so far over `rate` (or the
//! I/Os issued so far over `rate_iops`); with `poisson`, a running sum of exponential gaps whose
//! mean is one I/O at the rate (`rate` counted in I/Os of the smallest block size). Before
//! each I/O, `rate_ddir` lets the drawn direction go if it is due, else the other direction of
//! a mixed job if that one is due, else sleeps until the earlier of the two and takes that one.
//! Here the generator's clock stands for fio's: it is the previous request's arrival time, the
//! moment fio would decide the next one when a queue slot is free. When the device is slower
//! than the rate the core issues the late requests as slots free, as fio catches up.

use rand::SeedableRng;
use rand_distr::{Distribution, Exp1};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{JobSpec, RateLimit, RateProcess};
use crate::distribution::splitmix64;

const NS_PER_S: u128 = 1_000_000_000;

/// One direction's limit and what it has issued.
#[derive(Debug, Clone)]
struct Lane {
    limit: Option<RateLimit>,
    /// Mean gap between I/Os (Poisson), ns.
    mean_gap_ns: f64,
    bytes: u64,
    ios: u64,
    /// Poisson clock: the sum of the gaps drawn so far, ns.
    clock_ns: f64,
    /// Earliest arrival of this direction's next I/O.
    next_ns: u64,
}

/// The arrival-time generator of a rate-limited job.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    lanes: [Lane; 3],
    poisson: bool,
    /// Both reads and writes may be drawn: an I/O may switch direction.
    mixed: bool,
    /// The generator's clock: the arrival of the previous request.
    now_ns: u64,
    /// Exponential gaps; a stream of its own, so the job's offsets and sizes are the same
    /// with or without a rate.
    rng: Xoshiro256PlusPlus,
}

impl Pacer {
    /// The pacer of `job`, or None when no direction is limited. `state` is the job's seed
    /// state (SplitMix64), advanced here.
    pub(crate) fn new(job: &JobSpec, state: &mut u64) -> Option<Pacer> {
        if !job.is_rate_limited() {
            return None;
        }
        let lane = |d: usize| {
            let limit = job.rate[d];
            let per_s = match limit {
                Some(RateLimit::Iops(n)) => n as f64,
                Some(RateLimit::Bytes(b)) => (b / job.block_size[d].min().max(1)) as f64,
                None => 0.0,
            };
            Lane {
                limit,
                mean_gap_ns: if per_s > 0.0 { 1e9 / per_s } else { 0.0 },
                bytes: 0,
                ios: 0,
                clock_ns: 0.0,
                next_ns: 0,
            }
        };
        Some(Pacer {
            lanes: [lane(0), lane(1), lane(2)],
            poisson: job.rate_process == RateProcess::Poisson,
            mixed: job.rw.is_mixed() && job.rwmixread > 0 && job.rwmixread < 100,
            now_ns: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(splitmix64(state)),
        })
    }

    /// The direction and arrival time of the next I/O, whose direction the mix drew as
    /// `drawn` (fio's `rate_ddir`).
    #[inline]
    pub(crate) fn next(&mut self, drawn: usize) -> (usize, u64) {
        let now = self.now_ns;
        if self.lanes[drawn].next_ns <= now {
            return (drawn, now);
        }
        let mut d = drawn;
        if self.mixed {
            // Reads and writes are directions 0 and 1.
            let other = drawn ^ 1;
            if self.lanes[other].next_ns <= now {
                return (other, now);
            }
            if self.lanes[other].next_ns < self.lanes[drawn].next_ns {
                d = other;
            }
        }
        self.now_ns = self.lanes[d].next_ns;
        (d, self.now_ns)
    }

    /// An I/O of `length` bytes went in direction `d`: when the direction's next may go.
    #[inline]
    pub(crate) fn issued(&mut self, d: usize, length: u64) {
        let lane = &mut self.lanes[d];
        lane.bytes += length;
        lane.ios += 1;
        lane.next_ns = match lane.limit {
            None => 0,
            Some(_) if self.poisson => {
                let gap: f64 = Exp1.sample(&mut self.rng);
                lane.clock_ns += lane.mean_gap_ns * gap;
                lane.clock_ns as u64
            }
            Some(RateLimit::Bytes(b)) => (lane.bytes as u128 * NS_PER_S / b as u128) as u64,
            Some(RateLimit::Iops(n)) => (lane.ios as u128 * NS_PER_S / n as u128) as u64,
        };
    }
}
