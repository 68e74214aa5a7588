//! Dynamic wear levelling: allocate the free block with the fewest erases (ties by block
//! number, for determinism), so erases spread over the blocks that are being rewritten.

use super::FreeBlockPool;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Default)]
pub struct LeastWorn {
    heap: BinaryHeap<Reverse<(u32, u32)>>,
}

impl FreeBlockPool for LeastWorn {
    fn push(&mut self, block: u32, erase_count: u32) {
        self.heap.push(Reverse((erase_count, block)));
    }
    fn pop(&mut self) -> Option<u32> {
        self.heap.pop().map(|Reverse((_, block))| block)
    }
    fn len(&self) -> usize {
        self.heap.len()
    }
}
