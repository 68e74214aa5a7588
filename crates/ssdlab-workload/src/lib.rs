//! ssdlab-workload: what the simulated SSD is asked to do.
//!
//! Two kinds of [`ssdlab_core::RequestSource`] come out of this crate:
//!
//! - **fio jobs** ([`fio`]): a subset of fio's job-file language, parsed into typed
//!   [`JobSpec`]s whose [`JobSpec::source`] generates the job's requests deterministically from
//!   a seed, with fio's semantics for block sizes, mixes, random maps and the `zipf`, `pareto`
//!   and `normal` distributions ([`distribution`]). Jobs of one file run one after another.
//! - **block traces** ([`trace`]): MSR Cambridge, SPC, blkparse, DiskSim, MQSim, Alibaba,
//!   Tencent, FIU and ssdlab's own CSV (which also carries hints), streamed line by line with
//!   every unit converted to ns and bytes.
//!
//! Problems in the inputs are [`WorkloadError`]s naming the file, the line (or option) and
//! what was expected; nothing in a trace or job file is skipped silently.
//!
//! ```
//! use ssdlab_workload::{parse_job_file, parse_trace_str, TraceFormat, TraceOptions};
//!
//! let jobs = parse_job_file("[w]\nrw=randwrite\nbs=4k\nsize=1m\n", "w.fio").unwrap();
//! let mut source = jobs.jobs[0].source(1 << 30, 42).unwrap();
//! assert_eq!(source.len_hint(), Some(256));
//! let first = source.next_request().unwrap().unwrap();
//! assert_eq!(first.length, 4096);
//!
//! let reqs = parse_trace_str("0,write,0,4096\n", "t.csv", TraceFormat::Csv, TraceOptions::default()).unwrap();
//! assert_eq!(reqs[0].offset, 0);
//! ```

pub mod distribution;
pub mod error;
pub mod fio;
pub mod request_log;
pub mod trace;

pub use distribution::{DistributionSpec, OffsetDistribution};
pub use error::WorkloadError;
pub use fio::{
    parse_job_file, read_job_file, BlockSize, Extent, FioSource, JobFile, JobSpec, RateLimit,
    RateProcess, RwMode,
};
pub use trace::{
    format_csv_line, open_trace, parse_hint, parse_trace_str, BlkparseAction, TraceFormat,
    TraceOptions, TraceSource,
};
