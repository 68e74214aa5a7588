//! Die scheduling: which queued flash transaction a free die serves next.
//!
//! Each die has its own queue of transactions (host reads and writes, GC reads and programs,
//! erases). When the die becomes free, the engine asks the policy to pick one from that queue;
//! the policy sees each candidate's kind, class, age and whether its channel is free, and never
//! changes anything. This is MQSim's transaction scheduling unit (`TSU_*`), one file per policy
//! (`fcfs`, `priority`, `out_of_order`); adding one touches its file and [`scheduler`].

mod fcfs;
mod out_of_order;
mod priority;

pub use fcfs::Fcfs;
pub use out_of_order::OutOfOrder;
pub use priority::Priority;

use crate::config::SchedulerKind;

/// What a transaction does on the die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnKind {
    Read,
    Program,
    Erase,
}

/// Why a transaction exists, highest priority first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TxnClass {
    HostRead = 0,
    /// Host programs, read-modify-write reads, and the foreground GC a host write waits for.
    HostWrite = 1,
    /// Background GC reads and programs.
    Gc = 2,
    Erase = 3,
}

/// One queued transaction as a policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    pub kind: TxnKind,
    pub class: TxnClass,
    /// When it entered the die's queue.
    pub enqueued_ns: u64,
    /// It needs the channel as soon as it starts (a program's data transfer).
    pub needs_channel_first: bool,
}

/// What the die and its channel are doing when the policy is asked.
#[derive(Debug, Clone, Copy)]
pub struct DieContext {
    pub now_ns: u64,
    pub channel_free: bool,
    /// A program or erase is suspended on the die: only host reads may run before it resumes
    /// (suspending for a GC read would only delay both).
    pub reads_only: bool,
}

/// Picks the next transaction of a die.
pub trait Scheduler: Send {
    fn name(&self) -> &'static str;
    /// Index into `queue` (in arrival order) of the transaction to serve, or `None` to leave
    /// the die idle (for instance when only reads may run and none is queued).
    fn pick(&mut self, queue: &[Candidate], die: &DieContext) -> Option<usize>;
}

/// The policy registry.
pub fn scheduler(kind: SchedulerKind, aging_ns: u64) -> Box<dyn Scheduler> {
    match kind {
        SchedulerKind::Fcfs => Box::new(Fcfs),
        SchedulerKind::Priority => Box::new(Priority::new(aging_ns)),
        SchedulerKind::OutOfOrder => Box::new(OutOfOrder),
    }
}

/// The first host read in arrival order (what every policy serves during a suspension).
fn first_read(queue: &[Candidate]) -> Option<usize> {
    queue.iter().position(|c| c.class == TxnClass::HostRead)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(kind: TxnKind, class: TxnClass, at: u64) -> Candidate {
        Candidate {
            kind,
            class,
            enqueued_ns: at,
            needs_channel_first: kind == TxnKind::Program,
        }
    }

    fn ctx(now: u64) -> DieContext {
        DieContext {
            now_ns: now,
            channel_free: true,
            reads_only: false,
        }
    }

    #[test]
    fn each_policy_orders_a_mixed_queue_its_own_way() {
        use TxnClass::{Gc, HostRead, HostWrite};
        use TxnKind::{Program, Read};
        let queue = [
            c(TxnKind::Erase, TxnClass::Erase, 0),
            c(Program, Gc, 1),
            c(Read, Gc, 2),
            c(Program, HostWrite, 3),
            c(Read, HostRead, 4),
        ];
        assert_eq!(Fcfs.pick(&queue, &ctx(10)), Some(0));
        assert_eq!(Priority::new(1_000_000).pick(&queue, &ctx(10)), Some(4));
        // Out of order: reads first in arrival order (the GC read came first).
        assert_eq!(OutOfOrder.pick(&queue, &ctx(10)), Some(2));
        // During a suspension only host reads run, under every policy.
        let suspended = DieContext {
            reads_only: true,
            ..ctx(10)
        };
        let writes = [
            c(Program, HostWrite, 0),
            c(TxnKind::Erase, TxnClass::Erase, 1),
        ];
        for mut p in [
            Box::new(Fcfs) as Box<dyn Scheduler>,
            Box::new(Priority::new(1_000)),
            Box::new(OutOfOrder),
        ] {
            assert_eq!(p.pick(&writes, &suspended), None, "{}", p.name());
            // The host read, not the GC read queued before it.
            assert_eq!(p.pick(&queue, &suspended), Some(4), "{}", p.name());
        }
    }

    #[test]
    fn priority_ages_a_starving_erase_past_new_reads() {
        use TxnKind::*;
        let mut p = Priority::new(1_000);
        // At 2 us the erase has aged two classes (3 → 1): a fresh read still wins.
        let queue = [
            c(Erase, TxnClass::Erase, 0),
            c(Read, TxnClass::HostRead, 1_900),
        ];
        assert_eq!(p.pick(&queue, &ctx(2_000)), Some(1));
        // At 4 us it has aged past every class (−1) and goes before a fresh read.
        let queue = [
            c(Erase, TxnClass::Erase, 0),
            c(Read, TxnClass::HostRead, 3_900),
        ];
        assert_eq!(p.pick(&queue, &ctx(4_000)), Some(0));
    }

    #[test]
    fn out_of_order_serves_work_that_needs_no_channel_while_it_is_busy() {
        use TxnKind::*;
        let queue = [
            c(Program, TxnClass::HostWrite, 0),
            c(Erase, TxnClass::Erase, 1),
        ];
        let busy = DieContext {
            channel_free: false,
            ..ctx(10)
        };
        assert_eq!(OutOfOrder.pick(&queue, &busy), Some(1));
        assert_eq!(OutOfOrder.pick(&queue, &ctx(10)), Some(0));
    }
}
