//! Wordline allocation: the melded layout of the melded-pages paper (Arpith K., Gopinath).
//! Each placement handle stripes over the planes in channel-way-die-plane order like
//! [`super::Stripe`], but gives each plane a whole wordline -- one page per bit of a cell (LSB,
//! CSB, MSB on TLC) -- before moving on, so consecutive logical pages share a wordline and a
//! large sequential read can sense each wordline once. Pages of a block are programmed in order
//! and a block holds whole wordlines, so a plane's frontier fed only by this allocator stays at
//! a wordline boundary between chunks.

use super::PlaneAllocator;
use crate::nand::Geometry;

pub struct WordlineStripe {
    order: Vec<u32>,
    /// Host pages per plane before the next (bits per cell).
    pages_per_wordline: u32,
    /// Per handle: position in `order` and pages given to that plane so far.
    cursor: Vec<(u32, u32)>,
}

impl WordlineStripe {
    pub fn new(geo: &Geometry, handles: u32) -> Self {
        WordlineStripe {
            order: geo.stripe_order.clone(),
            pages_per_wordline: geo.bits_per_cell.max(1),
            cursor: vec![(0, 0); handles as usize],
        }
    }
}

impl PlaneAllocator for WordlineStripe {
    fn name(&self) -> &'static str {
        "wordline"
    }

    #[inline]
    fn choose(&mut self, handle: u32, _die_free_ns: &[u64], _now_ns: u64) -> u32 {
        let (position, given) = &mut self.cursor[handle as usize];
        let plane = self.order[*position as usize];
        *given += 1;
        if *given == self.pages_per_wordline {
            *given = 0;
            *position = if *position as usize + 1 == self.order.len() {
                0
            } else {
                *position + 1
            };
        }
        plane
    }
}
