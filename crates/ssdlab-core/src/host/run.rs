//! The run loop: the one place that advances simulated time during a workload.
//!
//! Closed loop keeps `queue_depth` requests outstanding and issues the next one when one
//! completes (fio's model). Open loop issues each request at its arrival time (a trace's
//! timestamps, optionally scaled) unless the host queue is full, in which case it waits for the
//! earliest completion: submission latency (`slat`) is that wait, completion latency (`clat`)
//! runs from issue to completion, total latency (`lat`) from arrival to completion. Completions
//! are ordered by (time, issue sequence), so ties are broken the same way every run. A run is
//! stepped in bounded chunks so that a front end can show progress and stay responsive.

use super::{Device, DeviceError};
use crate::request::{HostRequest, Op, RequestSource};
use crate::stats::{job_json, JobStats};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

mod group;
pub(crate) use group::GroupRun;

/// Requests pulled from the source ahead of issue, so that their mapping entries can be
/// prefetched (stage 1 on entry, stage 2 at the middle of the window). Public for the speed
/// benchmark that times the FTL alone at the same distances.
pub const LOOKAHEAD: usize = 16;
pub const DEPENDENT_STAGE: usize = LOOKAHEAD / 2;

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loop {
    /// Keep the queue full.
    Closed,
    /// Issue at arrival times multiplied by `time_scale` (0.5 replays twice as fast).
    Open { time_scale: f64 },
    /// Closed loop with fio's think time: after each issue, once `blocks` requests are counted
    /// (issued, or completed with `count_completions`) since the run began and the count is a
    /// multiple of `blocks`, wait for every outstanding request, then leave the device idle
    /// for `think_ns` before the next issue. A full queue reaps one completion first, as fio
    /// does before it checks, so with `count_completions` and a deep queue the first stall
    /// comes once the queue has filled.
    Think {
        think_ns: u64,
        blocks: u32,
        count_completions: bool,
    },
}

/// Where the timestamps of open-loop jobs side by side count from
/// ([`Device::start_group_clocked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArrivalClock {
    /// Each job's own first request arrives when the group starts.
    #[default]
    PerJob,
    /// The earliest first request among the jobs arrives when the group starts; the others
    /// keep their offsets from it.
    Shared,
}

/// A workload to run on a device.
pub struct RunSpec {
    pub name: String,
    pub source: Box<dyn RequestSource>,
    pub queue_depth: u32,
    pub pacing: Loop,
    /// Stop issuing after this much simulated time (fio `runtime`).
    pub runtime_ns: Option<u64>,
    /// Completions in the first `ramp_ns` are not counted (fio `ramp_time`).
    pub ramp_ns: Option<u64>,
}

/// Progress of a run after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub done: bool,
    pub completed: u64,
    pub total: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    /// Time waiting in die queues (the rest of its latency is service).
    queue_ns: u64,
    complete_ns: u64,
    arrival_ns: u64,
    issue_ns: u64,
    op: Op,
    bytes: u64,
    failed: bool,
}

/// Outstanding requests ordered by (completion time, issue sequence). The heap holds packed
/// `u128` keys (completion << 64 | sequence << 16 | slot) and the payloads sit in a slot table,
/// so that reordering the heap moves 16 bytes per entry rather than a whole request. Records
/// are written and read field by field where they sit: a record copied right after some of its
/// fields were stored is read back in wide loads that span those stores, and such a load waits
/// for the stores to reach the cache (a store-forwarding stall, a fifth of `issue`'s samples).
struct InFlightSet {
    heap: BinaryHeap<Reverse<u128>>,
    slots: Vec<InFlight>,
    free: Vec<u32>,
    /// Requests in flight (in the heap, or in the event engine by slot).
    live: usize,
}

impl InFlightSet {
    /// Queue depths above this do not fit the 16-bit slot field.
    const MAX_DEPTH: u32 = 1 << 16;

    fn new(depth: usize) -> Self {
        InFlightSet {
            heap: BinaryHeap::with_capacity(depth + 1),
            slots: Vec::with_capacity(depth),
            free: Vec::with_capacity(depth),
            live: 0,
        }
    }

    fn len(&self) -> usize {
        self.live
    }

    fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// A slot for a request issued at `issue_ns` (arrived at `arrival_ns`), its completion
    /// still unknown.
    fn insert(&mut self, arrival_ns: u64, issue_ns: u64, op: Op, bytes: u64) -> u16 {
        self.live += 1;
        let Some(slot) = self.free.pop() else {
            // Slots grow to the queue depth once; from then on they are reused.
            self.slots.push(InFlight {
                queue_ns: 0,
                complete_ns: 0,
                arrival_ns,
                issue_ns,
                op,
                bytes,
                failed: false,
            });
            return (self.slots.len() - 1) as u16;
        };
        let f = &mut self.slots[slot as usize];
        f.queue_ns = 0;
        f.complete_ns = 0;
        f.arrival_ns = arrival_ns;
        f.issue_ns = issue_ns;
        f.op = op;
        f.bytes = bytes;
        f.failed = false;
        // At most MAX_DEPTH slots are live, so the index fits the key's 16-bit field.
        slot as u16
    }

    /// Record how the request in `slot` completed: when, its longest die-queue wait, and
    /// whether it failed.
    fn set_outcome(&mut self, slot: u16, complete_ns: u64, queue_ns: u64, failed: bool) {
        let f = &mut self.slots[slot as usize];
        f.complete_ns = complete_ns;
        f.queue_ns = queue_ns;
        f.failed = failed;
    }

    /// The request in `slot` is done: its slot is free for the next insert, and its record
    /// stays readable until then.
    fn take(&mut self, slot: u16) -> u16 {
        self.live -= 1;
        self.free.push(slot as u32);
        slot
    }

    /// Order `slot`, whose completion time is now known, in the heap (reservation path).
    fn push(&mut self, seq: u64, slot: u16) {
        let order = (seq & ((1 << 48) - 1)) << 16 | slot as u64;
        let complete_ns = self.slots[slot as usize].complete_ns;
        self.heap
            .push(Reverse((complete_ns as u128) << 64 | order as u128));
    }

    fn earliest_ns(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(key)| (key >> 64) as u64)
    }

    fn pop(&mut self) -> Option<u16> {
        let Reverse(key) = self.heap.pop()?;
        let slot = (key & 0xFFFF) as u16;
        Some(self.take(slot))
    }
}

/// A run in progress: one job, or jobs side by side (see [`Device::start_group`]).
// One per device, boxed there; boxing the one-job variant too would put another indirection
// in front of the hot loop's state.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Run {
    One(RunState),
    Group(GroupRun),
}

pub(crate) struct RunState {
    /// Log rows of completed requests waiting for earlier requests (engine path), and the
    /// request number the log expects next.
    log_reorder: std::collections::BTreeMap<u64, crate::stats::RequestLogRow>,
    log_next: u64,
    source: Box<dyn RequestSource>,
    queue_depth: usize,
    pacing: Loop,
    stop_issuing_ns: Option<u64>,
    count_from_ns: u64,
    in_flight: InFlightSet,
    pending: Option<HostRequest>,
    lookahead: VecDeque<HostRequest>,
    /// The source has ended (or failed: the error waits here until the lookahead drains).
    source_done: bool,
    source_error: Option<crate::request::SourceError>,
    exhausted: bool,
    seq: u64,
    completed: u64,
    start_ns: u64,
    first_arrival: Option<u64>,
    total: Option<u64>,
    job: JobStats,
    /// The first engine slot of this job's requests (0 unless it runs beside others).
    slot_base: u32,
    /// The job runs beside others: its last issue does not end the device's run.
    in_group: bool,
    /// Where a think-time job beside others stands (alone, its loop's control flow says it).
    think: ThinkState,
    /// The job's closing flush (fio's `end_fsync`).
    end_flush: EndFlush,
}

/// Where a job's closing flush stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EndFlush {
    /// The job has none.
    None,
    /// To be issued once the source is done and nothing of the job is in flight.
    Due,
    /// Issued: every flush that completes from now on is that one (it went with nothing else
    /// in flight, and last).
    Issued,
}

/// The steps of fio's think time, for a job that runs beside others ([`Loop::Think`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThinkState {
    /// Issuing at the present.
    Ready,
    /// The queue is full: waiting for one of its own completions, then, with `check`, looking
    /// at the count.
    WaitOne { check: bool },
    /// The count was reached: waiting for its own requests to complete.
    Draining,
    /// Leaving the device idle until then.
    Sleeping { until: u64 },
}

