//! Block-trace replay: one parser per trace format, one streaming reader for all of them.
//!
//! [`open_trace`] reads a trace line by line through a `BufReader` (constant memory, so
//! multi-gigabyte traces replay) and yields [`HostRequest`]s with `arrival_ns` set, offsets and
//! lengths in bytes. Each format's units are converted exactly as `shared/spec/formats.md`
//! states them; see the module of each format.
//!
//! Rules shared by every format:
//! - Blank lines and lines starting with `#` are skipped. Any other line that does not parse is
//!   an error naming the file, the line and what was expected, never a silent skip. (A format
//!   may define lines that are legitimately not requests, such as blkparse's summary block or
//!   events of another action; each module documents them.)
//! - Arrival times must not go backwards. A stream cannot be sorted without holding it in
//!   memory, so a decreasing timestamp is an error with its line number (sort the trace
//!   first). MQSim requires this by definition; for the others it is our rule.
//! - A read, write or trim of zero bytes is an error; flushes have offset 0 and length 0.
//! - [`TraceOptions::time_scale`] multiplies the time since the first replayed request (so 0.5
//!   replays twice as fast); with [`TraceOptions::rebase_time`] (default) the first request
//!   arrives at t = 0, otherwise at the trace's own absolute time.
//! - [`TraceOptions::device_filter`] keeps one disk/volume when the format has a device
//!   column (ignored by the ssdlab CSV format, which has none); the matching rule is in each
//!   module.

mod alibaba;
mod blkparse;
mod csv;
mod disksim;
mod fiu;
mod mqsim;
mod msr;
mod spc;
mod tencent;

use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::str::FromStr;

use ssdlab_core::request::{Hint, HostRequest, Op, RequestSource, SourceError};

use crate::error::WorkloadError;

pub use csv::{format_csv_line, parse_hint};

/// The trace formats we read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// MSR Cambridge (SNIA IOTTA).
    Msr,
    /// SPC (UMass Financial, WebSearch).
    Spc,
    /// blkparse default text output.
    Blkparse,
    /// DiskSim ASCII input.
    Disksim,
    /// MQSim ASCII trace.
    Mqsim,
    /// Alibaba block traces 2020.
    Alibaba,
    /// Tencent CBS 2018.
    Tencent,
    /// FIU (SNIA IOTTA).
    Fiu,
    /// ssdlab's own CSV: `time_ns,op,offset,length[,hint]`.
    Csv,
}

const FORMAT_NAMES: &str = "msr, spc, blkparse, disksim, mqsim, alibaba, tencent, fiu, csv";

impl TraceFormat {
    /// All formats, in the order of [`FORMAT_NAMES`].
    pub const ALL: [TraceFormat; 9] = [
        TraceFormat::Msr,
        TraceFormat::Spc,
        TraceFormat::Blkparse,
        TraceFormat::Disksim,
        TraceFormat::Mqsim,
        TraceFormat::Alibaba,
        TraceFormat::Tencent,
        TraceFormat::Fiu,
        TraceFormat::Csv,
    ];

    /// The lowercase name accepted by [`FromStr`].
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Msr => "msr",
            TraceFormat::Spc => "spc",
            TraceFormat::Blkparse => "blkparse",
            TraceFormat::Disksim => "disksim",
            TraceFormat::Mqsim => "mqsim",
            TraceFormat::Alibaba => "alibaba",
            TraceFormat::Tencent => "tencent",
            TraceFormat::Fiu => "fiu",
            TraceFormat::Csv => "csv",
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TraceFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| WorkloadError::UnknownFormat {
                name: s.to_string(),
                valid: FORMAT_NAMES,
            })
    }
}

/// Which blkparse action is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BlkparseAction {
    /// `Q`: the request as the application queued it (default).
    #[default]
    Queued,
    /// `D`: the request as issued to the device driver (after merging and scheduling).
    Issued,
}

/// How a trace is replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceOptions {
    /// Multiplies inter-arrival times (1.0 = as recorded).
    pub time_scale: f64,
    /// Only requests of this disk/volume/device (formats with a device column); `None` = all.
    pub device_filter: Option<String>,
    /// First replayed request at t = 0 (default true).
    pub rebase_time: bool,
    /// blkparse only: which action to replay.
    pub blkparse_action: BlkparseAction,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            time_scale: 1.0,
            device_filter: None,
            rebase_time: true,
            blkparse_action: BlkparseAction::Queued,
        }
    }
}

