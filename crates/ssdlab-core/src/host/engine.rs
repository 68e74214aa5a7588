//! The event engine of a run: per-die transaction queues, a scheduling policy, program/erase
//! suspend, GC as queued work, and completions in the order the device produces them.
//!
//! A request issued in a run is translated at once into flash transactions (the FTL decides
//! where data is and goes when the request arrives, as a controller's mapping does), and each
//! transaction waits in its die's queue. When a die becomes free, the [`Scheduler`] picks what
//! it does next; queued reads or programs at one page offset on other planes of the die join it
//! as one multi-plane operation. A transfer asks for its channel when it is ready (a program's
//! data in when the die starts it, a read's data out once sensed) and the channel goes to the
//! waiting transfer the same policy ranks first (`channel`); read data then crosses the host
//! link in the order it becomes ready. A host read arriving at a die that is
//! programming or erasing suspends it when `cell.suspend` allows ([`Die`]). GC moves and erases
//! are transactions too: foreground steps at the priority of the host write that waits for
//! them (the write's completion includes them, which throttles writes in proportion to the
//! shortage), background steps at GC priority when a die has been idle for `gc_bg_idle_ns`.
//! A request completes when its last transaction and its last link transfer are done.
//!
//! Only the event loop moves the engine's clock; events are ordered by (time, sequence), so a
//! run is a pure function of its inputs. Known simplifications: the mapping of a GC-moved page
//! changes when the move is decided, not when its program ends; programs into one block are not
//! forced into page order once queued; read retries re-read the page as new transactions.

use super::{page_span, Device, DeviceError};
use crate::config::MeldedReads;
use crate::ecc;
use crate::ftl::{FlashOp, UnitWrite, WriteOutcome};
use crate::nand::die::{ActiveOp, Die};
use crate::nand::timing::Timeline;
use crate::request::{HostRequest, Op};
use crate::sched::{
    queue_of, scheduler, Candidate, DieContext, Heads, Scheduler, TxnClass, TxnKind, QUEUES,
};
use events::EventQueue;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

const NONE: u32 = u32::MAX;

mod channel;
mod events;
mod ftl_work;
mod host_io;
mod idle;
mod wordline_join;

#[derive(Debug, Clone, Copy)]
struct Txn {
    kind: TxnKind,
    class: TxnClass,
    die: u32,
    plane: u32,
    page_in_block: u32,
    ppa: u32,
    array_ns: u64,
    /// Pages that cross the channel (0 for copyback; at most a wordline's).
    transfers: u16,
    /// The codewords a host read wants of its page, when fewer than all: only they cross the
    /// channel. 0: `transfers` whole pages.
    codewords: u16,
    /// Pages whose codewords are decoded after the transfer (host reads).
    decode_pages: u32,
    /// Bytes this read sends to the host.
    host_bytes: u64,
    /// Run slot of the request that waits for it, or NONE.
    request: u32,
    /// GC batch whose erase waits for it (move reads), or NONE.
    batch: u32,
    /// Transaction released when this one completes, `after_ns` later.
    next: u32,
    after_ns: u64,
    /// What it still waits for before it may be queued (a read-modify-write or GC read, a
    /// write-buffer slot), and the earliest time it may be (its data's arrival).
    gates: u8,
    not_before_ns: u64,
    enqueued_ns: u64,
    /// Arrival order in its die's queues.
    enqueue_seq: u64,
    /// Next member of a multi-plane group (the leader's chain), or NONE.
    group_next: u32,
    /// A host program out of the write buffer: frees a slot when done.
    buffer_id: Option<u64>,
    retries_left: u32,
    /// Copyback moves fused into this one die operation (a GC step on its die), or 0.
    moves: u32,
    extra_decode_ns: u64,
    uncorrectable: bool,
    sampled: bool,
    /// A host program that marked its page pending (`Engine::mark_host_program`).
    marks_pending: bool,
    background: bool,
    /// GC work (a move's read or program, a fused copyback step, a victim's erase): GC time,
    /// counted when it is made, is corrected when it shares a multi-plane operation.
    gc: bool,
}

/// `Engine::programs_since_erase` of a block being erased.
#[cfg(debug_assertions)]
const ERASING: u32 = u32::MAX;

/// What the engine tracks of one block's programs and erases (together: one cache line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BlockWork {
    /// Its latest GC erase not done yet, or NONE. The FTL opens such a block only when its
    /// plane has no erased one left (`Ftl::defer_erases`); its programs, and its next erase,
    /// then wait for that erase (`gate_on`).
    erase: u32,
    /// Programs made and not started yet (those waiting for its erase aside). A victim's
    /// erase waits until none is left (`erase_blocked`): a victim taken soon after it filled
    /// may still have programs waiting for GC reads, a buffer slot or their die. (Which of a
    /// block's free pages a program takes is not modelled: controllers bind a page when its
    /// data is ready, so a block's programs may start in any order.)
    unstarted_programs: u32,
    /// Its erase waiting for `unstarted_programs` to reach 0, or NONE.
    erase_blocked: u32,
    /// Its host pages whose program is not done (`Engine::pending_program_bits`): GC looks at
    /// a victim's pages one by one only when it has some.
    pending_host_programs: u32,
}

impl BlockWork {
    const IDLE: BlockWork = BlockWork {
        erase: NONE,
        unstarted_programs: 0,
        erase_blocked: NONE,
        pending_host_programs: 0,
    };
}

/// A die operation of several transactions (`Device::join_leader`): its members, its array
/// time, the pages and bus time of its transfers, and whether it is one melded read.
#[derive(Debug, Clone, Copy)]
struct Group {
    members: u32,
    array_ns: u64,
    transfers: u32,
    bus_ns: u64,
    melded: bool,
}

/// What the engine keeps of one die: its state machine, its queues (one per kind of work,
/// `sched::queue_of`, each in arrival order) and what they hold, together, so that a die's
/// dispatch looks in one place.
#[derive(Debug, Clone, Default)]
struct DieWork {
    die: Die,
    /// Transactions in its queues (a die with none is idle at once, without looking at them).
    queued: u32,
    /// The plane of its next background GC step (round robin).
    bg_plane_cursor: u32,
    /// Array time of the transactions assigned to it and not started yet.
    queued_work_ns: u64,
    /// Times it went idle with background GC wanted (`idle`).
    idle_checks: u32,
    queues: [VecDeque<u32>; QUEUES],
}

impl DieWork {
    /// What an idle check of the die holds it to: it lapses once the die starts anything
    /// (its generation moves on) or is checked again.
    #[inline]
    fn idle_stamp(&self) -> u64 {
        (self.die.generation as u64) << 32 | self.idle_checks as u64
    }
}

/// Move reads of one GC step that must be done before the victim's erase may start.
#[derive(Debug, Clone, Copy)]
struct Batch {
    reads_left: u32,
    erase: u32,
}

