//! The engine's pending events, in (time, sequence) order: a timing wheel for the near future
//! and a heap beyond it.
//!
//! Nearly every event is due within a few milliseconds of the last one taken (a die's end one
//! program or erase time ahead, a transfer's arrival microseconds ahead, an idle check
//! `gc_bg_idle_ns` ahead), and the engine never schedules one before the last one taken. So
//! the wheel's buckets, 2 µs wide, cover a window of 4.2 ms that starts at the last event
//! taken: an event lands in its bucket's short sorted list in a few
//! instructions, and the earliest is the head of the first occupied bucket, found with two
//! bitmap words. Events outside the window (past its end, or before its start if a caller
//! ever schedules one) go to the heap; taking an event compares the two fronts, so the order is
//! exact wherever an event is kept.

use super::Event;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A wheel bucket is `1 << BUCKET_SHIFT` (2,048) ns wide.
const BUCKET_SHIFT: u32 = 11;
const BUCKETS: usize = 2048;
/// Span of the wheel's window, 4.2 ms: longer than a TLC erase.
#[cfg(test)]
const WHEEL_NS: u64 = (BUCKETS as u64) << BUCKET_SHIFT;
const WORDS: usize = BUCKETS / 64;
const NIL: u32 = u32::MAX;

/// An event and its key, `time << 64 | seq << 32 | slot`; `next` links a wheel bucket's list.
#[derive(Clone, Copy)]
struct Node {
    key: u128,
    event: Event,
    next: u32,
}

/// Pending events in (time, sequence) order. Sequence numbers have 32 bits: before they run
/// out, the pending events are renumbered in their order.
pub(super) struct EventQueue {
    /// First node of each bucket's list (sorted by key), or NIL.
    heads: Vec<u32>,
    /// Bit per bucket: its list is not empty; `summary` has a bit per non-zero word.
    occupied: [u64; WORDS],
    summary: u64,
    /// Bucket number (time >> BUCKET_SHIFT) where the window starts: the last event taken's.
    base: u64,
    /// The wheel's earliest key (`u128::MAX` when, and only when, the wheel is empty).
    wheel_min: u128,
    /// Keys of the events outside the window.
    far: BinaryHeap<Reverse<u128>>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    seq: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            heads: vec![NIL; BUCKETS],
            occupied: [0; WORDS],
            summary: 0,
            base: 0,
            wheel_min: u128::MAX,
            far: BinaryHeap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            seq: 0,
        }
    }
}

impl EventQueue {
    pub(super) const SEQ_LIMIT: u64 = 1 << 32;

    pub(super) fn push(&mut self, time_ns: u64, event: Event) {
        if self.seq == Self::SEQ_LIMIT {
            self.renumber();
        }
        let node = Node {
            key: 0,
            event,
            next: NIL,
        };
        let slot = super::slab_insert(&mut self.nodes, &mut self.free, node);
        let key = (time_ns as u128) << 64 | (self.seq as u128) << 32 | slot as u128;
        self.seq += 1;
        self.nodes[slot as usize].key = key;
        let bucket = time_ns >> BUCKET_SHIFT;
        if bucket.wrapping_sub(self.base) < BUCKETS as u64 {
            self.link(bucket as usize % BUCKETS, slot, key);
        } else {
            self.far.push(Reverse(key));
        }
    }

    /// Put node `slot` into bucket `b`'s list, after every smaller key.
    #[inline]
    fn link(&mut self, b: usize, slot: u32, key: u128) {
        let mut prev = NIL;
        let mut cur = self.heads[b];
        while cur != NIL && self.nodes[cur as usize].key < key {
            prev = cur;
            cur = self.nodes[cur as usize].next;
        }
        self.nodes[slot as usize].next = cur;
        if prev == NIL {
            self.heads[b] = slot;
            self.occupied[b / 64] |= 1 << (b % 64);
            self.summary |= 1 << (b / 64);
        } else {
            self.nodes[prev as usize].next = slot;
        }
        self.wheel_min = self.wheel_min.min(key);
    }

