//! Random offset distributions of fio's `random_distribution` option.
//!
//! An [`OffsetDistribution`] draws a *unit index* in `[0, n)` (a unit is the job's alignment,
//! normally its block size); the generator turns it into a byte offset. Four shapes:
//!
//! - `random`: uniform, by a widening multiply of a 64-bit draw (Lemire's method without the
//!   rejection step: the bias is below `n / 2^64`, far under any measurable effect).
//! - `zipf:θ`: a Zipf rank `k ∈ [1, n]` with `P(k) ∝ k^-θ`, sampled exactly by
//!   rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion to generate
//!   variates from monotone discrete distributions", ACM TOMACS 6(3), 1996), the algorithm of
//!   `rand_distr::Zipf` and Apache Commons' `RejectionInversionZipfSampler`. It is exact for
//!   every θ > 0, including θ = 1 and θ > 1, unlike fio's `zipf_next`, which uses Gray et al.'s
//!   approximation (fio also rejects θ = 1; we accept it).
//! - `pareto:h`: fio's Pareto, `rank = floor((n - 1) · u^(ln h / ln(1 - h)))` for a uniform
//!   `u ∈ [0, 1)` (fio `lib/zipf.c: pareto_next`), so that a fraction `1 - h` of the accesses
//!   goes to the hottest fraction `h` of the units (h = 0.2 is the 80/20 rule).
//! - `normal:σ`: Gaussian centred on the middle of the range with a standard deviation of σ %
//!   of the range (fio's "deviation as a percentage"), rounded and clamped to `[0, n)`. It is not
//!   scattered: the hot spot is the middle of the range, which is what users read from the
//!   option and what makes the shape visible in a heat map.
//!
//! **Scattering.** Zipf and Pareto ranks are mapped to units by a keyed *bijection* of
//! `[0, n)`: a 4-round Feistel network over the smallest power-of-four domain `2^(2b) ≥ n`,
//! with cycle walking (re-apply until the value falls below `n`; the domain is below `4n`, so
//! this averages under 4 rounds of the network). Like fio's `hash_u64(rank) % n + rand_off`,
//! hot ranks end up spread over the device instead of packed at its start; unlike fio's
//! hash-and-modulo, two ranks never collide on one unit, so the access frequencies of the
//! units are exactly the Zipf/Pareto probabilities. The key comes from the job's seed.

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

/// Which distribution a random job draws its offsets from (the parsed option).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DistributionSpec {
    /// `random`: uniform.
    Random,
    /// `zipf:θ` with θ > 0.
    Zipf(f64),
    /// `pareto:h` with 0 < h < 1.
    Pareto(f64),
    /// `normal:σ` with σ the standard deviation in percent of the range, 0 < σ ≤ 100.
    Normal(f64),
}

impl DistributionSpec {
    /// True when a pass over the range should visit each unit once (the random map applies).
    pub fn is_uniform(&self) -> bool {
        matches!(self, DistributionSpec::Random)
    }
}

/// A sampler of unit indices in `[0, n)`, with every constant precomputed.
#[derive(Debug, Clone)]
pub enum OffsetDistribution {
    Uniform {
        n: u64,
    },
    Zipf {
        sampler: ZipfSampler,
        scatter: Scatter,
    },
    Pareto {
        sampler: ParetoSampler,
        scatter: Scatter,
    },
    Normal {
        n: u64,
        center: f64,
        stddev: f64,
    },
}

impl OffsetDistribution {
    /// Build the sampler of `spec` over `n ≥ 1` units; `key` seeds the scattering bijection.
    pub fn new(spec: DistributionSpec, n: u64, key: u64) -> OffsetDistribution {
        assert!(n >= 1, "a distribution needs at least one unit");
        match spec {
            DistributionSpec::Random => OffsetDistribution::Uniform { n },
            DistributionSpec::Zipf(theta) => OffsetDistribution::Zipf {
                sampler: ZipfSampler::new(n, theta),
                scatter: Scatter::new(n, key),
            },
            DistributionSpec::Pareto(h) => OffsetDistribution::Pareto {
                sampler: ParetoSampler::new(n, h),
                scatter: Scatter::new(n, key),
            },
            DistributionSpec::Normal(dev_percent) => OffsetDistribution::Normal {
                n,
                center: (n as f64 - 1.0) / 2.0,
                stddev: dev_percent / 100.0 * n as f64,
            },
        }
    }

