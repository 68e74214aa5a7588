//! Alibaba block traces (2020): `device_id,opcode,offset,length,timestamp`.
//!
//! opcode `R`/`W`, offset and length in bytes, timestamp in microseconds (arrival ns =
//! µs · 1000). The device filter matches device_id.

use super::{parse_decimal_ns, parse_rw, parse_u64, record, split_exact, LineFormat, Parsed};

pub(crate) struct Alibaba {
    filter: Option<String>,
}

impl Alibaba {
    pub(crate) fn new(filter: Option<String>) -> Self {
        Alibaba { filter }
    }
}

impl LineFormat for Alibaba {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        let [device, opcode, offset, length, ts] = split_exact::<5>(line, ',').map_err(|n| {
            format!(
                "expected 5 comma-separated fields (device_id, opcode, offset, length, timestamp), found {n}"
            )
        })?;
        parse_u64(device, "device_id")?;
        let op = parse_rw(opcode, "R or W")?;
        let offset = parse_u64(offset, "offset (bytes)")?;
        let length = parse_u64(length, "length (bytes)")?;
        let time_ns = parse_decimal_ns(ts, 3, "timestamp (µs)")?;
        if self.filter.as_deref().is_some_and(|d| d != device) {
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
    fn bytes_and_microseconds() {
        let text = "419,W,8954302464,4096,1577808000000047\n419,R,1024,512,1577808000000050\n7,R,0,4096,1577808000000051\n";
        let r =
            parse_trace_str(text, "a.csv", TraceFormat::Alibaba, TraceOptions::default()).unwrap();
        assert_eq!(
            (r[0].op, r[0].offset, r[0].length, r[0].arrival_ns),
            (Op::Write, 8_954_302_464, 4096, Some(0))
        );
        assert_eq!(
            (r[1].op, r[1].offset, r[1].length, r[1].arrival_ns),
            (Op::Read, 1024, 512, Some(3000))
        );
        let opts = TraceOptions {
            device_filter: Some("7".into()),
            rebase_time: false,
            ..TraceOptions::default()
        };
        let r = parse_trace_str(text, "a.csv", TraceFormat::Alibaba, opts).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].arrival_ns, Some(1_577_808_000_000_051_000));
    }

    #[test]
    fn bad_opcode() {
        let e = parse_trace_str(
            "1,X,0,1,2\n",
            "a.csv",
            TraceFormat::Alibaba,
            TraceOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "a.csv:1: expected the operation as R or W, found 'X'");
    }
}
