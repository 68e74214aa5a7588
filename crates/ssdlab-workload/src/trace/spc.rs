//! SPC traces (UMass Financial, WebSearch): `ASU,LBA,Size,Opcode,Timestamp[,…]`.
//!
//! LBA is in 512-byte blocks (offset = LBA · 512), Size in bytes, Opcode `r`/`R`/`w`/`W`,
//! Timestamp in seconds as a decimal (converted to ns exactly, without going through a float).
//! Extra trailing fields (some releases append more) are ignored. The device filter matches
//! the ASU number.

use super::{parse_decimal_ns, parse_u64, record, scaled, LineFormat, Op, Parsed};

pub(crate) struct Spc {
    filter: Option<String>,
}

impl Spc {
    pub(crate) fn new(filter: Option<String>) -> Self {
        Spc { filter }
    }
}

impl LineFormat for Spc {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        let mut fields = [""; 5];
        let mut n = 0;
        for f in line.split(',') {
            if n < 5 {
                fields[n] = f.trim();
            }
            n += 1;
        }
        if n < 5 {
            return Err(format!(
                "expected at least 5 comma-separated fields (ASU, LBA, Size, Opcode, Timestamp), found {n}"
            ));
        }
        let [asu, lba, size, opcode, ts] = fields;
        parse_u64(asu, "ASU")?;
        let offset = scaled(parse_u64(lba, "LBA (512-byte blocks)")?, 512, "LBA")?;
        let length = parse_u64(size, "Size (bytes)")?;
        let op = match opcode {
            "r" | "R" => Op::Read,
            "w" | "W" => Op::Write,
            _ => {
                return Err(format!(
                    "expected the Opcode as r, R, w or W, found '{opcode}'"
                ))
            }
        };
        let time_ns = parse_decimal_ns(ts, 9, "Timestamp (seconds)")?;
        if self.filter.as_deref().is_some_and(|f| f != asu) {
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
    fn lba_blocks_size_bytes_seconds() {
        let text = "0,2,3584,w,0.000000\n1,303567,512,R,0.026214,extra\n";
        let r = parse_trace_str(
            text,
            "Financial1.spc",
            TraceFormat::Spc,
            TraceOptions::default(),
        )
        .unwrap();
        assert_eq!(
            (r[0].op, r[0].offset, r[0].length, r[0].arrival_ns),
            (Op::Write, 1024, 3584, Some(0))
        );
        assert_eq!(
            (r[1].op, r[1].offset, r[1].length),
            (Op::Read, 303_567 * 512, 512)
        );
        assert_eq!(r[1].arrival_ns, Some(26_214_000));
        let only1 = TraceOptions {
            device_filter: Some("1".into()),
            ..TraceOptions::default()
        };
        let r = parse_trace_str(text, "f.spc", TraceFormat::Spc, only1).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].offset, 303_567 * 512);
    }

    #[test]
    fn bad_opcode_and_short_lines() {
        let e = parse_trace_str(
            "0,2,3584,x,0.0\n",
            "f.spc",
            TraceFormat::Spc,
            TraceOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "f.spc:1: expected the Opcode as r, R, w or W, found 'x'");
        let e = parse_trace_str(
            "0,2,3584\n",
            "f.spc",
            TraceFormat::Spc,
            TraceOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("at least 5 comma-separated fields") && e.ends_with("found 3"),
            "{e}"
        );
    }
}
