//! Garbage-collection victim policies: pure decisions over a read-only view of one plane's
//! blocks. The FTL owns the mechanism (moving valid pages, erasing) and asks a policy which
//! block to reclaim. Adding a policy touches its own file and the registry in [`victim_policy`].

pub mod destination;

mod cost_benefit;
mod fifo;
mod greedy;

pub use cost_benefit::CostBenefit;
pub use fifo::Fifo;
pub use greedy::{uniform_random_waf, uniform_random_waf_of, Greedy};

use crate::config::GcPolicyKind;

/// Life-cycle state of an erase block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockState {
    Free = 0,
    /// A write frontier is filling it.
    Open = 1,
    /// Every page programmed: a GC candidate.
    Full = 2,
    /// Chosen as a GC victim, its valid pages being moved a step at a time.
    Victim = 3,
}

/// The blocks of one plane, as the FTL sees them (slices indexed by block-in-plane).
pub struct PlaneView<'a> {
    pub valid_pages: &'a [u32],
    pub state: &'a [BlockState],
    /// Order in which blocks became full (FIFO / LRW order).
    pub closed_seq: &'a [u64],
    /// Simulated time of the newest write into each block (its data's age for cost-benefit).
    pub last_write_ns: &'a [u64],
    pub erase_count: &'a [u32],
    pub pages_per_block: u32,
    pub now_ns: u64,
}

/// Chooses which full block of a plane to reclaim.
pub trait VictimPolicy: Send {
    fn name(&self) -> &'static str;
    /// Index (within the plane) of the block to reclaim, or `None` when no block is full.
    fn select(&mut self, view: &PlaneView<'_>) -> Option<usize>;
}

/// The policy registry.
pub fn victim_policy(kind: GcPolicyKind) -> Box<dyn VictimPolicy> {
    match kind {
        GcPolicyKind::Greedy => Box::new(Greedy),
        GcPolicyKind::CostBenefit => Box::new(CostBenefit),
        GcPolicyKind::Fifo => Box::new(Fifo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(
        valid: &'a [u32],
        state: &'a [BlockState],
        seq: &'a [u64],
        last: &'a [u64],
        erase: &'a [u32],
    ) -> PlaneView<'a> {
        PlaneView {
            valid_pages: valid,
            state,
            closed_seq: seq,
            last_write_ns: last,
            erase_count: erase,
            pages_per_block: 64,
            now_ns: 1_000_000,
        }
    }

    #[test]
    fn policies_pick_their_victims_among_full_blocks_only() {
        use BlockState::*;
        let valid = [1, 10, 20, 30, 40];
        let state = [Open, Full, Full, Full, Free];
        let seq = [0, 3, 1, 2, 0];
        let last = [0, 999_000, 0, 500_000, 0];
        let erase = [0; 5];
        let v = view(&valid, &state, &seq, &last, &erase);
        assert_eq!(Greedy.select(&v), Some(1));
        assert_eq!(Fifo.select(&v), Some(2));
        // Block 2: u = 20/64, age 1e6 beats block 1: u = 10/64 but age 1e3.
        assert_eq!(CostBenefit.select(&v), Some(2));
        let none = [Open, Free, Free, Free, Free];
        let v = view(&valid, &none, &seq, &last, &erase);
        assert_eq!(Greedy.select(&v), None);
        assert_eq!(Fifo.select(&v), None);
        assert_eq!(CostBenefit.select(&v), None);
    }
}