    /// Number of units the distribution ranges over.
    pub fn len(&self) -> u64 {
        match self {
            OffsetDistribution::Uniform { n } | OffsetDistribution::Normal { n, .. } => *n,
            OffsetDistribution::Zipf { sampler, .. } => sampler.n,
            OffsetDistribution::Pareto { sampler, .. } => sampler.n,
        }
    }

    /// Always false: a distribution has at least one unit (present for clippy's `len` rule).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Draw one unit index in `[0, n)`.
    #[inline]
    pub fn sample<R: RngCore>(&self, rng: &mut R) -> u64 {
        match self {
            OffsetDistribution::Uniform { n } => uniform_below(rng, *n),
            OffsetDistribution::Zipf { sampler, scatter } => {
                scatter.apply(sampler.sample_rank(rng) - 1)
            }
            OffsetDistribution::Pareto { sampler, scatter } => {
                scatter.apply(sampler.sample_rank(rng))
            }
            OffsetDistribution::Normal { n, center, stddev } => {
                let z: f64 = StandardNormal.sample(rng);
                let x = (center + stddev * z).round();
                // Clamp rather than redraw: fio clamps too, and redrawing would make the cost
                // of a draw unbounded for huge σ.
                if x <= 0.0 {
                    0
                } else if x >= (*n - 1) as f64 {
                    *n - 1
                } else {
                    x as u64
                }
            }
        }
    }

    /// The rank (0-based, hottest first) before scattering; uniform and normal draws are
    /// returned as they are. Used by tests to check the rank law separately from the spread.
    pub fn sample_unscattered<R: RngCore>(&self, rng: &mut R) -> u64 {
        match self {
            OffsetDistribution::Zipf { sampler, .. } => sampler.sample_rank(rng) - 1,
            OffsetDistribution::Pareto { sampler, .. } => sampler.sample_rank(rng),
            _ => self.sample(rng),
        }
    }
}

/// A uniform integer in `[0, n)` from one 64-bit draw (widening multiply).
#[inline]
pub fn uniform_below<R: RngCore>(rng: &mut R, n: u64) -> u64 {
    ((rng.next_u64() as u128 * n as u128) >> 64) as u64
}

/// fio's Pareto rank for the 53-bit uniform `m`.
fn pareto_rank_of(m: u64, n: u64, power: f64) -> u64 {
    let unit = m as f64 * (1.0 / (1u64 << 53) as f64);
    (((n - 1) as f64 * unit.powf(power)) as u64).min(n - 1)
}

/// A Pareto sampler with its [`QuickTable`] (the rank is monotone in the uniform draw, so a
/// bucket whose two ends give the same rank gives it throughout).
#[derive(Debug, Clone)]
pub struct ParetoSampler {
    n: u64,
    power: f64,
    quick: QuickTable,
}

impl ParetoSampler {
    pub fn new(n: u64, h: f64) -> ParetoSampler {
        let power = h.ln() / (1.0 - h).ln();
        ParetoSampler {
            n,
            power,
            quick: QuickTable::build(n, |m| Some(pareto_rank_of(m, n, power))),
        }
    }

    /// A 0-based rank, 0 the hottest.
    #[inline]
    pub fn sample_rank<R: RngCore>(&self, rng: &mut R) -> u64 {
        let m = rng.next_u64() >> 11;
        self.quick
            .lookup(m)
            .unwrap_or_else(|| pareto_rank_of(m, self.n, self.power))
    }
}

