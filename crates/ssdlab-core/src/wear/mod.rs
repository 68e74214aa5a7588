//! Wear levelling as the free-block allocation policy of each plane: which free block a write
//! frontier opens next. Dynamic wear levelling opens the least-worn free block; `None` reuses
//! blocks in the order they were freed. Adding a policy touches its file and [`free_pool`].

mod dynamic;
mod fifo_pool;

pub use dynamic::LeastWorn;
pub use fifo_pool::FifoPool;

use crate::config::WearLevelingKind;

/// The free blocks of one plane.
pub trait FreeBlockPool: Send {
    fn push(&mut self, block: u32, erase_count: u32);
    fn pop(&mut self) -> Option<u32>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The policy registry.
pub fn free_pool(kind: WearLevelingKind) -> Box<dyn FreeBlockPool> {
    match kind {
        WearLevelingKind::Dynamic => Box::new(LeastWorn::default()),
        WearLevelingKind::None => Box::new(FifoPool::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_opens_least_worn_and_fifo_keeps_order() {
        let mut d = free_pool(WearLevelingKind::Dynamic);
        let mut f = free_pool(WearLevelingKind::None);
        for (block, erases) in [(7, 5), (3, 1), (9, 3)] {
            d.push(block, erases);
            f.push(block, erases);
        }
        assert_eq!(
            (d.pop(), d.pop(), d.pop(), d.pop()),
            (Some(3), Some(9), Some(7), None)
        );
        assert_eq!(
            (f.pop(), f.pop(), f.pop(), f.pop()),
            (Some(7), Some(3), Some(9), None)
        );
    }
}
