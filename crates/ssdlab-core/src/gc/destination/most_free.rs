//! GC data goes to the plane with the most free blocks (the victim's own plane when no other has
//! more than [`FreeBlocks::keep`], or none has more than it). Ties go to the first plane after the
//! victim's in plane order, so equal planes share the work.

use super::{FreeBlocks, GcDestination};

pub struct MostFree;

impl GcDestination for MostFree {
    fn choose(&mut self, victim_plane: u32, free: &FreeBlocks<'_>) -> u32 {
        let mut best = victim_plane;
        let mut best_free = (free.of)(victim_plane);
        for k in 1..free.planes {
            let plane = (victim_plane + k) % free.planes;
            let n = (free.of)(plane);
            if n > free.keep && n > best_free {
                best = plane;
                best_free = n;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plane chosen for a victim in `victim` when the planes have `counts` free blocks.
    fn choose(counts: &[usize], victim: u32) -> u32 {
        let of = |p: u32| counts[p as usize];
        let free = FreeBlocks {
            of: &of,
            planes: counts.len() as u32,
            keep: 3,
        };
        MostFree.choose(victim, &free)
    }

    #[test]
    fn chooses_the_plane_with_most_free_blocks_above_the_floor() {
        let counts = [3, 9, 9, 2];
        // 1 and 2 tie with 9: the first after the victim wins.
        assert_eq!(choose(&counts, 0), 1);
        assert_eq!(choose(&counts, 1), 1, "no plane has more than the victim's");
        assert_eq!(choose(&counts, 2), 2);
        // Above the floor but not above the victim's own count: stay.
        assert_eq!(choose(&[5, 4, 4, 4], 0), 0);
        // Below the floor: never chosen, however empty the victim's plane.
        assert_eq!(choose(&[0, 3, 3, 3], 0), 0);
    }
}
