//! Fuzz the request-log reader and summariser (`ssdlab stats`) with any bytes, with and without
//! the header in front so that the rows are reached: no panic, every error names a line (≥ 1),
//! and a summary's totals are the sums of its ops.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ssdlab_core::stats::RequestLogRow;
use ssdlab_workload::request_log::{summarize_request_log, RequestLogOptions};
use ssdlab_workload::WorkloadError;

fuzz_target!(|data: &[u8]| {
    let mut with_header = format!("{}\n", RequestLogRow::CSV_HEADER).into_bytes();
    with_header.extend_from_slice(data);
    for input in [data, &with_header[..]] {
        match summarize_request_log(input, "fuzz", &RequestLogOptions::default()) {
            Ok(s) => {
                let ops = [&s.ops.read, &s.ops.write, &s.ops.trim, &s.ops.flush];
                assert_eq!(
                    s.total.requests,
                    ops.iter().map(|o| o.requests).sum::<u64>()
                );
                assert_eq!(s.total.bytes, ops.iter().map(|o| o.bytes).sum::<u128>());
                assert_eq!(s.rows, s.total.requests);
            }
            Err(WorkloadError::Parse { line, .. }) => assert!(line >= 1),
            Err(other) => panic!("unexpected error kind: {other}"),
        }
    }
});
