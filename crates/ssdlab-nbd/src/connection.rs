//! One client connection in the transmission phase.
//!
//! A connection is served by one thread that reads requests, simulates them on the shared
//! device as they arrive and sends each reply when its clock allows: at once (virtual clock,
//! replies batched into one write per read) or at the wall-clock instant of the modelled
//! completion (real-time clock, replies held in a deadline-ordered heap, so they may leave out
//! of order as the protocol allows). Waiting for a deadline sleeps in `ppoll` until shortly
//! before it and spins the rest, still reading new requests, because a sleeping thread wakes
//! tens of microseconds late on a busy machine.

use crate::clock::ConnectionClock;
use crate::emulator::{Emulator, EmulatorCounters, Served};
use crate::handshake::ExportInfo;
use crate::protocol::*;
use crate::transport::Transport;
use ssdlab_core::{HostRequest, Op};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io;
use std::time::{Duration, Instant};

/// Sleep until this long before a reply's deadline, then spin. Timer wake-ups on a virtual
/// machine are late by tens to hundreds of microseconds (measured here: 60 us median, 180 us
/// at the 90th percentile for a 100 us sleep), so only distant deadlines are slept towards.
const SPIN_BEFORE_DEADLINE: Duration = Duration::from_millis(1);
/// Real-time clock: after a reply, look for the client's next request this long before
/// blocking, since a wake-up from a blocking read costs as much as a timer's. A client at
/// queue depth 1 sends its next request within this time.
const SPIN_WHEN_IDLE: Duration = Duration::from_micros(500);
/// Initial size of the input buffer; it grows to hold the largest write payload seen.
const INPUT_BUFFER: usize = 256 << 10;
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

enum Flow {
    Continue,
    Stop(Ending),
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

pub struct Session<'a, T: Transport> {
    io: T,
    emu: &'a Emulator,
    export: &'a ExportInfo,
    strict_alignment: bool,
    clock: ConnectionClock,
    input: Vec<u8>,
    start: usize,
    end: usize,
    /// Replies ready to go, written together.
    out: Vec<u8>,
    held: BinaryHeap<Reverse<HeldReply>>,
    spare_buffers: Vec<Vec<u8>>,
    seq: u64,
    zeroes: Vec<u8>,
    pub counters: EmulatorCounters,
}

impl<'a, T: Transport> Session<'a, T> {
    pub fn new(io: T, emu: &'a Emulator, export: &'a ExportInfo, strict_alignment: bool) -> Self {
        Session {
            io,
            emu,
            export,
            strict_alignment,
            clock: ConnectionClock::default(),
            input: vec![0; INPUT_BUFFER],
            start: 0,
            end: 0,
            out: Vec::with_capacity(INPUT_BUFFER),
            held: BinaryHeap::new(),
            spare_buffers: Vec::new(),
            seq: 0,
            zeroes: Vec::new(),
            counters: EmulatorCounters {
                connections: 1,
                ..EmulatorCounters::default()
            },
        }
    }

    /// Serve requests until the client disconnects; every reply to a request that reached the
    /// device is sent (or the client is gone) before this returns.
    pub fn run(&mut self) -> io::Result<Ending> {
        if self.emu.clock.holds_replies() {
            precise_timers();
        }
        let ending = self.serve_until_end();
        // Whatever ended the session, acknowledged-to-be writes are already on the device;
        // their replies still go out at their deadlines if the client listens.
        let drained = self.drain_held();
        self.counters.compensation_sum_ns = self.clock.compensation_sum_ns;
        self.counters.compensated_replies = self.clock.compensated_replies;
        let ending = ending?;
        match drained {
            Err(e) if ending != Ending::EndOfStream => Err(e),
            _ => Ok(ending),
        }
    }

