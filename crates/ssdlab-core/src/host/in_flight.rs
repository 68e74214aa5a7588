//! Host programs reserved on the timeline whose array work is not done yet (reservation path).
//!
//! Until its program ends, a host page's data is still in the controller: a read of it, or the
//! old copy a partial write merges with, is served from there at link time, as the event engine
//! does with its pending-program bitmap. A die's reservations end in the order they are made
//! (its timeline is busy-until), so each die keeps its pages in a queue ordered by end time,
//! pruned from the front as new ones arrive: what it holds is bounded by what is in flight.

use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub(super) struct ProgramsInFlight {
    /// Per die: (end of the program, physical page, when its data starts across the channel),
    /// in end order.
    per_die: Vec<VecDeque<(u64, u32, u64)>>,
    /// The latest end of all: at or after it nothing is in flight (the common case of a read,
    /// answered without finding its die).
    last_end_ns: u64,
}

impl ProgramsInFlight {
    pub(super) fn new(dies: u32) -> ProgramsInFlight {
        ProgramsInFlight {
            per_die: vec![VecDeque::new(); dies as usize],
            last_end_ns: 0,
        }
    }

    /// The program of `ppa` on `die` takes its data from `data_out_ns` on and ends at
    /// `end_ns`; those that ended by `now_ns` are forgotten.
    pub(super) fn push(
        &mut self,
        die: u32,
        ppa: u32,
        (data_out_ns, end_ns): (u64, u64),
        now_ns: u64,
    ) {
        let queue = &mut self.per_die[die as usize];
        while queue.front().is_some_and(|&(end, _, _)| end <= now_ns) {
            queue.pop_front();
        }
        debug_assert!(
            queue.back().is_none_or(|&(end, _, _)| end <= end_ns),
            "a die's programs end in the order they are reserved"
        );
        queue.push_back((end_ns, ppa, data_out_ns));
        self.last_end_ns = self.last_end_ns.max(end_ns);
    }

    /// Whether any program is still running (or waiting) at `at_ns`.
    #[inline]
    pub(super) fn any_at(&self, at_ns: u64) -> bool {
        at_ns < self.last_end_ns
    }

    /// Whether the program of `ppa` on `die` is still running (or waiting) at `at_ns`.
    pub(super) fn pending(&self, die: u32, ppa: u32, at_ns: u64) -> bool {
        self.data_out_of(die, ppa, at_ns).is_some()
    }

    /// When the data of `ppa`'s program on `die` starts across the channel, if that program
    /// is still running (or waiting) at `at_ns`.
    pub(super) fn data_out_of(&self, die: u32, ppa: u32, at_ns: u64) -> Option<u64> {
        // Newest first: the ones that ended by `at_ns` sit at the front.
        self.per_die[die as usize]
            .iter()
            .rev()
            .take_while(|&&(end, _, _)| end > at_ns)
            .find(|&&(_, p, _)| p == ppa)
            .map(|&(_, _, data_out)| data_out)
    }

    /// Every program is done (the clock restarts, or the power went).
    pub(super) fn clear(&mut self) {
        self.per_die.iter_mut().for_each(VecDeque::clear);
        self.last_end_ns = 0;
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.per_die.iter().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_pending_until_its_end() {
        let mut p = ProgramsInFlight::new(2);
        p.push(0, 7, (100, 1_000), 0);
        p.push(0, 9, (1_000, 2_000), 0);
        assert_eq!(p.data_out_of(0, 9, 500), Some(1_000));
        assert!(p.pending(0, 7, 999));
        assert!(!p.pending(0, 7, 1_000), "done at its end");
        assert!(p.pending(0, 9, 1_000));
        assert!(!p.pending(1, 9, 1_000), "another die's page");
        assert!(!p.pending(0, 8, 0), "never programmed here");
    }

    #[test]
    fn what_is_held_is_bounded_by_what_is_in_flight() {
        let mut p = ProgramsInFlight::new(1);
        for i in 0..10_000u64 {
            // One program every 100 ns, each 250 ns long: at most three in flight.
            p.push(0, i as u32, (i * 100, i * 100 + 250), i * 100);
        }
        assert!(p.held() <= 3, "held {}", p.held());
        assert!(p.any_at(9_999 * 100 + 249) && !p.any_at(9_999 * 100 + 250));
        assert!(p.pending(0, 9_999, 9_999 * 100));
        assert!(p.pending(0, 9_998, 9_999 * 100));
        assert!(!p.pending(0, 9_997, 9_999 * 100 + 50));
        p.clear();
        assert_eq!(p.held(), 0);
    }
}
