//! Idle-time GC checks: a die that goes idle with a plane below the background watermark gets a
//! GC step once it has stayed idle for `gc_bg_idle_ns`.
//!
//! A die goes idle after nearly every operation under load and is busy again microseconds
//! later, so most checks lapse. They wait in one FIFO instead of the event queue: every check is
//! due `gc_bg_idle_ns` after the moment it was made, and moments only advance, so the FIFO is in
//! due order. One `IdleCheck` event stands for its front. A check lapses for good once its die
//! starts anything (the die's generation moves on) or goes idle again (a newer check of the die
//! replaces it), so lapsed checks leave the front whenever the event runs, due or not, and the
//! next event is set for the first check still live. Both marks are the die's own
//! (`DieWork::idle_stamp`), so a check is judged from one place.

use super::{Device, DeviceError, Event, TxnClass, NONE};
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Check {
    due_ns: u64,
    die: u32,
    /// The die's idle stamp when it went idle: its generation (a later start makes the check
    /// lapse) and its check count (so does a later check of the die).
    stamp: u64,
}

#[derive(Debug, Default)]
pub(super) struct IdleChecks {
    checks: VecDeque<Check>,
    /// An `IdleCheck` event is pending for the front.
    wake_pending: bool,
}

impl IdleChecks {
    /// Die `die` (with idle stamp `stamp`) went idle at `now_ns`: its check is due `idle_ns`
    /// later. Returns the time of an `IdleCheck` event to schedule, if none is pending.
    fn push(&mut self, die: u32, stamp: u64, now_ns: u64, idle_ns: u64) -> Option<u64> {
        let due_ns = now_ns + idle_ns;
        debug_assert!(self.checks.back().is_none_or(|c| c.due_ns <= due_ns));
        self.checks.push_back(Check { due_ns, die, stamp });
        (!std::mem::replace(&mut self.wake_pending, true)).then_some(due_ns)
    }

    /// Take the front check if it is due by `now_ns` and still live (`stamp_of` gives a die's
    /// present idle stamp), dropping the lapsed ones before it. `None` when the front is
    /// live and not due yet, or the FIFO is empty.
    fn take_due(&mut self, now_ns: u64, stamp_of: impl Fn(u32) -> u64) -> Option<u32> {
        while let Some(&c) = self.checks.front() {
            let live = c.stamp == stamp_of(c.die);
            if live && c.due_ns > now_ns {
                return None;
            }
            self.checks.pop_front();
            if live {
                return Some(c.die);
            }
        }
        None
    }

    /// After the event ran: when the next one is due (the front's check), if any is left.
    fn rearm(&mut self) -> Option<u64> {
        let front = self.checks.front()?;
        self.wake_pending = true;
        Some(front.due_ns)
    }
}

impl Device {
    /// Die `die` went idle with nothing queued: if a plane of it wants background GC, it is
    /// checked again once it has stayed idle for `gc_bg_idle_ns`.
    pub(super) fn maybe_idle_gc(&mut self, die: u32) {
        let first = die * self.geo.planes_per_die;
        if !self
            .ftl
            .any_wants_background_gc(first..first + self.geo.planes_per_die)
        {
            return;
        }
        let idle_ns = self.config.ftl.gc_bg_idle_ns;
        let e = self.engine.as_mut().expect("engine");
        let work = &mut e.dies[die as usize];
        work.idle_checks = work.idle_checks.wrapping_add(1);
        if let Some(at) = e.idle.push(die, work.idle_stamp(), e.now_ns, idle_ns) {
            e.schedule(at, Event::IdleCheck);
        }
    }

    /// The `IdleCheck` event: each due check whose die has stayed idle since runs a GC step
    /// there (not once the run has issued its last request: its end is its last completion).
    pub(super) fn idle_checks_due(&mut self) -> Result<(), DeviceError> {
        let e = self.engine.as_mut().expect("engine");
        e.idle.wake_pending = false;
        loop {
            let e = self.engine.as_mut().expect("engine");
            let now = e.now_ns;
            let dies = &e.dies;
            let Some(die) = e.idle.take_due(now, |d| dies[d as usize].idle_stamp()) else {
                break;
            };
            if e.source_done || e.dies[die as usize].die.is_busy(now) || !e.die_queues_empty(die) {
                continue;
            }
            self.background_gc_step(die)?;
        }
        let e = self.engine.as_mut().expect("engine");
        if let Some(at) = e.idle.rearm() {
            e.schedule(at, Event::IdleCheck);
        }
        Ok(())
    }

