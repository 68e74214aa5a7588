//! Reading and summarising the simulator's per-request log (`ssdlab stats`).
//!
//! The log is the CSV that `ssdlab run --request-log` (and the NBD emulator's stats log) writes,
//! one row per request, with the header [`RequestLogRow::CSV_HEADER`]:
//!
//! ```text
//! request,op,logical_sector,size_bytes,duration_ns,flash_reads,flash_writes,oob_reads,oob_writes,erases,physical_sector,flash_duration_ns,queue_ns,service_ns,translation_reads,translation_writes,mapping_hits,mapping_misses,device_cpu_ns
//! ```
//!
//! `op` is `read`, `write`, `trim` or `flush`; `physical_sector` is `-1` when the request touched
//! no flash page; every other column is a non-negative integer. `queue_ns` (waiting for dies)
//! and `service_ns` add up to `duration_ns`. Logs written before those two columns existed (the
//! first twelve columns only, with their header) are read too, without the split, and so are logs
//! written before the last five, a cached-mapping FTL's (DFTL) work per request. Such logs reach tens of millions
//! of rows, so [`RequestLogReader`] streams them with one reused line buffer (constant memory,
//! lines capped at [`MAX_LINE_BYTES`]) and parses the bytes directly, without UTF-8 validation or
//! per-field allocation. [`summarize_request_log`] folds the rows into a [`RequestLogSummary`].
//!
//! The reader is strict, like the trace readers: the first line must be the header exactly (a
//! UTF-8 byte-order mark and `\r\n` line ends are tolerated), blank lines are skipped, and
//! anything else that is not a row is a [`WorkloadError::Parse`] naming the source, the 1-based
//! line, the column and what was expected. Nothing is skipped silently, and no input panics.
//!
//! ```
//! use ssdlab_workload::request_log::{summarize_request_log, RequestLogOptions};
//!
//! let log = "request,op,logical_sector,size_bytes,duration_ns,flash_reads,flash_writes,\
//! oob_reads,oob_writes,erases,physical_sector,flash_duration_ns,queue_ns,service_ns\n\
//! 1,write,0,8192,70000,0,2,0,2,0,64,60000,0,70000\n\
//! 2,read,8,4096,50000,1,0,0,0,0,72,40000,5000,45000\n";
//! let s = summarize_request_log(log.as_bytes(), "log.csv", &RequestLogOptions::default()).unwrap();
//! assert_eq!((s.rows, s.ops.write.requests, s.ops.write.bytes), (2, 1, 8192));
//! assert_eq!((s.total.queue_total_ns, s.ops.read.service_total_ns), (5_000, 45_000));
//! assert_eq!(s.write_amplification, Some(1.0));
//! assert_eq!(s.total.duration_ns.unwrap().max, 70_000);
//! ```

use std::io::{BufRead, BufReader};
use std::path::Path;

use hdrhistogram::Histogram;
use serde::Serialize;
use ssdlab_core::request::Op;
use ssdlab_core::stats::RequestLogRow;

use crate::error::WorkloadError;

/// The columns of the log, in order (the header is these joined by commas).
pub const REQUEST_LOG_COLUMNS: [&str; 19] = [
    "request",
    "op",
    "logical_sector",
    "size_bytes",
    "duration_ns",
    "flash_reads",
    "flash_writes",
    "oob_reads",
    "oob_writes",
    "erases",
    "physical_sector",
    "flash_duration_ns",
    "queue_ns",
    "service_ns",
    "translation_reads",
    "translation_writes",
    "mapping_hits",
    "mapping_misses",
    "device_cpu_ns",
];

/// Columns of a log written before `queue_ns` and `service_ns` existed (the first ones).
pub const LEGACY_COLUMNS: usize = 12;

/// Columns of a log written before the DFTL columns (`translation_reads` ..
/// `device_cpu_ns`) existed.
pub const PRE_DFTL_COLUMNS: usize = 14;

/// Longest line accepted. A row has at most 18 integers of 20 digits, an op and 18 commas
/// (383 bytes); the cap keeps memory constant on input that has no line breaks at all.
pub const MAX_LINE_BYTES: usize = 4096;

/// Sector size of `logical_sector` and `physical_sector`.
pub const SECTOR_BYTES: u64 = 512;

/// One row of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLogRecord {
    /// The request's number in its run (1-based in `ssdlab run` logs).
    pub request: u64,
    pub op: Op,
    /// First byte / 512.
    pub logical_sector: u64,
    pub size_bytes: u64,
    /// Issue to completion.
    pub duration_ns: u64,
    pub flash_reads: u64,
    pub flash_writes: u64,
    pub oob_reads: u64,
    pub oob_writes: u64,
    pub erases: u64,
    /// First physical sector touched; `None` when the log says -1 (no flash page touched).
    pub physical_sector: Option<u64>,
    /// Array and bus time of the request's flash commands.
    pub flash_duration_ns: u64,
    /// Waiting for dies, and the rest of `duration_ns`; `None` in a log of the older
    /// twelve-column format.
    pub queue_ns: Option<u64>,
    pub service_ns: Option<u64>,
}

/// Streams [`RequestLogRecord`]s from a buffered reader; an iterator that stops after its first
/// error.
pub struct RequestLogReader<R: BufRead> {
    reader: R,
    source: String,
    line_no: usize,
    line: Vec<u8>,
    header_seen: bool,
    /// Columns a row has (the current format's, or [`LEGACY_COLUMNS`]), known from the header.
    columns: usize,
    done: bool,
}

impl<R: BufRead> RequestLogReader<R> {
    /// Read `reader`, named `source` in errors (usually the file's path).
    pub fn new(reader: R, source: &str) -> Self {
        RequestLogReader {
            reader,
            source: source.to_string(),
            line_no: 0,
            line: Vec::with_capacity(256),
            header_seen: false,
            columns: REQUEST_LOG_COLUMNS.len(),
            done: false,
        }
    }

