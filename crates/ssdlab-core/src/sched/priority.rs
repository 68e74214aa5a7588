//! Priority scheduling with aging: host reads, then host writes (with the foreground GC they
//! wait for), then background GC, then erases; within a class, arrival order. A transaction
//! rises one class for every `aging_ns` it has waited, so GC and erases are served under a
//! sustained host load instead of starving (the priority classes of MQSim's
//! `TSU_Priority_OutOfOrder` and of FLIN, Tavakkol et al., ISCA 2018, without its fairness
//! control).

use super::{host_read, min_head, DieContext, Heads, Scheduler, TxnClass, TxnKind};

pub struct Priority {
    aging_ns: u64,
}

impl Priority {
    pub fn new(aging_ns: u64) -> Self {
        Priority {
            aging_ns: aging_ns.max(1),
        }
    }
}

impl Scheduler for Priority {
    fn name(&self) -> &'static str {
        "priority"
    }

    fn pick(&mut self, heads: &Heads, die: &DieContext) -> Option<usize> {
        if die.reads_only {
            return host_read(heads);
        }
        // Effective class = class − waited / aging (may go below 0); lowest wins, then oldest.
        // Each queue is in arrival order, so its head has waited longest of its class. A GC or
        // write-path read never rises above host reads: it cannot be suspended, and a step's
        // reads aged together would hold a waiting host read for all of them. An aged program
        // or erase may start ahead of host reads, which then suspend it (within its budget), so
        // it progresses between them and nothing starves.
        min_head(heads, |c| {
            let waited = die.now_ns.saturating_sub(c.enqueued_ns);
            // Most heads have waited less than one aging period: no 64-bit division for them
            // (tens of cycles on some cores, once per queue head of every pick).
            let aged = match waited < self.aging_ns {
                true => 0,
                false => waited / self.aging_ns,
            };
            let mut class = c.class as i64 - aged as i64;
            if c.kind == TxnKind::Read && c.class != TxnClass::HostRead {
                class = class.max(TxnClass::HostRead as i64 + 1);
            }
            (class, c.seq)
        })
    }
}