/// What the engine tracks of a request in flight: 32 bytes, touched by every transaction of
/// it (its log row, when the log is kept, lives apart in `Engine::log_rows`).
#[derive(Debug, Clone, Copy, Default)]
struct RequestState {
    /// Transactions and transfers still to finish.
    pending: u32,
    complete_ns: u64,
    /// Longest wait of one of its transactions in a die queue.
    queue_ns: u64,
    uncorrectable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Die `die` may be free (stale unless its generation is still `generation`).
    DieFree { die: u32, generation: u32 },
    /// The data of read group `leader` has crossed the channel.
    ReadDone { leader: u32 },
    /// Transaction `txn` enters its die's queue.
    Enqueue { txn: u32 },
    /// Idle-time GC checks may be due (`idle`).
    IdleCheck,
    /// The pages of read group `leader` are in `die`'s register: their data wants the channel.
    Sensed { die: u32, leader: u32, xfer_ns: u32 },
    /// Channel `channel` may be free for the next waiting transfer.
    ChannelFree { channel: u32 },
}

/// One finished request of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EngineCompletion {
    pub slot: u32,
    pub complete_ns: u64,
    pub queue_ns: u64,
    pub uncorrectable: bool,
}

pub(crate) struct Engine {
    now_ns: u64,
    events: EventQueue,
    txns: Vec<Txn>,
    free_txns: Vec<u32>,
    batches: Vec<Batch>,
    free_batches: Vec<u32>,
    dies: Vec<DieWork>,
    enqueue_seq: u64,
    /// Dies that went idle, checked for background GC once idle long enough.
    idle: idle::IdleChecks,
    /// When each die would be done with everything given to it (dynamic allocation's view).
    die_load_ns: Vec<u64>,
    channel_free_ns: Vec<u64>,
    /// Transfers waiting for each channel, and their arrival order.
    channels: Vec<channel::ChannelQueue>,
    channel_seq: u64,
    planes_per_die: u32,
    /// tR and tPROG of a page by its offset in its block (blocks hold whole wordlines, so the
    /// offset gives the page type): a copyback run's array time without a division per page.
    read_ns_at: Vec<u64>,
    program_ns_at: Vec<u64>,
    sched: Box<dyn Scheduler>,
    requests: Vec<RequestState>,
    /// Per run slot: the request's log row (duration filled at completion), when the log is
    /// kept.
    log_rows: Vec<Option<crate::stats::RequestLogRow>>,
    /// Finished requests by (completion time, order finished), packed as
    /// `complete << 64 | seq << 16 | slot` (run slots fit 16 bits): the heap moves 16 bytes
    /// per entry.
    done: BinaryHeap<Reverse<u128>>,
    done_seq: u64,
    buffer_used: u32,
    buffer_next_id: u64,
    buffer_outstanding: BTreeSet<u64>,
    /// Host pages in the write buffer whose program has not started, by page: a write to a
    /// unit of one merges into it (its data is still in the controller's memory).
    buffered_programs: BTreeMap<u32, u32>,
    /// Host pages waiting for a buffer slot: (program txn, request slot, data arrival).
    buffer_waiting: VecDeque<(u32, u32, u64)>,
    /// Flushes waiting for buffered programs: (first buffer id not covered, request slot).
    flushes: Vec<(u64, u32)>,
    /// Scratch list of the move reads of a GC step.
    scratch_reads: Vec<u32>,
    /// Programs of host pages still filling, by page: created with the page's first unit so
    /// that its read-modify-write reads can gate it, queued once the page is full.
    staged_programs: BTreeMap<u32, u32>,
    /// One bit per physical page: a host page whose program is not done. Its data is still in
    /// the controller (staging or write buffer), so reads and read-modify-writes of it are
    /// served from there: sensing a page whose program is queued or suspended would read what
    /// is not on flash yet.
    pending_program_bits: Vec<u64>,
    /// The bits set (no lookups while it is 0; per block in `BlockWork`).
    pending_programs: u32,
    /// Per block: its programs not started and its erases (see `BlockWork`).
    block_work: Vec<BlockWork>,
    /// (erase, transaction waiting for it), in the order they were gated.
    erase_waiters: Vec<(u32, u32)>,
    /// Scratch list of the erases of an FTL call's list that may be queued once it is made.
    scratch_erases: Vec<u32>,
    /// Checked builds: per block, programs started since its erase ended (ERASING while one
    /// runs; unknown before the run, so 0). Flash takes at most a block's pages between
    /// erases, and none during one.
    #[cfg(debug_assertions)]
    programs_since_erase: Vec<u32>,
    /// Scratch list of a host read's (page, bytes): no allocation per read.
    scratch_pages: Vec<(u32, u64, u32)>,
    /// The run will issue no more requests: no new background GC steps (the run ends with
    /// its last completion, and work after it would belong to no request of the run).
    source_done: bool,
}

impl Engine {
    pub(crate) fn new(dev: &Device) -> Engine {
        let dies = dev.derived.dies as usize;
        let g = &dev.config.geometry;
        let mut die_state = vec![DieWork::default(); dies];
        let mut events = EventQueue::default();
        // Work reserved before the run (direct submissions) keeps its dies busy.
        for (d, work) in die_state.iter_mut().enumerate() {
            let die = &mut work.die;
            die.free_at_ns = dev.timeline.die_free_ns(d as u32);
            if die.free_at_ns > dev.now_ns {
                let event = Event::DieFree {
                    die: d as u32,
                    generation: 0,
                };
                events.push(die.free_at_ns, event);
            }
        }
        Engine {
            now_ns: dev.now_ns,
            events,
            txns: Vec::with_capacity(1024),
            free_txns: Vec::new(),
            batches: Vec::new(),
            free_batches: Vec::new(),
            die_load_ns: die_state.iter().map(|d| d.die.free_at_ns).collect(),
            dies: die_state,
            enqueue_seq: 0,
            idle: idle::IdleChecks::default(),
            channel_free_ns: (0..g.channels)
                .map(|c| dev.timeline.channel_free_ns(c))
                .collect(),
            channels: (0..g.channels).map(|_| Default::default()).collect(),
            channel_seq: 0,
            planes_per_die: g.planes_per_die,
            read_ns_at: (0..g.pages_per_block)
                .map(|page| dev.derived.read_ns[dev.geo.page_type(page) as usize])
                .collect(),
            program_ns_at: (0..g.pages_per_block)
                .map(|page| dev.derived.program_ns[dev.geo.page_type(page) as usize])
                .collect(),
            sched: scheduler(
                dev.config.controller.scheduler,
                dev.config.controller.aging_ns,
            ),
            requests: Vec::new(),
            log_rows: Vec::new(),
            done: BinaryHeap::new(),
            done_seq: 0,
            buffer_used: 0,
            buffer_next_id: 0,
            buffer_outstanding: BTreeSet::new(),
            buffered_programs: BTreeMap::new(),
            buffer_waiting: VecDeque::new(),
            flushes: Vec::new(),
            scratch_reads: Vec::new(),
            staged_programs: BTreeMap::new(),
            pending_program_bits: vec![0; (dev.geo.physical_pages as usize).div_ceil(64)],
            block_work: vec![BlockWork::IDLE; dev.geo.blocks as usize],
            erase_waiters: Vec::new(),
            scratch_erases: Vec::new(),
            #[cfg(debug_assertions)]
            programs_since_erase: vec![0; dev.geo.blocks as usize],
            pending_programs: 0,
            scratch_pages: Vec::new(),
            source_done: false,
        }
    }

