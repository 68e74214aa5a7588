//! Tencent CBS traces (2018): `Timestamp,Offset,Size,IOType,VolumeID`.
//!
//! Timestamp in seconds (Unix time; a decimal is accepted and converted exactly), Offset and
//! Size in 512-byte sectors, IOType `0` = read and `1` = write. The device filter matches
//! VolumeID.

use super::{parse_decimal_ns, parse_u64, record, scaled, split_exact, LineFormat, Op, Parsed};

pub(crate) struct Tencent {
    filter: Option<String>,
}

impl Tencent {
    pub(crate) fn new(filter: Option<String>) -> Self {
        Tencent { filter }
    }
}

impl LineFormat for Tencent {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        let [ts, offset, size, io_type, volume] = split_exact::<5>(line, ',').map_err(|n| {
            format!("expected 5 comma-separated fields (Timestamp, Offset, Size, IOType, VolumeID), found {n}")
        })?;
        let time_ns = parse_decimal_ns(ts, 9, "Timestamp (seconds)")?;
        let offset = scaled(
            parse_u64(offset, "Offset (512-byte sectors)")?,
            512,
            "Offset",
        )?;
        let length = scaled(parse_u64(size, "Size (512-byte sectors)")?, 512, "Size")?;
        let op = match io_type {
            "0" => Op::Read,
            "1" => Op::Write,
            _ => {
                return Err(format!(
                    "expected IOType 0 (read) or 1 (write), found '{io_type}'"
                ))
            }
        };
        parse_u64(volume, "VolumeID")?;
        if self.filter.as_deref().is_some_and(|d| d != volume) {
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
    fn seconds_sectors_and_iotype() {
        let text = "1538323200,1024,8,0,1234\n1538323201,16,1,1,1234\n1538323201,0,8,1,99\n";
        let r =
            parse_trace_str(text, "t.csv", TraceFormat::Tencent, TraceOptions::default()).unwrap();
        assert_eq!(
            (r[0].op, r[0].offset, r[0].length, r[0].arrival_ns),
            (Op::Read, 524_288, 4096, Some(0))
        );
        assert_eq!(
            (r[1].op, r[1].offset, r[1].length, r[1].arrival_ns),
            (Op::Write, 8192, 512, Some(1_000_000_000))
        );
        let opts = TraceOptions {
            device_filter: Some("99".into()),
            ..TraceOptions::default()
        };
        assert_eq!(
            parse_trace_str(text, "t.csv", TraceFormat::Tencent, opts)
                .unwrap()
                .len(),
            1
        );
        let e = parse_trace_str(
            "1,0,8,2,1\n",
            "t.csv",
            TraceFormat::Tencent,
            TraceOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv:1: expected IOType 0 (read) or 1 (write), found '2'"
        );
    }
}