    fn serve_until_end(&mut self) -> io::Result<Ending> {
        loop {
            if let Flow::Stop(ending) = self.process_input()? {
                self.flush_out()?;
                return Ok(ending);
            }
            self.flush_out()?;
            self.send_due()?;
            let got = match self.held.peek().map(|Reverse(r)| r.deadline) {
                None => self.read_idle()?,
                Some(deadline) => self.read_until(deadline)?,
            };
            if got == Some(0) {
                return Ok(Ending::EndOfStream);
            }
        }
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

    /// Read into the input buffer; `None` when nothing was available (non-blocking).
    fn read_some(&mut self, blocking: bool) -> io::Result<Option<usize>> {
        if self.end == self.input.len() {
            self.compact(self.input.len());
        }
        let buf = &mut self.input[self.end..];
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
        self.end += n;
        Ok(Some(n))
    }

    /// Make room for `need` bytes of the current request from `start`.
    fn compact(&mut self, need: usize) {
        if self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.input.len() < need {
            self.input.resize(need, 0);
        } else if self.end == self.input.len() {
            self.input.resize(self.input.len() * 2, 0);
        }
    }

    /// Handle every complete request in the input buffer.
    fn process_input(&mut self) -> io::Result<Flow> {
        loop {
            let available = self.end - self.start;
            if available < REQUEST_HEADER_LEN {
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
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
            self.clock.request_arrived(received);
            if header.command == Command::Write && header.length > MAX_PAYLOAD {
                // The payload cannot be buffered; answer, then close.
                self.reply_error(header.cookie, EINVAL);
                self.counters.protocol_errors += 1;
                return Ok(Flow::Stop(Ending::ProtocolError));
            }
            let need = REQUEST_HEADER_LEN + header.payload_len();
            if available < need {
                if self.input.len() - self.start < need {
                    self.compact(need);
                }
                return Ok(Flow::Continue);
            }
            let payload_at = self.start + REQUEST_HEADER_LEN;
            self.start += need;
            self.counters.requests += 1;
            if header.command == Command::Disconnect {
                return Ok(Flow::Stop(Ending::Disconnect));
            }
            let error = validate(&header, self.export, self.strict_alignment);
            if error != 0 {
                self.reply_error(header.cookie, error);
                continue;
            }
            let payload = payload_at..payload_at + header.payload_len();
            self.execute(&header, payload, received);
        }
    }

    fn reply_error(&mut self, cookie: u64, error: u32) {
        self.counters.error_replies += 1;
        self.out.extend_from_slice(&simple_reply(error, cookie));
    }

    /// Run a valid request on the device and queue its reply.
    fn execute(&mut self, h: &RequestHeader, payload: std::ops::Range<usize>, received: Instant) {
        let length = h.length as usize;
        let deadline_clock = self.emu.clock.holds_replies();
        let mut reply = if deadline_clock {
            self.spare_buffers.pop().unwrap_or_default()
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
                    let req = HostRequest::new(Op::Write, h.offset, length as u64);
                    let data = &self.input[payload];
                    let served = self.emu.submit(issue, &req, Some(data), None);
                    self.with_fua(h, issue, served)
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
                reply.clear();
                self.spare_buffers.push(reply);
            }
            None => {
                self.out = reply;
                if let Some(c) = complete_ns {
                    self.emu.clock.replied(&mut self.clock, c);
                }
            }
        }
    }

    /// FUA: the request completes when a flush issued with it does.
    fn with_fua(&mut self, h: &RequestHeader, issue: u64, served: Served) -> Served {
        if h.flags & CMD_FLAG_FUA == 0 || served.error != 0 {
            return served;
        }
        let flush = self
            .emu
            .submit(issue, &HostRequest::new(Op::Flush, 0, 0), None, None);
        served.and(flush)
    }

    /// Zero a range: whole pages are deallocated (they read back as zeros) unless the client
    /// asked for no holes; partial pages at either end are written with zeros.
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

    fn flush_out(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            let r = write_all(&mut self.io, &self.out);
            self.out.clear();
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
            let Reverse(mut reply) = self.held.pop().expect("peeked");
            // Lateness is when the reply was released; the write itself (which, on a virtual
            // machine, pays for waking the client's vCPU) is part of delivery.
            let released = Instant::now();
            let result = write_all(&mut self.io, &reply.bytes);
            let late = released
                .saturating_duration_since(reply.deadline)
                .as_nanos() as u64;
            self.counters.lateness.record(late);
            self.counters.served.record(
                released
                    .saturating_duration_since(reply.received)
                    .as_nanos() as u64,
            );
            if late > self.emu.miss_threshold_ns {
                self.counters.deadline_misses += 1;
            }
            reply.bytes.clear();
            self.spare_buffers.push(reply.bytes);
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
            let deadline = r.deadline;
            let now = Instant::now();
            if deadline > now + SPIN_BEFORE_DEADLINE {
                std::thread::sleep(deadline - now - SPIN_BEFORE_DEADLINE);
            }
            while Instant::now() < deadline {
                std::thread::yield_now();
            }
            if let Err(e) = self.send_due() {
                // The client is gone; the rest cannot be delivered, but the accounting of the
                // remaining replies is not worth waiting for.
                first_error.get_or_insert(e);
                self.held.clear();
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