    #[inline(always)]
    fn schedule(&mut self, time_ns: u64, event: Event) {
        self.events.push(time_ns, event);
    }

    /// Is host page `ppa` waiting for its program to finish (its data in the controller)?
    #[inline]
    pub(super) fn program_pending(&self, ppa: u32) -> bool {
        self.pending_programs > 0
            && self.pending_program_bits[ppa as usize / 64] & (1 << (ppa % 64)) != 0
    }

    /// Mark the program of host page `ppa` (in `block`) pending; false if it was already (GC
    /// took the block while its program waited, the block was opened again before its erase,
    /// and the page is written again: the earlier program, done first on its die, clears it).
    #[inline]
    fn mark_host_program(&mut self, ppa: u32, block: u32) -> bool {
        let word = &mut self.pending_program_bits[ppa as usize / 64];
        let bit = 1u64 << (ppa % 64);
        if *word & bit != 0 {
            return false;
        }
        *word |= bit;
        self.pending_programs += 1;
        self.block_work[block as usize].pending_host_programs += 1;
        true
    }

    /// The program that marked host page `ppa` (in `block`) pending is done. (No look at the
    /// bit first: its word is seldom in the cache by then, and nothing waits on the load.)
    #[inline]
    fn clear_host_program(&mut self, ppa: u32, block: u32) {
        self.pending_program_bits[ppa as usize / 64] &= !(1u64 << (ppa % 64));
        self.pending_programs -= 1;
        self.block_work[block as usize].pending_host_programs -= 1;
    }

    /// Erase `erase` holds up a program of `class`: it is served as that class (host writes
    /// at most), so that it does not wait behind the work of the class it blocks (priority
    /// inheritance). Moved to that class's queue if it is queued.
    fn inherit_class(&mut self, erase: u32, class: TxnClass) {
        let t = self.txns[erase as usize];
        let class = class.max(TxnClass::HostWrite);
        if class >= t.class {
            return;
        }
        self.txns[erase as usize].class = class;
        let queues = &mut self.dies[t.die as usize].queues;
        let queue = &mut queues[queue_of(t.kind, t.class)];
        if let Some(at) = queue.iter().position(|&id| id == erase) {
            queue.remove(at);
            queues[queue_of(t.kind, class)].push_back(erase);
        }
    }

    fn new_txn(&mut self, txn: Txn) -> u32 {
        slab_insert(&mut self.txns, &mut self.free_txns, txn)
    }

    /// Add a GC transaction for `request` (or NONE), counting its die's queued work.
    fn gc_txn(&mut self, mut t: Txn, request: u32, background: bool) -> u32 {
        t.request = request;
        t.background = background;
        t.gc = true;
        let id = self.new_txn(t);
        self.dies[t.die as usize].queued_work_ns += t.array_ns;
        if request != NONE {
            self.request(request).pending += 1;
        }
        id
    }

    fn new_batch(&mut self) -> u32 {
        let batch = Batch {
            reads_left: 0,
            erase: NONE,
        };
        slab_insert(&mut self.batches, &mut self.free_batches, batch)
    }

    fn die_queues_empty(&self, die: u32) -> bool {
        self.dies[die as usize].queued == 0
    }

    fn refresh_load(&mut self, die: u32) {
        let d = die as usize;
        let work = &self.dies[d];
        self.die_load_ns[d] = work.die.free_at_ns + work.queued_work_ns;
    }

    /// Hand the dies' and channels' busy times back to the reservation timeline.
    pub(crate) fn hand_back(&self, timeline: &mut Timeline) {
        for (d, work) in self.dies.iter().enumerate() {
            timeline.set_die_free_ns(d as u32, work.die.free_at_ns);
        }
        for (c, &free) in self.channel_free_ns.iter().enumerate() {
            timeline.set_channel_free_ns(c as u32, free);
        }
    }

    fn request(&mut self, slot: u32) -> &mut RequestState {
        &mut self.requests[slot as usize]
    }

    #[inline]
    fn part_done(&mut self, slot: u32, time_ns: u64) {
        let r = &mut self.requests[slot as usize];
        r.complete_ns = r.complete_ns.max(time_ns);
        r.pending -= 1;
        if r.pending == 0 {
            let complete = r.complete_ns;
            debug_assert!(slot < 1 << 16, "run slots fit 16 bits");
            let order = (self.done_seq & ((1 << 48) - 1)) << 16 | slot as u64;
            self.done
                .push(Reverse((complete as u128) << 64 | order as u128));
            self.done_seq += 1;
        }
    }
}

/// Put `item` in a freed slot of `items` (or a new one) and return its index: slots are reused,
/// so memory follows what is in flight.
pub(crate) fn slab_insert<T>(items: &mut Vec<T>, free: &mut Vec<u32>, item: T) -> u32 {
    match free.pop() {
        Some(id) => {
            items[id as usize] = item;
            id
        }
        None => {
            items.push(item);
            (items.len() - 1) as u32
        }
    }
}

impl Txn {
    /// Its time on the channel, given a page's and a part's by codewords.
    #[inline]
    fn xfer_ns(&self, page_xfer_ns: u64, codeword_transfer_ns: &[u64]) -> u64 {
        match self.codewords {
            0 => self.transfers as u64 * page_xfer_ns,
            k => codeword_transfer_ns[k as usize],
        }
    }

    /// The data bytes it moves over the channel, given the page and codeword sizes.
    #[inline]
    fn bytes_transferred(&self, page_bytes: u64, codeword_bytes: u64) -> u64 {
        match self.codewords {
            0 => self.transfers as u64 * page_bytes,
            k => k as u64 * codeword_bytes,
        }
    }
}

fn txn(kind: TxnKind, class: TxnClass, array_ns: u64) -> Txn {
    Txn {
        kind,
        class,
        die: 0,
        plane: 0,
        page_in_block: 0,
        ppa: 0,
        array_ns,
        transfers: 0,
        codewords: 0,
        decode_pages: 0,
        host_bytes: 0,
        request: NONE,
        batch: NONE,
        next: NONE,
        after_ns: 0,
        gates: 0,
        not_before_ns: 0,
        enqueued_ns: 0,
        enqueue_seq: 0,
        group_next: NONE,
        buffer_id: None,
        retries_left: 0,
        moves: 0,
        extra_decode_ns: 0,
        uncorrectable: false,
        sampled: false,
        marks_pending: false,
        background: false,
        gc: false,
    }
}

