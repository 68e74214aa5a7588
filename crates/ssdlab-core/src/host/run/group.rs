//! Jobs side by side ([`Device::start_group`]): the loop that interleaves their issues,
//! arrivals, pauses and completions on one device and one clock.
//!
//! Its own work per event does not grow with the number of jobs: only the jobs an event
//! touched (an issue, a completion or the end of a pause of their own) are looked at again,
//! and the next arrival (and, on the reservation path, the next completion) among all jobs
//! comes from a heap. What does grow is memory traffic: each completion touches its own job's
//! state and statistics, so 1,024 jobs of depth 1 cost 3–4 times per request what one job of
//! depth 1,024 does (`groupspeed`).

use super::*;

/// The earliest of one optional time per job, a tie going to the job given first: a heap
/// beside each job's current time. An entry that no longer equals its job's time is stale and
/// is dropped when it reaches the top; each job's current time always has an entry.
struct EarliestPerJob {
    time: Vec<Option<u64>>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl EarliestPerJob {
    fn new(jobs: usize) -> Self {
        EarliestPerJob {
            time: vec![None; jobs],
            heap: BinaryHeap::with_capacity(jobs),
        }
    }

    fn set(&mut self, job: usize, time: Option<u64>) {
        if self.time[job] == time {
            return;
        }
        self.time[job] = time;
        if let Some(t) = time {
            self.heap.push(Reverse((t, job)));
        }
    }

    fn earliest(&mut self) -> Option<(u64, usize)> {
        while let Some(&Reverse((t, job))) = self.heap.peek() {
            if self.time[job] == Some(t) {
                return Some((t, job));
            }
            self.heap.pop();
        }
        None
    }
}

/// What the group knows of one of its jobs as of the last look.
#[derive(Default, Clone, Copy)]
struct JobMarks {
    /// In the list of jobs to look at again.
    listed: bool,
    /// Counted among the jobs that issue no more.
    exhausted: bool,
    /// Its requests in flight, as counted in the group's total.
    in_flight: usize,
}

/// Jobs that run side by side, as fio runs the jobs of one group: each with its own source,
/// queue depth, pacing, runtime and statistics, on one device and one clock. Each job's slots
/// take their own range of the engine's request slots (from its `slot_base`).
pub(crate) struct GroupRun {
    pub(super) jobs: Vec<RunState>,
    /// Log rows of completed requests waiting for earlier ones, and the next request number.
    log_reorder: BTreeMap<u64, crate::stats::RequestLogRow>,
    log_next: u64,
    pub(super) completed: u64,
    pub(super) total: Option<u64>,
    marks: Vec<JobMarks>,
    /// Jobs touched since the loop last looked at them (in no particular order).
    changed: Vec<usize>,
    /// The next arrival of each open-loop job with a free slot, or the end of a pause.
    arrivals: EarliestPerJob,
    /// Reservation path: each job's earliest completion.
    completions: EarliestPerJob,
    /// Requests in flight over all jobs, and the jobs that issue no more.
    in_flight: usize,
    exhausted: usize,
}

impl GroupRun {
    /// Job `j` was touched: look at it again before the next event.
    fn mark(&mut self, j: usize) {
        if !self.marks[j].listed {
            self.marks[j].listed = true;
            self.changed.push(j);
        }
    }

    /// Bring the group's counts and its completion heap up to date with job `j`.
    fn sync(&mut self, j: usize) {
        let run = &self.jobs[j];
        let marks = &mut self.marks[j];
        self.in_flight = self.in_flight - marks.in_flight + run.in_flight.len();
        marks.in_flight = run.in_flight.len();
        if run.exhausted && !marks.exhausted {
            marks.exhausted = true;
            self.exhausted += 1;
        }
        // Only the reservation path orders completions in the jobs' heaps.
        self.completions.set(j, run.in_flight.earliest_ns());
    }

    fn sync_changed(&mut self) {
        for i in 0..self.changed.len() {
            self.sync(self.changed[i]);
        }
    }
}

impl Device {
    /// Begin jobs that run side by side, as fio runs the jobs of a group: each keeps its own
    /// queue depth (closed loop) or arrival times (open loop), runtime, ramp and statistics,
    /// and they share the device and its clock. Drive it with [`Device::step`] and end it with
    /// [`Device::finish_group`]. One job is an ordinary run.
    pub fn start_group(&mut self, specs: Vec<RunSpec>) -> Result<(), DeviceError> {
        self.start_group_clocked(specs, ArrivalClock::PerJob)
    }

