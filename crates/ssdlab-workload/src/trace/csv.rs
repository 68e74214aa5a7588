//! ssdlab's own plain trace format: `time_ns,op,offset,length[,hint]`.
//!
//! - `time_ns`: arrival time, integer ns.
//! - `op`: `read`, `write`, `trim`, `flush` or their initials `R`, `W`, `T`, `F` (any case);
//!   `write_fua` (`WF`) is a write with Force Unit Access, done once its data is on flash.
//! - `offset`, `length`: bytes. A flush has offset 0 and length 0; other operations need a
//!   length above 0.
//! - `hint` (optional): items separated by `;`, each `name=value` or a bare flag, with the names
//!   and values of the hint vocabulary (`ssdlab_core::hint`, documented in the README): for
//!   example `write_life=short` or `life=short`, `placement_id=2` or `fdp=2`, `sea=dyn`,
//!   `group=17`, `rel=dirty`, `flushread`. Spaces around items are allowed; a field given twice
//!   (under any of its names) is an error. Example: `1000,write,4096,4096,stream=3;life=short`.
//!
//! A header line `time_ns,op,offset,length[,hint]` is allowed as the first line that is not
//! blank or a comment. There is no device column, so the device filter does not apply.
//! [`format_csv_line`] writes the same grammar with canonical names, so traces round-trip.

use ssdlab_core::hint::HintError;
use ssdlab_core::request::{Hint, HostRequest};

use super::{parse_u64, LineFormat, Op, Parsed, Record};

pub(crate) struct Csv {
    seen_line: bool,
}

impl Csv {
    pub(crate) fn new() -> Self {
        Csv { seen_line: false }
    }
}

/// The op column: the operation, and whether a write has Force Unit Access.
fn parse_op(field: &str) -> Result<(Op, bool), String> {
    Ok(match field.to_ascii_lowercase().as_str() {
        "read" | "r" => (Op::Read, false),
        "write" | "w" => (Op::Write, false),
        "write_fua" | "wf" => (Op::Write, true),
        "trim" | "t" => (Op::Trim, false),
        "flush" | "f" => (Op::Flush, false),
        _ => {
            return Err(format!(
                "expected op as read, write, write_fua, trim or flush (or R, W, WF, T, F), found '{field}'"
            ))
        }
    })
}

/// Parse the hint column: the core's hint grammar and vocabulary ([`ssdlab_core::hint`]), so
/// a trace accepts exactly the names and values Python's `Hint` does.
pub fn parse_hint(text: &str) -> Result<Hint, String> {
    text.parse().map_err(|e: HintError| e.to_string())
}

/// One line of the CSV format for `request` (no newline); a missing arrival time writes 0.
pub fn format_csv_line(request: &HostRequest) -> String {
    let base = format!(
        "{},{},{},{}",
        request.arrival_ns.unwrap_or(0),
        match (request.op, request.fua) {
            (Op::Write, true) => "write_fua",
            (op, _) => op.as_str(),
        },
        request.offset,
        request.length
    );
    if request.hint.is_empty() {
        base
    } else {
        format!("{base},{}", request.hint)
    }
}

/// The `type` column of an SSD cache's trace (`ssdlab_core::cache`): dirty_write, clean_write,
/// host_read or flush_read. It gives the hint when the hint column is empty and must agree
/// with the op and a hint that is there.
fn cache_request_type(text: &str, op: Op, hint: Hint) -> Result<Hint, String> {
    use ssdlab_core::request::Reliability;
    let (want_op, reliability, flush_read) = match text.to_ascii_lowercase().as_str() {
        "dirty_write" => (Op::Write, Some(Reliability::Dirty), false),
        "clean_write" => (Op::Write, Some(Reliability::Clean), false),
        "host_read" => (Op::Read, None, false),
        "flush_read" => (Op::Read, None, true),
        other => {
            return Err(format!(
                "type: expected dirty_write, clean_write, host_read or flush_read, found '{other}'"
            ))
        }
    };
    let typed = Hint {
        reliability,
        flush_read,
        ..hint
    };
    if op != want_op || (!hint.is_empty() && typed != hint) {
        return Err(format!(
            "type {text} disagrees with op {} and hint '{hint}'",
            op.as_str()
        ));
    }
    Ok(typed)
}