impl Device {
    fn engine(&mut self) -> &mut Engine {
        self.engine.as_mut().expect("the event engine of a run")
    }

    fn at_page(&self, mut t: Txn, ppa: u32) -> Txn {
        t.ppa = ppa;
        (t.die, t.plane, _, t.page_in_block) = self.geo.locate(ppa);
        t
    }

    /// Put a transaction in its die's queue at `time_ns` (now, or later through an event), and
    /// start it or suspend the die for it.
    fn enqueue_at(&mut self, id: u32, time_ns: u64) {
        let suspend = self.config.cell.suspend;
        let e = self.engine.as_mut().expect("engine");
        if time_ns > e.now_ns {
            e.schedule(time_ns, Event::Enqueue { txn: id });
            return;
        }
        let now = e.now_ns;
        let t = &mut e.txns[id as usize];
        t.enqueued_ns = now;
        t.enqueue_seq = e.enqueue_seq;
        e.enqueue_seq += 1;
        // Host reads suspend, read-modify-write reads too (queued as host reads: the write's
        // program waits for them); GC reads do not (suspending for them only delays both).
        let suspends_for = t.class == TxnClass::HostRead;
        let (die, queue) = (t.die, queue_of(t.kind, t.class));
        let work = &mut e.dies[die as usize];
        let idle = !work.die.is_busy(now);
        if idle && work.queued == 0 && work.die.suspended.is_none() {
            // Its only transaction: every policy serves a lone candidate (only a suspension
            // could hold it back), so it starts without asking, and without a queue.
            return self.start_txn(die, queue, id);
        }
        work.queues[queue].push_back(id);
        work.queued += 1;
        if idle {
            self.dispatch(die);
        } else if suspends_for && suspend && work.die.can_suspend(now) {
            self.suspend_die(die);
        }
    }

    /// Suspend the operation in service on `die` (the caller checked that it may be) so that
    /// the host reads queued there are served.
    fn suspend_die(&mut self, die: u32) {
        let suspend_ns = self.derived.suspend_ns;
        let e = self.engine.as_mut().expect("engine");
        let d = &mut e.dies[die as usize].die;
        let free = d.suspend(e.now_ns, suspend_ns);
        let generation = d.generation;
        e.schedule(free, Event::DieFree { die, generation });
        e.refresh_load(die);
        self.flash.suspensions += 1;
        self.timeline.add_busy(die, suspend_ns);
    }

    /// One of the things `id` waits for is done at `at`: queue it once nothing is left.
    fn release(&mut self, id: u32, at: u64) {
        let e = self.engine();
        let t = &mut e.txns[id as usize];
        t.not_before_ns = t.not_before_ns.max(at);
        t.gates -= 1;
        if t.gates == 0 {
            let when = t.not_before_ns;
            self.enqueue_at(id, when);
        }
    }

    /// A die is free: let the policy choose its next operation, resume a suspended one, or
    /// leave it idle (and consider background GC).
    fn dispatch(&mut self, die: u32) {
        let e = self.engine.as_mut().expect("engine");
        let now = e.now_ns;
        let d = die as usize;
        if e.dies[d].die.is_busy(now) {
            return;
        }
        let reads_only = e.dies[d].die.suspended.is_some();
        let pick = if e.dies[d].queued == 0 {
            None
        } else {
            let channel = self.geo.channel_of_die(die);
            let context = DieContext {
                now_ns: now,
                channel_free: e.channel_free_ns[channel as usize] <= now
                    && e.channels[channel as usize].is_idle(),
                reads_only,
            };
            let mut heads: Heads = [None; QUEUES];
            for (queue, head) in e.dies[d].queues.iter().zip(heads.iter_mut()) {
                if let Some(&id) = queue.front() {
                    let t = &e.txns[id as usize];
                    *head = Some(Candidate {
                        kind: t.kind,
                        class: t.class,
                        enqueued_ns: t.enqueued_ns,
                        seq: t.enqueue_seq,
                        needs_channel_first: t.kind == TxnKind::Program && t.transfers > 0,
                    });
                }
            }
            e.sched.pick(&heads, &context)
        };
        match pick {
            Some(index) => self.start(die, index),
            None if reads_only => {
                let op = e.dies[d].die.resume(now, self.derived.resume_ns);
                e.schedule(
                    op.end_ns,
                    Event::DieFree {
                        die,
                        generation: e.dies[d].die.generation,
                    },
                );
                e.refresh_load(die);
                self.timeline.add_busy(die, self.derived.resume_ns);
            }
            None => self.maybe_idle_gc(die),
        }
    }

    /// Start the head of queue `queue` on `die`, with queued ones of the same queue that line
    /// up with it on the die's other planes (one multi-plane operation; the first
    /// `MERGE_WINDOW` entries are looked at, so a start costs the same for any queue length).
    fn start(&mut self, die: u32, queue: usize) {
        let work = &mut self.engine().dies[die as usize];
        let leader = work.queues[queue]
            .pop_front()
            .expect("a queued transaction");
        work.queued -= 1;
        self.start_txn(die, queue, leader);
    }