/// One parsed trace line, before time rebasing and scaling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Record {
    /// Absolute time in the trace's clock, in ns.
    pub time_ns: u64,
    pub op: Op,
    pub offset: u64,
    pub length: u64,
    pub hint: Hint,
    /// A write with Force Unit Access (see [`HostRequest::fua`]).
    pub fua: bool,
    /// A flush comes first, issued at the same time (a block-layer pre-flush: what came
    /// before is made durable before this request).
    pub preflush: bool,
}

/// What a format parser makes of one non-blank, non-comment line.
pub(crate) enum Parsed {
    Request(Record),
    /// A legitimate line that is not a request to replay (filtered device, other action).
    Skip,
    /// This line and every following one are not requests (blkparse's summary block).
    End,
}

/// A format's line parser. `Err` is the message of a line that does not parse.
pub(crate) trait LineFormat: Send {
    fn parse(&mut self, line: &str) -> Result<Parsed, String>;
}

fn line_format(format: TraceFormat, opts: &TraceOptions) -> Result<Box<dyn LineFormat>, String> {
    let filter = opts.device_filter.clone();
    Ok(match format {
        TraceFormat::Msr => Box::new(msr::Msr::new(filter)),
        TraceFormat::Spc => Box::new(spc::Spc::new(filter)),
        TraceFormat::Blkparse => Box::new(blkparse::Blkparse::new(filter, opts.blkparse_action)),
        TraceFormat::Disksim => Box::new(disksim::Disksim::new(filter)),
        TraceFormat::Mqsim => Box::new(mqsim::Mqsim::new(filter)),
        TraceFormat::Alibaba => Box::new(alibaba::Alibaba::new(filter)),
        TraceFormat::Tencent => Box::new(tencent::Tencent::new(filter)),
        TraceFormat::Fiu => Box::new(fiu::Fiu::new(filter)?),
        TraceFormat::Csv => Box::new(csv::Csv::new()),
    })
}

/// A trace being replayed from any buffered reader.
pub struct TraceSource<R: BufRead + Send> {
    reader: R,
    path: String,
    line_no: usize,
    buf: String,
    format: Box<dyn LineFormat>,
    time_scale: f64,
    rebase_time: bool,
    first_time_ns: Option<u64>,
    last_time_ns: u64,
    done: bool,
    /// The request of a line whose pre-flush was returned first.
    after_preflush: Option<HostRequest>,
}

impl<R: BufRead + Send> TraceSource<R> {
    /// Replay `reader` (named `path` in errors) as `format`.
    pub fn new(
        reader: R,
        path: &str,
        format: TraceFormat,
        opts: TraceOptions,
    ) -> Result<Self, WorkloadError> {
        if !(opts.time_scale.is_finite() && opts.time_scale >= 0.0) {
            return Err(WorkloadError::Parse {
                path: path.to_string(),
                line: 0,
                message: format!(
                    "time_scale must be a finite number ≥ 0, found {}",
                    opts.time_scale
                ),
            });
        }
        let line_format = line_format(format, &opts).map_err(|message| WorkloadError::Parse {
            path: path.to_string(),
            line: 0,
            message,
        })?;
        Ok(TraceSource {
            reader,
            path: path.to_string(),
            line_no: 0,
            buf: String::with_capacity(256),
            format: line_format,
            time_scale: opts.time_scale,
            rebase_time: opts.rebase_time,
            first_time_ns: None,
            last_time_ns: 0,
            done: false,
            after_preflush: None,
        })
    }

    fn error(&self, message: String) -> WorkloadError {
        WorkloadError::Parse {
            path: self.path.clone(),
            line: self.line_no,
            message,
        }
    }

    /// The next request, or the error that stops the replay (after which it yields `None`).
    pub fn next_host_request(&mut self) -> Option<Result<HostRequest, WorkloadError>> {
        let result = self.advance();
        if matches!(result, Some(Err(_))) {
            self.done = true;
        }
        result
    }

