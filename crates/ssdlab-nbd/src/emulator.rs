//! The state every connection shares: the simulated device and what is measured on it.
//!
//! One mutex guards the device, the per-direction statistics and the request log, so that a
//! request's simulation, its accounting and its log row happen in one critical section and the
//! log's request numbers are in issue order. A request holds it for a few hundred nanoseconds
//! (plus, with `--image`, the `pwrite` that mirrors a write into the image file, so that the file
//! sees writes in the device's order; a FLUSH's `fdatasync` happens after the lock is released).

use crate::clock::Clock;
use crate::image::Image;
use ssdlab_core::stats::{JobStats, LatencyStats};
use ssdlab_core::{Completion, Device, DeviceError, HostRequest, Op};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

pub struct DeviceState {
    pub device: Device,
    pub job: JobStats,
    pub log: Option<BufWriter<File>>,
    pub log_error: Option<io::Error>,
    /// The log error was shown as a warning.
    pub log_error_reported: bool,
    /// Simulate a power loss (and recovery) when the first request issued at or after this
    /// simulated time arrives (`ssdlab serve --power-loss-at`).
    pub power_loss_at_ns: Option<u64>,
    /// What the recovery after that power loss read and how long it took.
    pub recovery: Option<ssdlab_core::RecoveryReport>,
    /// SIGUSR1 cuts the power (`ssdlab serve`; see [`crate::power_signal`]).
    pub power_loss_on_signal: bool,
    /// Power-loss signals already acted on (the process's count when the server started, then
    /// each one served).
    pub power_signals_seen: u64,
    /// Every power loss so far, in order.
    pub power_losses: Vec<PowerLoss>,
}

/// One power loss and the recovery that followed.
#[derive(Debug, Clone)]
pub struct PowerLoss {
    /// `"time"` (`--power-loss-at`) or `"signal"` (SIGUSR1).
    pub trigger: &'static str,
    /// Simulated time of the loss.
    pub at_ns: u64,
    /// None when the device refused (a device without a block-interface FTL).
    pub recovery: Option<ssdlab_core::RecoveryReport>,
}

/// Reply-timing figures of the real-time clock, summed over connections.
#[derive(Debug, Clone)]
pub struct EmulatorCounters {
    pub connections: u64,
    pub requests: u64,
    pub error_replies: u64,
    pub protocol_errors: u64,
    /// Replies sent after their deadline by more than the miss threshold.
    pub deadline_misses: u64,
    /// How late each timed reply went out (0 when on time), in ns.
    pub lateness: LatencyStats,
    /// Wall time from receiving a request to sending its reply, in ns.
    pub served: LatencyStats,
    /// Real time: each gap between a reply that left its connection idle and the client's
    /// next request (reply delivery, the client's processing or thinking, request delivery),
    /// in ns. The compensation is the running lower quartile of those under 2 ms, so how far
    /// the median lies above it bounds how far a client's median latency can exceed the
    /// model's on this host: the figure that tells a slow host from a wrong model.
    pub client_gaps: LatencyStats,
    /// Real time: compensation applied to replies (sum, in ns, and count).
    pub compensation_sum_ns: u64,
    pub compensated_replies: u64,
    /// Times a connection stopped reading because a limit was reached (to wait for a held
    /// reply's deadline, or for the client to take the replies written to it).
    pub backpressure_waits: u64,
    /// The most bytes one connection held at once.
    pub peak_buffered_bytes: u64,
}

impl Default for EmulatorCounters {
    /// The server's totals, with timing histograms.
    fn default() -> Self {
        let mut c = EmulatorCounters::for_connection();
        c.time_replies();
        c
    }
}

impl EmulatorCounters {
    /// A connection's counters: the timing histograms (about 280 KiB each) are created at the
    /// first timed reply, so that idle connections and virtual-clock ones cost none.
    pub fn for_connection() -> Self {
        EmulatorCounters {
            connections: 0,
            requests: 0,
            error_replies: 0,
            protocol_errors: 0,
            deadline_misses: 0,
            lateness: LatencyStats::new(false),
            served: LatencyStats::new(false),
            client_gaps: LatencyStats::new(false),
            compensation_sum_ns: 0,
            compensated_replies: 0,
            backpressure_waits: 0,
            peak_buffered_bytes: 0,
        }
    }