    /// The 1-based number of the line read last (0 before the first).
    pub fn line_no(&self) -> usize {
        self.line_no
    }

    /// The next row, `None` at the end, or the error that stops the reader.
    pub fn next_record(&mut self) -> Option<Result<RequestLogRecord, WorkloadError>> {
        if self.done {
            return None;
        }
        let result = self.advance();
        if !matches!(result, Some(Ok(_))) {
            self.done = true;
        }
        result
    }

    fn advance(&mut self) -> Option<Result<RequestLogRecord, WorkloadError>> {
        if !self.header_seen {
            if let Err(e) = self.read_header() {
                return Some(Err(e));
            }
            self.header_seen = true;
        }
        loop {
            // Fast path: a well-formed row that lies wholly in the reader's buffer is parsed in
            // place, in one pass that also finds its end.
            let fast = match self.reader.fill_buf() {
                Ok(bytes) => parse_row_fast(bytes, self.columns),
                Err(_) => None, // read_line meets the error again and reports it
            };
            // (Its numbers have at most 19 digits, so its rows stay far below MAX_LINE_BYTES.)
            if let Some((record, len)) = fast {
                self.reader.consume(len);
                self.line_no += 1;
                return Some(Ok(record));
            }
            // Careful path: anything else (a row across the buffer's end, `\r\n`, a blank line,
            // the last line without a line break, every error) is copied out and checked
            // column by column.
            match self.read_line() {
                Ok(false) => return None,
                Ok(true) => {}
                Err(e) => return Some(Err(e)),
            }
            if self.line.is_empty() {
                continue;
            }
            let row = parse_row(&self.line, self.columns);
            return Some(row.map_err(|message| self.error(message)));
        }
    }

    fn error(&self, message: String) -> WorkloadError {
        WorkloadError::Parse {
            path: self.source.clone(),
            line: self.line_no,
            message,
        }
    }

    fn read_header(&mut self) -> Result<(), WorkloadError> {
        let header = RequestLogRow::CSV_HEADER;
        if !self.read_line()? {
            self.line_no = 1;
            return Err(self.error(format!(
                "the file is empty; expected the request-log header '{header}'"
            )));
        }
        let line = self
            .line
            .strip_prefix(b"\xEF\xBB\xBF")
            .unwrap_or(&self.line);
        if line == header.as_bytes() {
            return Ok(());
        }
        for older in [LEGACY_COLUMNS, PRE_DFTL_COLUMNS] {
            if line == REQUEST_LOG_COLUMNS[..older].join(",").as_bytes() {
                self.columns = older;
                return Ok(());
            }
        }
        let found: Vec<&[u8]> = line.split(|&b| b == b',').collect();
        let detail = match REQUEST_LOG_COLUMNS
            .iter()
            .zip(&found)
            .position(|(want, got)| want.as_bytes() != *got)
        {
            Some(i) => format!(
                "column {} is '{}', expected '{}'",
                i + 1,
                show(found[i]),
                REQUEST_LOG_COLUMNS[i]
            ),
            None => format!(
                "found {} columns, expected {}",
                found.len(),
                REQUEST_LOG_COLUMNS.len()
            ),
        };
        Err(self.error(format!(
            "not a request log: expected the header '{header}'; {detail}"
        )))
    }

    /// Read the next line into `self.line` without its line end. `Ok(false)` at the end.
    fn read_line(&mut self) -> Result<bool, WorkloadError> {
        self.line.clear();
        self.line_no += 1;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(WorkloadError::Io {
                        path: self.source.clone(),
                        source,
                    })
                }
            };
            if available.is_empty() {
                // A last line without a line break still counts.
                return Ok(!self.line.is_empty());
            }
            let (take, complete) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if self.line.len() + take > MAX_LINE_BYTES + 2 {
                return Err(self.error(format!(
                    "line is longer than {MAX_LINE_BYTES} bytes; expected a request-log row of \
                     {} columns",
                    REQUEST_LOG_COLUMNS.len()
                )));
            }
            self.line.extend_from_slice(&available[..take]);
            self.reader.consume(take);
            if complete {
                self.line.pop();
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                return Ok(true);
            }
        }
    }
}

impl<R: BufRead> Iterator for RequestLogReader<R> {
    type Item = Result<RequestLogRecord, WorkloadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

/// Parse the well-formed row, ending in `\n`, at the start of `bytes`; returns it and its
/// length with the `\n`. `None` when the row does not end inside `bytes` or is not exactly
/// well formed; [`parse_row`] then decides (and names the problem).
///
/// One loop over the columns rather than twelve inlined parsers: it keeps few values live (the
/// unrolled form spilled its counters to the stack and ran ~25% more instructions per row).
#[inline]
fn parse_row_fast(bytes: &[u8], columns: usize) -> Option<(RequestLogRecord, usize)> {
    let mut ints = [0u64; REQUEST_LOG_COLUMNS.len()];
    let mut op = Op::Read;
    let mut physical_sector = None;
    let mut rest = bytes;
    for (column, int) in ints[..columns].iter_mut().enumerate() {
        let taken = match column {
            1 => {
                let (parsed, len) = if rest.starts_with(b"read,") {
                    (Op::Read, 5)
                } else if rest.starts_with(b"write,") {
                    (Op::Write, 6)
                } else if rest.starts_with(b"trim,") {
                    (Op::Trim, 5)
                } else if rest.starts_with(b"flush,") {
                    (Op::Flush, 6)
                } else {
                    return None;
                };
                op = parsed;
                len
            }
            10 if rest.starts_with(b"-1,") => 3,
            _ => {
                let end = if column == columns - 1 { b'\n' } else { b',' };
                let (value, len) = take_u64(rest, end)?;
                *int = value;
                if column == 10 {
                    physical_sector = Some(value);
                }
                len
            }
        };
        rest = rest.get(taken..)?;
    }
    let record = RequestLogRecord {
        request: ints[0],
        op,
        logical_sector: ints[2],
        size_bytes: ints[3],
        duration_ns: ints[4],
        flash_reads: ints[5],
        flash_writes: ints[6],
        oob_reads: ints[7],
        oob_writes: ints[8],
        erases: ints[9],
        physical_sector,
        flash_duration_ns: ints[11],
        queue_ns: (columns > LEGACY_COLUMNS).then_some(ints[12]),
        service_ns: (columns > LEGACY_COLUMNS).then_some(ints[13]),
    };
    Some((record, bytes.len() - rest.len()))
}

/// The decimal number at the start of `bytes` that `end` follows, and its length with `end`.
/// `None` unless there are 1 to 19 digits (so the value fits u64 without an overflow check per
/// digit; longer numbers take the careful path) and then `end`.
#[inline(always)]
fn take_u64(bytes: &[u8], end: u8) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == end {
            return (i > 0 && i <= 19).then_some((value, i + 1));
        }
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
    }
    None
}

