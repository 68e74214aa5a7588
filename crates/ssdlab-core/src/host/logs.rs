//! Taking the per-request log out of the device as a run goes, so that it can be streamed to
//! a file in constant memory.
//!
//! With `stats.request_log` on, the device appends one row per executed request. A long run
//! would hold every row (about 100 B each, tens of millions of requests); a host that writes
//! the log to a file drains the rows after each step of the run instead, and the device then
//! holds at most one step's worth.

use super::Device;
use crate::stats::RequestLogRow;

impl Device {
    /// The request-log rows accumulated since the last drain (or the last reset), oldest
    /// first; the device keeps none of them. Empty when `stats.request_log` is off.
    pub fn drain_request_log(&mut self) -> Vec<RequestLogRow> {
        self.request_log
            .as_mut()
            .map_or_else(Vec::new, std::mem::take)
    }

    /// Like [`Device::drain_request_log`], formatted as CSV lines (no header) appended to
    /// `out`; returns the number of rows.
    pub fn drain_request_log_csv(&mut self, out: &mut String) -> usize {
        let Some(log) = self.request_log.as_mut() else {
            return 0;
        };
        for row in log.iter() {
            out.push_str(&row.csv_line());
            out.push('\n');
        }
        let rows = log.len();
        log.clear();
        rows
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, HostRequest, Op};

    #[test]
    fn drained_rows_leave_the_device_and_keep_their_order() {
        let ov = vec![("stats.request_log".to_string(), "true".to_string())];
        let mut dev = Device::from_toml("", "t", &ov, 1, false).unwrap();
        for i in 0..3u64 {
            dev.submit(&HostRequest::new(Op::Write, i * 4096, 4096), None, None)
                .unwrap();
        }
        let rows = dev.drain_request_log();
        assert_eq!(
            rows.iter().map(|r| r.request).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert!(dev.drain_request_log().is_empty());
        assert_eq!(dev.request_log().map(<[_]>::len), Some(0));
        dev.submit(&HostRequest::new(Op::Read, 0, 4096), None, None)
            .unwrap();
        let mut csv = String::new();
        assert_eq!(dev.drain_request_log_csv(&mut csv), 1);
        assert!(csv.starts_with("4,read,0,4096,"), "{csv}");
        assert_eq!(dev.request_log().map(<[_]>::len), Some(0));
        // Without the log there is nothing to drain.
        let mut quiet = Device::from_toml("", "t", &[], 1, false).unwrap();
        quiet
            .submit(&HostRequest::new(Op::Write, 0, 4096), None, None)
            .unwrap();
        assert!(quiet.drain_request_log().is_empty());
    }
}
