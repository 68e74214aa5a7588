//! First come, first served: the die serves its transactions in arrival order. (Runs with
//! `fcfs` and no suspend use the reservation fast path, which gives the same order without
//! events; this policy serves the event engine when suspend is on.)

use super::{host_read, min_head, DieContext, Heads, Scheduler};

pub struct Fcfs;

impl Scheduler for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }

    fn pick(&mut self, heads: &Heads, die: &DieContext) -> Option<usize> {
        if die.reads_only {
            return host_read(heads);
        }
        min_head(heads, |c| c.seq)
    }
}
