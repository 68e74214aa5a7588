//! ECC/EDC codec model: decode and encode latency per codeword by code and strength, and the
//! raw-bit-error-rate model that decides how many bits a read finds in error.
//!
//! Latency figures come from the BCH decoder measurements quoted in `device-model.md`
//! (data bits, total bits, t → decoder latency); between reference points the latency is
//! interpolated linearly in t, which matches how BCH decoder cost (Berlekamp–Massey plus Chien
//! search) grows with the correction capability. Error injection samples a Poisson number of
//! bit errors per codeword from RBER = base · (1 + PE/pe_scale)^pe_exponent; more errors than the
//! code corrects lead to read retries and finally an uncorrectable error, never silent
//! corruption.

pub mod bits;
pub mod flex;

use crate::config::{EccCode, EccConfig};
use rand::Rng;

/// (t, decode ns) reference points for 1 KiB (8192-bit) BCH codewords.
const BCH_1K: &[(u32, u64)] = &[(5, 10_400), (12, 10_900), (67, 17_600)];
/// (t, decode ns) reference points for 2 KiB (16384-bit) BCH codewords.
const BCH_2K: &[(u32, u64)] = &[(5, 20_700), (15, 21_400), (102, 40_200)];
/// CRC check (EDC) per codeword, as used by FlexECC.
const CRC_DECODE_NS: u64 = 800;
/// LDPC hard-decision decode per codeword.
const LDPC_HARD_DECODE_NS: u64 = 5_000;

fn interpolate(points: &[(u32, u64)], t: u32) -> u64 {
    let (first, last) = (points[0], points[points.len() - 1]);
    if t <= first.0 {
        return first.1;
    }
    for pair in points.windows(2) {
        let ((t0, l0), (t1, l1)) = (pair[0], pair[1]);
        if t <= t1 {
            return l0 + (l1 - l0) * (t - t0) as u64 / (t1 - t0) as u64;
        }
    }
    // Beyond the last point, extend the last segment's slope.
    let (t0, l0) = points[points.len() - 2];
    l0 + (last.1 - l0) * (t - t0) as u64 / (last.0 - t0) as u64
}

/// Decode latency of one codeword: the configured figure, or the code's reference figure.
pub fn decode_ns_per_codeword(ecc: &EccConfig) -> u64 {
    if ecc.code == EccCode::None {
        return 0;
    }
    if ecc.decode_ns > 0 {
        return ecc.decode_ns;
    }
    match ecc.code {
        EccCode::None => 0,
        EccCode::Crc => CRC_DECODE_NS,
        EccCode::Ldpc => LDPC_HARD_DECODE_NS,
        EccCode::Bch => {
            // Scale from the nearest reference codeword size by data length.
            let t = ecc.correctable_bits.max(1);
            if ecc.codeword_bytes <= 1024 {
                interpolate(BCH_1K, t) * ecc.codeword_bytes as u64 / 1024
            } else {
                interpolate(BCH_2K, t) * ecc.codeword_bytes as u64 / 2048
            }
        }
    }
}

/// What the decoder made of one page read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeOutcome {
    /// Codewords with at least one bit error that the code corrected.
    pub corrected_codewords: u32,
    /// Extra array reads (read retries, soft-decoding re-reads) this page needed.
    pub retries: u32,
    /// Extra decode time beyond one hard decode (soft-decoding rounds).
    pub extra_decode_ns: u64,
    /// True when the page could not be recovered (or, for an EDC, an error was detected).
    pub uncorrectable: bool,
    /// Bit errors seen on the first sensing, summed over the page's codewords.
    pub bit_errors: u64,
}

/// Raw bit error rate of a block with `erase_count` program/erase cycles.
pub fn rber(ecc: &EccConfig, erase_count: u32) -> f64 {
    ecc.rber_base * (1.0 + erase_count as f64 / ecc.rber_pe_scale).powf(ecc.rber_pe_exponent)
}

