//! Die scheduling: which queued flash transaction a free die serves next.
//!
//! Each die has its own transaction queues, one per kind of work (host reads; host-write-path
//! reads and programs; background-GC reads and programs; erases), each in arrival order, as
//! MQSim's transaction scheduling unit (`TSU_*`) keeps per-chip queues by type and source. When
//! the die becomes free, the engine shows the policy the head of each queue (its oldest
//! transaction) and whether the channel is free; the policy picks a queue and never changes
//! anything. Since every queue is in arrival order, comparing heads is enough for arrival-order,
//! class and aging decisions, and a pick costs the same however long the queues are. One file
//! per policy (`fcfs`, `priority`, `out_of_order`); adding one touches its file and
//! [`scheduler`].

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

/// The queues of a die.
pub const QUEUES: usize = 6;

/// Which queue of its die a transaction waits in: host reads (0); reads (1) and programs or
/// erases (2) of the host-write path; the same of background GC (3, 4); erases (5).
#[inline]
pub fn queue_of(kind: TxnKind, class: TxnClass) -> usize {
    // By (class, kind), Read, Program, Erase: a table lookup, not a chain of branches.
    const QUEUE: [[u8; 3]; 4] = [[0, 0, 0], [1, 2, 2], [3, 4, 4], [5, 5, 5]];
    QUEUE[class as usize][kind as usize] as usize
}

/// The head of one queue as a policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    pub kind: TxnKind,
    pub class: TxnClass,
    /// When it entered the die's queue.
    pub enqueued_ns: u64,
    /// Arrival order among all of the die's transactions (ties of `enqueued_ns`).
    pub seq: u64,
    /// It needs the channel as soon as it starts (a program's data transfer).
    pub needs_channel_first: bool,
}

/// The head of each queue of a die ([`queue_of`] gives the index), `None` where empty.
pub type Heads = [Option<Candidate>; QUEUES];

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
    /// The queue whose head the die serves next, or `None` to leave it idle (for instance
    /// when only host reads may run and none is queued).
    fn pick(&mut self, heads: &Heads, die: &DieContext) -> Option<usize>;
}

/// The policy registry.
pub fn scheduler(kind: SchedulerKind, aging_ns: u64) -> Box<dyn Scheduler> {
    match kind {
        SchedulerKind::Fcfs => Box::new(Fcfs),
        SchedulerKind::Priority => Box::new(Priority::new(aging_ns)),
        SchedulerKind::OutOfOrder => Box::new(OutOfOrder),
    }
}

/// The host-read queue, if it holds anything (what every policy serves during a suspension).
fn host_read(heads: &Heads) -> Option<usize> {
    heads[0].map(|_| 0)
}

