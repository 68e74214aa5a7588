//! Static allocation: each placement handle stripes its pages over the planes in
//! channel-way-die-plane order with its own cursor, whatever the dies are doing. Consecutive
//! pages land on different channels, so a sequential stream spreads over the device; a die busy
//! with GC still gets its turn of host pages, which is what dynamic allocation avoids.

use super::PlaneAllocator;
use crate::nand::Geometry;

pub struct Stripe {
    order: Vec<u32>,
    cursor: Vec<u32>,
}

impl Stripe {
    pub fn new(geo: &Geometry, handles: u32) -> Self {
        Stripe {
            order: geo.stripe_order.clone(),
            cursor: vec![0; handles as usize],
        }
    }
}

impl PlaneAllocator for Stripe {
    fn name(&self) -> &'static str {
        "static"
    }

    #[inline]
    fn choose(&mut self, handle: u32, _die_free_ns: &[u64], _now_ns: u64) -> u32 {
        let cursor = &mut self.cursor[handle as usize];
        let plane = self.order[*cursor as usize];
        *cursor = if *cursor as usize + 1 == self.order.len() {
            0
        } else {
            *cursor + 1
        };
        plane
    }
}