impl RunState {
    fn is_done(&self) -> bool {
        self.exhausted && self.in_flight.is_empty() && self.pending.is_none()
    }

    /// The pending request's arrival on the run's clock: its timestamp counted from the job's
    /// first, scaled, after the job's start. `None` with nothing pending, or when it arrives
    /// after the runtime: the job then issues nothing more.
    fn pending_arrival(&mut self, time_scale: f64) -> Option<u64> {
        let raw = self.pending.as_ref()?.arrival_ns.unwrap_or(0);
        let first = *self.first_arrival.get_or_insert(raw);
        let arrival =
            self.start_ns + ((raw.saturating_sub(first)) as f64 * time_scale).round() as u64;
        if self.stop_issuing_ns.is_some_and(|stop| arrival >= stop) {
            self.pending = None;
            self.exhausted = true;
            return None;
        }
        Some(arrival)
    }

    /// fio's think-time count (completed or issued I/Os) is at a multiple of `blocks`.
    fn think_due(&self, blocks: u32, count_completions: bool) -> bool {
        let count = if count_completions {
            self.completed
        } else {
            self.seq
        };
        count != 0 && count % blocks as u64 == 0
    }

    /// Where [`Device::issue`] records a request of this job.
    fn issue_target(&mut self) -> (&mut InFlightSet, &mut JobStats, &mut u64, u32) {
        (
            &mut self.in_flight,
            &mut self.job,
            &mut self.seq,
            self.slot_base,
        )
    }
}

/// Push `row` to the request log in request order: completions leave out of order, so rows
/// wait in `reorder` (at most those of requests still in flight) until `next` is theirs.
fn log_in_order(
    log: &mut Vec<crate::stats::RequestLogRow>,
    (reorder, next): (&mut BTreeMap<u64, crate::stats::RequestLogRow>, &mut u64),
    row: crate::stats::RequestLogRow,
) {
    reorder.insert(row.request, row);
    while let Some(entry) = reorder.first_entry() {
        if *entry.key() != *next {
            break;
        }
        log.push(entry.remove());
        *next += 1;
    }
}

impl Device {
    /// Begin a run; drive it with [`Device::step`] and end it with [`Device::finish_run`].
    pub fn start_run(&mut self, spec: RunSpec) -> Result<(), DeviceError> {
        if self.run.is_some() {
            return Err(DeviceError::Run("a run is already in progress"));
        }
        let run = self.new_run_state(spec)?;
        self.start_engine();
        self.run = Some(Box::new(Run::One(run)));
        Ok(())
    }

    /// The state of a job about to start at the present, its spec checked.
    fn new_run_state(&self, spec: RunSpec) -> Result<RunState, DeviceError> {
        self.check_block_interface()?;
        if spec.queue_depth == 0 || spec.queue_depth > InFlightSet::MAX_DEPTH {
            return Err(DeviceError::Run("queue depth must be between 1 and 65536"));
        }
        let end_flush = if spec.source.ends_with_flush() {
            EndFlush::Due
        } else {
            EndFlush::None
        };
        match spec.pacing {
            Loop::Open { .. } if end_flush == EndFlush::Due => {
                return Err(DeviceError::Run(
                    "a job that ends with a flush (end_fsync) runs closed loop, not at arrival \
                     times",
                ));
            }
            Loop::Open { time_scale } if !(time_scale.is_finite() && time_scale > 0.0) => {
                return Err(DeviceError::Run("time scale must be a positive number"));
            }
            Loop::Think { blocks: 0, .. } => {
                return Err(DeviceError::Run(
                    "think time needs at least one block per stall",
                ));
            }
            _ => {}
        }
        let start = self.now_ns;
        Ok(RunState {
            log_reorder: Default::default(),
            log_next: self.requests_seen + 1,
            total: spec.source.len_hint(),
            source: spec.source,
            queue_depth: spec.queue_depth as usize,
            pacing: spec.pacing,
            stop_issuing_ns: spec.runtime_ns.map(|r| start + r),
            count_from_ns: start + spec.ramp_ns.unwrap_or(0),
            in_flight: InFlightSet::new(spec.queue_depth as usize),
            pending: None,
            lookahead: VecDeque::with_capacity(LOOKAHEAD + 1),
            source_done: false,
            source_error: None,
            exhausted: false,
            seq: 0,
            completed: 0,
            start_ns: start,
            first_arrival: None,
            job: JobStats::new(&spec.name),
            slot_base: 0,
            in_group: false,
            think: ThinkState::Ready,
            end_flush,
        })
    }

