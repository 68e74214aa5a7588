//! blkparse default text output:
//! `maj,min cpu seq sec.nsec pid action rwbs [sector + nsectors] [process]`.
//!
//! Sectors are 512 bytes. Only one action is replayed, `Q` (queued, the application's view)
//! by default or `D` (issued to the driver) with [`BlkparseAction::Issued`]; events with any
//! other action (`G`, `I`, `M`, `C`, `m` messages…) describe the same requests at other stages
//! and are skipped, which is not an error. RWBS maps to the operation as blktrace's
//! `fill_rwbs` writes it: `D` (discard) → trim, else `W` → write, else `R` → read; a leading
//! `F` (pre-flush) with no data (`FWS` with no sector, or `+ 0`) → a flush at offset 0 with
//! length 0, while a pre-flush attached to a request with data replays as a flush followed by
//! that request at the same time, as the block layer sends it; `N` (no data, e.g. a barrier
//! notice) is skipped. An `F` right after a write's `W` is Force Unit Access (`WFS`; a journal
//! commit's `FWFS` is a flush, then a FUA write): the write replays as a FUA write, done once
//! its data is on flash. `S`, `M`, `A` are qualifiers and ignored.
//!
//! blkparse ends its output with a summary block ("CPU0 (8,0):", "Total (8,0):",
//! "Throughput (R/W): …", "Events (8,0): …"): from the first summary header on, lines are
//! not events and the replay ends there. The device filter matches `maj,min` (or `maj:min`).

use super::{
    parse_decimal_ns, parse_u64, record, scaled, split_ws, BlkparseAction, LineFormat, Op, Parsed,
    Record,
};

pub(crate) struct Blkparse {
    filter: Option<String>,
    action: &'static str,
}

impl Blkparse {
    pub(crate) fn new(filter: Option<String>, action: BlkparseAction) -> Self {
        Blkparse {
            filter: filter.map(|f| f.replace(':', ",")),
            action: match action {
                BlkparseAction::Queued => "Q",
                BlkparseAction::Issued => "D",
            },
        }
    }
}

/// "CPU3 (8,0):" or "Total (8,0):" — the headers of blkparse's closing summary.
fn is_summary_header(line: &str) -> bool {
    let head = line.split(" (").next().unwrap_or("");
    let cpu = head
        .strip_prefix("CPU")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    (cpu || head == "Total") && line.ends_with("):")
}

fn is_device(field: &str) -> bool {
    field.split_once(',').is_some_and(|(a, b)| {
        !a.is_empty()
            && !b.is_empty()
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_digit())
    })
}