    fn advance(&mut self) -> Option<Result<HostRequest, WorkloadError>> {
        if let Some(request) = self.after_preflush.take() {
            return Some(Ok(request));
        }
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            self.line_no += 1;
            match self.reader.read_line(&mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    return None;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Some(Err(self.error("line is not valid UTF-8 text".to_string())));
                }
                Err(source) => {
                    return Some(Err(WorkloadError::Io {
                        path: self.path.clone(),
                        source,
                    }))
                }
            }
            let line = self.buf.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let record = match self.format.parse(line) {
                Ok(Parsed::Request(r)) => r,
                Ok(Parsed::Skip) => continue,
                Ok(Parsed::End) => {
                    self.done = true;
                    return None;
                }
                Err(message) => return Some(Err(self.error(message))),
            };
            if record.length == 0 && record.op != Op::Flush {
                return Some(Err(
                    self.error(format!("zero-length {} request", record.op.as_str()))
                ));
            }
            let first = *self.first_time_ns.get_or_insert(record.time_ns);
            if record.time_ns < self.last_time_ns {
                return Some(Err(self.error(format!(
                    "timestamp goes backwards ({} ns after {} ns); traces must be sorted by time",
                    record.time_ns, self.last_time_ns
                ))));
            }
            self.last_time_ns = record.time_ns;
            let delta = record.time_ns - first;
            let scaled = if self.time_scale == 1.0 {
                delta
            } else {
                // Saturating float-to-int cast: absurd scales clamp instead of wrapping.
                (delta as f64 * self.time_scale).round() as u64
            };
            let arrival = if self.rebase_time {
                scaled
            } else {
                first.saturating_add(scaled)
            };
            let request = HostRequest {
                arrival_ns: Some(arrival),
                op: record.op,
                offset: record.offset,
                length: record.length,
                hint: record.hint,
                fua: record.fua,
            };
            if record.preflush {
                self.after_preflush = Some(request);
                return Some(Ok(HostRequest {
                    arrival_ns: Some(arrival),
                    ..HostRequest::new(Op::Flush, 0, 0)
                }));
            }
            return Some(Ok(request));
        }
    }
}

impl<R: BufRead + Send> RequestSource for TraceSource<R> {
    fn next_request(&mut self) -> Option<Result<HostRequest, SourceError>> {
        self.next_host_request()
            .map(|r| r.map_err(|e| Box::new(e) as SourceError))
    }
}

/// Open a trace file for streaming replay.
pub fn open_trace(
    path: &Path,
    format: TraceFormat,
    opts: TraceOptions,
) -> Result<Box<dyn RequestSource>, WorkloadError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| WorkloadError::Io {
        path: name.clone(),
        source,
    })?;
    Ok(Box::new(TraceSource::new(
        BufReader::with_capacity(1 << 16, file),
        &name,
        format,
        opts,
    )?))
}

/// Parse a whole trace held in memory (tests, small traces); stops at the first error.
pub fn parse_trace_str(
    text: &str,
    name: &str,
    format: TraceFormat,
    opts: TraceOptions,
) -> Result<Vec<HostRequest>, WorkloadError> {
    let mut source = TraceSource::new(text.as_bytes(), name, format, opts)?;
    let mut out = Vec::new();
    while let Some(r) = source.next_host_request() {
        out.push(r?);
    }
    Ok(out)
}

// ---- Field helpers shared by the format parsers. ----

/// Split `line` by `sep` into exactly `N` fields, or say how many there were.
pub(crate) fn split_exact<const N: usize>(line: &str, sep: char) -> Result<[&str; N], usize> {
    let mut out = [""; N];
    let mut count = 0;
    for field in line.split(sep) {
        if count < N {
            out[count] = field.trim();
        }
        count += 1;
    }
    if count == N {
        Ok(out)
    } else {
        Err(count)
    }
}

/// The first `N` whitespace-separated fields and the total count.
pub(crate) fn split_ws<const N: usize>(line: &str) -> ([&str; N], usize) {
    let mut out = [""; N];
    let mut count = 0;
    for field in line.split_ascii_whitespace() {
        if count < N {
            out[count] = field;
        }
        count += 1;
    }
    (out, count)
}

/// An unsigned decimal integer field.
pub(crate) fn parse_u64(field: &str, what: &str) -> Result<u64, String> {
    if !field.is_empty() && field.bytes().all(|b| b.is_ascii_digit()) {
        field
            .parse()
            .map_err(|_| format!("{what} '{field}' overflows 64 bits"))
    } else {
        Err(format!(
            "expected {what} as an unsigned integer, found '{field}'"
        ))
    }
}

/// `count · scale` bytes without overflow.
pub(crate) fn scaled(value: u64, scale: u64, what: &str) -> Result<u64, String> {
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("{what} {value} overflows 64-bit bytes"))
}

/// A non-negative decimal number of units of `10^-exp10` seconds... converted to ns exactly:
/// `parse_decimal_ns("1.5", 9)` (seconds) is 1 500 000 000. Digits past ns resolution are
/// rounded half up. Exponent notation (`1e-3`) falls back to `f64`.
pub(crate) fn parse_decimal_ns(field: &str, exp10: u32, what: &str) -> Result<u64, String> {
    let bad = || format!("expected {what} as a non-negative decimal number, found '{field}'");
    if field.is_empty() {
        return Err(bad());
    }
    if field.contains(['e', 'E']) {
        let v: f64 = field.parse().map_err(|_| bad())?;
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad());
        }
        let ns = v * 10f64.powi(exp10 as i32);
        if ns >= u64::MAX as f64 {
            return Err(format!("{what} '{field}' overflows 64-bit ns"));
        }
        return Ok(ns.round() as u64);
    }
    let (int, frac) = field.split_once('.').unwrap_or((field, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let overflow = || format!("{what} '{field}' overflows 64-bit ns");
    let mul = 10u64.pow(exp10);
    let int_part: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| overflow())?
    };
    let mut ns = int_part.checked_mul(mul).ok_or_else(overflow)?;
    let mut place = mul;
    let mut digits = frac.bytes();
    for d in digits.by_ref() {
        place /= 10;
        ns += (d - b'0') as u64 * place;
        if place == 1 {
            break;
        }
    }
    if let Some(next) = digits.next() {
        if next >= b'5' {
            ns = ns.checked_add(1).ok_or_else(overflow)?;
        }
    }
    Ok(ns)
}