    /// [`Device::start_group`], with the open-loop jobs' timestamps counted from `clock`'s
    /// origin: each job's own first request, or the earliest first request of them all (traces
    /// recorded side by side, such as the volumes of one server, keep their offsets).
    pub fn start_group_clocked(
        &mut self,
        mut specs: Vec<RunSpec>,
        clock: ArrivalClock,
    ) -> Result<(), DeviceError> {
        if specs.len() <= 1 {
            let spec = specs.pop().ok_or(DeviceError::Run("a group needs a job"))?;
            return self.start_run(spec);
        }
        if self.run.is_some() {
            return Err(DeviceError::Run("a run is already in progress"));
        }
        let depth: u64 = specs.iter().map(|s| s.queue_depth as u64).sum();
        if depth > InFlightSet::MAX_DEPTH as u64 {
            return Err(DeviceError::Run(
                "the queue depths of jobs side by side must add up to at most 65536",
            ));
        }
        let mut jobs = Vec::with_capacity(specs.len());
        let mut slot_base = 0;
        let mut total = Some(0u64);
        for spec in specs {
            let depth = spec.queue_depth;
            let mut job = self.new_run_state(spec)?;
            job.slot_base = slot_base;
            job.in_group = true;
            slot_base += depth;
            total = total.zip(job.total).map(|(a, b)| a + b);
            jobs.push(job);
        }
        if clock == ArrivalClock::Shared {
            self.share_arrival_origin(&mut jobs)?;
        }
        self.start_engine();
        let n = jobs.len();
        let log_next = jobs[0].log_next;
        self.run = Some(Box::new(Run::Group(GroupRun {
            jobs,
            log_reorder: Default::default(),
            log_next,
            completed: 0,
            total,
            // Every job is looked at first, in the order given.
            marks: vec![
                JobMarks {
                    listed: true,
                    ..Default::default()
                };
                n
            ],
            changed: (0..n).collect(),
            arrivals: EarliestPerJob::new(n),
            completions: EarliestPerJob::new(n),
            in_flight: 0,
            exhausted: 0,
        })));
        Ok(())
    }

    /// Count every open-loop job's timestamps from the earliest first request among them.
    fn share_arrival_origin(&mut self, jobs: &mut [RunState]) -> Result<(), DeviceError> {
        let mut origin: Option<u64> = None;
        for job in jobs.iter_mut() {
            if !matches!(job.pacing, Loop::Open { .. }) || !self.fill_lookahead(job)? {
                continue;
            }
            let first = job
                .lookahead
                .front()
                .and_then(|r| r.arrival_ns)
                .unwrap_or(0);
            origin = Some(origin.map_or(first, |o| o.min(first)));
        }
        for job in jobs.iter_mut() {
            if matches!(job.pacing, Loop::Open { .. }) {
                job.first_arrival = origin;
            }
        }
        Ok(())
    }

    /// The next completion among the jobs of `group` (with `limit`, only one at or before
    /// it): the job's index and the request's slot in it, its record complete.
    pub(super) fn group_next_completion(
        &mut self,
        group: &mut GroupRun,
        limit: Option<u64>,
    ) -> Result<Option<(usize, u16)>, DeviceError> {
        group.sync_changed();
        if group.in_flight == 0 && (self.engine.is_none() || limit.is_none()) {
            return Ok(None);
        }
        let (j, slot) = if self.engine.is_none() {
            let Some((complete_ns, j)) = group.completions.earliest() else {
                return Ok(None);
            };
            if limit.is_some_and(|l| complete_ns > l) {
                return Ok(None);
            }
            let slot = group.jobs[j].in_flight.pop().expect("the job's earliest");
            (j, slot)
        } else {
            let Some(c) = self.engine_next_completion(limit)? else {
                if limit.is_none() {
                    return Err(DeviceError::Run(
                        "event engine stalled with requests in flight",
                    ));
                }
                return Ok(None);
            };
            // Slot ranges ascend with the job index.
            let j = group.jobs.partition_point(|run| run.slot_base <= c.slot) - 1;
            let run = &mut group.jobs[j];
            let local = (c.slot - run.slot_base) as u16;
            let reorder = (&mut group.log_reorder, &mut group.log_next);
            (
                j,
                self.engine_completed(&mut run.in_flight, local, &c, reorder),
            )
        };
        group.mark(j);
        Ok(Some((j, slot)))
    }