/// A lookup table over the top bits of a 53-bit uniform draw `m`: the entry of a bucket is the
/// value a monotone sampler returns for every `m` of the bucket (+1, so that 0 means "not
/// constant here, compute it"). Its size grows with `n` up to 2^16 entries (256 KiB), because
/// a bucket can only be resolved when it is narrower than its rank's share of the draws.
///
/// Equivalence with the plain sampler rests on monotonicity: the sampler maps `m` to a value
/// through a monotone function followed by acceptance intervals, so two ends of a bucket that
/// agree bound everything in between (up to floating-point rounding at interval edges).
#[derive(Debug, Clone)]
pub struct QuickTable {
    shift: u32,
    entries: Box<[u32]>,
}

impl QuickTable {
    fn empty() -> QuickTable {
        QuickTable {
            shift: 53,
            entries: vec![0].into_boxed_slice(),
        }
    }

    fn build(n: u64, sample: impl Fn(u64) -> Option<u64>) -> QuickTable {
        // 4 buckets per unit for small ranges (cheap to build in tests), 2^16 at most.
        let bits = (64 - n.saturating_mul(4).leading_zeros()).clamp(4, 16);
        let shift = 53 - bits;
        let entries = (0..1u64 << bits)
            .map(|i| {
                let lo = sample(i << shift);
                let hi = sample(((i + 1) << shift) - 1);
                match (lo, hi) {
                    (Some(a), Some(b)) if a == b && a < u32::MAX as u64 => a as u32 + 1,
                    _ => 0,
                }
            })
            .collect();
        QuickTable { shift, entries }
    }

    #[inline]
    fn lookup(&self, m: u64) -> Option<u64> {
        match self.entries[(m >> self.shift) as usize] {
            0 => None,
            e => Some(e as u64 - 1),
        }
    }
}

/// Exact Zipf sampler over ranks `1..=n` by rejection-inversion (Hörmann & Derflinger 1996),
/// following the formulation of Apache Commons RNG's `RejectionInversionZipfSampler`.
///
/// The algorithm maps a uniform `U` monotonically to a point `u'`; rank `k` is returned when
/// `u'` falls in an interval of width `k^-θ` and the draw is rejected in the gaps between
/// intervals. A [`QuickTable`] over the top bits of `U` remembers the buckets that lie inside
/// one rank's interval, so most draws (the hot ranks) cost one table read instead of the
/// logarithms and exponentials; the others run the algorithm on the same `U`, so the output
/// distribution is the algorithm's.
#[derive(Debug, Clone)]
pub struct ZipfSampler {
    n: u64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
    quick: QuickTable,
}

