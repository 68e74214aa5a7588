//! Out-of-order scheduling after MQSim's `TSU_OutofOrder`: host reads, then the other reads (GC
//! and read-modify-write), then programs, then erases, each in arrival order, and a die whose
//! channel is busy serves work that does not need the channel to start (an erase, a copyback, an
//! array read) rather than waiting for the bus. Host reads go before GC reads as MQSim's user
//! read queue goes before its GC read queue while GC is not urgent: a GC step's reads cannot be
//! suspended, and queued together they would hold a host read for all of them. There is no
//! aging: under a read flood, writes wait (the policy's known weakness).

use super::{host_read, min_head, DieContext, Heads, Scheduler, TxnClass, TxnKind};

pub struct OutOfOrder;

fn rank(kind: TxnKind, class: TxnClass) -> u8 {
    match (kind, class) {
        (TxnKind::Read, TxnClass::HostRead) => 0,
        (TxnKind::Read, _) => 1,
        (TxnKind::Program, _) => 2,
        (TxnKind::Erase, _) => 3,
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
            (blocked, rank(c.kind, c.class), c.seq)
        })
    }
}
