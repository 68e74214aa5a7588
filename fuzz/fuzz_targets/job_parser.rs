//! Fuzz the fio job-file parser and the generators it builds: no panic, errors carry a line,
//! and generated requests stay inside the device.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ssdlab_workload::{parse_job_file, WorkloadError};

const DEVICE_BYTES: u64 = 1 << 30;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_job_file(text, "fuzz.fio") {
        Ok(file) => {
            for job in &file.jobs {
                let _ = job.request_count(DEVICE_BYTES);
                if let Ok(mut source) = job.source(DEVICE_BYTES, 1) {
                    for _ in 0..64 {
                        match source.next_request() {
                            Some(Ok(r)) => assert!(r.offset + r.length <= DEVICE_BYTES),
                            Some(Err(e)) => panic!("a generator cannot fail: {e}"),
                            None => break,
                        }
                    }
                }
            }
        }
        Err(WorkloadError::Parse { line, .. }) | Err(WorkloadError::JobOption { line, .. }) => {
            assert!(line >= 1)
        }
        Err(other) => panic!("unexpected error kind: {other}"),
    }
});