/// Parse one row (without its line end) column by column; `Err` is the message.
fn parse_row(line: &[u8], columns: usize) -> Result<RequestLogRecord, String> {
    const MAX: usize = REQUEST_LOG_COLUMNS.len();
    let n = columns;
    let mut fields: [&[u8]; MAX] = [&[]; MAX];
    let mut count = 0;
    for field in line.split(|&b| b == b',') {
        if count < n {
            fields[count] = field;
        }
        count += 1;
    }
    if count != n {
        let detail = if count < n {
            format!(
                "the row ends after column '{}', '{}' is missing",
                REQUEST_LOG_COLUMNS[count - 1],
                REQUEST_LOG_COLUMNS[count]
            )
        } else {
            format!(
                "there is more after the last column, '{}'",
                REQUEST_LOG_COLUMNS[n - 1]
            )
        };
        return Err(format!("expected {n} columns, found {count}: {detail}"));
    }
    let int = |i: usize| parse_u64(fields[i]).ok_or_else(|| integer_error(i, fields[i]));
    let op = match fields[1] {
        b"read" => Op::Read,
        b"write" => Op::Write,
        b"trim" => Op::Trim,
        b"flush" => Op::Flush,
        other => {
            return Err(format!(
                "column 'op': expected read, write, trim or flush, found '{}'",
                show(other)
            ))
        }
    };
    let physical_sector = match fields[10] {
        b"-1" => None,
        field => Some(parse_u64(field).ok_or_else(|| {
            if field.first() == Some(&b'-') {
                format!(
                    "column 'physical_sector': expected -1 (no flash page) or a non-negative \
                     integer, found '{}'",
                    show(field)
                )
            } else {
                integer_error(10, field)
            }
        })?),
    };
    // The DFTL columns are checked; a replay or summary does not need their values.
    for i in PRE_DFTL_COLUMNS..n {
        int(i)?;
    }
    Ok(RequestLogRecord {
        request: int(0)?,
        op,
        logical_sector: int(2)?,
        size_bytes: int(3)?,
        duration_ns: int(4)?,
        flash_reads: int(5)?,
        flash_writes: int(6)?,
        oob_reads: int(7)?,
        oob_writes: int(8)?,
        erases: int(9)?,
        physical_sector,
        flash_duration_ns: int(11)?,
        queue_ns: if n > LEGACY_COLUMNS {
            Some(int(12)?)
        } else {
            None
        },
        service_ns: if n > LEGACY_COLUMNS {
            Some(int(13)?)
        } else {
            None
        },
    })
}

/// Plain decimal digits only (no sign, no spaces), within u64.
#[inline]
fn parse_u64(field: &[u8]) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &b in field {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    Some(value)
}

/// Why `field` of column `i` is not a non-negative integer.
#[cold]
fn integer_error(i: usize, field: &[u8]) -> String {
    let column = REQUEST_LOG_COLUMNS[i];
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    if field.is_empty() {
        format!("column '{column}': expected a non-negative integer, found an empty field")
    } else if field[0] == b'-' && digits(&field[1..]) {
        format!(
            "column '{column}': expected a non-negative integer, found the negative number '{}'",
            show(field)
        )
    } else if digits(field) {
        format!(
            "column '{column}': expected an integer of at most {}, found '{}'",
            u64::MAX,
            show(field)
        )
    } else {
        format!(
            "column '{column}': expected a non-negative integer, found '{}'",
            show(field)
        )
    }
}

/// A field as text for a message: lossy UTF-8, control characters escaped, at most 40
/// characters (then `…`).
fn show(field: &[u8]) -> String {
    let text = String::from_utf8_lossy(field);
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == 40 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

// ---- Summary ----

/// How the summary is computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLogOptions {
    /// Flash page size of the device that wrote the log (the log does not record it); used only
    /// for [`RequestLogSummary::write_amplification`]. A positive multiple of 512.
    pub page_size_bytes: u64,
}

impl Default for RequestLogOptions {
    fn default() -> Self {
        RequestLogOptions {
            page_size_bytes: 4096,
        }
    }
}

/// Duration statistics of a set of requests, in ns. Percentiles come from an HDR histogram with
/// three significant digits (as in the run report) and are clamped to [min, max].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DurationSummary {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
}