    /// Start transaction `leader` of queue `queue` (taken from it, or never queued) on `die`,
    /// as `start` does.
    fn start_txn(&mut self, die: u32, queue: usize, leader: u32) {
        let xfer_ns = self.derived.page_transfer_ns;
        let cache_read = self.config.channel.cache_read;
        let max_suspends = self.derived.max_suspends;
        let e = self.engine.as_mut().expect("engine");
        let now = e.now_ns;
        let d = die as usize;
        // Only what waits in the same queue can join the leader: alone, nothing is looked at.
        let group = match e.dies[d].queues[queue].is_empty() {
            true => None,
            false => self.join_leader(die, queue, leader),
        };
        let e = self.engine.as_mut().expect("engine");
        let lt = &mut e.txns[leader as usize];
        if group.is_none() {
            lt.group_next = NONE;
        }
        let (kind, moves) = (lt.kind, lt.moves);
        let (array_ns, transfers, bus_ns) = match group {
            Some(g) => (g.array_ns, g.transfers, g.bus_ns),
            None => {
                let bus_ns = lt.xfer_ns(xfer_ns, &self.derived.codeword_transfer_ns);
                (lt.array_ns, lt.transfers as u32, bus_ns)
            }
        };
        // Queueing time of the requests it serves, and the die's remaining backlog.
        let mut id = leader;
        while id != NONE {
            let t = &e.txns[id as usize];
            #[cfg(debug_assertions)]
            {
                let block = self.geo.block_of(t.ppa) as usize;
                let done = &mut e.programs_since_erase[block];
                match t.kind {
                    TxnKind::Program => {
                        assert_ne!(*done, ERASING, "block {block} programmed while erased");
                        *done += t.moves.max(1);
                        assert!(
                            *done <= self.geo.pages_per_block,
                            "block {block}: {done} programs since its erase"
                        );
                    }
                    TxnKind::Erase => *done = ERASING,
                    TxnKind::Read => {}
                }
            }
            let (array, request, enqueued, next) =
                (t.array_ns, t.request, t.enqueued_ns, t.group_next);
            e.dies[d].queued_work_ns -= array;
            if request != NONE {
                let r = &mut e.requests[request as usize];
                r.queue_ns = r.queue_ns.max(now - enqueued);
            }
            if group.is_none() {
                break;
            }
            id = next;
        }
        if let Some(g) = group.filter(|g| !g.melded) {
            self.flash.multi_plane_ops += 1;
            self.gc_time_of_multi_plane(leader, array_ns, g.members);
        }
        let e = self.engine.as_mut().expect("engine");
        // With a transfer to make, the die's end is known once the channel grants it
        // (`channel`): until then the end is an estimate and no end event is scheduled.
        let awaiting_channel = transfers > 0 && (kind == TxnKind::Program || !cache_read);
        let (die_free, array_start) = match kind {
            TxnKind::Read if transfers > 0 && !cache_read => (now + array_ns + bus_ns, now),
            TxnKind::Program if transfers > 0 => {
                let data_in = now + bus_ns;
                (data_in + array_ns, data_in)
            }
            _ => (now + array_ns, now),
        };
        let die_state = &mut e.dies[d].die;
        die_state.start(ActiveOp {
            id: leader,
            kind,
            array_start_ns: array_start,
            end_ns: die_free,
            suspends: 0,
            // A GC step's copybacks are programs of their own, each with the budget of one
            // (fused into one die operation only to spare events).
            max_suspends: max_suspends * moves.max(1),
            read_done_with_die: kind == TxnKind::Read && (transfers == 0 || !cache_read),
            awaiting_channel,
        });
        let generation = die_state.generation;
        if !awaiting_channel {
            e.schedule(die_free, Event::DieFree { die, generation });
        }
        if kind == TxnKind::Read && transfers > 0 {
            e.schedule(
                now + array_ns,
                Event::Sensed {
                    die,
                    leader,
                    xfer_ns: bus_ns as u32,
                },
            );
        }
        self.timeline.add_busy(die, array_ns);
        if kind == TxnKind::Program {
            self.programs_started(leader);
        }
        // The die's load for dynamic allocation (read only when a host page is placed): a
        // program granted its channel at once has it refreshed by the grant.
        let data_in = kind == TxnKind::Program && transfers > 0;
        let granted = data_in && self.request_channel(die, leader, bus_ns as u32, array_ns);
        if !granted {
            self.engine().refresh_load(die);
        }
        if !data_in && kind != TxnKind::Read {
            self.suspend_for_waiting_reads(die);
        }
    }

    /// What joins `leader` (taken from queue `q` of `die`, which is not empty) in one die
    /// operation: queued host reads of its wordline as one melded read, or queued work at its
    /// page offset on the die's other planes (same kind and class) as one multi-plane
    /// operation. `None` when nothing joins. The group is chained through `group_next` from
    /// the leader.
    #[inline(never)]
    fn join_leader(&mut self, die: u32, q: usize, leader: u32) -> Option<Group> {
        const MERGE_WINDOW: usize = 16;
        let xfer_ns = self.derived.page_transfer_ns;
        // Queued host reads of the leader's wordline may join it as one melded read.
        if let Some((tail, members)) = self.join_queued_wordline(die, q, leader) {
            let e = self.engine.as_mut().expect("engine");
            e.txns[tail as usize].group_next = NONE;
            let transfers = self.geo.bits_per_cell;
            return Some(Group {
                members,
                array_ns: self.derived.melded_read_ns,
                transfers,
                bus_ns: transfers as u64 * xfer_ns,
                melded: true,
            });
        }
        let e = self.engine.as_mut().expect("engine");
        let d = die as usize;
        let lt = e.txns[leader as usize];
        if lt.kind == TxnKind::Erase
            || lt.moves != 0
            || lt.decode_pages > 1
            || lt.transfers > 1
            || e.planes_per_die <= 1
        {
            return None;
        }
        // Multi-plane: same kind and page offset on other planes, same class (a melded read
        // senses a whole wordline on its own).
        let mut members = 1u32;
        let mut planes_used = 1u64 << (lt.plane % 64);
        let mut tail = leader;
        let mut array_ns = lt.array_ns;
        let mut transfers = lt.transfers as u32;
        let mut bus_ns = lt.xfer_ns(xfer_ns, &self.derived.codeword_transfer_ns);
        // Planes with a program passed over: a later page of that program's block may not
        // join, or it would be programmed before a page queued ahead of it (NAND programs a
        // block's pages in order). The blocks are compared only for a candidate that would
        // join on such a plane, which is rare.
        let mut passed_planes = 0u64;
        let geo = &self.geo;
        let mut i = 0;
        let planes_per_die = e.planes_per_die;
        let (work, txns) = (&mut e.dies[d], &mut e.txns);
        while i < work.queues[q].len().min(MERGE_WINDOW) && members < planes_per_die {
            let id = work.queues[q][i];
            let t = txns[id as usize];
            let bit = 1u64 << (t.plane % 64);
            if t.kind == lt.kind
                && t.moves == 0
                && t.class == lt.class
                && t.page_in_block == lt.page_in_block
                && t.decode_pages <= 1
                && t.transfers <= 1
                && planes_used & bit == 0
                && (t.kind != TxnKind::Program
                    || passed_planes & bit == 0
                    || !work.queues[q].iter().take(i).any(|&ahead| {
                        let a = &txns[ahead as usize];
                        a.kind == TxnKind::Program && geo.block_of(a.ppa) == geo.block_of(t.ppa)
                    }))
            {
                work.queues[q].remove(i);
                work.queued -= 1;
                planes_used |= bit;
                txns[tail as usize].group_next = id;
                tail = id;
                members += 1;
                array_ns = array_ns.max(t.array_ns);
                transfers += t.transfers as u32;
                bus_ns += t.xfer_ns(xfer_ns, &self.derived.codeword_transfer_ns);
                continue;
            }
            if t.kind == TxnKind::Program {
                passed_planes |= bit;
            }
            i += 1;
        }
        if members == 1 {
            return None;
        }
        e.txns[tail as usize].group_next = NONE;
        Some(Group {
            members,
            array_ns,
            transfers,
            bus_ns,
            melded: false,
        })
    }

    /// GC time counts each GC page's array time when its work is made; the die's busy time
    /// counts a multi-plane operation once. So when GC pages share one (group `leader`,
    /// `array_ns` of die time), GC's time becomes its share of the die's: by its pages, in an
    /// operation that also carries host pages. Out of line: few operations are multi-plane.
    #[cold]
    #[inline(never)]
    fn gc_time_of_multi_plane(&mut self, leader: u32, array_ns: u64, members: u32) {
        let e = self.engine();
        let (mut gc_pages, mut counted, mut background) = (0u64, 0u64, false);
        let mut id = leader;
        while id != NONE {
            let t = &e.txns[id as usize];
            if t.gc {
                gc_pages += 1;
                counted += t.array_ns;
                background = t.background;
            }
            id = t.group_next;
        }
        let over = counted - array_ns * gc_pages / members as u64;
        self.flash.gc_busy_ns -= over;
        if background {
            self.flash.gc_background_ns -= over;
        }
    }