    /// The first occupied bucket at or after `from`, going round the wheel (the window's
    /// buckets in time order when `from` is the window's start).
    #[inline]
    fn first_occupied(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let here = self.occupied[w] & (!0u64 << (from % 64));
        if here != 0 {
            return Some(w * 64 + here.trailing_zeros() as usize);
        }
        let later = self.summary & (!1u64 << w);
        let word = if later != 0 {
            later.trailing_zeros()
        } else if self.summary != 0 {
            // Round the wheel: the words up to `w` (the bits of `w` below `from` included).
            self.summary.trailing_zeros()
        } else {
            return None;
        } as usize;
        Some(word * 64 + self.occupied[word].trailing_zeros() as usize)
    }

    /// The earliest pending key, and whether it is the wheel's.
    #[inline]
    fn first(&self) -> Option<(u128, bool)> {
        let wheel = self.wheel_min;
        match self.far.peek() {
            Some(&Reverse(far)) if far < wheel => Some((far, false)),
            _ if wheel != u128::MAX => Some((wheel, true)),
            _ => None,
        }
    }

    pub(super) fn peek(&self) -> Option<(u64, Event)> {
        self.first()
            .map(|(key, _)| ((key >> 64) as u64, self.nodes[key as u32 as usize].event))
    }

    pub(super) fn pop(&mut self) -> Option<(u64, Event)> {
        self.pop_until(u64::MAX)
    }

    /// The earliest pending event, taken from the queue, if it is at or before `last_ns`.
    #[inline]
    pub(super) fn pop_until(&mut self, last_ns: u64) -> Option<(u64, Event)> {
        let (key, in_wheel) = self.first()?;
        let time = (key >> 64) as u64;
        if time > last_ns {
            return None;
        }
        let slot = key as u32;
        // Every pending event is at or after this one: the window may start here.
        self.base = self.base.max(time >> BUCKET_SHIFT);
        if in_wheel {
            let b = (time >> BUCKET_SHIFT) as usize % BUCKETS;
            debug_assert_eq!(self.heads[b], slot, "the wheel's minimum heads its bucket");
            let next = self.nodes[slot as usize].next;
            self.heads[b] = next;
            if next != NIL {
                self.wheel_min = self.nodes[next as usize].key;
            } else {
                self.occupied[b / 64] &= !(1 << (b % 64));
                if self.occupied[b / 64] == 0 {
                    self.summary &= !(1 << (b / 64));
                }
                self.wheel_min = match self.first_occupied(b) {
                    Some(first) => self.nodes[self.heads[first] as usize].key,
                    None => u128::MAX,
                };
            }
        } else {
            self.far.pop();
        }
        self.free.push(slot);
        Some((time, self.nodes[slot as usize].event))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.wheel_min == u128::MAX && self.far.is_empty()
    }