impl LineFormat for Blkparse {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        if is_summary_header(line) {
            return Ok(Parsed::End);
        }
        let (f, n) = split_ws::<10>(line);
        let expected = "expected a blkparse event 'maj,min cpu seq sec.nsec pid action rwbs sector + nsectors [process]'";
        if n < 6 || !is_device(f[0]) {
            return Err(format!("{expected}, found '{line}'"));
        }
        parse_u64(f[1], "the CPU")?;
        parse_u64(f[2], "the sequence number")?;
        let time_ns = parse_decimal_ns(f[3], 9, "the time (sec.nsec)")?;
        parse_u64(f[4], "the PID")?;
        if f[5] != self.action {
            return Ok(Parsed::Skip);
        }
        if n < 7 {
            return Err(format!("{expected}: the RWBS field is missing"));
        }
        if self.filter.as_deref().is_some_and(|d| d != f[0]) {
            return Ok(Parsed::Skip);
        }
        let rwbs = f[6];
        if rwbs.is_empty() || !rwbs.bytes().all(|b| b"RWDFSMANE".contains(&b)) {
            return Err(format!(
                "expected an RWBS field of R, W, D, F, S, M, A, N, E, found '{rwbs}'"
            ));
        }
        let has_range = n >= 10 && f[8] == "+" && !f[7].starts_with('[');
        let (sector, nsectors) = if has_range {
            (
                parse_u64(f[7], "the sector")?,
                parse_u64(f[9], "the sector count")?,
            )
        } else if n >= 8 && !f[7].starts_with('[') {
            return Err(format!(
                "{expected}: expected 'sector + nsectors' after the RWBS field, found '{}'",
                f[7]
            ));
        } else {
            (0, 0)
        };
        let preflush = rwbs.starts_with('F');
        let op = if rwbs.contains('D') {
            Op::Trim
        } else if preflush && nsectors == 0 {
            return Ok(record(time_ns, Op::Flush, 0, 0));
        } else if rwbs.contains('W') {
            Op::Write
        } else if rwbs.contains('R') {
            Op::Read
        } else {
            return Ok(Parsed::Skip);
        };
        if !has_range {
            return Err(format!(
                "{expected}: a {} needs 'sector + nsectors'",
                op.as_str()
            ));
        }
        // fill_rwbs writes FUA as an `F` after the operation's letter.
        let fua = op == Op::Write
            && rwbs
                .split_once('W')
                .is_some_and(|(_, q)| q.starts_with('F'));
        Ok(Parsed::Request(Record {
            time_ns,
            op,
            offset: scaled(sector, 512, "sector")?,
            length: scaled(nsectors, 512, "sector count")?,
            hint: Default::default(),
            fua,
            preflush,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::trace::{parse_trace_str, BlkparseAction, TraceFormat, TraceOptions};
    use ssdlab_core::request::Op;

    const SAMPLE: &str = "\
  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]
  8,0    3        2     0.000001000   697  G   W 223490 + 8 [kjournald]
  8,0    3        3     0.000002500   697  D   W 223490 + 8 [kjournald]
  8,0    1        0     0.000120934     0  m   N cfq697 alloced
  8,0    0        4     0.000500000  1234  Q  RA 1000 + 16 [cat]
  8,0    0        5     0.000600000  1234  Q   D 2048 + 2048 [fstrim]
  8,0    0        6     0.000700000   411  Q FWS [jbd2/sda1-8]
  8,16   0        7     0.000800000   411  Q  WS 64 + 8 [jbd2/sda1-8]
  8,0    0        8     0.000850000   411  Q FWFS 72 + 8 [jbd2/sda1-8]
  8,0    0        9     0.000900000   411  C   W 223490 + 8 [0]

CPU0 (8,0):
 Reads Queued:           1,        8KiB\t Writes Queued:           1,        4KiB
Total (8,0):
 Reads Queued:           1,        8KiB\t Writes Queued:           1,        4KiB
Throughput (R/W): 0KiB/s / 3,301KiB/s
Events (8,0): 10 entries
";

    #[test]
    fn queued_events_in_sectors_and_ns() {
        let r = parse_trace_str(
            SAMPLE,
            "sda.txt",
            TraceFormat::Blkparse,
            TraceOptions::default(),
        )
        .unwrap();
        let got: Vec<_> = r
            .iter()
            .map(|q| (q.arrival_ns.unwrap(), q.op, q.offset, q.length, q.fua))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, Op::Write, 223_490 * 512, 4096, false),
                (500_000, Op::Read, 512_000, 8192, false),
                (600_000, Op::Trim, 2048 * 512, 1 << 20, false),
                (700_000, Op::Flush, 0, 0, false),
                (800_000, Op::Write, 64 * 512, 4096, false),
                // A journal commit: pre-flush, write, FUA, sync: a flush, then a FUA write.
                (850_000, Op::Flush, 0, 0, false),
                (850_000, Op::Write, 72 * 512, 4096, true),
            ]
        );
    }

    #[test]
    fn issued_action_and_device_filter() {
        let opts = TraceOptions {
            blkparse_action: BlkparseAction::Issued,
            ..TraceOptions::default()
        };
        let r = parse_trace_str(SAMPLE, "sda.txt", TraceFormat::Blkparse, opts).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].op, r[0].offset), (Op::Write, 223_490 * 512));
        let opts = TraceOptions {
            device_filter: Some("8:16".into()),
            ..TraceOptions::default()
        };
        let r = parse_trace_str(SAMPLE, "sda.txt", TraceFormat::Blkparse, opts).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].offset, 64 * 512);
    }

    #[test]
    fn garbage_is_an_error_not_a_skip() {
        let e = parse_trace_str(
            "8,0 0 1 0.1 5 Q W abc + 8 [x]\n",
            "b.txt",
            TraceFormat::Blkparse,
            TraceOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "b.txt:1: expected the sector as an unsigned integer, found 'abc'"
        );
        let e = parse_trace_str(
            "hello world\n",
            "b.txt",
            TraceFormat::Blkparse,
            TraceOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.line(), Some(1));
        let e = parse_trace_str(
            "8,0 0 1 0.1 5 Q W\n",
            "b.txt",
            TraceFormat::Blkparse,
            TraceOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("a write needs 'sector + nsectors'"), "{e}");
    }
}
