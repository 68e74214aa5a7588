//! Priority scheduling with aging: host reads, then host writes (with the foreground GC they
//! wait for), then background GC, then erases; within a class, arrival order. A transaction
//! rises one class for every `aging_ns` it has waited, so GC and erases are served under a
//! sustained host load instead of starving (the priority classes of MQSim's
//! `TSU_Priority_OutOfOrder` and of FLIN, Tavakkol et al., ISCA 2018, without its fairness
//! control).

use super::{host_read, min_head, DieContext, Heads, Scheduler};

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
        // Each queue is in arrival order, so its head has waited longest of its class.
        min_head(heads, |c| {
            let waited = die.now_ns.saturating_sub(c.enqueued_ns);
            (c.class as i64 - (waited / self.aging_ns) as i64, c.seq)
        })
    }
}