impl ZipfSampler {
    /// `n ≥ 1` ranks, exponent `theta > 0`.
    pub fn new(n: u64, theta: f64) -> ZipfSampler {
        assert!(
            theta > 0.0 && theta.is_finite(),
            "zipf exponent must be > 0"
        );
        let mut z = ZipfSampler {
            n,
            exponent: theta,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
            quick: QuickTable::empty(),
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z.quick = QuickTable::build(n, |m| z.try_rank(m));
        z
    }

    /// A rank in `[1, n]`, rank 1 the most likely.
    #[inline]
    pub fn sample_rank<R: RngCore>(&self, rng: &mut R) -> u64 {
        if self.n == 1 {
            return 1;
        }
        loop {
            let m = rng.next_u64() >> 11;
            if let Some(k) = self.quick.lookup(m) {
                return k;
            }
            if let Some(k) = self.try_rank(m) {
                return k;
            }
        }
    }

    /// One round of rejection-inversion for the 53-bit uniform `m`: the rank, or `None` when
    /// the draw is rejected.
    fn try_rank(&self, m: u64) -> Option<u64> {
        let unit = m as f64 * (1.0 / (1u64 << 53) as f64);
        let u = self.h_integral_n + unit * (self.h_integral_x1 - self.h_integral_n);
        let x = self.h_integral_inverse(u);
        let k = ((x + 0.5) as u64).clamp(1, self.n);
        let kf = k as f64;
        (kf - x <= self.s || u >= self.h_integral(kf + 0.5) - self.h(kf)).then_some(k)
    }

    /// `h(x) = x^-θ`.
    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    /// `H(x) = (x^(1-θ) - 1) / (1 - θ)`, or `ln x` at θ = 1, computed without cancellation.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.exponent);
        if t < -1.0 {
            // Guards the log1p against rounding just below its pole.
            t = -1.0;
        }
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// A keyed bijection of `[0, n)`: 4-round balanced Feistel network on `2 * half_bits` bits with
/// cycle walking.
#[derive(Debug, Clone)]
pub struct Scatter {
    n: u64,
    half_bits: u32,
    mask: u64,
    keys: [u64; 4],
}

impl Scatter {
    pub fn new(n: u64, key: u64) -> Scatter {
        let bits = (64 - (n.max(2) - 1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        let mut state = key;
        let keys = [
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
        ];
        Scatter {
            n,
            half_bits,
            mask: (1u64 << half_bits) - 1,
            keys,
        }
    }

    /// The image of `x < n`.
    #[inline]
    pub fn apply(&self, mut x: u64) -> u64 {
        debug_assert!(x < self.n);
        loop {
            x = self.permute(x);
            if x < self.n {
                return x;
            }
        }
    }

    #[inline]
    fn permute(&self, x: u64) -> u64 {
        let mut left = x >> self.half_bits;
        let mut right = x & self.mask;
        // Round function: the top `half_bits` of a keyed multiply (multiplicative hashing; the
        // high bits of a product depend on every input bit), one multiply per round.
        let top = 64 - self.half_bits;
        for k in self.keys {
            let f = (right ^ k).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> top;
            let next = left ^ f;
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }
}

/// SplitMix64 step: the standard way to derive well-mixed 64-bit values from one seed.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    const SAMPLES: usize = 100_000;

    fn rng() -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(0x5eed)
    }

    fn harmonic(n: u64, theta: f64) -> f64 {
        (1..=n).map(|k| (k as f64).powf(-theta)).sum()
    }

    #[test]
    fn uniform_mean_and_bounds() {
        let d = OffsetDistribution::new(DistributionSpec::Random, 1000, 1);
        let mut r = rng();
        let mut sum = 0.0;
        for _ in 0..SAMPLES {
            let x = d.sample(&mut r);
            assert!(x < 1000);
            sum += x as f64;
        }
        let mean = sum / SAMPLES as f64;
        // Mean of U{0..999} is 499.5, stddev 288.7, so the standard error is about 0.9.
        assert!((mean - 499.5).abs() < 5.0, "mean {mean}");
    }

    #[test]
    fn zipf_rank_frequencies_match_closed_form() {
        for &theta in &[0.8, 1.0, 1.2] {
            let n = 1000;
            let d = OffsetDistribution::new(DistributionSpec::Zipf(theta), n, 7);
            let mut r = rng();
            let mut counts = [0usize; 3];
            for _ in 0..SAMPLES {
                let rank = d.sample_unscattered(&mut r);
                assert!(rank < n);
                if rank < 3 {
                    counts[rank as usize] += 1;
                }
            }
            let hn = harmonic(n, theta);
            for (i, &c) in counts.iter().enumerate() {
                let expect = ((i + 1) as f64).powf(-theta) / hn;
                let got = c as f64 / SAMPLES as f64;
                let sigma = (expect * (1.0 - expect) / SAMPLES as f64).sqrt();
                assert!(
                    (got - expect).abs() < 5.0 * sigma,
                    "theta {theta} rank {}: got {got}, expected {expect}",
                    i + 1
                );
            }
        }
    }

    #[test]
    fn zipf_scattered_hottest_unit_has_rank_one_frequency() {
        let n = 4096;
        let d = OffsetDistribution::new(DistributionSpec::Zipf(1.2), n, 99);
        let mut r = rng();
        let mut counts = vec![0u32; n as usize];
        for _ in 0..SAMPLES {
            counts[d.sample(&mut r) as usize] += 1;
        }
        let max = *counts.iter().max().unwrap() as f64 / SAMPLES as f64;
        let expect = 1.0 / harmonic(n, 1.2);
        assert!((max - expect).abs() < 0.01, "hottest {max} vs {expect}");
    }

    #[test]
    fn scatter_is_a_permutation_that_spreads_hot_ranks() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097] {
            let s = Scatter::new(n, 12345);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = s.apply(x);
                assert!(y < n);
                assert!(!seen[y as usize], "collision at n={n}");
                seen[y as usize] = true;
            }
        }
        // The 16 hottest ranks of 1M units must not sit in the first 1 % of the range.
        let n = 1 << 20;
        let s = Scatter::new(n, 42);
        let low = (0..16).filter(|&x| s.apply(x) < n / 100).count();
        assert!(low <= 2, "{low} hot ranks in the first 1 %");
        let mean = (0..1000).map(|x| s.apply(x) as f64).sum::<f64>() / 1000.0;
        assert!(
            (mean / n as f64 - 0.5).abs() < 0.05,
            "hot ranks not spread: mean {mean}"
        );
    }