    /// The programs of group `leader` started: an erase of their block that waited for the
    /// last of them may queue (on the same die, behind them).
    fn programs_started(&mut self, leader: u32) {
        let now = self.engine().now_ns;
        let mut id = leader;
        while id != NONE {
            let e = self.engine.as_mut().expect("engine");
            let t = &e.txns[id as usize];
            let (ppa, buffered, next) = (t.ppa, t.buffer_id.is_some(), t.group_next);
            let block = self.geo.block_of(ppa) as usize;
            if buffered && !e.buffered_programs.is_empty() {
                // Its data is on its way to the die: later writes of its units go elsewhere.
                e.buffered_programs.remove(&ppa);
            }
            let work = &mut e.block_work[block];
            work.unstarted_programs -= 1;
            if work.unstarted_programs == 0 && work.erase_blocked != NONE {
                let erase = std::mem::replace(&mut work.erase_blocked, NONE);
                self.release(erase, now);
            }
            id = next;
        }
    }

    /// A program or erase just started on `die` while host reads wait there (the policy chose
    /// it over them: aged past their priority, or `fcfs`): the reads suspend it at once, within
    /// its budget, as they would had they arrived a moment later. Without this a read that
    /// found the die busy with a GC read would wait for the whole program chosen next.
    fn suspend_for_waiting_reads(&mut self, die: u32) {
        if !self.config.cell.suspend {
            return;
        }
        let e = self.engine.as_ref().expect("engine");
        let work = &e.dies[die as usize];
        let reads = queue_of(TxnKind::Read, TxnClass::HostRead);
        if !work.queues[reads].is_empty() && work.die.can_suspend(e.now_ns) {
            self.suspend_die(die);
        }
    }

    /// The operation in service on `die` ended: programs and erases complete their
    /// transactions; then the die looks for its next work.
    fn die_free(&mut self, die: u32, generation: u32) {
        let e = self.engine.as_mut().expect("engine");
        let d = die as usize;
        if e.dies[d].die.generation != generation {
            return;
        }
        if let Some(op) = e.dies[d].die.finish() {
            if op.kind == TxnKind::Read && op.read_done_with_die {
                self.read_done(op.id);
            } else if op.kind != TxnKind::Read {
                let mut id = op.id;
                while id != NONE {
                    let next = self.engine().txns[id as usize].group_next;
                    self.complete_txn(id);
                    id = next;
                }
            }
        }
        self.engine().refresh_load(die);
        self.dispatch(die);
    }

    /// The data of a read group is on the controller: decode each page (with read retries),
    /// then send it to the host or release what waits for it.
    fn read_done(&mut self, leader: u32) {
        let mut id = leader;
        while id != NONE {
            let next = self.engine().txns[id as usize].group_next;
            let now = self.engine().now_ns;
            let t = self.engine().txns[id as usize];
            if self.flex && t.decode_pages > 0 && !t.sampled {
                // FlexECC: each page by its own code (host/flexecc.rs).
                let (extra, bad) = self.flex_engine_decode(t.ppa, t.decode_pages, now);
                let tt = &mut self.engine().txns[id as usize];
                (tt.sampled, tt.extra_decode_ns, tt.uncorrectable) = (true, extra, bad);
            }
            let t = self.engine().txns[id as usize];
            if t.decode_pages > 0 && self.config.ecc.rber_base > 0.0 && !t.sampled {
                let mut retries = 0;
                let mut extra = 0;
                let mut bad = false;
                // The codewords that crossed: those wanted, or every page's.
                let codewords = match t.codewords {
                    0 => self.derived.codewords_per_page,
                    k => k as u32,
                };
                for _ in 0..t.decode_pages {
                    let outcome = ecc::decode_page(
                        &self.config.ecc,
                        codewords,
                        self.ftl.erase_count_of(t.ppa),
                        &mut self.rng,
                    );
                    retries = retries.max(outcome.retries);
                    extra = extra.max(outcome.extra_decode_ns);
                    bad |= outcome.uncorrectable;
                    self.flash.read_retries += outcome.retries as u64;
                    self.flash.corrected_codewords += outcome.corrected_codewords as u64;
                    self.flash.uncorrectable_pages += outcome.uncorrectable as u64;
                }
                let e = self.engine();
                let tt = &mut e.txns[id as usize];
                tt.sampled = true;
                tt.retries_left = retries;
                tt.extra_decode_ns = extra;
                tt.uncorrectable = bad;
            }
            let t = self.engine().txns[id as usize];
            if t.retries_left > 0 {
                // Re-sense with shifted references: the page is read again after the failed
                // decode, as a new read of the die.
                let e = self.engine();
                let tt = &mut e.txns[id as usize];
                tt.retries_left -= 1;
                tt.group_next = NONE;
                e.dies[t.die as usize].queued_work_ns += t.array_ns;
                if t.gc {
                    // A GC read sensed again is GC's die time again.
                    self.count_gc_busy(t.array_ns, t.background);
                }
                self.flash.array_reads += t.decode_pages as u64;
                let codeword = self.config.ecc.codeword_bytes as u64;
                self.flash.bytes_transferred +=
                    t.bytes_transferred(self.page_size() as u64, codeword);
                self.enqueue_at(id, now + self.derived.decode_ns);
            } else {
                self.complete_txn(id);
            }
            id = next;
        }
    }

    /// A transaction is done: account it to its request, release what depends on it.
    #[inline(always)]
    fn complete_txn(&mut self, id: u32) {
        let e = self.engine.as_mut().expect("engine");
        let now = e.now_ns;
        let t = &e.txns[id as usize];
        let (kind, request, next, ppa, batch) = (t.kind, t.request, t.next, t.ppa, t.batch);
        let (buffer_id, marks_pending) = (t.buffer_id, t.marks_pending);
        if kind == TxnKind::Read && request != NONE && next == NONE {
            // A host read: decode, then the link.
            let (extra_ns, bytes, uncorrectable) =
                (t.extra_decode_ns, t.host_bytes, t.uncorrectable);
            let ready = now + self.derived.decode_ns + extra_ns;
            let link = self.link_ns(bytes);
            let end = self.link_out.reserve(ready, link, now);
            let e = self.engine.as_mut().expect("engine");
            if uncorrectable {
                e.request(request).uncorrectable = true;
            }
            e.part_done(request, end);
        } else if request != NONE {
            e.part_done(request, now);
        }
        match kind {
            TxnKind::Erase => self.erase_done(id, self.geo.block_of(ppa)),
            TxnKind::Program if marks_pending => {
                let block = self.geo.block_of(ppa);
                self.engine().clear_host_program(ppa, block);
            }
            TxnKind::Program => {}
            TxnKind::Read => {}
        }
        let e = self.engine.as_mut().expect("engine");
        if batch != NONE {
            let b = &mut e.batches[batch as usize];
            b.reads_left -= 1;
            if b.reads_left == 0 {
                let erase = b.erase;
                e.free_batches.push(batch);
                if erase != NONE {
                    self.release(erase, now);
                }
            }
        }
        if let Some(buffer_id) = buffer_id {
            self.buffer_slot_freed(buffer_id);
        }
        if next != NONE {
            let after_ns = self.engine().txns[id as usize].after_ns;
            self.release(next, now + after_ns);
        }
        self.engine().free_txns.push(id);
    }

