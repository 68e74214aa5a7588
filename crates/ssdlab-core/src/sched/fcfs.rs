//! First come, first served: the die serves its queue in arrival order. (Runs with `fcfs` and
//! no suspend use the reservation fast path, which gives the same order without events; this
//! policy serves the event engine when suspend is on.)

use super::{first_read, Candidate, DieContext, Scheduler};

pub struct Fcfs;

impl Scheduler for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }

    fn pick(&mut self, queue: &[Candidate], die: &DieContext) -> Option<usize> {
        if die.reads_only {
            return first_read(queue);
        }
        (!queue.is_empty()).then_some(0)
    }
}
