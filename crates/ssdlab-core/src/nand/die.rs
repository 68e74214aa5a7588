//! The die as a state machine: idle, busy with one array operation, or with a program or erase
//! suspended so that reads can be served (Wu & He, "Reducing SSD read latency via NAND flash
//! program and erase suspension", FAST 2012).
//!
//! Mechanism only: the engine decides when to start, suspend and resume; the die keeps what is
//! needed to do so exactly. Suspending at time t (or when the operation's array phase starts,
//! if its data is still being transferred in) keeps the remaining array time; the die is then
//! busy for `suspend_ns`, serves reads, and resuming costs `resume_ns` plus the remaining time.
//! A generation number changes with every transition, so an event scheduled for an earlier
//! state is recognised as stale.

use crate::sched::TxnKind;

/// An operation in service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveOp {
    /// Engine handle of the operation.
    pub id: u32,
    pub kind: TxnKind,
    /// When its array phase starts (after a program's data transfer).
    pub array_start_ns: u64,
    pub end_ns: u64,
    /// Times it has been suspended already, and how many times it may be: `cell.max_suspends`
    /// for one program or erase, that many per page program for a GC step of several
    /// copybacks run back to back (each of its programs is an operation of its own).
    pub suspends: u32,
    pub max_suspends: u32,
    /// A read whose data is on the controller when the die is free (no cache read).
    pub read_done_with_die: bool,
    /// Waiting for the channel (a program's data in, a sensed read's data out without cache
    /// read): `end_ns` is an estimate until the transfer is granted, and nothing suspends it.
    pub awaiting_channel: bool,
}

/// A program or erase waiting for the reads that suspended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuspendedOp {
    pub id: u32,
    pub kind: TxnKind,
    pub remaining_ns: u64,
    pub suspends: u32,
    pub max_suspends: u32,
}

#[derive(Debug, Clone, Default)]
pub struct Die {
    /// When the die is next free: the end of the operation in service, of a suspension, or of
    /// work handed over from the reservation timeline.
    pub free_at_ns: u64,
    pub generation: u32,
    pub active: Option<ActiveOp>,
    pub suspended: Option<SuspendedOp>,
}

impl Die {
    pub fn is_busy(&self, now_ns: u64) -> bool {
        self.active.is_some() || self.free_at_ns > now_ns
    }

    /// Start `op`; the die is busy until its end.
    pub fn start(&mut self, op: ActiveOp) {
        self.free_at_ns = op.end_ns;
        self.active = Some(op);
        self.generation = self.generation.wrapping_add(1);
    }

    /// The channel granted the operation in service its transfer: its array phase starts at
    /// `array_start_ns` (a program) and it ends at `end_ns`. The generation stays: the end
    /// event is scheduled now, for the first time.
    pub fn granted(&mut self, array_start_ns: u64, end_ns: u64) {
        let op = self
            .active
            .as_mut()
            .expect("an operation waiting for the channel");
        debug_assert!(op.awaiting_channel);
        op.awaiting_channel = false;
        op.array_start_ns = array_start_ns;
        op.end_ns = end_ns;
        self.free_at_ns = end_ns;
    }

    /// The operation in service is done (its end event fired).
    pub fn finish(&mut self) -> Option<ActiveOp> {
        self.active.take()
    }

    /// May a read arriving at `now_ns` suspend the operation in service (within its budget)?
    pub fn can_suspend(&self, now_ns: u64) -> bool {
        self.suspended.is_none()
            && self.active.is_some_and(|op| {
                matches!(op.kind, TxnKind::Program | TxnKind::Erase)
                    && !op.awaiting_channel
                    && op.suspends < op.max_suspends
                    && now_ns < op.end_ns
            })
    }

    /// Suspend the operation in service for a read arriving at `now_ns`. Returns when the die
    /// is free to serve reads.
    pub fn suspend(&mut self, now_ns: u64, suspend_ns: u64) -> u64 {
        let op = self.active.take().expect("an operation to suspend");
        let at = now_ns.max(op.array_start_ns);
        self.suspended = Some(SuspendedOp {
            id: op.id,
            kind: op.kind,
            remaining_ns: op.end_ns - at,
            suspends: op.suspends + 1,
            max_suspends: op.max_suspends,
        });
        self.free_at_ns = at + suspend_ns;
        self.generation = self.generation.wrapping_add(1);
        self.free_at_ns
    }

    /// Resume the suspended operation at `now_ns`: it ends `resume_ns` + its remaining time
    /// later.
    pub fn resume(&mut self, now_ns: u64, resume_ns: u64) -> ActiveOp {
        let s = self.suspended.take().expect("an operation to resume");
        let op = ActiveOp {
            id: s.id,
            kind: s.kind,
            array_start_ns: now_ns,
            end_ns: now_ns + resume_ns + s.remaining_ns,
            suspends: s.suspends,
            max_suspends: s.max_suspends,
            read_done_with_die: false,
            awaiting_channel: false,
        };
        self.start(op);
        op
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suspended_program_keeps_its_remaining_time() {
        let mut die = Die::default();
        die.start(ActiveOp {
            id: 7,
            kind: TxnKind::Program,
            array_start_ns: 10_000,
            end_ns: 710_000,
            suspends: 0,
            max_suspends: 1,
            read_done_with_die: false,
            awaiting_channel: false,
        });
        assert!(die.can_suspend(300_000));
        let g = die.generation;
        assert_eq!(die.suspend(300_000, 5_000), 305_000);
        assert_ne!(die.generation, g);
        assert!(!die.can_suspend(300_000));
        let op = die.resume(400_000, 6_000);
        assert_eq!(op.end_ns, 400_000 + 6_000 + 410_000);
        // The cap counts suspensions of this operation, across its resumption.
        assert_eq!((op.suspends, op.max_suspends), (1, 1));
        assert!(!die.can_suspend(500_000));
        die.active.as_mut().unwrap().max_suspends = 2;
        assert!(die.can_suspend(500_000));
    }

    #[test]
    fn a_read_during_the_data_transfer_suspends_when_the_array_phase_starts() {
        let mut die = Die::default();
        die.start(ActiveOp {
            id: 1,
            kind: TxnKind::Erase,
            array_start_ns: 50,
            end_ns: 1_050,
            suspends: 0,
            max_suspends: 5,
            read_done_with_die: false,
            awaiting_channel: false,
        });
        assert_eq!(die.suspend(20, 5), 55);
        assert_eq!(die.suspended.unwrap().remaining_ns, 1_000);
        assert!(!die.can_suspend(60), "nothing in service while suspended");
    }
}