    /// The event engine for a run, unless the device schedules by plain FCFS reservation.
    fn start_engine(&mut self) {
        let c = &self.config;
        if c.controller.scheduler != crate::config::SchedulerKind::Fcfs || c.cell.suspend {
            self.engine = Some(Box::new(super::engine::Engine::new(self)));
            // Erases run when the engine gets to them: a victim is opened again once erased.
            self.ftl.defer_erases(true);
        }
    }

    /// Advance the run by at most `max_completions` completions.
    pub fn step(&mut self, max_completions: u64) -> Result<Progress, DeviceError> {
        let mut run = self
            .run
            .take()
            .ok_or(DeviceError::Run("no run in progress"))?;
        // This thread runs the whole step: the FTL's streamed map stores are ordered by it
        // before the step returns.
        self.ftl.stream_map_updates(true);
        let (result, progress) = match &mut *run {
            Run::One(one) => {
                let result = self.step_run(one, max_completions);
                let progress = Progress {
                    done: one.is_done(),
                    completed: one.completed,
                    total: one.total,
                };
                (result, progress)
            }
            Run::Group(group) => {
                let result = self.step_group(group, max_completions);
                let progress = Progress {
                    done: group.jobs.iter().all(RunState::is_done),
                    completed: group.completed,
                    total: group.total,
                };
                (result, progress)
            }
        };
        self.ftl.stream_map_updates(false);
        self.run = Some(run);
        result.map(|_| progress)
    }

    /// `run` has issued its last request: the device's run has, unless others run beside it.
    fn issued_last(&mut self, run: &RunState) {
        if !run.in_group {
            self.engine_source_done();
        }
    }

    /// The next request to issue, taken from the source.
    fn next_from_source(&mut self, run: &mut RunState) -> Result<Option<HostRequest>, DeviceError> {
        Ok(match self.fill_lookahead(run)? {
            true => run.lookahead.pop_front(),
            false => None,
        })
    }

    /// Top the lookahead up from the source and prefetch for it. True when a request is at its
    /// front, ready to issue; false when the run issues no more (an error of the source once
    /// the requests before it are issued).
    fn fill_lookahead(&mut self, run: &mut RunState) -> Result<bool, DeviceError> {
        if run.exhausted {
            return Ok(false);
        }
        if run.stop_issuing_ns.is_some_and(|stop| self.now_ns >= stop) {
            if run.end_flush != EndFlush::Due {
                run.exhausted = true;
                self.issued_last(run);
                return Ok(false);
            }
            // The runtime is over; what is left is the job's closing flush.
            run.source_done = true;
            run.source_error = None;
            run.lookahead.clear();
        }
        while !run.source_done && run.lookahead.len() < LOOKAHEAD {
            match run.source.next_request() {
                None => run.source_done = true,
                Some(Err(e)) => {
                    run.source_done = true;
                    run.source_error = Some(e);
                }
                Some(Ok(req)) => {
                    self.prefetch_request(&req, false);
                    run.lookahead.push_back(req);
                }
            }
        }
        if let Some(req) = run.lookahead.get(DEPENDENT_STAGE) {
            self.prefetch_request(req, true);
        }
        if !run.lookahead.is_empty() {
            return Ok(true);
        }
        if run.end_flush == EndFlush::Due && run.source_error.is_none() {
            // fio's end_fsync: once every request of the job is done.
            if !run.in_flight.is_empty() {
                return Ok(false);
            }
            run.end_flush = EndFlush::Issued;
            run.lookahead.push_back(HostRequest::new(Op::Flush, 0, 0));
            return Ok(true);
        }
        run.exhausted = true;
        self.issued_last(run);
        match run.source_error.take() {
            Some(e) => Err(DeviceError::Source(e)),
            None => Ok(false),
        }
    }

