//! One client connection in the transmission phase.
//!
//! A connection is served by one thread that reads requests, simulates them on the shared
//! device as they arrive and sends each reply when its clock allows: at once (virtual clock,
//! replies batched into one write per read) or at the wall-clock instant of the modelled
//! completion (real-time clock, replies held in a deadline-ordered heap, so they may leave out
//! of order as the protocol allows). Waiting for a deadline sleeps in `ppoll` until shortly
//! before it and spins the rest, still reading new requests, because a sleeping thread wakes
//! tens of microseconds late on a busy machine.
//!
//! A connection's memory is bounded by its [`ConnectionLimits`]: requests in flight and bytes
//! buffered (input received, replies built or held). At a limit the connection stops reading
//! its socket until held replies have gone out, so a client that floods requests or never
//! reads its replies meets TCP's (or the Unix socket's) own flow control instead of making the
//! server allocate. The input buffer grows with the bytes that arrive, not with the length a
//! header announces. The server's watchdog reads each connection's [`Activity`] to close
//! idle and stalled connections.

use crate::clock::ConnectionClock;
use crate::emulator::{Emulator, EmulatorCounters, Served};
use crate::handshake::ExportInfo;
use crate::protocol::*;
use crate::transport::Transport;
use ssdlab_core::{HostRequest, Op};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sleep until this long before a reply's deadline, then spin. Timer wake-ups on a virtual
/// machine are late by tens to hundreds of microseconds (measured here: 60 us median, 180 us
/// at the 90th percentile for a 100 us sleep), so only distant deadlines are slept towards.
const SPIN_BEFORE_DEADLINE: Duration = Duration::from_millis(1);
/// Real-time clock: after a reply, look for the client's next request this long before
/// blocking, since a wake-up from a blocking read costs as much as a timer's. A client at
/// queue depth 1 sends its next request within this time.
const SPIN_WHEN_IDLE: Duration = Duration::from_micros(500);
/// Size of the input window; the buffer grows to it as bytes arrive, beyond it only for a
/// write's payload, and shrinks back after one.
pub const INPUT_BUFFER: usize = 256 << 10;
/// The input buffer of a new connection: idle clients (up to the connection cap) should cost
/// little, so the buffer starts small and grows when requests come.
const INITIAL_INPUT: usize = 16 << 10;
/// Reply buffers kept for reuse, and the largest kept: a pool of 32 MiB read buffers would
/// hold the budget of an idle connection.
const SPARE_BUFFERS: usize = 8;
const SPARE_BUFFER_MAX: usize = 256 << 10;
/// WRITE_ZEROES without holes writes zeros in pieces of this size.
const ZERO_CHUNK: usize = 1 << 20;

/// A reply held until its deadline.
struct HeldReply {
    deadline: Instant,
    seq: u64,
    received: Instant,
    bytes: Vec<u8>,
}

impl PartialEq for HeldReply {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for HeldReply {}
impl PartialOrd for HeldReply {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeldReply {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

/// Why the transmission phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `NBD_CMD_DISC`.
    Disconnect,
    /// The client closed its end (or the server shut the connection's input down).
    EndOfStream,
    /// The client broke the protocol (bad magic, oversized write); the connection was closed.
    ProtocolError,
}

/// The error (if any) a request gets before it reaches the device.
pub fn validate(h: &RequestHeader, export: &ExportInfo, strict_alignment: bool) -> u32 {
    let allowed_flags = match h.command {
        Command::Write | Command::Trim | Command::Flush => CMD_FLAG_FUA,
        Command::WriteZeroes => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
        Command::Read | Command::Disconnect => 0,
        Command::Cache | Command::BlockStatus | Command::Unknown(_) => return EINVAL,
    };
    if h.flags & !allowed_flags != 0 {
        return EINVAL;
    }
    let writes = matches!(
        h.command,
        Command::Write | Command::Trim | Command::WriteZeroes
    );
    if writes && export.read_only {
        return EPERM;
    }
    if matches!(h.command, Command::Read | Command::Write) && h.length > MAX_PAYLOAD {
        return EINVAL;
    }
    if matches!(h.command, Command::Flush | Command::Disconnect) {
        return 0;
    }
    let in_range = h
        .offset
        .checked_add(h.length as u64)
        .is_some_and(|end| end <= export.size);
    if !in_range {
        return match h.command {
            Command::Write | Command::WriteZeroes => ENOSPC,
            _ => EINVAL,
        };
    }
    let min = export.block_sizes.0 as u64;
    if strict_alignment
        && matches!(h.command, Command::Read | Command::Write)
        && (!h.offset.is_multiple_of(min) || !(h.length as u64).is_multiple_of(min))
    {
        return EINVAL;
    }
    0
}

/// Per-connection limits on memory and queued work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Requests executed whose replies have not been sent yet.
    pub max_requests_in_flight: usize,
    /// Bytes of input buffer and of replies built or held. One request always proceeds when
    /// nothing else is buffered, so a connection holds at most the larger of this and
    /// [`ONE_REQUEST_BYTES`].
    pub max_buffered_bytes: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            // fio's and the kernel's usual queue depths are at most 128-256.
            max_requests_in_flight: 256,
            // Two maximum-size requests: a 32 MiB write can be received while a 32 MiB read's
            // reply waits for its deadline.
            max_buffered_bytes: 64 << 20,
        }
    }
}

