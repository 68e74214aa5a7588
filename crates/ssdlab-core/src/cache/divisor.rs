//! Division by a run-time constant that is usually a power of two (set counts, ways, blocks
//! per track): a shift and a mask then, a hardware division otherwise. The cache divides on
//! every request, and a 64-bit division costs tens of cycles.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Divisor {
    d: u64,
    /// log2(d) when d is a power of two, else u32::MAX.
    shift: u32,
}

impl Divisor {
    /// `d` must be positive.
    pub fn new(d: u64) -> Divisor {
        assert!(d > 0, "division by zero");
        Divisor {
            d,
            shift: if d.is_power_of_two() {
                d.trailing_zeros()
            } else {
                u32::MAX
            },
        }
    }

    #[inline]
    pub fn div(self, n: u64) -> u64 {
        if self.shift != u32::MAX {
            n >> self.shift
        } else {
            n / self.d
        }
    }

    #[inline]
    pub fn rem(self, n: u64) -> u64 {
        if self.shift != u32::MAX {
            n & (self.d - 1)
        } else {
            n % self.d
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Divisor;

    #[test]
    fn matches_the_hardware_division() {
        for d in [1u64, 2, 3, 7, 512, 1000, 1 << 20, 6_000_000] {
            let div = Divisor::new(d);
            for n in [0u64, 1, 2, 511, 512, 513, 999_999, u64::MAX - 1, u64::MAX] {
                assert_eq!(div.div(n), n / d, "{n} / {d}");
                assert_eq!(div.rem(n), n % d, "{n} % {d}");
            }
        }
    }
}