    /// Issue `req` (the run's `seq`-th request, counted from 0) into `in_flight`.
    fn issue(
        &mut self,
        (in_flight, job, seq, slot_base): (&mut InFlightSet, &mut JobStats, &mut u64, u32),
        req: &HostRequest,
        arrival_ns: u64,
        issue_ns: u64,
    ) -> Result<(), DeviceError> {
        let in_run = |e: DeviceError| DeviceError::InRun {
            index: *seq + 1,
            source: Box::new(e),
        };
        if self.engine.is_some() {
            let slot = in_flight.insert(arrival_ns, issue_ns, req.op, req.length);
            self.engine_set_now(issue_ns);
            if let Err(e) = self.engine_submit(req, issue_ns, slot_base + slot as u32) {
                return Err(in_run(e));
            }
        } else {
            let completion = self.execute(req, issue_ns, None, None).map_err(in_run)?;
            let slot = in_flight.insert(arrival_ns, issue_ns, req.op, req.length);
            let c = completion;
            in_flight.set_outcome(slot, c.complete_ns, c.queue_ns, c.uncorrectable);
            in_flight.push(*seq, slot);
        }
        job.first_issue_ns.get_or_insert(issue_ns);
        *seq += 1;
        Ok(())
    }

    /// The next completion of the run: from the in-flight heap, or from the event engine
    /// (with `limit`, only one at or before it). Returns the request's slot, its record
    /// complete (and readable until the next issue).
    fn next_completion(
        &mut self,
        run: &mut RunState,
        limit: Option<u64>,
    ) -> Result<Option<u16>, DeviceError> {
        if run.in_flight.is_empty() && (self.engine.is_none() || limit.is_none()) {
            return Ok(None);
        }
        if self.engine.is_none() {
            if limit.is_some_and(|l| run.in_flight.earliest_ns().is_some_and(|c| c > l)) {
                return Ok(None);
            }
            return Ok(run.in_flight.pop());
        }
        // With nothing in flight the engine still has work of its own before `limit` (GC
        // steps, buffered programs, idle-time GC): it happens at its own time, not when the
        // next request arrives.
        let Some(c) = self.engine_next_completion(limit)? else {
            if limit.is_none() {
                // Requests in flight but nothing left to happen: a broken invariant of the
                // engine; an error, never a spin.
                return Err(DeviceError::Run(
                    "event engine stalled with requests in flight",
                ));
            }
            return Ok(None);
        };
        let reorder = (&mut run.log_reorder, &mut run.log_next);
        let slot = self.engine_completed(&mut run.in_flight, c.slot as u16, &c, reorder);
        Ok(Some(slot))
    }

    /// Record the engine's completion `c` of the request in `slot` of `in_flight`, and push its
    /// log row (when the log is kept) in request order. Returns the slot.
    #[inline(always)]
    fn engine_completed(
        &mut self,
        in_flight: &mut InFlightSet,
        slot: u16,
        c: &super::engine::EngineCompletion,
        reorder: (&mut BTreeMap<u64, crate::stats::RequestLogRow>, &mut u64),
    ) -> u16 {
        let slot = in_flight.take(slot);
        in_flight.set_outcome(slot, c.complete_ns, c.queue_ns, c.uncorrectable);
        let row = match self.request_log {
            Some(_) => self.engine_take_log_row(c),
            None => None,
        };
        if let (Some(log), Some(row)) = (&mut self.request_log, row) {
            log_in_order(log, reorder, row);
        }
        slot
    }

    /// A think-time job beside others issues at the present what [`Device::think_step`] would:
    /// one request after another until its queue is full or its count calls a pause.
    fn think_issue(&mut self, run: &mut RunState) -> Result<(), DeviceError> {
        while run.think == ThinkState::Ready {
            if run.in_flight.len() >= run.queue_depth {
                run.think = ThinkState::WaitOne { check: false };
                break;
            }
            let Some(req) = self.next_from_source(run)? else {
                break;
            };
            let now = self.now_ns;
            self.issue(run.issue_target(), &req, now, now)?;
            if run.in_flight.len() >= run.queue_depth {
                // fio reaps one completion of a full queue, then looks at its count.
                run.think = ThinkState::WaitOne { check: true };
                break;
            }
            self.think_count(run);
        }
        Ok(())
    }