/// The queue index minimising `key` over the non-empty heads.
#[inline]
fn min_head<K: Ord>(heads: &Heads, mut key: impl FnMut(&Candidate) -> K) -> Option<usize> {
    heads
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.as_ref().map(|c| (key(c), i)))
        .min()
        .map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use TxnKind::{Erase, Program, Read};

    fn c(kind: TxnKind, class: TxnClass, at: u64) -> Candidate {
        Candidate {
            kind,
            class,
            enqueued_ns: at,
            seq: at,
            needs_channel_first: kind == Program,
        }
    }

    /// Queue heads of a die holding `queued` (in arrival order).
    fn heads(queued: &[Candidate]) -> Heads {
        let mut h: Heads = [None; QUEUES];
        for c in queued {
            let q = queue_of(c.kind, c.class);
            if h[q].is_none() {
                h[q] = Some(*c);
            }
        }
        h
    }

    fn ctx(now: u64) -> DieContext {
        DieContext {
            now_ns: now,
            channel_free: true,
            reads_only: false,
        }
    }

    #[test]
    fn each_kind_and_class_has_its_queue() {
        for kind in [Read, Program, Erase] {
            let read = kind == Read;
            assert_eq!(queue_of(kind, TxnClass::HostRead), 0);
            assert_eq!(
                queue_of(kind, TxnClass::HostWrite),
                if read { 1 } else { 2 }
            );
            assert_eq!(queue_of(kind, TxnClass::Gc), if read { 3 } else { 4 });
            assert_eq!(queue_of(kind, TxnClass::Erase), 5);
        }
    }

    #[test]
    fn each_policy_orders_a_mixed_queue_its_own_way() {
        let h = heads(&[
            c(Erase, TxnClass::Erase, 0),
            c(Program, TxnClass::Gc, 1),
            c(Read, TxnClass::Gc, 2),
            c(Program, TxnClass::HostWrite, 3),
            c(Read, TxnClass::HostRead, 4),
        ]);
        assert_eq!(Fcfs.pick(&h, &ctx(10)), Some(5), "the erase came first");
        assert_eq!(Priority::new(1_000_000).pick(&h, &ctx(10)), Some(0));
        // Out of order: host reads first, though the GC read came first.
        assert_eq!(OutOfOrder.pick(&h, &ctx(10)), Some(0));
        let no_host_read = heads(&[c(Program, TxnClass::HostWrite, 0), c(Read, TxnClass::Gc, 2)]);
        assert_eq!(
            OutOfOrder.pick(&no_host_read, &ctx(10)),
            Some(queue_of(Read, TxnClass::Gc)),
            "then the other reads, before programs"
        );
        // During a suspension only host reads run, under every policy.
        let suspended = DieContext {
            reads_only: true,
            ..ctx(10)
        };
        let writes = heads(&[
            c(Program, TxnClass::HostWrite, 0),
            c(Erase, TxnClass::Erase, 1),
            c(Read, TxnClass::Gc, 2),
        ]);
        for mut p in [
            Box::new(Fcfs) as Box<dyn Scheduler>,
            Box::new(Priority::new(1_000)),
            Box::new(OutOfOrder),
        ] {
            assert_eq!(p.pick(&writes, &suspended), None, "{}", p.name());
            // The host read, not the GC read queued before it.
            assert_eq!(p.pick(&h, &suspended), Some(0), "{}", p.name());
        }
    }

    #[test]
    fn priority_ages_a_starving_erase_past_new_reads() {
        let mut p = Priority::new(1_000);
        // At 2 us the erase has aged two classes (3 → 1): a fresh read still wins.
        let h = heads(&[
            c(Erase, TxnClass::Erase, 0),
            c(Read, TxnClass::HostRead, 1_900),
        ]);
        assert_eq!(p.pick(&h, &ctx(2_000)), Some(0));
        // At 4 us it has aged past every class (−1) and goes before a fresh read.
        let h = heads(&[
            c(Erase, TxnClass::Erase, 0),
            c(Read, TxnClass::HostRead, 3_900),
        ]);
        assert_eq!(p.pick(&h, &ctx(4_000)), Some(5));
    }

    #[test]
    fn priority_never_ages_a_gc_read_past_a_host_read() {
        let mut p = Priority::new(1_000);
        // Long aged, the GC read still yields to a fresh host read (it cannot be suspended)...
        let h = heads(&[
            c(Read, TxnClass::Gc, 0),
            c(Read, TxnClass::HostRead, 99_000),
        ]);
        assert_eq!(p.pick(&h, &ctx(100_000)), Some(0));
        // ...but still goes before a host write that has not aged.
        let h = heads(&[
            c(Read, TxnClass::Gc, 0),
            c(Program, TxnClass::HostWrite, 99_500),
        ]);
        assert_eq!(
            p.pick(&h, &ctx(100_000)),
            Some(queue_of(Read, TxnClass::Gc))
        );
        // An aged GC program does go first: the host read will suspend it.
        let h = heads(&[
            c(Program, TxnClass::Gc, 0),
            c(Read, TxnClass::HostRead, 99_000),
        ]);
        assert_eq!(
            p.pick(&h, &ctx(100_000)),
            Some(queue_of(Program, TxnClass::Gc))
        );
    }

    #[test]
    fn out_of_order_serves_work_that_needs_no_channel_while_it_is_busy() {
        let h = heads(&[
            c(Program, TxnClass::HostWrite, 0),
            c(Erase, TxnClass::Erase, 1),
        ]);
        let busy = DieContext {
            channel_free: false,
            ..ctx(10)
        };
        assert_eq!(OutOfOrder.pick(&h, &busy), Some(5));
        assert_eq!(OutOfOrder.pick(&h, &ctx(10)), Some(2));
    }
}