    /// Give the timing statistics their histograms (before the first sample).
    pub fn time_replies(&mut self) {
        if !self.lateness.has_histogram() {
            debug_assert_eq!(self.lateness.n, 0);
            self.lateness = LatencyStats::new(true);
            self.served = LatencyStats::new(true);
            self.client_gaps = LatencyStats::new(true);
        }
    }

    pub fn merge(&mut self, other: &EmulatorCounters) {
        self.connections += other.connections;
        self.requests += other.requests;
        self.error_replies += other.error_replies;
        self.protocol_errors += other.protocol_errors;
        self.deadline_misses += other.deadline_misses;
        self.lateness.merge(&other.lateness);
        self.served.merge(&other.served);
        self.client_gaps.merge(&other.client_gaps);
        self.compensation_sum_ns += other.compensation_sum_ns;
        self.compensated_replies += other.compensated_replies;
        self.backpressure_waits += other.backpressure_waits;
        self.peak_buffered_bytes = self.peak_buffered_bytes.max(other.peak_buffered_bytes);
    }
}

pub struct Emulator {
    pub state: Mutex<DeviceState>,
    pub clock: Box<dyn Clock>,
    pub counters: Mutex<EmulatorCounters>,
    /// A reply later than its deadline by more than this counts as a miss.
    pub miss_threshold_ns: u64,
    pub started: Instant,
    /// Bytes all connections hold now, and the most they held at once: the memory a client
    /// can make the server allocate, observable without reading the process's RSS.
    pub buffered_bytes: AtomicU64,
    pub peak_buffered_bytes: AtomicU64,
    /// The persistent image that mirrors the export's contents (`--image`).
    pub image: Option<Image>,
}

/// A request's outcome as the connection needs it.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub completion: Completion,
    /// NBD error value (0: success).
    pub error: u32,
}

impl Served {
    /// This request followed by another issued with it (a FUA flush, a piece of a
    /// WRITE_ZEROES): it completes when both have, with the first error.
    pub fn and(self, other: Served) -> Served {
        Served {
            completion: Completion {
                complete_ns: self
                    .completion
                    .complete_ns
                    .max(other.completion.complete_ns),
                ..self.completion
            },
            error: if self.error != 0 {
                self.error
            } else {
                other.error
            },
        }
    }
}

impl Emulator {
    pub fn new(
        device: Device,
        clock: Box<dyn Clock>,
        log: Option<File>,
        miss_threshold_ns: u64,
    ) -> Self {
        Emulator {
            state: Mutex::new(DeviceState {
                device,
                job: JobStats::new("nbd"),
                log: log.map(|f| BufWriter::with_capacity(1 << 20, f)),
                log_error: None,
                log_error_reported: false,
                power_loss_at_ns: None,
                recovery: None,
                power_loss_on_signal: false,
                power_signals_seen: 0,
                power_losses: Vec::new(),
            }),
            clock,
            counters: Mutex::new(EmulatorCounters::default()),
            miss_threshold_ns,
            started: Instant::now(),
            buffered_bytes: AtomicU64::new(0),
            peak_buffered_bytes: AtomicU64::new(0),
            image: None,
        }
    }

    /// Mirror every accepted write and trim into `image`, and make it durable on FLUSH.
    pub fn with_image(mut self, image: Image) -> Self {
        self.image = Some(image);
        self
    }

    /// A connection's buffered bytes went from `before` to `after`.
    pub fn note_buffered(&self, before: usize, after: usize) {
        let total = if after >= before {
            let added = (after - before) as u64;
            self.buffered_bytes.fetch_add(added, Ordering::Relaxed) + added
        } else {
            let removed = (before - after) as u64;
            self.buffered_bytes.fetch_sub(removed, Ordering::Relaxed) - removed
        };
        self.peak_buffered_bytes.fetch_max(total, Ordering::Relaxed);
    }