    /// Look at a think-time job's count: at a multiple of its blocks, wait for its requests,
    /// then pause.
    fn think_count(&mut self, run: &mut RunState) {
        let Loop::Think {
            think_ns,
            blocks,
            count_completions,
        } = run.pacing
        else {
            return;
        };
        if !run.think_due(blocks, count_completions) {
            return;
        }
        run.think = match run.in_flight.is_empty() {
            true => ThinkState::Sleeping {
                until: self.now_ns + think_ns,
            },
            false => ThinkState::Draining,
        };
    }

    /// One of a think-time job's own requests completed (its record accounted).
    fn think_completed(&mut self, run: &mut RunState) {
        match run.think {
            ThinkState::WaitOne { check } => {
                run.think = ThinkState::Ready;
                if check {
                    self.think_count(run);
                }
            }
            ThinkState::Draining if run.in_flight.is_empty() => {
                let Loop::Think { think_ns, .. } = run.pacing else {
                    return;
                };
                run.think = ThinkState::Sleeping {
                    until: self.now_ns + think_ns,
                };
            }
            _ => {}
        }
    }

    fn retire(&mut self, run: &mut RunState) -> Result<bool, DeviceError> {
        match self.next_completion(run, None)? {
            Some(slot) => {
                self.account(run, slot);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn account(&mut self, run: &mut RunState, slot: u16) {
        let f = &run.in_flight.slots[slot as usize];
        self.now_ns = self.now_ns.max(f.complete_ns);
        run.completed += 1;
        run.job.last_complete_ns = run.job.last_complete_ns.max(f.complete_ns);
        let ftl = &self.ftl;
        self.series.record(
            f.complete_ns,
            f.op,
            f.bytes,
            f.complete_ns - f.arrival_ns,
            || super::series_counters(ftl.as_ref()),
        );
        if f.complete_ns < run.count_from_ns {
            return;
        }
        let stats = match f.op {
            Op::Read => &mut run.job.read,
            Op::Write => &mut run.job.write,
            Op::Trim => &mut run.job.trim,
            Op::Flush => {
                // The closing flush (end_fsync) has its latency reported, not its count, as
                // fio reports it.
                run.job.sync_ios += (run.end_flush != EndFlush::Issued) as u64;
                run.job.sync.record(f.complete_ns - f.issue_ns);
                return;
            }
        };
        stats.ios += 1;
        stats.bytes += f.bytes;
        stats.errors += f.failed as u64;
        stats.slat.record(f.issue_ns - f.arrival_ns);
        let clat = f.complete_ns - f.issue_ns;
        stats.clat.record(clat);
        stats.lat.record(f.complete_ns - f.arrival_ns);
        let queue = f.queue_ns.min(clat);
        stats.queue.record(queue);
        stats.service.record(clat - queue);
    }

    /// A closed-loop job fills its queue at the present.
    #[inline(always)]
    fn fill_closed(&mut self, run: &mut RunState) -> Result<(), DeviceError> {
        while run.in_flight.len() < run.queue_depth && self.issue_in_place(run)? {}
        while run.in_flight.len() < run.queue_depth && self.fill_lookahead(run)? {
            // Issued where it waits in the lookahead: a request is 72 bytes, and copying it
            // out costs more than the borrow.
            let now = self.now_ns;
            let RunState {
                lookahead,
                in_flight,
                job,
                seq,
                slot_base,
                ..
            } = &mut *run;
            let req = lookahead.front().expect("a request in the lookahead");
            let issued = self.issue((in_flight, job, seq, *slot_base), req, now, now);
            lookahead.pop_front();
            issued?;
        }
        Ok(())
    }

    /// Issue the next request where its source holds it (an in-memory source, nothing in the
    /// lookahead, the runtime not over), prefetching as the lookahead does: the request
    /// `LOOKAHEAD` ahead's mapping entries, the one `DEPENDENT_STAGE` ahead's dependent ones,
    /// and the lines of the one twice `LOOKAHEAD` ahead. False when the lookahead's path has
    /// to take over (the source is another kind, or has nothing left).
    #[inline(always)]
    fn issue_in_place(&mut self, run: &mut RunState) -> Result<bool, DeviceError> {
        if !run.lookahead.is_empty()
            || run.source_done
            || run.exhausted
            || run.stop_issuing_ns.is_some_and(|stop| self.now_ns >= stop)
        {
            return Ok(false);
        }
        let now = self.now_ns;
        let RunState {
            source,
            in_flight,
            job,
            seq,
            slot_base,
            ..
        } = &mut *run;
        let Some(pending) = source.pending().filter(|p| !p.is_empty()) else {
            return Ok(false);
        };
        crate::nand::prefetch::prefetch_item(pending, 2 * LOOKAHEAD);
        if let Some(ahead) = pending.get(LOOKAHEAD) {
            self.prefetch_request(ahead, false);
        }
        if let Some(ahead) = pending.get(DEPENDENT_STAGE) {
            self.prefetch_request(ahead, true);
        }
        let issued = self.issue((in_flight, job, seq, *slot_base), &pending[0], now, now);
        source.skip(1);
        issued.map(|_| true)
    }

    fn step_run(&mut self, run: &mut RunState, max_completions: u64) -> Result<(), DeviceError> {
        let target = run.completed + max_completions;
        while run.completed < target {
            match run.pacing {
                Loop::Closed => {
                    self.fill_closed(run)?;
                    if !self.retire(run)? {
                        return Ok(());
                    }
                }
                Loop::Think {
                    think_ns,
                    blocks,
                    count_completions,
                } => return self.step_think(run, target, think_ns, blocks, count_completions),
                Loop::Open { time_scale } => {
                    if run.pending.is_none() {
                        if let Some(req) = self.next_from_source(run)? {
                            run.pending = Some(req);
                        }
                    }
                    let Some(req) = run.pending else {
                        if !self.retire(run)? {
                            return Ok(());
                        }
                        continue;
                    };
                    let Some(arrival) = run.pending_arrival(time_scale) else {
                        // It arrives after the runtime: the run issues nothing more.
                        self.issued_last(run);
                        continue;
                    };
                    // Completions before the arrival go first (at the same instant too: a
                    // completion frees its slot before the next request arrives).
                    if run.in_flight.len() >= run.queue_depth {
                        self.retire(run)?;
                        continue;
                    }
                    if let Some(slot) = self.next_completion(run, Some(arrival))? {
                        self.account(run, slot);
                        continue;
                    }
                    run.pending = None;
                    let issue = arrival.max(self.now_ns);
                    self.now_ns = issue;
                    self.issue(run.issue_target(), &req, arrival, issue)?;
                }
            }
        }
        Ok(())
    }

    /// [`Device::step_run`] of a closed loop with think time, until `target` completions. Out
    /// of line, so that the other loops' code stays as it is without it.
    #[inline(never)]
    fn step_think(
        &mut self,
        run: &mut RunState,
        target: u64,
        think_ns: u64,
        blocks: u32,
        count_completions: bool,
    ) -> Result<(), DeviceError> {
        while run.completed < target {
            if !self.think_step(run, think_ns, blocks, count_completions)? {
                break;
            }
        }
        Ok(())
    }

    /// One step of a closed loop with think time (see [`Loop::Think`]): issue one request
    /// (reaping one completion first when the queue is full), then stall if the count says so.
    /// False when the run has nothing left to issue or complete.
    fn think_step(
        &mut self,
        run: &mut RunState,
        think_ns: u64,
        blocks: u32,
        count_completions: bool,
    ) -> Result<bool, DeviceError> {
        if run.in_flight.len() >= run.queue_depth {
            return self.retire(run);
        }
        let Some(req) = self.next_from_source(run)? else {
            return self.retire(run);
        };
        let now = self.now_ns;
        self.issue(run.issue_target(), &req, now, now)?;
        // fio reaps when the queue is full, then looks at its count.
        if run.in_flight.len() >= run.queue_depth {
            self.retire(run)?;
        }
        if !run.think_due(blocks, count_completions) {
            return Ok(true);
        }
        while self.retire(run)? {}
        // Idle: the device's own work (background GC) runs in the pause.
        let until = self.now_ns + think_ns;
        while let Some(slot) = self.next_completion(run, Some(until))? {
            self.account(run, slot);
        }
        self.now_ns = self.now_ns.max(until);
        Ok(true)
    }

    /// End the run (stopping early if it is not done: outstanding requests are drained) and
    /// return its job object in fio's layout.
    pub fn finish_run(&mut self) -> Result<serde_json::Value, DeviceError> {
        if matches!(self.run.as_deref(), Some(Run::Group(_))) {
            return Err(DeviceError::Run(
                "jobs side by side are in progress: end them with finish_group",
            ));
        }
        let mut jobs = self.finish_group()?;
        Ok(jobs.pop().expect("one job"))
    }

    /// End the run or group (stopping early if it is not done: outstanding requests are
    /// drained) and return each job's object in fio's layout, in the order they were given.
    pub fn finish_group(&mut self) -> Result<Vec<serde_json::Value>, DeviceError> {
        self.finish_group_reported(&[])
    }

    /// [`Device::finish_group`], reporting jobs together as fio's `group_reporting` does:
    /// `reports[i]` is the report of job `i` (0, then each the same as the job before it or one
    /// more); jobs of one report become one object, named after its first job. Empty: one
    /// report per job.
    pub fn finish_group_reported(
        &mut self,
        reports: &[usize],
    ) -> Result<Vec<serde_json::Value>, DeviceError> {
        let jobs = match self.run.as_deref() {
            Some(Run::One(_)) => 1,
            Some(Run::Group(group)) => group.jobs.len(),
            None => return Err(DeviceError::Run("no run in progress")),
        };
        let numbered = reports.first().is_none_or(|&r| r == 0)
            && reports.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1);
        if !reports.is_empty() && (reports.len() != jobs || !numbered) {
            return Err(DeviceError::Run(
                "reports must number the jobs 0, 1, ... in order, one entry per job",
            ));
        }
        let mut run = self
            .run
            .take()
            .ok_or(DeviceError::Run("no run in progress"))?;
        let drained = (|| {
            match &mut *run {
                Run::One(one) => while self.retire(one)? {},
                Run::Group(group) => {
                    while let Some((j, slot)) = self.group_next_completion(group, None)? {
                        self.account(&mut group.jobs[j], slot);
                    }
                }
            }
            if self.engine.is_some() {
                self.engine_drain()?;
            }
            Ok::<(), DeviceError>(())
        })();
        if let Err(e) = drained {
            self.engine = None;
            self.ftl.defer_erases(false);
            return Err(e);
        }
        let jobs = match *run {
            Run::One(one) => vec![one],
            Run::Group(group) => group.jobs,
        };
        let mut merged: Vec<RunState> = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.into_iter().enumerate() {
            match merged.last_mut() {
                Some(last) if i > 0 && !reports.is_empty() && reports[i] == reports[i - 1] => {
                    last.job.merge(&job.job)
                }
                _ => merged.push(job),
            }
        }
        Ok(merged.iter().map(|run| self.job_report(run)).collect())
    }

    /// A finished job's object in fio's layout, with its `ssd_job` section.
    fn job_report(&self, run: &RunState) -> serde_json::Value {
        let ssd_job = serde_json::json!({
            "sim_time_ns": self.now_ns - run.start_ns,
            "scheduler": self.config.controller.scheduler.name(),
            "read": time_split_json(&run.job.read),
            "write": time_split_json(&run.job.write),
        });
        job_json(&run.job, ssd_job)
    }

    /// Run a workload to the end and return its job object.
    pub fn run_to_end(&mut self, spec: RunSpec) -> Result<serde_json::Value, DeviceError> {
        self.start_run(spec)?;
        loop {
            match self.step(1 << 20) {
                Ok(p) if p.done => break,
                Ok(_) => {}
                Err(e) => {
                    self.run = None;
                    return Err(e);
                }
            }
        }
        self.finish_run()
    }

    pub fn run_in_progress(&self) -> bool {
        self.run.is_some()
    }
}

/// Queueing (waiting in die queues) and service (the rest of the completion latency) of one
/// direction's requests.
fn time_split_json(stats: &crate::stats::OpStats) -> serde_json::Value {
    let part = |s: &crate::stats::SplitStats| {
        let [p50, p99, p999] = s.percentiles([50.0, 99.0, 99.9]);
        let m = &s.moments;
        serde_json::json!({
            "mean": m.mean(), "p50": p50, "p99": p99,
            "p99.9": p999, "max": if m.n == 0 { 0 } else { m.max },
        })
    };
    serde_json::json!({ "queue_ns": part(&stats.queue), "service_ns": part(&stats.service) })
}
