//! FIU traces (SNIA IOTTA): `ts pid process lba size op major minor md5`, whitespace-separated.
//!
//! ts is in ns; lba *and size* are in 512-byte blocks (the FIU README gives size in blocks:
//! a 4 KiB request has size 8), so offset = lba · 512 and length = size · 512; op is `R` or
//! `W`. Process names may contain spaces, so the line is read from both ends: ts and pid are
//! the first two fields, the last six are lba … md5, and whatever lies between is the process
//! name. The device filter is `major,minor` (or `major:minor`).

use super::{parse_rw, parse_u64, record, scaled, LineFormat, Parsed};

pub(crate) struct Fiu {
    filter: Option<(String, String)>,
}

impl Fiu {
    pub(crate) fn new(filter: Option<String>) -> Result<Self, String> {
        let filter = match filter {
            None => None,
            Some(f) => match f.split_once([',', ':']) {
                Some((a, b)) => Some((a.trim().to_string(), b.trim().to_string())),
                None => {
                    return Err(format!(
                        "FIU device filter must be 'major,minor' (e.g. 8,0), found '{f}'"
                    ))
                }
            },
        };
        Ok(Fiu { filter })
    }
}

impl LineFormat for Fiu {
    fn parse(&mut self, line: &str) -> Result<Parsed, String> {
        let mut head = [""; 2];
        let mut tail = [""; 6];
        let mut n = 0usize;
        for f in line.split_ascii_whitespace() {
            if n < 2 {
                head[n] = f;
            }
            tail[n % 6] = f;
            n += 1;
        }
        if n < 9 {
            return Err(format!(
                "expected 9 whitespace-separated fields (ts pid process lba size op major minor md5), found {n}"
            ));
        }
        // tail is a ring buffer holding the last six fields; rotate it into order.
        let at = |i: usize| tail[(n - 6 + i) % 6];
        let time_ns = parse_u64(head[0], "ts (ns)")?;
        parse_u64(head[1], "pid")?;
        let offset = scaled(parse_u64(at(0), "lba (512-byte blocks)")?, 512, "lba")?;
        let length = scaled(parse_u64(at(1), "size (512-byte blocks)")?, 512, "size")?;
        let op = parse_rw(at(2), "R or W")?;
        let (major, minor) = (at(3), at(4));
        parse_u64(major, "major")?;
        parse_u64(minor, "minor")?;
        if let Some((fmaj, fmin)) = &self.filter {
            if fmaj != major || fmin != minor {
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
    fn ns_blocks_and_spaced_process_names() {
        let text =
            "89966527055253 4892 syslogd 904265560 8 W 6 0 531f3c9ab9d2c4bdf1c9e28e1bc0b4e1\n\
                    89966527056253 4893 Web Content 16 1 R 8 1 d41d8cd98f00b204e9800998ecf8427e\n";
        let r =
            parse_trace_str(text, "homes.txt", TraceFormat::Fiu, TraceOptions::default()).unwrap();
        assert_eq!(
            (r[0].op, r[0].offset, r[0].length, r[0].arrival_ns),
            (Op::Write, 904_265_560 * 512, 4096, Some(0))
        );
        assert_eq!(
            (r[1].op, r[1].offset, r[1].length, r[1].arrival_ns),
            (Op::Read, 8192, 512, Some(1000))
        );
        let opts = TraceOptions {
            device_filter: Some("8:1".into()),
            ..TraceOptions::default()
        };
        assert_eq!(
            parse_trace_str(text, "h", TraceFormat::Fiu, opts)
                .unwrap()
                .len(),
            1
        );
        let opts = TraceOptions {
            device_filter: Some("sda".into()),
            ..TraceOptions::default()
        };
        let e = parse_trace_str(text, "h", TraceFormat::Fiu, opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("major,minor"), "{e}");
    }
}