    /// [`Device::step_run`] of jobs side by side. At each instant the jobs touched since the
    /// last look issue what they can (closed-loop jobs fill their queues); then the next thing
    /// to happen is the earliest completion or the earliest arrival of an open-loop job with a
    /// free slot (or end of a pause), a completion winning a tie (as in one job's loops).
    pub(super) fn step_group(
        &mut self,
        group: &mut GroupRun,
        max_completions: u64,
    ) -> Result<(), DeviceError> {
        let target = group.completed + max_completions;
        while group.completed < target {
            self.look_at_changed(group)?;
            if group.exhausted == group.jobs.len() {
                self.engine_source_done();
            }
            let next_arrival = group.arrivals.earliest();
            match self.group_next_completion(group, next_arrival.map(|(t, _)| t))? {
                Some((j, slot)) => {
                    let run = &mut group.jobs[j];
                    self.account(run, slot);
                    group.completed += 1;
                    if matches!(run.pacing, Loop::Think { .. }) {
                        self.think_completed(run);
                    }
                }
                None => {
                    let Some((arrival, j)) = next_arrival else {
                        return Ok(()); // nothing in flight and nothing to issue
                    };
                    group.arrivals.set(j, None);
                    group.mark(j);
                    let run = &mut group.jobs[j];
                    if let ThinkState::Sleeping { until } = run.think {
                        self.now_ns = self.now_ns.max(until);
                        run.think = ThinkState::Ready;
                        continue;
                    }
                    let req = run.pending.take().expect("the arrival's request");
                    let issue = arrival.max(self.now_ns);
                    self.now_ns = issue;
                    self.issue(run.issue_target(), &req, arrival, issue)?;
                }
            }
        }
        Ok(())
    }

    /// The touched jobs, in the order given, issue what they can at the present, and their
    /// next arrivals or ends of pauses are noted.
    fn look_at_changed(&mut self, group: &mut GroupRun) -> Result<(), DeviceError> {
        group.changed.sort_unstable();
        for i in 0..group.changed.len() {
            let j = group.changed[i];
            let run = &mut group.jobs[j];
            match run.pacing {
                Loop::Closed => self.fill_closed(run)?,
                Loop::Think { .. } => self.think_issue(run)?,
                Loop::Open { .. } => {}
            }
            let arrival = match (run.think, run.pacing) {
                (ThinkState::Sleeping { until }, _) => Some(until),
                (_, Loop::Open { time_scale }) if run.in_flight.len() < run.queue_depth => {
                    if run.pending.is_none() {
                        run.pending = self.next_from_source(run)?;
                    }
                    // None with nothing pending, or when it arrives after the runtime.
                    run.pending_arrival(time_scale)
                }
                _ => None,
            };
            group.arrivals.set(j, arrival);
            group.sync(j);
        }
        for &j in &group.changed {
            group.marks[j].listed = false;
        }
        group.changed.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::EarliestPerJob;

    #[test]
    fn earliest_per_job_follows_each_jobs_latest_time() {
        let mut e = EarliestPerJob::new(4);
        assert_eq!(e.earliest(), None);
        e.set(2, Some(50));
        e.set(1, Some(50));
        e.set(3, Some(70));
        // A tie goes to the job given first.
        assert_eq!(e.earliest(), Some((50, 1)));
        // A job's new time replaces its old one, later or earlier.
        e.set(1, Some(90));
        assert_eq!(e.earliest(), Some((50, 2)));
        e.set(3, Some(10));
        assert_eq!(e.earliest(), Some((10, 3)));
        e.set(3, None);
        e.set(2, None);
        assert_eq!(e.earliest(), Some((90, 1)));
        // Back to a time it had before: one live entry, however many stale ones.
        e.set(2, Some(50));
        e.set(2, None);
        e.set(2, Some(50));
        e.set(2, Some(50));
        assert_eq!(e.earliest(), Some((50, 2)));
        e.set(2, None);
        assert_eq!(e.earliest(), Some((90, 1)));
        e.set(1, None);
        assert_eq!(e.earliest(), None);
        assert!(
            e.heap.is_empty(),
            "stale entries are dropped as they surface"
        );
    }
}