    /// The device state; a connection thread that panicked mid-request cannot have left it
    /// half-updated in a way later requests could observe more harmfully than the panic itself,
    /// so a poisoned lock is taken over rather than propagated.
    pub fn lock(&self) -> MutexGuard<'_, DeviceState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Simulate one device request issued at `issue` (from [`Clock::issue_ns`]) and account
    /// for it.
    pub fn submit(
        &self,
        issue: u64,
        req: &HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Served {
        let mut guard = self.lock();
        let state = &mut *guard;
        if let Some(at) = state.power_loss_at_ns.filter(|&at| issue >= at) {
            // The request arrives at a device that lost power at `at` and recovered: it waits
            // for the recovery's scan (the device's clock moves to its end).
            state.power_loss_at_ns = None;
            state.lose_power("time", at);
        }
        if state.power_loss_on_signal && crate::power_signal::received() != state.power_signals_seen
        {
            // The signal came before this request: the power went at its issue time at the
            // latest.
            state.power_signals_seen = crate::power_signal::received();
            let at = state.device.now_ns().max(issue);
            state.lose_power("signal", at);
        }
        let served = match state.device.submit_at(issue, req, data, out) {
            Ok(completion) => {
                let mut error = if completion.uncorrectable {
                    crate::protocol::EIO
                } else {
                    0
                };
                if let Some(image) = &self.image {
                    let mirrored = match (req.op, data) {
                        (Op::Write, Some(bytes)) => image.write(req.offset, bytes),
                        (Op::Trim, _) => image.trim(req.offset, req.length),
                        _ => Ok(()),
                    };
                    // The client must learn that its data will not survive a restart.
                    if mirrored.is_err() {
                        error = crate::protocol::EIO;
                    }
                }
                state.account(req, &completion, error != 0);
                Served { completion, error }
            }
            Err(err) => {
                // Requests are validated before they get here; anything the device still
                // refuses is reported to the client as an I/O error, not a crash.
                let now = state.device.now_ns();
                let completion = Completion {
                    issue_ns: now,
                    complete_ns: now,
                    uncorrectable: false,
                    queue_ns: 0,
                };
                let error = match err {
                    DeviceError::OutOfRange { .. } => crate::protocol::EINVAL,
                    _ => crate::protocol::EIO,
                };
                Served { completion, error }
            }
        };
        drop(guard);
        match &self.image {
            Some(image)
                if (req.op == Op::Flush || req.fua)
                    && served.error == 0
                    && image.sync().is_err() =>
            {
                Served {
                    error: crate::protocol::EIO,
                    ..served
                }
            }
            _ => served,
        }
    }
}

impl DeviceState {
    /// Cut the power at simulated time `at` (not before the device's clock) and recover.
    fn lose_power(&mut self, trigger: &'static str, at: u64) {
        let at = at.max(self.device.now_ns());
        self.device.advance_to(at);
        let recovery = match self.device.power_loss() {
            Ok(()) => self.device.recover().ok(),
            Err(_) => None,
        };
        self.recovery = recovery.or(self.recovery);
        self.power_losses.push(PowerLoss {
            trigger,
            at_ns: at,
            recovery,
        });
    }

    /// Act on a power-loss signal received while no request came (the server's idle loop):
    /// the power goes at the device's current time.
    pub fn check_power_signal(&mut self) {
        if self.power_loss_on_signal && crate::power_signal::received() != self.power_signals_seen {
            self.power_signals_seen = crate::power_signal::received();
            let at = self.device.now_ns();
            self.lose_power("signal", at);
        }
    }

    fn account(&mut self, req: &HostRequest, c: &Completion, failed: bool) {
        let job = &mut self.job;
        job.first_issue_ns.get_or_insert(c.issue_ns);
        job.last_complete_ns = job.last_complete_ns.max(c.complete_ns);
        let stats = match req.op {
            Op::Read => &mut job.read,
            Op::Write => &mut job.write,
            Op::Trim => &mut job.trim,
            Op::Flush => {
                job.sync_ios += 1;
                job.sync.record(c.latency_ns());
                return self.log_row(req, c);
            }
        };
        stats.ios += 1;
        stats.bytes += req.length;
        stats.errors += failed as u64;
        stats.slat.record(0);
        stats.clat.record(c.latency_ns());
        stats.lat.record(c.latency_ns());
        self.log_row(req, c);
    }

    fn log_row(&mut self, req: &HostRequest, c: &Completion) {
        if let Some(log) = &mut self.log {
            let row = self.device.last_request_log_row(req, c);
            if let Err(e) = writeln!(log, "{}", row.csv_line()) {
                // Keep serving; the error is reported when the server stops.
                self.log_error.get_or_insert(e);
                self.log = None;
            }
        }
    }
}