    /// Give the pending events sequence numbers 0, 1, ... in their present order. Each keeps
    /// its place (wheel bucket or heap): the order within a bucket does not change.
    fn renumber(&mut self) {
        let mut keys: Vec<(u128, bool)> =
            self.far.drain().map(|Reverse(key)| (key, true)).collect();
        for &head in &self.heads {
            let mut cur = head;
            while cur != NIL {
                keys.push((self.nodes[cur as usize].key, false));
                cur = self.nodes[cur as usize].next;
            }
        }
        keys.sort_unstable();
        let low = (1u128 << 32) - 1;
        let mut far = Vec::new();
        for (seq, &(old, in_far)) in keys.iter().enumerate() {
            let key = old >> 64 << 64 | (seq as u128) << 32 | old & low;
            self.nodes[old as u32 as usize].key = key;
            if in_far {
                far.push(Reverse(key));
            }
        }
        self.far = BinaryHeap::from(far);
        self.wheel_min = match self.first_occupied(self.base as usize % BUCKETS) {
            Some(b) => self.nodes[self.heads[b] as usize].key,
            None => u128::MAX,
        };
        self.seq = keys.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn idle(channel: u32) -> Event {
        Event::ChannelFree { channel }
    }

    /// Every pending event in the order the queue gives them; the queue is empty after.
    fn drain(q: &mut EventQueue) -> Vec<(u64, Event)> {
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert!(q.is_empty());
        order
    }

    fn free(die: u32) -> Event {
        Event::DieFree { die, generation: 0 }
    }

    #[test]
    fn wheel_and_far_events_merge_in_time_then_arrival_order() {
        let mut q = EventQueue::default();
        q.push(30, idle(0));
        q.push(30, free(1)); // same time, later: after idle(0)
        q.push(WHEEL_NS + 5, free(2)); // past the window: to the heap
        q.push(20, free(3));
        q.push(20, idle(7)); // same time as free(3), after it
        q.push(WHEEL_NS + 5, idle(4)); // the heap's, after free(2)
        q.push(WHEEL_NS - 1, free(5)); // the window's last nanosecond
        assert_eq!(q.far.len(), 2, "only events past the window go to the heap");
        assert_eq!(q.pop(), Some((20, free(3))));
        assert_eq!(q.pop(), Some((20, idle(7))));
        // The window now starts at 20's bucket; an event before it goes to the heap.
        q.push(10, free(6));
        let expected = [
            (10, free(6)),
            (30, idle(0)),
            (30, free(1)),
            (WHEEL_NS - 1, free(5)),
            (WHEEL_NS + 5, free(2)),
            (WHEEL_NS + 5, idle(4)),
        ];
        assert_eq!(drain(&mut q), expected);
    }

    #[test]
    fn events_leave_in_time_then_arrival_order_across_a_renumbering() {
        let mut q = EventQueue::default();
        q.push(50, idle(0));
        q.push(10, idle(1));
        q.push(3 * WHEEL_NS, free(6));
        // Sequence numbers about to run out: the next push renumbers the pending events.
        q.seq = EventQueue::SEQ_LIMIT;
        q.push(50, idle(2));
        assert_eq!(q.seq, 4, "three pending events renumbered, then one more");
        q.push(10, idle(3));
        q.push(50, idle(4));
        q.push(3 * WHEEL_NS, free(7));
        assert_eq!(q.peek(), Some((10, idle(1))));
        let expected = [
            (10, idle(1)),
            (10, idle(3)),
            (50, idle(0)),
            (50, idle(2)),
            (50, idle(4)),
            (3 * WHEEL_NS, free(6)),
            (3 * WHEEL_NS, free(7)),
        ];
        assert_eq!(drain(&mut q), expected);
        // Slots are reused once their events are gone.
        q.push(7, idle(5));
        assert_eq!(q.nodes.len(), 7);
    }

    #[test]
    fn the_queue_gives_the_order_of_a_sorted_reference_over_random_work() {
        // Times near the last event taken (most of them), far past the window, and now and
        // then before it; idle checks a fixed delay ahead; pops until a limit as the engine
        // does; a renumbering midway.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x9E37_79B9_7F4A_7C15);
        let mut q = EventQueue::default();
        let mut reference: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
        let mut pushed = 0u64;
        let mut now = 0u64;
        for step in 0..200_000u32 {
            if step == 100_000 {
                q.seq = EventQueue::SEQ_LIMIT;
            }
            let r: u64 = rng.gen();
            if r % 8 < 5 {
                let ahead = match r >> 3 & 15 {
                    0 => 3 * WHEEL_NS + (r >> 8) % WHEEL_NS,
                    1 => WHEEL_NS - 1 - (r >> 8) % 4,
                    2..=9 => (r >> 8) % 4000,
                    _ => (r >> 8) % 800_000,
                };
                let check = r >> 40 & 3 == 0;
                let time = if check && r >> 42 & 7 != 0 {
                    now + 1_000_000
                } else if r >> 7 & 31 == 0 {
                    now.saturating_sub((r >> 20) % 50_000)
                } else {
                    now + ahead
                };
                let event = if check { idle(step) } else { free(step) };
                q.push(time, event);
                reference.push(Reverse((time, pushed, event)));
                pushed += 1;
            } else {
                let last = now + (r >> 8) % 3000;
                let want = match reference.peek() {
                    Some(&Reverse((time, _, event))) if time <= last => {
                        reference.pop();
                        Some((time, event))
                    }
                    _ => None,
                };
                let got = q.pop_until(last);
                assert_eq!(got, want, "step {step}");
                if let Some((time, _)) = got {
                    now = now.max(time);
                }
            }
        }
        let rest: Vec<_> = std::iter::from_fn(|| reference.pop())
            .map(|Reverse((time, _, event))| (time, event))
            .collect();
        assert_eq!(drain(&mut q), rest);
    }
}
