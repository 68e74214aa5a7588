//! Channel arbitration by the die policy. A channel carries one transfer at a time: a
//! program's data in (its die is held, the array phase waits for the data) or a sensed read's
//! data out (the page waits in the die's register; without cache read the die is held too). A
//! transfer asks for its channel when it is ready; a free channel with nobody waiting grants it
//! at once, else it waits, and when the channel frees, the scheduler of the dies (`sched/`)
//! picks among the waiting transfers exactly as it picks among a die's queued transactions:
//! the earliest waiting transfer of each kind and class is a queue head, ready time standing
//! for arrival. So `priority` sends host reads' data before host writes' and GC's (with the
//! same aging), `out_of_order` reads first, `fcfs` in the order transfers became ready.
//!
//! A program's end is known when its transfer is granted, not when its die starts it: the die
//! is busy from the start (it holds the program's command), and the end event is scheduled at
//! the grant. The channel is free between transfers, so a transfer never reserves a slot ahead
//! of a transfer that is ready earlier.

use super::{Device, Event};
use crate::sched::{queue_of, Candidate, DieContext, Heads, TxnClass, TxnKind, QUEUES};

/// A transfer waiting for its channel.
#[derive(Debug, Clone, Copy)]
pub(super) struct Transfer {
    die: u32,
    /// Leader of the die's operation (the multi-plane group's first transaction).
    leader: u32,
    kind: TxnKind,
    class: TxnClass,
    /// Time on the bus: its pages, or the codewords a host read wants of its page.
    xfer_ns: u32,
    /// A program's array time after its data is in (0 for reads).
    array_ns: u64,
    ready_ns: u64,
    seq: u64,
}

/// One channel's waiting transfers.
#[derive(Debug, Default)]
pub(super) struct ChannelQueue {
    waiting: Vec<Transfer>,
    /// A `ChannelFree` event is pending for this channel.
    wake_pending: bool,
}

impl ChannelQueue {
    pub(super) fn is_idle(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The oldest waiting transfer of each kind and class, as the policy sees queue heads.
    fn heads(&self) -> (Heads, [usize; QUEUES]) {
        let mut heads: Heads = [None; QUEUES];
        let mut index = [usize::MAX; QUEUES];
        for (i, t) in self.waiting.iter().enumerate() {
            let q = queue_of(t.kind, t.class);
            if heads[q].is_none_or(|h| t.seq < h.seq) {
                heads[q] = Some(Candidate {
                    kind: t.kind,
                    class: t.class,
                    enqueued_ns: t.ready_ns,
                    seq: t.seq,
                    needs_channel_first: false,
                });
                index[q] = i;
            }
        }
        (heads, index)
    }
}

impl Device {
    /// The operation `leader` just started on `die` needs the channel now (a program's data
    /// in) or at `ready_ns` (a read's data out, once sensed: called from its `Sensed` event).
    /// True when the channel was free and granted the transfer at once.
    #[inline(always)]
    pub(super) fn request_channel(
        &mut self,
        die: u32,
        leader: u32,
        xfer_ns: u32,
        array_ns: u64,
    ) -> bool {
        let channel = self.geo.channel_of_die(die) as usize;
        let e = self.engine();
        let now = e.now_ns;
        let t = &e.txns[leader as usize];
        let transfer = Transfer {
            die,
            leader,
            kind: t.kind,
            class: t.class,
            xfer_ns,
            array_ns,
            ready_ns: now,
            seq: e.channel_seq,
        };
        e.channel_seq += 1;
        if e.channel_free_ns[channel] <= now && e.channels[channel].is_idle() {
            self.grant(channel, transfer);
            return true;
        }
        e.channels[channel].waiting.push(transfer);
        self.wake_channel(channel);
        false
    }

    /// Make sure the channel looks at its waiting transfers when it is next free.
    fn wake_channel(&mut self, channel: usize) {
        let e = self.engine();
        if e.channels[channel].wake_pending || e.channels[channel].is_idle() {
            return;
        }
        e.channels[channel].wake_pending = true;
        let at = e.channel_free_ns[channel].max(e.now_ns);
        e.schedule(
            at,
            Event::ChannelFree {
                channel: channel as u32,
            },
        );
    }

    /// The channel may be free: grant the waiting transfer the policy ranks first.
    pub(super) fn channel_free(&mut self, channel: u32) {
        let c = channel as usize;
        let e = self.engine();
        e.channels[c].wake_pending = false;
        if e.channels[c].is_idle() {
            return;
        }
        let now = e.now_ns;
        if e.channel_free_ns[c] > now {
            self.wake_channel(c);
            return;
        }
        let (heads, index) = e.channels[c].heads();
        let context = DieContext {
            now_ns: now,
            channel_free: true,
            reads_only: false,
        };
        let pick = e
            .sched
            .pick(&heads, &context)
            .expect("a policy picks among waiting transfers");
        let transfer = e.channels[c].waiting.swap_remove(index[pick]);
        self.grant(c, transfer);
        self.wake_channel(c);
    }

    /// Give the channel to `t` from now: a program's array phase starts when its data is in,
    /// a read's data is on the controller when its data is out.
    #[inline(always)]
    fn grant(&mut self, channel: usize, t: Transfer) {
        let cache_read = self.config.channel.cache_read;
        let e = self.engine();
        let now = e.now_ns;
        let end = now + t.xfer_ns as u64;
        e.channel_free_ns[channel] = end;
        let d = t.die as usize;
        // The die's operation ends with the transfer (a read without cache read) or with the
        // array phase after it (a program); with cache read the die is free already.
        let die_end = match t.kind {
            TxnKind::Program => Some(end + t.array_ns),
            _ if cache_read => None,
            _ => Some(end),
        };
        match die_end {
            Some(done) => {
                e.dies[d].die.granted(end, done);
                let generation = e.dies[d].die.generation;
                e.schedule(
                    done,
                    Event::DieFree {
                        die: t.die,
                        generation,
                    },
                );
                e.refresh_load(t.die);
            }
            None => e.schedule(end, Event::ReadDone { leader: t.leader }),
        }
        self.timeline.channel_busy_ns += t.xfer_ns as u64;
        if t.kind == TxnKind::Program {
            // Its array phase has a start now: reads waiting at the die may suspend it.
            self.suspend_for_waiting_reads(t.die);
        }
    }

    /// A read's pages are sensed into the die's register: their data (`xfer_ns` of it) asks
    /// for the channel.
    pub(super) fn sensed(&mut self, die: u32, leader: u32, xfer_ns: u32) {
        self.request_channel(die, leader, xfer_ns, 0);
    }
}