/// What one request may hold when it proceeds alone over the budget: a maximum READ reply,
/// the input window, the reply buffer's slack and the WRITE_ZEROES buffer.
pub const ONE_REQUEST_BYTES: usize = MAX_PAYLOAD as usize + (2 << 20);

/// The smallest buffered-bytes budget accepted: below the input window, a connection could
/// not even hold a batch of request headers.
pub const MIN_BUFFERED_BYTES: usize = 1 << 20;

/// What a connection shows the server's watchdog: when a byte last moved in either direction,
/// and whether the connection is waiting on its client (a partial request, replies the client
/// has not read, or a limit reached) rather than idle with nothing outstanding.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    last_ns: AtomicU64,
    busy: AtomicBool,
}

impl Activity {
    pub fn new() -> Self {
        Activity {
            epoch: Instant::now(),
            last_ns: AtomicU64::new(0),
            busy: AtomicBool::new(false),
        }
    }

    pub(crate) fn touch(&self) {
        let ns = self.epoch.elapsed().as_nanos() as u64;
        self.last_ns.store(ns, AtomicOrdering::Relaxed);
    }

    pub(crate) fn set_busy(&self, busy: bool) {
        self.busy.store(busy, AtomicOrdering::Relaxed);
    }

    /// How long ago a byte last moved.
    pub fn quiet_for(&self) -> Duration {
        let last = Duration::from_nanos(self.last_ns.load(AtomicOrdering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// Whether the connection waits on its client.
    pub fn busy(&self) -> bool {
        self.busy.load(AtomicOrdering::Relaxed)
    }
}

impl Default for Activity {
    fn default() -> Self {
        Activity::new()
    }
}

pub struct Session<'a, T: Transport> {
    io: T,
    emu: &'a Emulator,
    export: &'a ExportInfo,
    strict_alignment: bool,
    limits: ConnectionLimits,
    activity: Arc<Activity>,
    clock: ConnectionClock,
    input: Vec<u8>,
    start: usize,
    end: usize,
    /// Length (header and payload) of the request at `start`, once its header has arrived.
    head_need: Option<usize>,
    /// Replies ready to go, written together.
    out: Vec<u8>,
    /// Replies in `out`.
    out_replies: usize,
    held: BinaryHeap<Reverse<HeldReply>>,
    /// Capacity of the buffers of held replies.
    held_bytes: usize,
    spare_buffers: Vec<Vec<u8>>,
    spare_bytes: usize,
    /// What this connection last added to the emulator's total of buffered bytes.
    published_bytes: usize,
    seq: u64,
    zeroes: Vec<u8>,
    pub counters: EmulatorCounters,
}

/// What the input held after the requests in it were handled.
enum Flow {
    /// Read more.
    Continue,
    /// A limit is reached: do not read until held replies have gone out.
    Blocked,
    Stop(Ending),
}

impl<'a, T: Transport> Session<'a, T> {
    pub fn new(io: T, emu: &'a Emulator, export: &'a ExportInfo, strict_alignment: bool) -> Self {
        Session {
            io,
            emu,
            export,
            strict_alignment,
            limits: ConnectionLimits::default(),
            activity: Arc::new(Activity::new()),
            clock: ConnectionClock::default(),
            input: vec![0; INITIAL_INPUT],
            start: 0,
            end: 0,
            head_need: None,
            out: Vec::new(),
            out_replies: 0,
            held: BinaryHeap::new(),
            held_bytes: 0,
            spare_buffers: Vec::new(),
            spare_bytes: 0,
            published_bytes: 0,
            seq: 0,
            zeroes: Vec::new(),
            counters: EmulatorCounters {
                connections: 1,
                ..EmulatorCounters::for_connection()
            },
        }
    }

    /// Serve with these limits instead of the defaults.
    pub fn with_limits(mut self, limits: ConnectionLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Report activity to this watchdog record (shared with the server).
    pub fn with_activity(mut self, activity: Arc<Activity>) -> Self {
        self.activity = activity;
        self
    }

    /// Serve requests until the client disconnects; every reply to a request that reached the
    /// device is sent (or the client is gone) before this returns.
    pub fn run(&mut self) -> io::Result<Ending> {
        if self.emu.clock.holds_replies() {
            precise_timers();
        }
        self.activity.touch();
        let ending = self.serve_until_end();
        // Whatever ended the session, acknowledged-to-be writes are already on the device;
        // their replies still go out at their deadlines if the client listens.
        let drained = self.drain_held();
        self.counters.compensation_sum_ns = self.clock.compensation_sum_ns;
        self.counters.compensated_replies = self.clock.compensated_replies;
        // Nothing is buffered once the session ends (its buffers are dropped with it).
        self.input = Vec::new();
        self.out = Vec::new();
        self.spare_buffers.clear();
        self.spare_bytes = 0;
        self.zeroes = Vec::new();
        self.publish();
        let ending = ending?;
        match drained {
            Err(e) if ending != Ending::EndOfStream => Err(e),
            _ => Ok(ending),
        }
    }

    fn serve_until_end(&mut self) -> io::Result<Ending> {
        loop {
            let flow = self.process_input()?;
            if let Flow::Stop(ending) = flow {
                self.flush_out()?;
                return Ok(ending);
            }
            self.flush_out()?;
            self.send_due()?;
            let blocked = matches!(flow, Flow::Blocked) || !self.make_room();
            self.activity
                .set_busy(blocked || !self.held.is_empty() || self.start != self.end);
            self.publish();
            if blocked {
                // Back-pressure: leave the client's bytes in its socket until held replies
                // (the only thing that frees budget) have gone out.
                self.counters.backpressure_waits += 1;
                if let Some(Reverse(r)) = self.held.peek() {
                    let deadline = r.deadline;
                    wait_until(deadline);
                }
                continue;
            }
            let got = match self.held.peek().map(|Reverse(r)| r.deadline) {
                None => self.read_idle()?,
                Some(deadline) => self.read_until(deadline)?,
            };
            if got == Some(0) {
                return Ok(Ending::EndOfStream);
            }
        }
    }

    /// Bytes this connection holds: input buffer, replies built, held or kept for reuse.
    fn buffered(&self) -> usize {
        self.input.len()
            + self.out.capacity()
            + self.held_bytes
            + self.spare_bytes
            + self.zeroes.capacity()
    }

    /// Requests executed whose replies have not been sent.
    fn in_flight(&self) -> usize {
        self.held.len() + self.out_replies
    }

    /// Nothing but the input waits: the next request may go ahead whatever its size, so that
    /// a connection always progresses even when one request exceeds the budget.
    fn nothing_pending(&self) -> bool {
        self.held.is_empty() && self.out.is_empty()
    }

    /// Whether `extra` more bytes fit in the budget.
    fn fits(&self, extra: usize) -> bool {
        self.buffered() + extra <= self.limits.max_buffered_bytes
    }

    /// Add this connection's change in buffered bytes to the emulator's totals.
    fn publish(&mut self) {
        let now = self.buffered();
        self.counters.peak_buffered_bytes = self.counters.peak_buffered_bytes.max(now as u64);
        if now != self.published_bytes {
            self.emu.note_buffered(self.published_bytes, now);
            self.published_bytes = now;
        }
    }

    /// The input window: how far past `start` reads may fill. The request at `start` may
    /// need more than the usual window (a write's payload), but no more than it announced.
    fn window(&self) -> usize {
        self.head_need.map_or(INPUT_BUFFER, |n| n.max(INPUT_BUFFER))
    }

    /// Make room in the input buffer for more bytes of the window; `false` when the buffer
    /// cannot grow within the budget now (or the window is full of requests a limit holds
    /// back).
    fn make_room(&mut self) -> bool {
        let window_end = self.start + self.window();
        if self.end < window_end.min(self.input.len()) {
            return true;
        }
        if self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let window = self.window();
        if self.end < window.min(self.input.len()) {
            return true;
        }
        if self.end >= window {
            // The window is full of complete requests that a limit holds back.
            return false;
        }
        // Grow towards the request's announced length as its bytes arrive (doubling), never
        // to that length on the header alone.
        let new_len = (self.input.len() * 2).min(window);
        let growth = new_len - self.input.len();
        if !self.fits(growth) && !self.nothing_pending() {
            return false;
        }
        self.input.resize(new_len, 0);
        true
    }

    /// After a large request, give the input buffer back its usual size.
    fn shrink_input(&mut self) {
        let pending = self.end - self.start;
        if self.input.len() <= INPUT_BUFFER || pending > INPUT_BUFFER {
            return;
        }
        self.input.copy_within(self.start..self.end, 0);
        self.start = 0;
        self.end = pending;
        self.input.truncate(INPUT_BUFFER);
        self.input.shrink_to_fit();
    }

    /// Nothing held: block for input. `Some(0)` at the end of the stream.
    ///
    /// In real time, spin a while first: a reader asleep in `read` wakes tens of microseconds
    /// late on a virtual machine, which a client at queue depth 1 would measure. In virtual
    /// time the client is the bottleneck and a spinning reader only slows its sends.
    fn read_idle(&mut self) -> io::Result<Option<usize>> {
        if self.emu.clock.holds_replies() {
            let until = Instant::now() + SPIN_WHEN_IDLE;
            while Instant::now() < until {
                // Polling with a zero timeout reads the socket's state without its lock, so
                // the spin does not slow the client's sends the way repeated reads would.
                if self.io.wait_readable(Some(Duration::ZERO))? {
                    return self.read_some(true);
                }
                // Spinning threads give way to runnable ones (the client, other connections).
                std::thread::yield_now();
            }
        }
        self.read_some(true)
    }

    /// Replies are held: read what arrives until `deadline`, sleeping then spinning.
    fn read_until(&mut self, deadline: Instant) -> io::Result<Option<usize>> {
        let now = Instant::now();
        if deadline <= now {
            return Ok(None);
        }
        let wait = deadline - now;
        if wait > SPIN_BEFORE_DEADLINE
            && self.io.wait_readable(Some(wait - SPIN_BEFORE_DEADLINE))?
        {
            return self.read_some(false);
        }
        while Instant::now() < deadline {
            if self.io.wait_readable(Some(Duration::ZERO))? {
                return self.read_some(false);
            }
            std::thread::yield_now();
        }
        Ok(None)
    }

    /// Read into the input window (room was made by [`Self::make_room`]); `None` when
    /// nothing was available (non-blocking).
    fn read_some(&mut self, blocking: bool) -> io::Result<Option<usize>> {
        let limit = (self.start + self.window()).min(self.input.len());
        let buf = &mut self.input[self.end..limit];
        let n = if blocking {
            loop {
                match self.io.read(buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if is_disconnect(&e) => break 0,
                    Err(e) => return Err(e),
                }
            }
        } else {
            match self.io.read_available(buf) {
                Ok(None) => return Ok(None),
                Ok(Some(n)) => n,
                Err(e) if is_disconnect(&e) => 0,
                Err(e) => return Err(e),
            }
        };
        if n > 0 {
            self.activity.touch();
        }
        self.end += n;
        Ok(Some(n))
    }

    /// Handle every complete request in the input window that the limits let through.
    fn process_input(&mut self) -> io::Result<Flow> {
        loop {
            let available = self.end - self.start;
            if available < REQUEST_HEADER_LEN {
                self.head_need = None;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                self.shrink_input();
                return Ok(Flow::Continue);
            }
            let header_bytes: &[u8; REQUEST_HEADER_LEN] = self.input
                [self.start..self.start + REQUEST_HEADER_LEN]
                .try_into()
                .expect("length checked");
            let header = match RequestHeader::parse(header_bytes) {
                Ok(h) => h,
                Err(_) => {
                    // Without a valid magic the stream cannot be resynchronised.
                    self.counters.protocol_errors += 1;
                    return Ok(Flow::Stop(Ending::ProtocolError));
                }
            };
            let received = Instant::now();
            if let Some(gap) = self.clock.request_arrived(received) {
                self.counters.time_replies();
                self.counters.client_gaps.record(gap);
            }
            if header.command == Command::Write && header.length > MAX_PAYLOAD {
                // The payload cannot be buffered; answer, then close.
                self.reply_error(header.cookie, EINVAL);
                self.counters.protocol_errors += 1;
                return Ok(Flow::Stop(Ending::ProtocolError));
            }
            let need = REQUEST_HEADER_LEN + header.payload_len();
            self.head_need = Some(need);
            if available < need {
                return Ok(Flow::Continue);
            }
            if header.command == Command::Disconnect {
                self.start += need;
                self.counters.requests += 1;
                return Ok(Flow::Stop(Ending::Disconnect));
            }
            let error = validate(&header, self.export, self.strict_alignment);
            // What the reply will hold: a READ's data, or the header alone.
            let reply_len = REPLY_HEADER_LEN
                + if error == 0 && header.command == Command::Read {
                    header.length as usize
                } else {
                    0
                };
            if !self.admit(reply_len)? {
                return Ok(Flow::Blocked);
            }
            let payload_at = self.start + REQUEST_HEADER_LEN;
            self.start += need;
            self.head_need = None;
            self.counters.requests += 1;
            if error != 0 {
                self.reply_error(header.cookie, error);
                continue;
            }
            let payload = payload_at..payload_at + header.payload_len();
            self.execute(&header, payload, received);
            // Published before any write can block, so that the totals include this reply.
            self.publish();
        }
    }

    /// Whether a request whose reply takes `reply_len` bytes may execute now. Replies built
    /// but not yet written (virtual clock) are written first to make room; held replies
    /// (real-time clock) leave only at their deadlines.
    fn admit(&mut self, reply_len: usize) -> io::Result<bool> {
        let within =
            |s: &Self| s.in_flight() < s.limits.max_requests_in_flight && s.fits(reply_len);
        if within(self) {
            return Ok(true);
        }
        // Give back what is only kept for speed before waiting, or before letting one request
        // exceed the budget.
        self.shrink_input();
        self.spare_buffers.clear();
        self.spare_bytes = 0;
        if within(self) || self.nothing_pending() {
            return Ok(true);
        }
        if !self.out.is_empty() {
            // Blocks while the client does not read: back-pressure through the socket.
            self.counters.backpressure_waits += 1;
            self.flush_out()?;
        }
        Ok(within(self) || self.nothing_pending())
    }

    fn reply_error(&mut self, cookie: u64, error: u32) {
        self.counters.error_replies += 1;
        self.out.extend_from_slice(&simple_reply(error, cookie));
        self.out_replies += 1;
    }

    /// Run a valid request on the device and queue its reply.
    fn execute(&mut self, h: &RequestHeader, payload: std::ops::Range<usize>, received: Instant) {
        let length = h.length as usize;
        let deadline_clock = self.emu.clock.holds_replies();
        let mut reply = if deadline_clock {
            self.take_spare()
        } else {
            std::mem::take(&mut self.out)
        };
        let header_at = reply.len();
        reply.extend_from_slice(&simple_reply(0, h.cookie));
        let served = if length == 0 && h.command != Command::Flush {
            // Zero-length requests are valid no-ops (the protocol leaves them unspecified).
            None
        } else {
            let issue = self.emu.clock.issue_ns(&mut self.clock, received);
            Some(match h.command {
                Command::Read => {
                    let data_at = reply.len();
                    reply.resize(data_at + length, 0);
                    let req = HostRequest::new(Op::Read, h.offset, length as u64);
                    let served = self
                        .emu
                        .submit(issue, &req, None, Some(&mut reply[data_at..]));
                    if served.error != 0 {
                        reply.truncate(data_at);
                    }
                    served
                }
                Command::Write => {
                    let mut req = HostRequest::new(Op::Write, h.offset, length as u64);
                    // The device's own FUA write: done once its data is on flash.
                    req.fua = h.flags & CMD_FLAG_FUA != 0;
                    let data = &self.input[payload];
                    self.emu.submit(issue, &req, Some(data), None)
                }
                Command::Trim => {
                    let req = HostRequest::new(Op::Trim, h.offset, length as u64);
                    let served = self.emu.submit(issue, &req, None, None);
                    self.with_fua(h, issue, served)
                }
                Command::WriteZeroes => {
                    let served = self.write_zeroes(h, issue);
                    self.with_fua(h, issue, served)
                }
                Command::Flush => {
                    let req = HostRequest::new(Op::Flush, 0, 0);
                    self.emu.submit(issue, &req, None, None)
                }
                Command::Disconnect
                | Command::Cache
                | Command::BlockStatus
                | Command::Unknown(_) => {
                    unreachable!("validate() refuses these")
                }
            })
        };
        if let Some(s) = served.filter(|s| s.error != 0) {
            reply[header_at + 4..header_at + 8].copy_from_slice(&s.error.to_be_bytes());
            self.counters.error_replies += 1;
        }
        let complete_ns = served.map(|s| s.completion.complete_ns);
        match complete_ns.and_then(|c| self.emu.clock.deadline(&mut self.clock, c)) {
            Some(deadline) => {
                self.seq += 1;
                self.held_bytes += reply.capacity();
                self.held.push(Reverse(HeldReply {
                    deadline,
                    seq: self.seq,
                    received,
                    bytes: reply,
                }));
            }
            None if deadline_clock => {
                // A no-op in real time: answer at once.
                self.out.extend_from_slice(&reply);
                self.out_replies += 1;
                self.keep_spare(reply);
            }
            None => {
                self.out = reply;
                self.out_replies += 1;
                if let Some(c) = complete_ns {
                    self.emu.clock.replied(&mut self.clock, c);
                }
            }
        }
    }

    /// FUA on a trim or WRITE_ZEROES: the request completes when a flush issued with it does
    /// (a write's FUA is the device's own, [`HostRequest::fua`]).
    fn with_fua(&mut self, h: &RequestHeader, issue: u64, served: Served) -> Served {
        if h.flags & CMD_FLAG_FUA == 0 || served.error != 0 {
            return served;
        }
        let flush = self
            .emu
            .submit(issue, &HostRequest::new(Op::Flush, 0, 0), None, None);
        served.and(flush)
    }

    /// Zero a range: whole mapping units (the preferred block size) are deallocated (they read
    /// back as zeros) unless the client asked for no holes; partial units at either end are
    /// written with zeros.
    fn write_zeroes(&mut self, h: &RequestHeader, issue: u64) -> Served {
        let page = self.export.block_sizes.1 as u64;
        let (start, end) = (h.offset, h.offset + h.length as u64);
        let first_whole = start.div_ceil(page) * page;
        let last_whole = end / page * page;
        let mut pieces: Vec<(Op, u64, u64)> = Vec::new();
        if first_whole >= last_whole {
            pieces.push((Op::Write, start, end));
        } else {
            if start < first_whole {
                pieces.push((Op::Write, start, first_whole));
            }
            let middle_op = if h.flags & CMD_FLAG_NO_HOLE != 0 {
                Op::Write
            } else {
                Op::Trim
            };
            pieces.push((middle_op, first_whole, last_whole));
            if last_whole < end {
                pieces.push((Op::Write, last_whole, end));
            }
        }
        let mut result: Option<Served> = None;
        for (op, lo, hi) in pieces {
            let step = if op == Op::Write {
                ZERO_CHUNK as u64
            } else {
                hi - lo
            };
            let mut at = lo;
            while at < hi {
                let len = step.min(hi - at);
                if op == Op::Write && self.zeroes.len() < len as usize {
                    self.zeroes.resize(len as usize, 0);
                }
                let req = HostRequest::new(op, at, len);
                let data = (op == Op::Write).then(|| &self.zeroes[..len as usize]);
                let served = self.emu.submit(issue, &req, data, None);
                result = Some(match result {
                    None => served,
                    Some(prev) => prev.and(served),
                });
                at += len;
            }
        }
        result.expect("a non-empty range has at least one piece")
    }

    /// A reply buffer from the pool (or a new one).
    fn take_spare(&mut self) -> Vec<u8> {
        let buffer = self.spare_buffers.pop().unwrap_or_default();
        self.spare_bytes -= buffer.capacity();
        buffer
    }

    /// Return a sent reply's buffer to the pool, unless the pool is full or the buffer large.
    fn keep_spare(&mut self, mut buffer: Vec<u8>) {
        if self.spare_buffers.len() < SPARE_BUFFERS && buffer.capacity() <= SPARE_BUFFER_MAX {
            buffer.clear();
            self.spare_bytes += buffer.capacity();
            self.spare_buffers.push(buffer);
        }
    }

    fn flush_out(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.activity.set_busy(true);
            let r = write_all(&mut self.io, &self.out);
            if r.is_ok() {
                self.activity.touch();
            }
            self.out.clear();
            self.out_replies = 0;
            if self.out.capacity() > SPARE_BUFFER_MAX {
                // A batch that held large read replies: give the memory back.
                self.out = Vec::new();
            }
            r?;
        }
        Ok(())
    }

    /// Send every held reply whose deadline has passed.
    fn send_due(&mut self) -> io::Result<()> {
        loop {
            let now = Instant::now();
            let due = matches!(self.held.peek(), Some(Reverse(r)) if r.deadline <= now);
            if !due {
                return Ok(());
            }
            let Reverse(reply) = self.held.pop().expect("peeked");
            // Lateness is when the reply was released; the write itself (which, on a virtual
            // machine, pays for waking the client's vCPU) is part of delivery.
            let released = Instant::now();
            self.activity.set_busy(true);
            let result = write_all(&mut self.io, &reply.bytes);
            if result.is_ok() {
                self.activity.touch();
            }
            let late = released
                .saturating_duration_since(reply.deadline)
                .as_nanos() as u64;
            self.counters.time_replies();
            self.counters.lateness.record(late);
            self.counters.served.record(
                released
                    .saturating_duration_since(reply.received)
                    .as_nanos() as u64,
            );
            if late > self.emu.miss_threshold_ns {
                self.counters.deadline_misses += 1;
            }
            // Counted as held until written: a write to a client that does not read blocks
            // with the reply still in memory.
            self.held_bytes -= reply.bytes.capacity();
            self.keep_spare(reply.bytes);
            self.publish();
            result?;
            if self.held.is_empty() && self.start == self.end {
                self.clock.went_idle(released);
            }
        }
    }

    /// Wait for and send every held reply.
    fn drain_held(&mut self) -> io::Result<()> {
        let mut first_error = None;
        while let Some(Reverse(r)) = self.held.peek() {
            wait_until(r.deadline);
            if let Err(e) = self.send_due() {
                // The client is gone; the rest cannot be delivered, but the accounting of the
                // remaining replies is not worth waiting for.
                first_error.get_or_insert(e);
                self.held.clear();
                self.held_bytes = 0;
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Linux lets a sleeping thread's timer fire up to 50 us late by default ("timer slack") to
/// batch wake-ups; a thread that holds replies to deadlines asks for 1 ns instead.
fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// Sleep, then spin, until `deadline` (without reading: the connection is at a limit).
fn wait_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now + SPIN_BEFORE_DEADLINE {
        std::thread::sleep(deadline - now - SPIN_BEFORE_DEADLINE);
    }
    while Instant::now() < deadline {
        std::thread::yield_now();
    }
}

fn write_all<T: Transport>(io: &mut T, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match io.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}
