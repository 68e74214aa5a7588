//! Dynamic allocation: each host page goes to the die that will be free soonest, so writes flow
//! around dies that are busy with GC or a backlog (the die-level half of what MQSim and real
//! controllers call dynamic write allocation). Dies are scanned in channel-way-die order from a
//! per-handle cursor, so among equally loaded dies (an idle device) the choice is the static
//! channel-first stripe, and consecutive pages of a request still spread over channels. Within
//! a die the planes alternate, so pages that land on one die line up for multi-plane programs.

use super::PlaneAllocator;
use crate::nand::Geometry;

pub struct LeastLoaded {
    /// Dies in channel-way-die order.
    die_order: Vec<u32>,
    /// Planes of each die, in plane order.
    die_planes: Vec<Vec<u32>>,
    /// Next plane index within each die.
    die_plane_cursor: Vec<u32>,
    /// Next position in `die_order` per handle.
    cursor: Vec<u32>,
}

impl LeastLoaded {
    pub fn new(geo: &Geometry, handles: u32) -> Self {
        let mut die_order = Vec::with_capacity(geo.dies as usize);
        let mut die_planes = vec![Vec::new(); geo.dies as usize];
        for &plane in &geo.stripe_order {
            let die = geo.die_of_plane(plane);
            if die_planes[die as usize].is_empty() {
                die_order.push(die);
            }
            die_planes[die as usize].push(plane);
        }
        LeastLoaded {
            die_order,
            die_planes,
            die_plane_cursor: vec![0; geo.dies as usize],
            cursor: vec![0; handles as usize],
        }
    }
}

impl PlaneAllocator for LeastLoaded {
    fn name(&self) -> &'static str {
        "dynamic"
    }

    #[inline]
    fn choose(&mut self, handle: u32, die_free_ns: &[u64], now_ns: u64) -> u32 {
        let n = self.die_order.len();
        let start = self.cursor[handle as usize] as usize;
        let mut best = start;
        let mut best_free = u64::MAX;
        // From the cursor to the end, then from the start: the first least-loaded die in
        // stripe order. The running minimum is kept with selects, not a branch per new
        // minimum: which die wins is data, and that branch mispredicts.
        'scan: for range in [start..n, 0..start] {
            for pos in range {
                let free = die_free_ns[self.die_order[pos] as usize].max(now_ns);
                let better = free < best_free;
                best = if better { pos } else { best };
                best_free = best_free.min(free);
                if free == now_ns {
                    break 'scan; // idle: nothing can beat it, and the first idle die keeps the stripe
                }
            }
        }
        self.cursor[handle as usize] = (if best + 1 == n { 0 } else { best + 1 }) as u32;
        let die = self.die_order[best] as usize;
        let planes = &self.die_planes[die];
        let c = &mut self.die_plane_cursor[die];
        let plane = planes[*c as usize];
        *c = if *c as usize + 1 == planes.len() {
            0
        } else {
            *c + 1
        };
        plane
    }
}
