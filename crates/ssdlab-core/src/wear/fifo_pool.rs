//! No wear levelling: free blocks are reused in the order they were freed.

use super::FreeBlockPool;
use std::collections::VecDeque;

#[derive(Default)]
pub struct FifoPool {
    queue: VecDeque<u32>,
}

impl FreeBlockPool for FifoPool {
    fn push(&mut self, block: u32, _erase_count: u32) {
        self.queue.push_back(block);
    }
    fn pop(&mut self) -> Option<u32> {
        self.queue.pop_front()
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
}