    /// A buffered program is on flash: its slot takes the next waiting page, and flushes that
    /// waited for it may complete.
    fn buffer_slot_freed(&mut self, buffer_id: u64) {
        let encode = self.derived.encode_ns;
        let e = self.engine.as_mut().expect("engine");
        let now = e.now_ns;
        e.buffer_outstanding.remove(&buffer_id);
        e.buffer_used -= 1;
        if let Some((program, slot, arrive)) = e.buffer_waiting.pop_front() {
            e.buffer_used += 1;
            let accept = now.max(arrive);
            e.part_done(slot, accept);
            self.release(program, accept + encode);
        }
        let e = self.engine.as_mut().expect("engine");
        let oldest = e.buffer_outstanding.first().copied().unwrap_or(u64::MAX);
        let mut i = 0;
        while i < e.flushes.len() {
            if e.flushes[i].0 <= oldest {
                let (_, slot) = e.flushes.swap_remove(i);
                e.part_done(slot, now);
            } else {
                i += 1;
            }
        }
    }

    /// Program `id` of `block` is made: it waits for `erase` (the block's, not done yet) if
    /// not NONE; otherwise the block's next erase waits for it to start.
    fn program_made(&mut self, id: u32, block: u32, erase: u32) {
        if erase != NONE {
            self.gate_on(erase, id);
        } else {
            self.engine().block_work[block as usize].unstarted_programs += 1;
        }
    }

    /// `program_made` for a program of `block`, the block's erase looked up.
    fn program_made_in(&mut self, id: u32, block: u32) {
        let erase = self.engine().block_work[block as usize].erase;
        self.program_made(id, block, erase);
    }

    /// Gate transaction `id` on `erase` (of the block it programs, or erases again): flash
    /// takes a block's programs only after its erase.
    fn gate_on(&mut self, erase: u32, id: u32) {
        let e = self.engine.as_mut().expect("engine");
        let waiter = e.txns[id as usize];
        if waiter.kind == TxnKind::Program {
            self.flash.programs_awaiting_erase += 1;
            e.inherit_class(erase, waiter.class);
        }
        e.txns[id as usize].gates += 1;
        e.erase_waiters.push((erase, id));
    }

    /// Erase `id` of `block` is done: what waited for it may go, and the block joins its
    /// plane's free pool (unless a later erase of it is pending).
    fn erase_done(&mut self, id: u32, block: u32) {
        let e = self.engine();
        let now = e.now_ns;
        #[cfg(debug_assertions)]
        {
            e.programs_since_erase[block as usize] = 0;
        }
        let latest = e.block_work[block as usize].erase == id;
        if latest {
            e.block_work[block as usize].erase = NONE;
            self.ftl.block_erased(block);
        }
        let e = self.engine();
        if e.erase_waiters.iter().any(|&(erase, _)| erase == id) {
            let waiters = std::mem::take(&mut e.erase_waiters);
            let mut kept = Vec::with_capacity(waiters.len());
            let b = block as usize;
            for (erase, waiter) in waiters {
                if erase != id {
                    kept.push((erase, waiter));
                    continue;
                }
                let e = self.engine();
                if e.txns[waiter as usize].kind == TxnKind::Program {
                    // The block's next erase waits for it now.
                    e.block_work[b].unstarted_programs += 1;
                    self.release(waiter, now);
                } else if e.block_work[b].unstarted_programs > 0 {
                    // The block's next erase, after its programs made meanwhile (its gate
                    // on this erase becomes its gate on them).
                    e.block_work[b].erase_blocked = waiter;
                } else {
                    self.release(waiter, now);
                }
            }
            // Released ones gate on nothing new, so the list took no entries meanwhile.
            let e = self.engine();
            kept.append(&mut e.erase_waiters);
            e.erase_waiters = kept;
        }
    }

    /// Process events until the earliest completion is final, and return it; with `limit`,
    /// only a completion at or before it (events after it stay queued). Inlined in both of
    /// its callers (one job's loop and a group's), as it was when it had one: called, it
    /// costs one job's loop 2 % more instructions.
    #[inline(always)]
    pub(crate) fn engine_next_completion(
        &mut self,
        limit: Option<u64>,
    ) -> Result<Option<EngineCompletion>, DeviceError> {
        loop {
            let e = self.engine.as_mut().expect("engine");
            let next_done = e.done.peek().map(|Reverse(key)| (key >> 64) as u64);
            // The last time an event may have to run first: before the next completion (a
            // completion wins a tie) and not after `limit`.
            let last = match next_done {
                Some(done) => done.checked_sub(1),
                None => Some(u64::MAX),
            };
            let last = match (last, limit) {
                (Some(last), Some(limit)) => Some(last.min(limit)),
                (last, _) => last,
            };
            if let Some((time, event)) = last.and_then(|last| e.events.pop_until(last)) {
                self.handle_event(time, event)?;
                continue;
            }
            let Some(done) = next_done.filter(|&done| limit.is_none_or(|l| done <= l)) else {
                return Ok(None);
            };
            let e = self.engine();
            let Reverse(key) = e.done.pop().expect("a completion");
            let slot = (key & 0xFFFF) as u32;
            let r = &e.requests[slot as usize];
            return Ok(Some(EngineCompletion {
                slot,
                complete_ns: done,
                queue_ns: r.queue_ns,
                uncorrectable: r.uncorrectable,
            }));
        }
    }

    /// The log row of the request completed in `c` (when the log is kept), its duration and
    /// time split filled in.
    pub(crate) fn engine_take_log_row(
        &mut self,
        c: &EngineCompletion,
    ) -> Option<crate::stats::RequestLogRow> {
        let e = self.engine.as_mut()?;
        let mut row = e.log_rows.get_mut(c.slot as usize)?.take()?;
        row.set_duration(c.complete_ns - row.duration_ns, c.queue_ns);
        Some(row)
    }

    /// The run has issued its last request.
    pub(crate) fn engine_source_done(&mut self) {
        if let Some(e) = self.engine.as_mut() {
            e.source_done = true;
        }
    }

    /// Move the engine's clock to `time_ns` (an issue time no earlier than every event
    /// processed so far).
    pub(crate) fn engine_set_now(&mut self, time_ns: u64) {
        let e = self.engine();
        e.now_ns = e.now_ns.max(time_ns);
    }