    /// One background GC step on `die`, in the next of its planes (round robin) that wants it.
    fn background_gc_step(&mut self, die: u32) -> Result<(), DeviceError> {
        let now = self.engine().now_ns;
        let d = die as usize;
        let planes = self.geo.planes_per_die;
        let start = self.engine().dies[d].bg_plane_cursor;
        for k in 0..planes {
            let offset = (start + k) % planes;
            let plane = die * planes + offset;
            if !self.ftl.wants_background_gc(plane) {
                continue;
            }
            self.engine().dies[d].bg_plane_cursor = (offset + 1) % planes;
            self.ops.clear();
            let mut ops = std::mem::take(&mut self.ops);
            let result =
                self.ftl
                    .background_gc(plane, now, self.config.ftl.gc_step_pages, &mut ops);
            self.ftl_ops_to_txns(&ops, now, TxnClass::Gc, NONE, TxnClass::Gc, true);
            self.ops = ops;
            return result.map(|_| ()).map_err(Into::into);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle stamp: generation and check count, as `DieWork::idle_stamp` makes it.
    fn stamp(generation: u32, checks: u32) -> u64 {
        (generation as u64) << 32 | checks as u64
    }

    #[test]
    fn a_check_is_due_after_the_idle_time_unless_its_die_worked_or_idled_again() {
        let mut idle = IdleChecks::default();
        let stamps = std::cell::RefCell::new(vec![stamp(5, 1), stamp(9, 1), stamp(2, 1)]);
        let stamp_of = |d: u32| stamps.borrow()[d as usize];
        // The first check schedules the event; later ones ride on it.
        assert_eq!(idle.push(0, stamp(5, 1), 100, 1_000), Some(1_100));
        assert_eq!(idle.push(1, stamp(9, 1), 200, 1_000), None);
        assert_eq!(idle.push(2, stamp(2, 1), 300, 1_000), None);
        // Die 1 starts something: its check lapses. Die 2 idles again: the newer check counts.
        stamps.borrow_mut()[1] = stamp(10, 1);
        stamps.borrow_mut()[2] = stamp(2, 2);
        assert_eq!(idle.push(2, stamp(2, 2), 400, 1_000), None);
        idle.wake_pending = false;
        // Not due yet: nothing taken, the lapsed ones stay behind the live front.
        assert_eq!(idle.take_due(1_099, stamp_of), None);
        assert_eq!(idle.rearm(), Some(1_100));
        idle.wake_pending = false;
        assert_eq!(idle.take_due(1_100, stamp_of), Some(0));
        // At 1,300 die 1's check has lapsed, and die 2's first check was replaced.
        assert_eq!(idle.take_due(1_300, stamp_of), None);
        assert_eq!(idle.rearm(), Some(1_400));
        idle.wake_pending = false;
        assert_eq!(idle.take_due(1_400, stamp_of), Some(2));
        assert_eq!(idle.take_due(5_000, stamp_of), None);
        assert_eq!(idle.rearm(), None);
        assert!(!idle.wake_pending);
    }

    #[test]
    fn lapsed_checks_leave_the_front_before_they_are_due() {
        let mut idle = IdleChecks::default();
        let stamps = std::cell::RefCell::new(vec![stamp(1, 1), stamp(1, 1)]);
        let stamp_of = |d: u32| stamps.borrow()[d as usize];
        idle.push(0, stamp(1, 1), 0, 1_000);
        idle.push(1, stamp(1, 1), 10, 1_000);
        stamps.borrow_mut()[0] = stamp(2, 1);
        idle.wake_pending = false;
        // Die 0's check lapsed long before it is due: the event is set for die 1's.
        assert_eq!(idle.take_due(500, stamp_of), None);
        assert_eq!(idle.checks.len(), 1);
        assert_eq!(idle.rearm(), Some(1_010));
    }
}
