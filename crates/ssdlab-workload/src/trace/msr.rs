//! MSR Cambridge traces (SNIA IOTTA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
//!
//! Timestamp is a Windows FILETIME (100 ns ticks since 1601), so arrival ns = ticks · 100;
//! Type is `Read` or `Write` (any case); Offset and Size are bytes; ResponseTime (100 ns ticks)
//! is checked to be a number and otherwise ignored, since the simulator computes its own.
//! The device filter matches the DiskNumber (`1`) or the `Hostname_DiskNumber` name the MSR
//! files are published under (`hm_1`).

use super::{parse_rw, parse_u64, record, scaled, split_exact, LineFormat, Parsed};

pub(crate) struct Msr {
    filter: Option<String>,
}

impl Msr {
    pub(crate) fn new(filter: Option<String>) -> Self {
        Msr { filter }
    }
}

/// True when `filter` is `disk` or `host_disk`.
fn matches(filter: &str, host: &str, disk: &str) -> bool {
    filter == disk
        || (filter.len() == host.len() + 1 + disk.len()
            && filter.starts_with(host)
            && filter.as_bytes()[host.len()] == b'_'
            && filter.ends_with(disk))
}

impl LineFormat for Msr {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        let [ts, host, disk, op, offset, size, response] =
            split_exact::<7>(line, ',').map_err(|n| {
                format!(
                "expected 7 comma-separated fields (Timestamp, Hostname, DiskNumber, Type, Offset, \
                 Size, ResponseTime), found {n}"
            )
            })?;
        let time_ns = scaled(
            parse_u64(ts, "Timestamp (FILETIME 100 ns ticks)")?,
            100,
            "Timestamp",
        )?;
        parse_u64(disk, "DiskNumber")?;
        let op = parse_rw(op, "Read or Write")?;
        let offset = parse_u64(offset, "Offset (bytes)")?;
        let length = parse_u64(size, "Size (bytes)")?;
        parse_u64(response, "ResponseTime (100 ns ticks)")?;
        if let Some(f) = &self.filter {
            if !matches(f, host, disk) {
                return Ok(Parsed::Skip);
            }
        }
        Ok(record(time_ns, op, offset, length))
    }
}

#[cfg(test)]
mod tests {
    use crate::trace::{parse_trace_str, TraceFormat, TraceOptions};
    use ssdlab_core::request::Op;

    #[test]
    fn filetime_ticks_become_ns_and_offsets_stay_bytes() {
        let text = "128166372003061629,hm,1,Read,3154152448,4096,48979\n\
                    128166372003061639,hm,1,Write,1024,512,10\n";
        let r =
            parse_trace_str(text, "hm_1.csv", TraceFormat::Msr, TraceOptions::default()).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].arrival_ns, Some(0));
        assert_eq!(r[1].arrival_ns, Some(1000), "10 ticks of 100 ns");
        assert_eq!(
            (r[0].op, r[0].offset, r[0].length),
            (Op::Read, 3_154_152_448, 4096)
        );
        assert_eq!((r[1].op, r[1].offset, r[1].length), (Op::Write, 1024, 512));
        let abs = TraceOptions {
            rebase_time: false,
            ..TraceOptions::default()
        };
        let r = parse_trace_str(text, "hm_1.csv", TraceFormat::Msr, abs).unwrap();
        assert_eq!(r[0].arrival_ns, Some(12_816_637_200_306_162_900));
    }

    #[test]
    fn device_filter_matches_disk_or_host_disk() {
        let text = "100,hm,0,Read,0,4096,1\n200,hm,1,Read,0,4096,1\n300,prxy,1,Write,0,4096,1\n";
        for (f, n) in [
            ("1", 2),
            ("hm_1", 1),
            ("prxy_1", 1),
            ("hm_0", 1),
            ("x_1", 0),
        ] {
            let opts = TraceOptions {
                device_filter: Some(f.into()),
                ..TraceOptions::default()
            };
            let r = parse_trace_str(text, "m.csv", TraceFormat::Msr, opts).unwrap();
            assert_eq!(r.len(), n, "filter {f}");
        }
    }

    #[test]
    fn bad_lines_name_the_field() {
        let e = parse_trace_str(
            "1,hm,1,Read,0,4096\n",
            "m.csv",
            TraceFormat::Msr,
            TraceOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("m.csv:1: expected 7 comma-separated fields"),
            "{e}"
        );
        assert!(e.ends_with("found 6"), "{e}");
        let e = parse_trace_str(
            "1,hm,1,Erase,0,4096,1\n",
            "m.csv",
            TraceFormat::Msr,
            TraceOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "m.csv:1: expected the operation as Read or Write, found 'Erase'"
        );
    }
}
