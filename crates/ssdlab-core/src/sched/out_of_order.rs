//! Out-of-order scheduling after MQSim's `TSU_OutofOrder`: reads (host or GC) before programs
//! before erases, each in arrival order, and a die whose channel is busy serves work that does
//! not need the channel to start (an erase, a copyback, an array read) rather than waiting for
//! the bus. There is no aging: under a read flood, writes wait (the policy's known weakness).

use super::{first_read, Candidate, DieContext, Scheduler, TxnKind};

pub struct OutOfOrder;

fn kind_rank(kind: TxnKind) -> u8 {
    match kind {
        TxnKind::Read => 0,
        TxnKind::Program => 1,
        TxnKind::Erase => 2,
    }
}

impl Scheduler for OutOfOrder {
    fn name(&self) -> &'static str {
        "out_of_order"
    }

    fn pick(&mut self, queue: &[Candidate], die: &DieContext) -> Option<usize> {
        if die.reads_only {
            return first_read(queue);
        }
        let mut best: Option<(bool, u8, u64, usize)> = None;
        for (i, c) in queue.iter().enumerate() {
            let blocked = !die.channel_free && c.needs_channel_first;
            let key = (blocked, kind_rank(c.kind), c.enqueued_ns, i);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        best.map(|(_, _, _, i)| i)
    }
}
