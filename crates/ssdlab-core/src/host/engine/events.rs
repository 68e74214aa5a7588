//! The engine's pending events, in (time, sequence) order: a timing wheel for the near future
//! and a heap beyond it.
//!
//! Nearly every event is due within a few tens of milliseconds of the last one taken (a die's
//! end one program, erase or GC step time ahead, a transfer's arrival microseconds ahead, an
//! idle check `gc_bg_idle_ns` ahead), and the engine never schedules one before the last one
//! taken. So the wheel's buckets, 8 µs wide, cover a window of 33.5 ms that starts at the last
//! event taken: an event lands in its bucket's short sorted list in a few instructions, and the
//! earliest is the head of the first occupied bucket, found with two bitmap words. Events outside the window (past its end, or before its start if a caller
//! ever schedules one) go to the heap; taking an event compares the two fronts, so the order is
//! exact wherever an event is kept.

use super::Event;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A wheel bucket is `1 << BUCKET_SHIFT` (8,192) ns wide.
const BUCKET_SHIFT: u32 = 13;
const BUCKETS: usize = 4096;
/// Span of the wheel's window, 33.5 ms: longer than a TLC erase, and than a GC step of 32
/// copybacks of TLC pages (26 ms).
#[cfg(test)]
const WHEEL_NS: u64 = (BUCKETS as u64) << BUCKET_SHIFT;
const WORDS: usize = BUCKETS / 64;
const _: () = assert!(WORDS <= 64, "one summary word covers the bitmap");
const NIL: u32 = u32::MAX;

/// An event, its time and its sequence number; `next` links a wheel bucket's list.
#[derive(Clone, Copy)]
struct Node {
    time: u64,
    seq: u32,
    next: u32,
    event: Event,
}

/// Pending events in (time, sequence) order. Sequence numbers have 32 bits: before they run
/// out, the pending events are renumbered in their order.
///
/// Within the wheel a bucket's list is in (time, push) order: a push goes after every node of
/// its time or earlier, and a later push has a higher sequence number, so lists compare times
/// only. The sequence numbers order the wheel's front against the heap's at equal times.
pub(super) struct EventQueue {
    /// First node of each bucket's list (sorted by key), or NIL.
    heads: Box<[u32; BUCKETS]>,
    /// Bit per bucket: its list is not empty; `summary` has a bit per non-zero word.
    occupied: [u64; WORDS],
    summary: u64,
    /// Bucket number (time >> BUCKET_SHIFT) where the window starts: the last event taken's.
    base: u64,
    /// The wheel's earliest node and its time (`u64::MAX` when, and only when, the wheel is
    /// empty).
    wheel_min_time: u64,
    wheel_min: u32,
    /// Keys (`time << 64 | seq << 32 | slot`) of the events outside the window, and the
    /// earliest of them (`u128::MAX` when there is none).
    far: BinaryHeap<Reverse<u128>>,
    far_min: u128,
    nodes: Vec<Node>,
    free: Vec<u32>,
    seq: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            heads: Box::new([NIL; BUCKETS]),
            occupied: [0; WORDS],
            summary: 0,
            base: 0,
            wheel_min_time: u64::MAX,
            wheel_min: NIL,
            far: BinaryHeap::new(),
            far_min: u128::MAX,
            nodes: Vec::new(),
            free: Vec::new(),
            seq: 0,
        }
    }
}

impl EventQueue {
    pub(super) const SEQ_LIMIT: u64 = 1 << 32;

    /// Inlined where the engine schedules: a call's prologue and epilogue were a seventh of
    /// a push.
    #[inline(always)]
    pub(super) fn push(&mut self, time_ns: u64, event: Event) {
        debug_assert!(time_ns < u64::MAX, "an event at the end of time");
        if self.seq == Self::SEQ_LIMIT {
            self.renumber();
        }
        let seq = self.seq as u32;
        self.seq += 1;
        let node = Node {
            time: time_ns,
            seq,
            next: NIL,
            event,
        };
        let slot = super::slab_insert(&mut self.nodes, &mut self.free, node);
        let bucket = time_ns >> BUCKET_SHIFT;
        if bucket.wrapping_sub(self.base) < BUCKETS as u64 {
            self.link(bucket as usize % BUCKETS, slot, time_ns);
        } else {
            self.push_far(slot);
        }
    }

    /// Node `slot` to the heap (out of line: few events are outside the window).
    #[cold]
    #[inline(never)]
    fn push_far(&mut self, slot: u32) {
        let n = &self.nodes[slot as usize];
        let key = (n.time as u128) << 64 | (n.seq as u128) << 32 | slot as u128;
        self.far.push(Reverse(key));
        self.far_min = self.far_min.min(key);
    }