/// Sums over the requests of one op (or all of them). Sums are `u128` so that no log can
/// overflow them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpSummary {
    pub requests: u64,
    /// Sum of `size_bytes`.
    pub bytes: u128,
    /// `None` (JSON `null`) when there are no requests.
    pub duration_ns: Option<DurationSummary>,
    /// Sum of `duration_ns`.
    pub duration_total_ns: u128,
    pub flash_reads: u128,
    pub flash_writes: u128,
    pub oob_reads: u128,
    pub oob_writes: u128,
    pub erases: u128,
    /// Sum of `flash_duration_ns`.
    pub flash_duration_ns: u128,
    /// Sums of `queue_ns` and `service_ns` (0 for a log of the older format, which has no
    /// such columns).
    pub queue_total_ns: u128,
    pub service_total_ns: u128,
    /// Requests with at least one erase: the ones that triggered (foreground or background)
    /// garbage collection.
    pub requests_with_erases: u64,
}

/// [`OpSummary`] of each op.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpSummaries {
    pub read: OpSummary,
    pub write: OpSummary,
    pub trim: OpSummary,
    pub flush: OpSummary,
}

/// What `ssdlab stats` reports about a request log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestLogSummary {
    /// The name the log was read under.
    pub source: String,
    pub rows: u64,
    /// `request` of the first and of the last row (`None` for a log without rows).
    pub first_request: Option<u64>,
    pub last_request: Option<u64>,
    /// [`RequestLogOptions::page_size_bytes`].
    pub page_size_bytes: u64,
    /// Media bytes programmed over host bytes written, as the simulator's `waf`:
    /// `total.flash_writes` × `page_size_bytes` / `ops.write.bytes` (flash writes of every row,
    /// so programs of GC moves count wherever they were triggered); `None` when nothing was
    /// written.
    pub write_amplification: Option<f64>,
    /// `total.flash_duration_ns / total.duration_total_ns`: the share of request time spent
    /// in flash commands. It can exceed 1, because the commands of one request run in
    /// parallel on several dies; `None` when the durations sum to 0.
    pub flash_time_share: Option<f64>,
    pub ops: OpSummaries,
    /// All rows together.
    pub total: OpSummary,
}

/// Folds rows into a [`RequestLogSummary`] in constant memory.
pub struct RequestLogSummarizer {
    page_size_bytes: u64,
    rows: u64,
    first_request: Option<u64>,
    last_request: Option<u64>,
    /// Sums and duration histograms of read, write, trim and flush (the total's are merged
    /// from them at the end).
    ops: [Sums; 4],
    histograms: [Histogram<u64>; 4],
}

impl RequestLogSummarizer {
    /// A summariser; `Err` (the message) when the page size is not a positive multiple of 512.
    pub fn new(opts: &RequestLogOptions) -> Result<Self, String> {
        let page = opts.page_size_bytes;
        if page == 0 || page % SECTOR_BYTES != 0 {
            return Err(format!(
                "page_size_bytes must be a positive multiple of {SECTOR_BYTES}, got {page}"
            ));
        }
        Ok(RequestLogSummarizer {
            page_size_bytes: page,
            rows: 0,
            first_request: None,
            last_request: None,
            ops: [Sums::EMPTY; 4],
            histograms: std::array::from_fn(|_| new_histogram()),
        })
    }

    /// Add one row.
    #[inline]
    pub fn add(&mut self, r: &RequestLogRecord) {
        self.rows += 1;
        self.first_request.get_or_insert(r.request);
        self.last_request = Some(r.request);
        let index = match r.op {
            Op::Read => 0,
            Op::Write => 1,
            Op::Trim => 2,
            Op::Flush => 3,
        };
        self.ops[index].add(r);
        self.histograms[index].saturating_record(r.duration_ns);
    }

