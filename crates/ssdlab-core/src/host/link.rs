//! The host link in one direction, shared by bandwidth rather than by issue order.
//!
//! Each transfer takes the earliest gap of the link at or after the time its data is ready, so
//! a read whose data is ready early is not held behind a transfer reserved earlier for data that
//! is ready later (a read of an idle die does not wait for one behind a program). The busy
//! intervals are kept sorted and merged, and those that ended before the current time are
//! dropped, so the calendar holds at most one interval per transfer in flight.

use std::collections::VecDeque;

#[derive(Debug, Clone, Default)]
pub struct LinkCalendar {
    /// Busy intervals [start, end), sorted, disjoint and not adjacent.
    busy: VecDeque<(u64, u64)>,
}

impl LinkCalendar {
    /// Reserve `duration_ns` of link time at or after `ready_ns`; `now_ns` is the current time
    /// (no later transfer can be ready before it). Returns when the transfer ends.
    pub fn reserve(&mut self, ready_ns: u64, duration_ns: u64, now_ns: u64) -> u64 {
        if duration_ns == 0 {
            return ready_ns;
        }
        while self.busy.front().is_some_and(|&(_, end)| end <= now_ns) {
            self.busy.pop_front();
        }
        // The common case: data ready at or after the last reservation ends goes at the end.
        match self.busy.back_mut() {
            None => {
                self.busy.push_back((ready_ns, ready_ns + duration_ns));
                return ready_ns + duration_ns;
            }
            Some(last) if ready_ns >= last.1 => {
                let end = ready_ns + duration_ns;
                if ready_ns == last.1 {
                    last.1 = end;
                } else {
                    self.busy.push_back((ready_ns, end));
                }
                return end;
            }
            Some(_) => {}
        }
        // Skip the intervals that end before the data is ready (binary search: the calendar is
        // sorted), then take the first gap long enough.
        let mut start = ready_ns;
        // On the deque's two halves: a slice's search inlines where the deque's did not always.
        let (front, back) = self.busy.as_slices();
        let ended = |&(_, e): &(u64, u64)| e <= start;
        let first = match front.last() {
            Some(last) if ended(last) => front.len() + back.partition_point(ended),
            _ => front.partition_point(ended),
        };
        let mut index = self.busy.len();
        // By index: skipping `first` entries of the deque's iterator steps through them.
        for i in first..self.busy.len() {
            let (s, e) = self.busy[i];
            if s >= start + duration_ns {
                index = i;
                break;
            }
            start = start.max(e);
        }
        let end = start + duration_ns;
        // Insert before `index`, merging with touching neighbours.
        let merge_prev = index > 0 && self.busy[index - 1].1 == start;
        let merge_next = index < self.busy.len() && self.busy[index].0 == end;
        match (merge_prev, merge_next) {
            (true, true) => {
                let next_end = self.busy[index].1;
                self.busy[index - 1].1 = next_end;
                self.busy.remove(index);
            }
            (true, false) => self.busy[index - 1].1 = end,
            (false, true) => self.busy[index].0 = start,
            (false, false) => self.busy.insert(index, (start, end)),
        }
        end
    }

    pub fn reset(&mut self) {
        self.busy.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_early_transfer_back_fills_a_gap_before_a_later_one() {
        let mut link = LinkCalendar::default();
        // Data ready at 1000 reserves 1000..1100; data ready at 10 still leaves at once.
        assert_eq!(link.reserve(1_000, 100, 0), 1_100);
        assert_eq!(link.reserve(10, 100, 0), 110);
        // One that does not fit the gap before 1000 waits for the busy interval.
        assert_eq!(link.reserve(950, 100, 0), 1_200);
        // Back to back transfers queue by bandwidth.
        assert_eq!(link.reserve(0, 100, 0), 210);
    }

    #[test]
    fn zero_length_transfers_are_free_and_old_intervals_are_dropped() {
        let mut link = LinkCalendar::default();
        assert_eq!(link.reserve(500, 0, 0), 500);
        for i in 0..1000u64 {
            link.reserve(i * 1000, 10, i * 1000);
        }
        assert!(link.busy.len() <= 1);
    }
}
