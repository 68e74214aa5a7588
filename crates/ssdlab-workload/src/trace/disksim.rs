//! DiskSim ASCII traces: `time devno blkno bcount flags`, whitespace-separated.
//!
//! Time is in milliseconds (decimal, converted to ns exactly); blkno and bcount are 512-byte
//! sectors; bit 0 of flags set means read, clear means write. The device filter matches devno.

use super::{parse_decimal_ns, parse_u64, record, scaled, split_ws, LineFormat, Op, Parsed};

pub(crate) struct Disksim {
    filter: Option<String>,
}

impl Disksim {
    pub(crate) fn new(filter: Option<String>) -> Self {
        Disksim { filter }
    }
}

impl LineFormat for Disksim {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        let (f, n) = split_ws::<5>(line);
        if n != 5 {
            return Err(format!(
                "expected 5 whitespace-separated fields (time devno blkno bcount flags), found {n}"
            ));
        }
        let time_ns = parse_decimal_ns(f[0], 6, "the time (ms)")?;
        parse_u64(f[1], "devno")?;
        let offset = scaled(parse_u64(f[2], "blkno (512-byte sectors)")?, 512, "blkno")?;
        let length = scaled(parse_u64(f[3], "bcount (512-byte sectors)")?, 512, "bcount")?;
        let flags = parse_u64(f[4], "flags")?;
        if self.filter.as_deref().is_some_and(|d| d != f[1]) {
            return Ok(Parsed::Skip);
        }
        let op = if flags & 1 == 1 { Op::Read } else { Op::Write };
        Ok(record(time_ns, op, offset, length))
    }
}

#[cfg(test)]
mod tests {
    use crate::trace::{parse_trace_str, TraceFormat, TraceOptions};
    use ssdlab_core::request::Op;

    #[test]
    fn milliseconds_sectors_and_flag_bit() {
        let text = "0.000000 0 100 8 1\n1.500000\t0\t2\t16\t0\n2.25 1 0 1 3\n";
        let r = parse_trace_str(
            text,
            "t.disksim",
            TraceFormat::Disksim,
            TraceOptions::default(),
        )
        .unwrap();
        assert_eq!(
            (r[0].op, r[0].offset, r[0].length, r[0].arrival_ns),
            (Op::Read, 51_200, 4096, Some(0))
        );
        assert_eq!(
            (r[1].op, r[1].offset, r[1].length, r[1].arrival_ns),
            (Op::Write, 1024, 8192, Some(1_500_000))
        );
        assert_eq!((r[2].op, r[2].arrival_ns), (Op::Read, Some(2_250_000)));
        let opts = TraceOptions {
            device_filter: Some("1".into()),
            ..TraceOptions::default()
        };
        assert_eq!(
            parse_trace_str(text, "t", TraceFormat::Disksim, opts)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn wrong_field_count() {
        let e = parse_trace_str(
            "1 2 3 4\n",
            "t.disksim",
            TraceFormat::Disksim,
            TraceOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "t.disksim:1: expected 5 whitespace-separated fields (time devno blkno bcount flags), found 4");
    }
}