    /// Put node `slot` (at `time`) into bucket `b`'s list, after every node of its time or
    /// earlier.
    #[inline(always)]
    fn link(&mut self, b: usize, slot: u32, time: u64) {
        let head = self.heads[b];
        if head == NIL || self.nodes[head as usize].time > time {
            self.nodes[slot as usize].next = head;
            self.heads[b] = slot;
            self.occupied[b / 64] |= 1 << (b % 64);
            self.summary |= 1 << (b / 64);
        } else {
            let mut prev = head;
            let mut cur = self.nodes[head as usize].next;
            while cur != NIL && self.nodes[cur as usize].time <= time {
                prev = cur;
                cur = self.nodes[cur as usize].next;
            }
            self.nodes[slot as usize].next = cur;
            self.nodes[prev as usize].next = slot;
        }
        if time < self.wheel_min_time {
            self.wheel_min_time = time;
            self.wheel_min = slot;
        }
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

    /// Is the heap's earliest event before the wheel's (or the only one)?
    #[inline]
    fn far_first(&self) -> bool {
        let far_time = (self.far_min >> 64) as u64;
        if far_time != self.wheel_min_time {
            return far_time < self.wheel_min_time;
        }
        // The same time: the one pushed first (the heap cannot be empty here, as no event is
        // at `u64::MAX`).
        self.wheel_min == NIL
            || (self.far_min >> 32) as u32 <= self.nodes[self.wheel_min as usize].seq
    }

    pub(super) fn peek(&self) -> Option<(u64, Event)> {
        if self.is_empty() {
            return None;
        }
        let slot = match self.far_first() {
            true => self.far_min as u32,
            false => self.wheel_min,
        };
        let n = &self.nodes[slot as usize];
        Some((n.time, n.event))
    }

    pub(super) fn pop(&mut self) -> Option<(u64, Event)> {
        self.pop_until(u64::MAX)
    }

    /// The earliest pending event, taken from the queue, if it is at or before `last_ns`.
    /// Inlined into the engine's loop, which calls it once per event and once per completion.
    #[inline(always)]
    pub(super) fn pop_until(&mut self, last_ns: u64) -> Option<(u64, Event)> {
        // No event is at `u64::MAX` (an empty side's time): below it, "after `last_ns`" also
        // says "empty".
        let last_ns = last_ns.min(u64::MAX - 1);
        let far_time = (self.far_min >> 64) as u64;
        if self.wheel_min_time > last_ns && far_time > last_ns {
            return None; // nothing due (an empty queue included)
        }
        if far_time <= self.wheel_min_time && self.far_first() {
            return Some(self.pop_far());
        }
        let slot = self.wheel_min;
        let Node {
            time, next, event, ..
        } = self.nodes[slot as usize];
        // Every pending event is at or after this one: the window may start here.
        self.base = self.base.max(time >> BUCKET_SHIFT);
        let b = (time >> BUCKET_SHIFT) as usize % BUCKETS;
        debug_assert_eq!(self.heads[b], slot, "the wheel's minimum heads its bucket");
        self.heads[b] = next;
        if next != NIL {
            self.wheel_min = next;
            self.wheel_min_time = self.nodes[next as usize].time;
        } else {
            self.occupied[b / 64] &= !(1 << (b % 64));
            if self.occupied[b / 64] == 0 {
                self.summary &= !(1 << (b / 64));
            }
            self.set_wheel_min(b);
        }
        self.free.push(slot);
        Some((time, event))
    }

    /// The wheel's minimum: the head of the first occupied bucket from `from` on.
    #[inline]
    fn set_wheel_min(&mut self, from: usize) {
        match self.first_occupied(from) {
            Some(first) => {
                self.wheel_min = self.heads[first];
                self.wheel_min_time = self.nodes[self.wheel_min as usize].time;
            }
            None => {
                self.wheel_min = NIL;
                self.wheel_min_time = u64::MAX;
            }
        }
    }

    /// Take the heap's earliest event (out of line: few events are outside the window).
    #[cold]
    #[inline(never)]
    fn pop_far(&mut self) -> (u64, Event) {
        let slot = self.far_min as u32;
        self.far.pop();
        self.far_min = self.far.peek().map_or(u128::MAX, |&Reverse(key)| key);
        let n = self.nodes[slot as usize];
        self.base = self.base.max(n.time >> BUCKET_SHIFT);
        self.free.push(slot);
        (n.time, n.event)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.wheel_min_time == u64::MAX && self.far_min == u128::MAX
    }

    /// Give the pending events sequence numbers 0, 1, ... in their present order. Each keeps
    /// its place (wheel bucket or heap): the order within a bucket does not change.
    fn renumber(&mut self) {
        let mut keys: Vec<(u64, u32, u32, bool)> = self
            .far
            .drain()
            .map(|Reverse(key)| ((key >> 64) as u64, (key >> 32) as u32, key as u32, true))
            .collect();
        for &head in self.heads.iter() {
            let mut cur = head;
            while cur != NIL {
                let n = &self.nodes[cur as usize];
                keys.push((n.time, n.seq, cur, false));
                cur = n.next;
            }
        }
        keys.sort_unstable();
        let mut far = Vec::new();
        for (seq, &(time, _, slot, in_far)) in keys.iter().enumerate() {
            self.nodes[slot as usize].seq = seq as u32;
            if in_far {
                far.push(Reverse(
                    (time as u128) << 64 | (seq as u128) << 32 | slot as u128,
                ));
            }
        }
        self.far = BinaryHeap::from(far);
        self.far_min = self.far.peek().map_or(u128::MAX, |&Reverse(key)| key);
        self.set_wheel_min(self.base as usize % BUCKETS);
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
    fn a_heap_event_and_a_wheel_event_of_one_time_leave_in_push_order() {
        let mut q = EventQueue::default();
        let t = WHEEL_NS + 5;
        q.push(t, free(0)); // past the window: to the heap
        q.push(2 * WHEEL_NS, free(9));
        q.push(WHEEL_NS / 2, idle(1));
        assert_eq!(q.pop(), Some((WHEEL_NS / 2, idle(1))));
        // The window now reaches `t`: these go to the wheel, after the heap's event of `t`.
        q.push(t, free(2));
        q.push(t - 1, idle(3));
        assert_eq!(q.far.len(), 2);
        assert_eq!(q.peek(), Some((t - 1, idle(3))));
        let expected = [
            (t - 1, idle(3)),
            (t, free(0)),
            (t, free(2)),
            (2 * WHEEL_NS, free(9)),
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