/// Poisson sample by inversion; fine for the small means of bit errors per codeword.
fn poisson<R: Rng>(rng: &mut R, mean: f64) -> u64 {
    if mean <= 0.0 {
        return 0;
    }
    if mean > 50.0 {
        // Normal approximation for large means, clamped at zero.
        let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = rng.gen();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        return (mean + z * mean.sqrt()).round().max(0.0) as u64;
    }
    let limit = (-mean).exp();
    let mut product: f64 = rng.gen();
    let mut count = 0;
    while product > limit {
        product *= rng.gen::<f64>();
        count += 1;
    }
    count
}

/// Sample the errors of one page read and what the decoder does about them.
pub fn decode_page<R: Rng>(
    ecc: &EccConfig,
    codewords: u32,
    erase_count: u32,
    rng: &mut R,
) -> DecodeOutcome {
    let mut outcome = DecodeOutcome::default();
    if ecc.rber_base <= 0.0 || ecc.code == EccCode::None {
        return outcome;
    }
    let bits = ecc.codeword_bytes as f64 * 8.0;
    let mut rate = rber(ecc, erase_count);
    let t = ecc.correctable_bits as u64;
    for _ in 0..codewords {
        let mut errors = poisson(rng, bits * rate);
        outcome.bit_errors += errors;
        if errors == 0 {
            continue;
        }
        match ecc.code {
            EccCode::None => {}
            // A CRC only detects: any error makes the page unusable (FlexECC refetches it).
            EccCode::Crc => outcome.uncorrectable = true,
            EccCode::Bch | EccCode::Ldpc => {
                let mut attempts = 0;
                while errors > t && attempts < ecc.max_read_retries {
                    attempts += 1;
                    rate *= ecc.retry_rber_factor;
                    errors = poisson(rng, bits * rate);
                }
                if ecc.code == EccCode::Ldpc {
                    outcome.extra_decode_ns += attempts as u64 * ecc.soft_decode_ns;
                }
                outcome.retries = outcome.retries.max(attempts);
                if errors > t {
                    outcome.uncorrectable = true;
                } else {
                    outcome.corrected_codewords += 1;
                }
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn bch_reference_points_are_reproduced() {
        let mut ecc = EccConfig {
            code: EccCode::Bch,
            codeword_bytes: 1024,
            ..Default::default()
        };
        for (t, ns) in BCH_1K {
            ecc.correctable_bits = *t;
            assert_eq!(decode_ns_per_codeword(&ecc), *ns);
        }
        ecc.codeword_bytes = 2048;
        for (t, ns) in BCH_2K {
            ecc.correctable_bits = *t;
            assert_eq!(decode_ns_per_codeword(&ecc), *ns);
        }
        ecc.codeword_bytes = 1024;
        ecc.correctable_bits = 40;
        let mid = decode_ns_per_codeword(&ecc);
        assert!(mid > 10_900 && mid < 17_600, "{mid}");
    }

    #[test]
    fn no_errors_without_rber_and_retries_with_high_rber() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let mut ecc = EccConfig::default();
        assert_eq!(decode_page(&ecc, 4, 0, &mut rng), DecodeOutcome::default());
        ecc.rber_base = 1e-3; // mean 8 errors per 1 KiB codeword, t = 40: corrected
        let out = decode_page(&ecc, 4, 0, &mut rng);
        assert!(out.corrected_codewords > 0 && !out.uncorrectable, "{out:?}");
        ecc.rber_base = 2e-2; // mean 164 errors: beyond t even after retries
        ecc.max_read_retries = 1;
        let out = decode_page(&ecc, 4, 0, &mut rng);
        assert!(out.uncorrectable && out.retries == 1, "{out:?}");
    }

    #[test]
    fn poisson_mean_is_right() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let n = 20_000;
        let sum: u64 = (0..n).map(|_| poisson(&mut rng, 3.0)).sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 3.0).abs() < 0.1, "{mean}");
    }
}