    /// The summary of the rows added so far.
    pub fn finish(&self, source: &str) -> RequestLogSummary {
        let op = |i: usize| self.ops[i].summary(&self.histograms[i]);
        let ops = OpSummaries {
            read: op(0),
            write: op(1),
            trim: op(2),
            flush: op(3),
        };
        let mut all = Sums::EMPTY;
        let mut histogram = new_histogram();
        for (sums, op_histogram) in self.ops.iter().zip(&self.histograms) {
            all.merge(sums);
            // Bucket by bucket rather than `Histogram::add`, which is fallible; the buckets
            // are the same, so this is exact.
            for v in op_histogram.iter_recorded() {
                histogram.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        let total = all.summary(&histogram);
        let ratio = |a: u128, b: u128| (b > 0).then(|| a as f64 / b as f64);
        RequestLogSummary {
            source: source.to_string(),
            rows: self.rows,
            first_request: self.first_request,
            last_request: self.last_request,
            page_size_bytes: self.page_size_bytes,
            write_amplification: ratio(
                total.flash_writes * u128::from(self.page_size_bytes),
                ops.write.bytes,
            ),
            flash_time_share: ratio(total.flash_duration_ns, total.duration_total_ns),
            ops,
            total,
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns .. ~3 hours at 3 significant digits, like the run report's clat histogram; longer
    // durations saturate there, and percentiles are clamped to the exact max anyway.
    Histogram::new_with_bounds(1, 10_000_000_000_000, 3).expect("constant, valid bounds")
}

/// Running sums of one op (or of all rows).
#[derive(Clone, Copy)]
struct Sums {
    requests: u64,
    bytes: u128,
    duration_total_ns: u128,
    duration_min_ns: u64,
    duration_max_ns: u64,
    flash_reads: u128,
    flash_writes: u128,
    oob_reads: u128,
    oob_writes: u128,
    erases: u128,
    flash_duration_ns: u128,
    queue_total_ns: u128,
    service_total_ns: u128,
    requests_with_erases: u64,
}

impl Sums {
    const EMPTY: Sums = Sums {
        requests: 0,
        bytes: 0,
        duration_total_ns: 0,
        duration_min_ns: u64::MAX,
        duration_max_ns: 0,
        flash_reads: 0,
        flash_writes: 0,
        oob_reads: 0,
        oob_writes: 0,
        erases: 0,
        flash_duration_ns: 0,
        queue_total_ns: 0,
        service_total_ns: 0,
        requests_with_erases: 0,
    };

    #[inline]
    fn add(&mut self, r: &RequestLogRecord) {
        self.requests += 1;
        self.bytes += u128::from(r.size_bytes);
        self.duration_total_ns += u128::from(r.duration_ns);
        self.duration_min_ns = self.duration_min_ns.min(r.duration_ns);
        self.duration_max_ns = self.duration_max_ns.max(r.duration_ns);
        self.flash_reads += u128::from(r.flash_reads);
        self.flash_writes += u128::from(r.flash_writes);
        self.oob_reads += u128::from(r.oob_reads);
        self.oob_writes += u128::from(r.oob_writes);
        self.erases += u128::from(r.erases);
        self.flash_duration_ns += u128::from(r.flash_duration_ns);
        self.queue_total_ns += u128::from(r.queue_ns.unwrap_or(0));
        self.service_total_ns += u128::from(r.service_ns.unwrap_or(0));
        self.requests_with_erases += u64::from(r.erases > 0);
    }

    fn merge(&mut self, o: &Sums) {
        self.requests += o.requests;
        self.bytes += o.bytes;
        self.duration_total_ns += o.duration_total_ns;
        self.duration_min_ns = self.duration_min_ns.min(o.duration_min_ns);
        self.duration_max_ns = self.duration_max_ns.max(o.duration_max_ns);
        self.flash_reads += o.flash_reads;
        self.flash_writes += o.flash_writes;
        self.oob_reads += o.oob_reads;
        self.oob_writes += o.oob_writes;
        self.erases += o.erases;
        self.flash_duration_ns += o.flash_duration_ns;
        self.queue_total_ns += o.queue_total_ns;
        self.service_total_ns += o.service_total_ns;
        self.requests_with_erases += o.requests_with_erases;
    }

    /// The report of these sums, with percentiles from `histogram` (of the same rows).
    fn summary(&self, histogram: &Histogram<u64>) -> OpSummary {
        let duration_ns = (self.requests > 0).then(|| {
            let (min, max) = (self.duration_min_ns, self.duration_max_ns);
            let at = |p: f64| histogram.value_at_quantile(p / 100.0).clamp(min, max);
            DurationSummary {
                min,
                mean: self.duration_total_ns as f64 / self.requests as f64,
                max,
                p50: at(50.0),
                p90: at(90.0),
                p99: at(99.0),
                p99_9: at(99.9),
                p99_99: at(99.99),
            }
        });
        OpSummary {
            requests: self.requests,
            bytes: self.bytes,
            duration_ns,
            duration_total_ns: self.duration_total_ns,
            flash_reads: self.flash_reads,
            flash_writes: self.flash_writes,
            oob_reads: self.oob_reads,
            oob_writes: self.oob_writes,
            erases: self.erases,
            flash_duration_ns: self.flash_duration_ns,
            queue_total_ns: self.queue_total_ns,
            service_total_ns: self.service_total_ns,
            requests_with_erases: self.requests_with_erases,
        }
    }
}

/// Summarise the log read from `reader` (named `source` in errors); stops at the first error.
pub fn summarize_request_log<R: BufRead>(
    reader: R,
    source: &str,
    opts: &RequestLogOptions,
) -> Result<RequestLogSummary, WorkloadError> {
    let mut summarizer =
        RequestLogSummarizer::new(opts).map_err(|message| WorkloadError::Parse {
            path: source.to_string(),
            line: 0,
            message,
        })?;
    let mut rows = RequestLogReader::new(reader, source);
    while let Some(record) = rows.next_record() {
        summarizer.add(&record?);
    }
    Ok(summarizer.finish(source))
}

/// Summarise the log file at `path` (streamed through a 256 KiB buffer).
pub fn summarize_request_log_file(
    path: &Path,
    opts: &RequestLogOptions,
) -> Result<RequestLogSummary, WorkloadError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| WorkloadError::Io {
        path: name.clone(),
        source,
    })?;
    summarize_request_log(BufReader::with_capacity(1 << 18, file), &name, opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header of the older format (without `queue_ns` and `service_ns`): most tests below
    /// are about what both formats share, and its rows are shorter.
    const HEADER: &str = "request,op,logical_sector,size_bytes,duration_ns,flash_reads,\
flash_writes,oob_reads,oob_writes,erases,physical_sector,flash_duration_ns";
    const CURRENT: &str = RequestLogRow::CSV_HEADER;

    fn summarize(text: &str) -> Result<RequestLogSummary, WorkloadError> {
        summarize_request_log(text.as_bytes(), "t.csv", &RequestLogOptions::default())
    }

    /// The error of `body` (after the older header), as (line, message).
    fn error_of(body: &str) -> (usize, String) {
        error_in(HEADER, body)
    }

    /// The error of `body` after `header`, as (line, message).
    fn error_in(header: &str, body: &str) -> (usize, String) {
        let e = summarize(&format!("{header}\n{body}")).unwrap_err();
        let line = e.line().expect("a parse error names its line");
        let text = e.to_string();
        assert!(text.starts_with(&format!("t.csv:{line}: ")), "{text}");
        (line, text)
    }

    #[test]
    fn header_constant_matches_the_columns() {
        assert_eq!(CURRENT, REQUEST_LOG_COLUMNS.join(","));
        assert_eq!(HEADER, REQUEST_LOG_COLUMNS[..LEGACY_COLUMNS].join(","));
    }

    /// The current format: the older one's rows plus the split of `duration_ns`.
    const LOG_WITH_SPLIT: &str = "\
request,op,logical_sector,size_bytes,duration_ns,flash_reads,flash_writes,oob_reads,oob_writes,erases,physical_sector,flash_duration_ns,queue_ns,service_ns
1,write,0,8192,100000,0,2,0,2,0,0,80000,0,100000
2,write,4,4096,300000,1,5,0,5,1,72,500000,120000,180000
3,read,0,4096,50000,1,0,1,0,0,8,40000,7000,43000
4,flush,0,0,20000,0,0,0,0,0,-1,0,0,20000
";

    #[test]
    fn the_dftl_columns_are_read_and_checked() {
        let log = format!(
            "{CURRENT}\n1,read,0,4096,90000,2,0,2,0,0,8,60000,0,90000,1,0,0,1,600\n\
             2,write,8,4096,30000,0,1,0,1,0,16,20000,0,30000,0,0,1,0,100\n"
        );
        let s = summarize(&log).unwrap();
        assert_eq!(
            (s.rows, s.ops.read.requests, s.ops.write.requests),
            (2, 1, 1)
        );
        for line in log.lines().skip(1) {
            let columns = REQUEST_LOG_COLUMNS.len();
            let fast = parse_row_fast(format!("{line}\n").as_bytes(), columns).unwrap();
            assert_eq!(
                fast,
                (parse_row(line.as_bytes(), columns).unwrap(), line.len() + 1)
            );
        }
        let (line, e) = error_in(
            CURRENT,
            "1,read,0,4096,90000,2,0,2,0,0,8,60000,0,90000,1,0,0,x,600\n",
        );
        assert_eq!(line, 2);
        assert!(e.contains("column 'mapping_misses'"), "{e}");
    }

    #[test]
    fn queueing_and_service_time_are_read_and_summed() {
        let s = summarize(LOG_WITH_SPLIT).unwrap();
        assert_eq!(
            (s.ops.write.queue_total_ns, s.ops.write.service_total_ns),
            (120_000, 280_000)
        );
        assert_eq!(
            (s.ops.read.queue_total_ns, s.ops.read.service_total_ns),
            (7_000, 43_000)
        );
        assert_eq!(
            s.total.queue_total_ns + s.total.service_total_ns,
            s.total.duration_total_ns
        );
        for line in LOG_WITH_SPLIT.lines().skip(1) {
            let columns = PRE_DFTL_COLUMNS;
            let fast = parse_row_fast(format!("{line}\n").as_bytes(), columns).unwrap();
            assert_eq!(
                fast,
                (parse_row(line.as_bytes(), columns).unwrap(), line.len() + 1)
            );
            assert!(fast.0.queue_ns.is_some() && fast.0.service_ns.is_some());
        }
        // A row of the older length after the current header is an error, and the other
        // way round.
        let (_, e) = error_in(CURRENT, "1,read,0,4096,10,1,0,0,0,0,8,5\n");
        assert!(e.ends_with("expected 19 columns, found 12: the row ends after column 'flash_duration_ns', 'queue_ns' is missing"), "{e}");
        let (_, e) = error_of("1,read,0,4096,10,1,0,0,0,0,8,5,0,10\n");
        assert!(e.contains("expected 12 columns, found 14"), "{e}");
        // The older format has no split: its sums stay 0.
        let s = summarize(LOG).unwrap();
        assert_eq!((s.total.queue_total_ns, s.total.service_total_ns), (0, 0));
    }

    /// Five rows, worked by hand.
    const LOG: &str = "\
request,op,logical_sector,size_bytes,duration_ns,flash_reads,flash_writes,oob_reads,oob_writes,erases,physical_sector,flash_duration_ns
1,write,0,8192,100000,0,2,0,2,0,0,80000
2,write,4,4096,300000,1,5,0,5,1,72,500000
3,read,0,4096,50000,1,0,1,0,0,8,40000
4,trim,0,16384,0,0,0,0,0,0,-1,0
5,flush,0,0,20000,0,0,0,0,0,-1,0
";

    #[test]
    fn sums_counts_and_ratios_of_a_small_log() {
        let s = summarize(LOG).unwrap();
        assert_eq!(s.source, "t.csv");
        assert_eq!(s.rows, 5);
        assert_eq!((s.first_request, s.last_request), (Some(1), Some(5)));
        // 7 pages of 4 KiB programmed for 12 KiB written.
        assert_eq!(s.write_amplification, Some(7.0 * 4096.0 / 12288.0));
        assert_eq!(s.flash_time_share, Some(620_000.0 / 470_000.0));

        let w = &s.ops.write;
        assert_eq!(
            (w.requests, w.bytes, w.duration_total_ns),
            (2, 12288, 400_000)
        );
        assert_eq!(
            (w.flash_reads, w.flash_writes, w.oob_reads, w.oob_writes),
            (1, 7, 0, 7)
        );
        assert_eq!(
            (w.erases, w.requests_with_erases, w.flash_duration_ns),
            (1, 1, 580_000)
        );
        let d = w.duration_ns.as_ref().unwrap();
        assert_eq!((d.min, d.max, d.mean), (100_000, 300_000, 200_000.0));
        // A percentile is the top of its HDR bucket (3 significant digits: 100 000 ns falls in
        // [99 968, 100 031]), like the run report's, and is clamped to [min, max].
        assert_eq!((d.p50, d.p90, d.p99_99), (100_031, 300_000, 300_000));

        let r = &s.ops.read;
        assert_eq!(
            (r.requests, r.bytes, r.flash_reads, r.oob_reads),
            (1, 4096, 1, 1)
        );
        assert_eq!(r.duration_ns.as_ref().unwrap().p99, 50_000);
        let t = &s.ops.trim;
        assert_eq!((t.requests, t.bytes, t.duration_total_ns), (1, 16384, 0));
        let td = t.duration_ns.as_ref().unwrap();
        assert_eq!(
            (td.min, td.p50, td.max),
            (0, 0, 0),
            "0 ns stays 0 through the histogram"
        );
        assert_eq!((s.ops.flush.requests, s.ops.flush.bytes), (1, 0));

        let all = &s.total;
        assert_eq!((all.requests, all.bytes), (5, 32768));
        assert_eq!((all.flash_reads, all.flash_writes, all.erases), (2, 7, 1));
        assert_eq!(
            (all.oob_reads, all.oob_writes, all.requests_with_erases),
            (1, 7, 1)
        );
        assert_eq!(
            (all.duration_total_ns, all.flash_duration_ns),
            (470_000, 620_000)
        );
        let d = all.duration_ns.as_ref().unwrap();
        assert_eq!((d.min, d.max, d.mean), (0, 300_000, 94_000.0));
        assert_eq!(
            (d.p50, d.p99_9),
            (50_015, 300_000),
            "50 000 ns is in [49 984, 50 015]"
        );
    }

    #[test]
    fn page_size_changes_the_write_amplification_only() {
        let opts = RequestLogOptions {
            page_size_bytes: 16384,
        };
        let s = summarize_request_log(LOG.as_bytes(), "t.csv", &opts).unwrap();
        assert_eq!(s.page_size_bytes, 16384);
        assert_eq!(s.write_amplification, Some(7.0 * 16384.0 / 12288.0));
        assert_eq!(s.total.flash_writes, 7);
        for bad in [0, 1000] {
            let opts = RequestLogOptions {
                page_size_bytes: bad,
            };
            let e = summarize_request_log(LOG.as_bytes(), "t.csv", &opts).unwrap_err();
            assert!(e.to_string().contains("multiple of 512"), "{e}");
        }
    }

    #[test]
    fn header_only_log_has_no_rows_and_no_ratios() {
        let s = summarize(&format!("{HEADER}\n")).unwrap();
        assert_eq!((s.rows, s.first_request, s.ops.write.bytes), (0, None, 0));
        assert_eq!((s.write_amplification, s.flash_time_share), (None, None));
        assert_eq!(s.total.duration_ns, None);
        assert_eq!(s.ops.read.requests, 0);
    }

    #[test]
    fn crlf_bom_blank_lines_and_a_missing_last_newline_are_accepted() {
        let text = format!(
            "\u{feff}{HEADER}\r\n1,read,0,4096,10,1,0,0,0,0,8,5\r\n\r\n\n2,read,8,4096,30,1,0,0,0,0,16,5"
        );
        let s = summarize(&text).unwrap();
        assert_eq!(
            (s.rows, s.last_request, s.ops.read.duration_total_ns),
            (2, Some(2), 40)
        );
    }

    #[test]
    fn reader_yields_typed_records() {
        let mut r = RequestLogReader::new(LOG.as_bytes(), "t.csv");
        let first = r.next().unwrap().unwrap();
        assert_eq!(
            first,
            RequestLogRecord {
                request: 1,
                op: Op::Write,
                logical_sector: 0,
                size_bytes: 8192,
                duration_ns: 100_000,
                flash_reads: 0,
                flash_writes: 2,
                oob_reads: 0,
                oob_writes: 2,
                erases: 0,
                physical_sector: Some(0),
                flash_duration_ns: 80_000,
                queue_ns: None,
                service_ns: None,
            }
        );
        let rest: Vec<_> = r.collect::<Result<_, _>>().unwrap();
        assert_eq!(rest.len(), 4);
        assert_eq!(rest[2].physical_sector, None);
    }

    #[test]
    fn summary_serializes_with_null_for_empty_ops() {
        let s = summarize(LOG).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(v["ops"]["write"]["flash_writes"], 7);
        assert_eq!(v["total"]["duration_ns"]["p99_9"], 300_000);
        assert_eq!(v["write_amplification"], 7.0 * 4096.0 / 12288.0);
        let empty = summarize(&format!("{HEADER}\n")).unwrap();
        let v = serde_json::to_value(&empty).unwrap();
        assert!(v["ops"]["read"]["duration_ns"].is_null());
        assert!(v["write_amplification"].is_null());
    }

    #[test]
    fn empty_file() {
        let e = summarize("").unwrap_err();
        assert_eq!(e.line(), Some(1));
        assert!(
            e.to_string().starts_with(
                "t.csv:1: the file is empty; expected the request-log header 'request,op,"
            ),
            "{e}"
        );
    }

    #[test]
    fn wrong_header() {
        let e = summarize("time_ns,op,offset,length\n0,write,0,4096\n").unwrap_err();
        assert_eq!(e.line(), Some(1));
        assert!(
            e.to_string()
                .ends_with("column 1 is 'time_ns', expected 'request'"),
            "{e}"
        );
        let e = summarize("request,op,lba,size_bytes\n").unwrap_err();
        assert!(
            e.to_string()
                .ends_with("column 3 is 'lba', expected 'logical_sector'"),
            "{e}"
        );
        let e = summarize(&format!("{CURRENT},extra\n")).unwrap_err();
        assert!(
            e.to_string().ends_with("found 20 columns, expected 19"),
            "{e}"
        );
        let e = summarize("1,read,0,4096,10,1,0,0,0,0,8,5\n").unwrap_err();
        assert!(
            e.to_string().starts_with("t.csv:1: not a request log"),
            "{e}"
        );
    }

    #[test]
    fn wrong_column_count() {
        let (line, e) = error_of("1,write,0,4096,10,0,1,0,1,0,8,5\n2,read,0,4096\n");
        assert_eq!(line, 3);
        assert!(e.ends_with("expected 12 columns, found 4: the row ends after column 'size_bytes', 'duration_ns' is missing"), "{e}");
        let (_, e) = error_of("1,write,0,4096,10,0,1,0,1,0,8,5,7\n");
        assert!(e.ends_with("expected 12 columns, found 13: there is more after the last column, 'flash_duration_ns'"), "{e}");
        let (_, e) = error_of("garbage\n");
        assert!(
            e.contains("found 1: the row ends after column 'request'"),
            "{e}"
        );
    }

    #[test]
    fn non_integer_fields_name_their_column() {
        let row = [
            "1", "read", "0", "4096", "10", "1", "0", "0", "0", "0", "8", "5", "2", "8", "1", "0",
            "0", "1", "100",
        ];
        for (i, column) in REQUEST_LOG_COLUMNS.iter().enumerate() {
            if i == 1 {
                continue;
            }
            for (bad, expect) in [
                ("x1", "expected a non-negative integer, found 'x1'"),
                ("1.5", "expected a non-negative integer, found '1.5'"),
                ("", "expected a non-negative integer, found an empty field"),
                (" 7", "expected a non-negative integer, found ' 7'"),
                (
                    "18446744073709551616",
                    "expected an integer of at most 18446744073709551615",
                ),
            ] {
                let mut fields = row;
                fields[i] = bad;
                let (line, e) = error_in(CURRENT, &format!("{}\n", fields.join(",")));
                assert_eq!(line, 2);
                assert!(e.contains(&format!(": column '{column}': {expect}")), "{e}");
            }
        }
    }

    #[test]
    fn negative_values_are_rejected_except_physical_sector_minus_one() {
        let (_, e) = error_of("1,read,0,-4096,10,1,0,0,0,0,8,5\n");
        assert!(e.ends_with("column 'size_bytes': expected a non-negative integer, found the negative number '-4096'"), "{e}");
        let (_, e) = error_of("1,read,0,4096,-1,1,0,0,0,0,8,5\n");
        assert!(e.contains("column 'duration_ns'"), "{e}");
        let (_, e) = error_of("1,read,0,4096,10,1,0,0,0,0,-2,5\n");
        assert!(e.ends_with("column 'physical_sector': expected -1 (no flash page) or a non-negative integer, found '-2'"), "{e}");
        let (_, e) = error_of("1,read,0,4096,10,1,0,0,0,0,abc,5\n");
        assert!(
            e.ends_with("column 'physical_sector': expected a non-negative integer, found 'abc'"),
            "{e}"
        );
    }

    #[test]
    fn unknown_op() {
        let (line, e) =
            error_of("1,read,0,4096,10,1,0,0,0,0,8,5\n\n2,READ,0,4096,10,1,0,0,0,0,8,5\n");
        assert_eq!(line, 4, "blank lines count");
        assert!(
            e.ends_with("column 'op': expected read, write, trim or flush, found 'READ'"),
            "{e}"
        );
        let (_, e) = error_of("1,\u{fffd}\u{7}x,0,4096,10,1,0,0,0,0,8,5\n");
        assert!(e.contains("found '\u{fffd}\\u{7}x'"), "{e}");
    }

    #[test]
    fn long_lines_and_invalid_utf8_are_errors_not_panics() {
        let (line, e) = error_of(&"9".repeat(100_000));
        assert_eq!(line, 2);
        assert!(e.contains("line is longer than 4096 bytes"), "{e}");
        let mut bytes = format!("{HEADER}\n1,").into_bytes();
        bytes.extend_from_slice(b"\xff\xfe,0,4096,10,1,0,0,0,0,8,5\n");
        let e =
            summarize_request_log(&bytes[..], "t.csv", &RequestLogOptions::default()).unwrap_err();
        assert!(e.to_string().contains("column 'op'"), "{e}");
        // A long field is shown shortened.
        let (_, e) = error_of(&format!("1,{},0,4096,10,1,0,0,0,0,8,5\n", "w".repeat(100)));
        assert!(e.ends_with(&format!("found '{}…'", "w".repeat(40))), "{e}");
    }

    #[test]
    fn fast_and_careful_paths_agree() {
        for line in LOG.lines().skip(1) {
            let fast = parse_row_fast(format!("{line}\n").as_bytes(), LEGACY_COLUMNS).unwrap();
            assert_eq!(
                fast,
                (
                    parse_row(line.as_bytes(), LEGACY_COLUMNS).unwrap(),
                    line.len() + 1
                )
            );
            assert_eq!(
                parse_row_fast(line.as_bytes(), LEGACY_COLUMNS),
                None,
                "no line end: careful path"
            );
        }
    }

    #[test]
    fn twenty_digit_values_are_read_exactly() {
        // The fast path stops at 19 digits; the careful path takes the rest of u64.
        let text = format!(
            "{HEADER}\n{max},read,00000000000000000007,4096,10,1,0,0,0,0,{max},5\n",
            max = u64::MAX
        );
        let r: Vec<_> = RequestLogReader::new(text.as_bytes(), "t.csv")
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            (r[0].request, r[0].logical_sector, r[0].physical_sector),
            (u64::MAX, 7, Some(u64::MAX))
        );
    }

    #[test]
    fn reader_stops_after_its_error() {
        let text = format!("{HEADER}\nbad\n1,read,0,4096,10,1,0,0,0,0,8,5\n");
        let mut r = RequestLogReader::new(text.as_bytes(), "t.csv");
        assert!(r.next().unwrap().is_err());
        assert!(r.next().is_none());
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let e = summarize_request_log_file(
            Path::new("/nonexistent/log.csv"),
            &RequestLogOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(e, WorkloadError::Io { .. }));
        assert!(e.to_string().starts_with("/nonexistent/log.csv: "), "{e}");
    }
}
