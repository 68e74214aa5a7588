//! ssdlab-core: a deterministic, timing-accurate NAND-flash SSD simulator.
//!
//! The crate is pure: no I/O, no threads, no wall clock. A [`Device`] is built from a typed
//! [`config::Config`] and a seed; requests go in through [`Device::submit`] or a run
//! ([`Device::start_run`] / [`Device::step`]), and statistics come out as fio-layout JSON.
//! Layers, top to bottom: `host` (request splitting, queues, the run loop, the clock),
//! `placement` (hints → placement handles), `ftl` (mapping, GC, wear levelling through the
//! policies in `gc` and `wear`), `ecc` (codec latency and error model), `nand` (geometry, timed
//! dies and channels, page data), and `stats` (counters, histograms, time series, reports).
//! The same configuration, workload and seed always give the same statistics, bit for bit.

pub mod cache;
pub mod config;
pub mod ecc;
pub mod ftl;
pub mod gc;
pub mod hint;
pub mod host;
pub mod nand;
pub mod native;
pub mod placement;
pub mod presets;
pub mod request;
pub mod sched;
pub mod stats;
pub mod wear;

pub use config::{Config, ConfigError};
pub use host::{
    ArrivalClock, Completion, Device, DeviceError, Loop, NativeFlash, PageRead,
    PreconditionOptions, Progress, RecoveryReport, RunSpec,
};
pub use request::{Hint, HostRequest, Op, RequestSource, SourceError, VecSource};

/// The simulator's version, reported in every output.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
