//! Fuzz every trace parser with the same bytes: none may panic, and every error must point at
//! a line (≥ 1) of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ssdlab_workload::{parse_trace_str, TraceFormat, TraceOptions, WorkloadError};

fuzz_target!(|data: &[u8]| {
    // Non-UTF-8 input is exercised through the streaming reader, which reports it per line.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in TraceFormat::ALL {
        match parse_trace_str(text, "fuzz", format, TraceOptions::default()) {
            Ok(requests) => {
                for r in requests {
                    assert!(r.arrival_ns.is_some());
                    assert!(r.length > 0 || r.op == ssdlab_core::Op::Flush);
                }
            }
            Err(WorkloadError::Parse { line, .. }) => assert!(line >= 1),
            Err(other) => panic!("unexpected error kind: {other}"),
        }
    }
});