fn is_header(line: &str) -> bool {
    let mut fields = line.split(',').map(|f| f.trim().to_ascii_lowercase());
    let names: [&str; 6] = ["time_ns", "op", "offset", "length", "hint", "type"];
    let mut count = 0;
    for name in names {
        match fields.next() {
            Some(f) if f == name => count += 1,
            Some(_) => return false,
            None => break,
        }
    }
    fields.next().is_none() && count >= 4
}

impl LineFormat for Csv {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        let first = !std::mem::replace(&mut self.seen_line, true);
        if first && is_header(line) {
            return Ok(Parsed::Skip);
        }
        let mut f = [""; 6];
        let mut n = 0;
        for field in line.split(',') {
            if n < 6 {
                f[n] = field.trim();
            }
            n += 1;
        }
        if !(4..=6).contains(&n) {
            return Err(format!(
                "expected 4 to 6 comma-separated fields (time, op, offset, length[, hint[, type]]), found {n}"
            ));
        }
        let time_ns = parse_u64(f[0], "time_ns")?;
        let (op, fua) = parse_op(f[1])?;
        let offset = parse_u64(f[2], "offset (bytes)")?;
        let length = parse_u64(f[3], "length (bytes)")?;
        if op == Op::Flush && (offset != 0 || length != 0) {
            return Err(format!(
                "a flush has offset 0 and length 0, found offset {offset} length {length}"
            ));
        }
        let mut hint = if n >= 5 {
            parse_hint(f[4])?
        } else {
            Hint::default()
        };
        if n == 6 {
            hint = cache_request_type(f[5], op, hint)?;
        }
        Ok(Parsed::Request(Record {
            time_ns,
            op,
            offset,
            length,
            hint,
            fua,
            preflush: false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{parse_trace_str, TraceFormat, TraceOptions};
    use ssdlab_core::hint::{HintField, HINT_FIELDS};
    use ssdlab_core::request::{Reliability, SeaClass, WriteLife};

    fn parse(text: &str) -> Result<Vec<HostRequest>, crate::WorkloadError> {
        parse_trace_str(text, "trace.csv", TraceFormat::Csv, TraceOptions::default())
    }

    #[test]
    fn cache_trace_type_column() {
        let text = "time_ns,op,offset,length,hint,type\n0,write,0,4096,,clean_write\n\
                    5,read,0,4096,flush_read,flush_read\n9,read,4096,4096,,host_read\n";
        let r = parse(text).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].hint.reliability, Some(Reliability::Clean));
        assert!(r[1].hint.flush_read);
        assert!(r[2].hint.is_empty());
        let bad = parse("0,read,0,4096,,dirty_write\n")
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("trace.csv:1") && bad.contains("disagrees"),
            "{bad}"
        );
    }

    #[test]
    fn header_ops_and_hints() {
        let text = "# comment\ntime_ns,op,offset,length,hint\n10,write,4096,8192,stream=3;life=short\n\
                    20,R,0,512\n30,T,0,4096,\n40,flush,0,0\n50,w,0,4096,fdp=2;sea=dyn;group=17;rel=dirty\n\
                    60,read,0,4096,flushread\n70,write_fua,0,4096\n80,WF,4096,4096,life=short\n";
        let r = parse(text).unwrap();
        assert_eq!(r.len(), 8);
        assert_eq!(
            r.iter().map(|q| q.fua).collect::<Vec<_>>()[4..],
            [false, false, true, true]
        );
        assert_eq!(
            (r[6].op, r[7].op, r[7].hint.write_life),
            (Op::Write, Op::Write, Some(WriteLife::Short))
        );
        assert_eq!(
            (r[0].arrival_ns, r[0].op, r[0].offset, r[0].length),
            (Some(0), Op::Write, 4096, 8192)
        );
        assert_eq!(r[0].hint.stream, Some(3));
        assert_eq!(r[0].hint.write_life, Some(WriteLife::Short));
        assert_eq!((r[1].op, r[1].arrival_ns), (Op::Read, Some(10)));
        assert_eq!(r[2].op, Op::Trim);
        assert!(r[2].hint.is_empty());
        assert_eq!((r[3].op, r[3].length), (Op::Flush, 0));
        let h = r[4].hint;
        assert_eq!(
            (h.placement_id, h.sea_class, h.read_group, h.reliability),
            (
                Some(2),
                Some(SeaClass::Dyn),
                Some(17),
                Some(Reliability::Dirty)
            )
        );
        assert!(r[5].hint.flush_read);
    }

