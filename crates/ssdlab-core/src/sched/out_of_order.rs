//! Out-of-order scheduling after MQSim's `TSU_OutofOrder`: reads (host or GC) before programs
//! before erases, each in arrival order, and a die whose channel is busy serves work that does
//! not need the channel to start (an erase, a copyback, an array read) rather than waiting for
//! the bus. There is no aging: under a read flood, writes wait (the policy's known weakness).

use super::{host_read, min_head, DieContext, Heads, Scheduler, TxnKind};

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

    fn pick(&mut self, heads: &Heads, die: &DieContext) -> Option<usize> {
        if die.reads_only {
            return host_read(heads);
        }
        min_head(heads, |c| {
            let blocked = !die.channel_free && c.needs_channel_first;
            (blocked, kind_rank(c.kind), c.seq)
        })
    }
}