    #[test]
    fn pareto_puts_one_minus_h_of_accesses_on_the_hottest_h() {
        for &h in &[0.1, 0.2, 0.3] {
            let n = 10_000;
            let d = OffsetDistribution::new(DistributionSpec::Pareto(h), n, 3);
            let mut r = rng();
            let limit = (h * (n - 1) as f64) as u64;
            let hot = (0..SAMPLES)
                .filter(|_| d.sample_unscattered(&mut r) <= limit)
                .count();
            let got = hot as f64 / SAMPLES as f64;
            assert!((got - (1.0 - h)).abs() < 0.01, "h {h}: {got}");
        }
    }

    #[test]
    fn normal_mean_and_stddev() {
        let n = 100_000;
        let d = OffsetDistribution::new(DistributionSpec::Normal(5.0), n, 0);
        let mut r = rng();
        let xs: Vec<f64> = (0..SAMPLES).map(|_| d.sample(&mut r) as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((mean - 49_999.5).abs() < 100.0, "mean {mean}");
        assert!((var.sqrt() - 5000.0).abs() < 100.0, "stddev {}", var.sqrt());
    }

    #[test]
    fn normal_clamps_to_range() {
        let d = OffsetDistribution::new(DistributionSpec::Normal(100.0), 10, 0);
        let mut r = rng();
        let mut ends = 0;
        for _ in 0..10_000 {
            let x = d.sample(&mut r);
            assert!(x < 10);
            ends += (x == 0 || x == 9) as usize;
        }
        assert!(
            ends > 1000,
            "a σ of the whole range must hit both ends often"
        );
    }

    #[test]
    fn quick_tables_agree_with_the_plain_samplers() {
        let mut r = rng();
        for n in [2u64, 10, 1000, 1 << 20] {
            let z = ZipfSampler::new(n, 1.1);
            let p = ParetoSampler::new(n, 0.2);
            let mut hits = 0;
            for _ in 0..20_000 {
                let m = r.next_u64() >> 11;
                if let Some(k) = z.quick.lookup(m) {
                    hits += 1;
                    assert_eq!(z.try_rank(m), Some(k), "zipf n={n} m={m}");
                }
                if let Some(k) = p.quick.lookup(m) {
                    assert_eq!(pareto_rank_of(m, n, p.power), k, "pareto n={n} m={m}");
                }
            }
            assert!(
                hits > 10_000,
                "the table should serve most zipf draws (n={n}: {hits})"
            );
        }
    }

    #[test]
    fn single_unit_ranges() {
        let mut r = rng();
        for spec in [
            DistributionSpec::Random,
            DistributionSpec::Zipf(1.1),
            DistributionSpec::Pareto(0.2),
            DistributionSpec::Normal(10.0),
        ] {
            let d = OffsetDistribution::new(spec, 1, 5);
            for _ in 0..100 {
                assert_eq!(d.sample(&mut r), 0);
            }
        }
    }
}