    #[test]
    fn errors_match_the_documented_text() {
        let text = format!("{}1,read,0\n", "0,read,0,4096\n".repeat(16));
        let e = parse(&text).unwrap_err().to_string();
        assert_eq!(e, "trace.csv:17: expected 4 to 6 comma-separated fields (time, op, offset, length[, hint[, type]]), found 3");
        assert!(parse("0,erase,0,1\n")
            .unwrap_err()
            .to_string()
            .contains("expected op as read"));
        assert!(parse("0,write,0,1,stream=x\n")
            .unwrap_err()
            .to_string()
            .contains("hint 'stream'"));
        assert!(parse("0,write,0,1,bogus=1\n")
            .unwrap_err()
            .to_string()
            .contains("unknown hint 'bogus'"));
        assert!(parse("0,write,0,1,fdp=1;fdp=2\n")
            .unwrap_err()
            .to_string()
            .contains("given twice"));
        assert!(parse("0,flush,0,4096\n")
            .unwrap_err()
            .to_string()
            .contains("a flush has offset 0"));
        // A header is only a header on the first line.
        assert!(parse("0,read,0,1\ntime_ns,op,offset,length\n").is_err());
    }

    /// Every name of every field in the core's table, with every named value (or a number, or
    /// bare for a flag), parses in the hint column to the hint the canonical spelling gives.
    #[test]
    fn every_alias_parses_to_the_same_hint() {
        let line = |item: &str| format!("0,write,0,4096,{item}");
        let mut checked = 0;
        for spec in &HINT_FIELDS {
            let values: Vec<Option<&str>> = match spec.field {
                HintField::FlushRead => vec![None, Some("true")],
                _ if spec.values.is_empty() => vec![Some("7")],
                _ => spec.values.iter().copied().map(Some).collect(),
            };
            for value in values {
                let item = |name: &str| match value {
                    Some(v) => format!("{name}={v}"),
                    None => name.to_string(),
                };
                let want = parse(&line(&item(spec.name))).unwrap()[0].hint;
                assert!(!want.is_empty(), "{}", spec.name);
                for alias in spec.aliases {
                    let got = parse(&line(&item(alias))).unwrap()[0].hint;
                    assert_eq!(got, want, "{} vs {}", item(alias), item(spec.name));
                    checked += 1;
                }
            }
        }
        assert!(checked >= 12, "only {checked} aliases checked");
        // The spellings older traces and scripts used.
        for (old, new) in [
            ("life=notset", "write_life=not_set"),
            ("fdp=3", "placement_id=3"),
            ("group=9", "read_group=9"),
            ("rel=dirty", "reliability=dirty"),
            ("flushread", "flush_read"),
            ("life=SHORT", "write_life=short"),
            ("life=2", "write_life=short"),
        ] {
            assert_eq!(
                parse(&line(old)).unwrap(),
                parse(&line(new)).unwrap(),
                "{old}"
            );
        }
    }

    #[test]
    fn hint_errors_are_the_core_messages() {
        let e = parse("0,write,0,1,life=forever\n").unwrap_err().to_string();
        assert_eq!(
            e,
            "trace.csv:1: hint 'write_life' expects one of not_set, none, short, medium, long, \
             extreme (or 0-5), found 'forever'"
        );
        let core = "write_life=forever"
            .parse::<Hint>()
            .unwrap_err()
            .to_string();
        assert!(e.ends_with(&core));
    }

    #[test]
    fn format_round_trips() {
        let mut req = HostRequest::new(Op::Write, 8192, 4096);
        req.arrival_ns = Some(5);
        req.hint = Hint {
            write_life: Some(WriteLife::Extreme),
            stream: Some(9),
            placement_id: Some(4),
            sea_class: Some(SeaClass::Stat),
            read_group: Some(u64::MAX),
            reliability: Some(Reliability::Clean),
            flush_read: true,
        };
        req.fua = true;
        let line = format_csv_line(&req);
        assert!(line.starts_with("5,write_fua,"), "{line}");
        let back = parse_trace_str(
            &line,
            "x",
            TraceFormat::Csv,
            TraceOptions {
                rebase_time: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(back, vec![req]);
    }
}