/// `R`/`W` style ops, case-insensitive, with the words `Read`/`Write`.
pub(crate) fn parse_rw(field: &str, expected: &str) -> Result<Op, String> {
    if field.eq_ignore_ascii_case("r") || field.eq_ignore_ascii_case("read") {
        Ok(Op::Read)
    } else if field.eq_ignore_ascii_case("w") || field.eq_ignore_ascii_case("write") {
        Ok(Op::Write)
    } else {
        Err(format!(
            "expected the operation as {expected}, found '{field}'"
        ))
    }
}

/// A request record with no hint.
pub(crate) fn record(time_ns: u64, op: Op, offset: u64, length: u64) -> Parsed {
    Parsed::Request(Record {
        time_ns,
        op,
        offset,
        length,
        hint: Hint::default(),
        fua: false,
        preflush: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_times_are_exact() {
        assert_eq!(parse_decimal_ns("1.5", 9, "t"), Ok(1_500_000_000));
        assert_eq!(parse_decimal_ns("0.000000001", 9, "t"), Ok(1));
        assert_eq!(parse_decimal_ns("0.0000000015", 9, "t"), Ok(2));
        assert_eq!(parse_decimal_ns("12", 6, "t"), Ok(12_000_000));
        assert_eq!(parse_decimal_ns(".25", 3, "t"), Ok(250));
        assert_eq!(parse_decimal_ns("1e-3", 9, "t"), Ok(1_000_000));
        assert!(parse_decimal_ns("-1", 9, "t").is_err());
        assert!(parse_decimal_ns(".", 9, "t").is_err());
        assert!(parse_decimal_ns("1.2.3", 9, "t").is_err());
        assert!(parse_decimal_ns("99999999999999999999", 9, "t").is_err());
    }

    #[test]
    fn format_names_round_trip_and_errors_list_them() {
        for f in TraceFormat::ALL {
            assert_eq!(f.name().parse::<TraceFormat>().unwrap(), f);
        }
        let e = "msrc".parse::<TraceFormat>().unwrap_err().to_string();
        assert_eq!(
            e,
            format!("unknown trace format 'msrc' (valid: {FORMAT_NAMES})")
        );
    }

    #[test]
    fn rebase_scale_and_backwards_time() {
        let text = "1000,write,0,4096\n3000,read,4096,512\n";
        let opts = TraceOptions {
            time_scale: 0.5,
            ..TraceOptions::default()
        };
        let r = parse_trace_str(text, "t.csv", TraceFormat::Csv, opts).unwrap();
        assert_eq!(r[0].arrival_ns, Some(0));
        assert_eq!(r[1].arrival_ns, Some(1000));
        let opts = TraceOptions {
            rebase_time: false,
            ..TraceOptions::default()
        };
        let r = parse_trace_str(text, "t.csv", TraceFormat::Csv, opts).unwrap();
        assert_eq!(r[1].arrival_ns, Some(3000));
        let e = parse_trace_str(
            "5,read,0,1\n4,read,0,1\n",
            "t.csv",
            TraceFormat::Csv,
            TraceOptions::default(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.csv:2: timestamp goes backwards"),
            "{e}"
        );
        let e = parse_trace_str(
            "\n# c\n5,read,0,0\n",
            "t.csv",
            TraceFormat::Csv,
            TraceOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "t.csv:3: zero-length read request");
    }

    #[test]
    fn non_utf8_line_is_an_error_with_its_line() {
        let bytes: &[u8] = b"0,read,0,1\n\xff\xfe\n";
        let mut s =
            TraceSource::new(bytes, "b.csv", TraceFormat::Csv, TraceOptions::default()).unwrap();
        assert!(s.next_host_request().unwrap().is_ok());
        let e = s.next_host_request().unwrap().unwrap_err();
        assert_eq!(e.line(), Some(2));
        assert!(s.next_host_request().is_none());
    }
}