    fn process_event(&mut self) -> Result<(), DeviceError> {
        match self.engine().events.pop() {
            Some((time, event)) => self.handle_event(time, event),
            None => Ok(()),
        }
    }

    /// Run `event`, taken from the queue, at `time`.
    #[inline(always)]
    fn handle_event(&mut self, time: u64, event: Event) -> Result<(), DeviceError> {
        let e = self.engine();
        e.now_ns = e.now_ns.max(time);
        match event {
            Event::DieFree { die, generation } => self.die_free(die, generation),
            Event::ReadDone { leader } => self.read_done(leader),
            Event::Enqueue { txn } => {
                // Not before its data is in: a write merged into a buffered page since this
                // arrival was scheduled may have moved that later.
                let ready = self.engine().txns[txn as usize].not_before_ns;
                self.enqueue_at(txn, time.max(ready))
            }
            Event::IdleCheck => self.idle_checks_due()?,
            Event::Sensed {
                die,
                leader,
                xfer_ns,
            } => self.sensed(die, leader, xfer_ns),
            Event::ChannelFree { channel } => self.channel_free(channel),
        }
        Ok(())
    }

    /// Finish every queued operation (buffered programs, GC) and hand the dies back to the
    /// reservation timeline.
    pub(crate) fn engine_drain(&mut self) -> Result<(), DeviceError> {
        // Bounded: each event either completes work or is stale; background GC stops once
        // the planes are above their watermark.
        let mut budget: u64 = 1 << 40;
        while self.engine.as_ref().is_some_and(|e| !e.events.is_empty()) {
            // Background GC on an idle device would continue: only finish what is queued.
            let e = self.engine();
            if let Some((_, Event::IdleCheck)) = e.events.peek() {
                e.events.pop();
                continue;
            }
            self.process_event()?;
            budget -= 1;
            if budget == 0 {
                return Err(DeviceError::Run("event engine did not drain"));
            }
        }
        self.ftl.defer_erases(false);
        if let Some(e) = self.engine.take() {
            // Host pages still filling stay staged in the controller after the run: later
            // flushes pad them and a power loss loses their units, as for pages staged outside
            // a run (their programs, gated until the page fills, never ran).
            for (&ppa, &program) in &e.staged_programs {
                self.stage_page(ppa, e.txns[program as usize].not_before_ns);
            }
            // Every program and erase that waited for another was released by it (their
            // starts and completions are events, all processed above).
            debug_assert!(
                e.block_work
                    .iter()
                    .all(|w| w.erase == NONE && w.erase_blocked == NONE),
                "an erase never ran"
            );
            debug_assert!(e.erase_waiters.is_empty(), "a program waits for an erase");
            e.hand_back(&mut self.timeline);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A multi-plane program takes from its die's queue the programs of the leader's page on
    /// the other planes, but not a later page of a block whose earlier page is queued ahead
    /// of it: NAND programs a block's pages in order.
    #[test]
    fn a_multi_plane_program_keeps_each_block_in_page_order() {
        let planes = [("geometry.planes_per_die".to_string(), "2".to_string())];
        let mut dev = Device::from_toml("", "t", &planes, 1, false).unwrap();
        dev.engine = Some(Box::new(Engine::new(&dev)));
        let (a, b) = (dev.geo.plane_blocks(0).start, dev.geo.plane_blocks(1).start);
        let geo = dev.geo.clone();
        let page = |block: usize, page: u32| geo.first_page(block as u32) + page;
        let program = |dev: &mut Device, ppa: u32| {
            let t = dev.at_page(txn(TxnKind::Program, TxnClass::HostWrite, 500_000), ppa);
            assert_eq!(t.die, 0);
            let id = dev.engine().new_txn(t);
            let q = queue_of(TxnKind::Program, TxnClass::HostWrite);
            let block = dev.geo.block_of(ppa) as usize;
            let e = dev.engine();
            let work = &mut e.dies[0];
            work.queues[q].push_back(id);
            work.queued += 1;
            work.queued_work_ns += 500_000;
            e.block_work[block].unstarted_programs += 1;
            id
        };
        // Plane 0's page 6 leads; plane 1 has its page 5 queued, then its page 6.
        let leader = program(&mut dev, page(a, 6));
        let b5 = program(&mut dev, page(b, 5));
        let b6 = program(&mut dev, page(b, 6));
        dev.start(0, queue_of(TxnKind::Program, TxnClass::HostWrite));
        let e = dev.engine();
        assert_eq!(
            e.txns[leader as usize].group_next, NONE,
            "page 6 of b went before page 5"
        );
        assert_eq!(
            e.dies[0].queues[queue_of(TxnKind::Program, TxnClass::HostWrite)],
            [b5, b6]
        );
        // With plane 1's page 6 at the head of what is left, it joins a page-6 leader.
        let a7 = program(&mut dev, page(a, 6));
        let e = dev.engine();
        let q = queue_of(TxnKind::Program, TxnClass::HostWrite);
        let work = &mut e.dies[0];
        work.queues[q].retain(|&id| id != b5);
        work.queues[q].push_front(a7);
        work.queued -= 1;
        work.die = Default::default();
        dev.start(0, q);
        assert_eq!(dev.engine().txns[a7 as usize].group_next, b6);
    }

    /// An erase that programs wait for is served as their class (host writes at most), moved
    /// to that class's queue of its die; never lowered.
    #[test]
    fn an_erase_inherits_the_class_of_the_programs_it_holds_up() {
        let dev = Device::from_toml("", "t", &[], 1, false).unwrap();
        let mut e = Engine::new(&dev);
        let mut erase = txn(TxnKind::Erase, TxnClass::Erase, 1);
        erase.die = 1;
        let id = e.new_txn(erase);
        let queue = |class| queue_of(TxnKind::Erase, class);
        e.dies[1].queues[queue(TxnClass::Erase)].push_back(id);
        e.inherit_class(id, TxnClass::Gc);
        assert_eq!(e.txns[id as usize].class, TxnClass::Gc);
        assert!(e.dies[1].queues[queue(TxnClass::Erase)].is_empty());
        assert_eq!(e.dies[1].queues[queue(TxnClass::Gc)], [id]);
        // A host read's program (DFTL translation work) lifts it to host writes, no further.
        e.inherit_class(id, TxnClass::HostRead);
        assert_eq!(e.txns[id as usize].class, TxnClass::HostWrite);
        assert_eq!(e.dies[1].queues[queue(TxnClass::HostWrite)], [id]);
        e.inherit_class(id, TxnClass::Gc);
        assert_eq!(e.txns[id as usize].class, TxnClass::HostWrite);
        // Not queued (still gated, or running): only its class changes.
        let other = e.new_txn(erase);
        e.inherit_class(other, TxnClass::HostWrite);
        assert_eq!(e.txns[other as usize].class, TxnClass::HostWrite);
        assert_eq!(e.dies[1].queues[queue(TxnClass::HostWrite)], [id]);
    }
}
