//! MQSim ASCII traces: exactly five fields separated by one space,
//! `arrival_time device start_LBA size type`.
//!
//! arrival_time is integer ns and must not decrease; start_LBA and size are 512-byte sectors;
//! type `0` is a write and anything else a read (as MQSim reads it). MQSim parses a number with
//! a leading `0` as octal, so a zero-padded number (`010`) would mean something else to MQSim
//! than to a reader: it is an error here rather than a guess. The device column is ignored by
//! MQSim; our device filter matches it.

use super::{parse_u64, record, scaled, split_exact, LineFormat, Op, Parsed};

pub(crate) struct Mqsim {
    filter: Option<String>,
}

impl Mqsim {
    pub(crate) fn new(filter: Option<String>) -> Self {
        Mqsim { filter }
    }
}

fn number(field: &str, what: &str) -> Result<u64, String> {
    if field.len() > 1 && field.starts_with('0') && field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{what} '{field}' has a leading zero, which MQSim reads as octal; write it without zero-padding"
        ));
    }
    parse_u64(field, what)
}

impl LineFormat for Mqsim {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        if line.contains("  ") || line.contains('\t') {
            return Err(
                "expected exactly 5 fields separated by one space (arrival_time device start_LBA size type); found an empty field (two spaces in a row, or a tab)"
                    .to_string(),
            );
        }
        let f = split_exact::<5>(line, ' ').map_err(|n| {
            format!(
                "expected exactly 5 fields separated by one space (arrival_time device start_LBA size type), found {n}"
            )
        })?;
        let time_ns = number(f[0], "arrival_time (ns)")?;
        number(f[1], "device")?;
        let offset = scaled(
            number(f[2], "start_LBA (512-byte sectors)")?,
            512,
            "start_LBA",
        )?;
        let length = scaled(number(f[3], "size (512-byte sectors)")?, 512, "size")?;
        let op = if number(f[4], "type")? == 0 {
            Op::Write
        } else {
            Op::Read
        };
        if self.filter.as_deref().is_some_and(|d| d != f[1]) {
            return Ok(Parsed::Skip);
        }
        Ok(record(time_ns, op, offset, length))
    }
}

#[cfg(test)]
mod tests {
    use crate::trace::{parse_trace_str, TraceFormat, TraceOptions};
    use ssdlab_core::request::Op;

    #[test]
    fn ns_sectors_and_type() {
        let text = "100 0 8 8 0\n250 0 16 1 1\n250 3 0 2 7\n";
        let r = parse_trace_str(text, "t.mq", TraceFormat::Mqsim, TraceOptions::default()).unwrap();
        assert_eq!(
            (r[0].op, r[0].offset, r[0].length, r[0].arrival_ns),
            (Op::Write, 4096, 4096, Some(0))
        );
        assert_eq!(
            (r[1].op, r[1].offset, r[1].length, r[1].arrival_ns),
            (Op::Read, 8192, 512, Some(150))
        );
        assert_eq!(r[2].op, Op::Read);
    }

    #[test]
    fn strict_spacing_octal_and_order() {
        let e = |t: &str| {
            parse_trace_str(t, "t.mq", TraceFormat::Mqsim, TraceOptions::default())
                .unwrap_err()
                .to_string()
        };
        assert!(e("100  0 8 8 0\n").contains("empty field"));
        assert!(e("100 0 8 8\n").ends_with("found 4"));
        assert!(e("100 0 010 8 0\n").contains("octal"));
        assert!(e("100 0 8 8 0\n99 0 8 8 0\n").starts_with("t.mq:2: timestamp goes backwards"));
    }
}
