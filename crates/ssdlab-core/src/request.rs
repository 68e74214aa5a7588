//! Host requests, hints and the trait every workload source implements.
//!
//! A [`HostRequest`] is what a host layer (fio job, trace replay, a database coupling, an NBD
//! client) hands to the device: an operation on a byte range, an optional arrival time and the
//! optional cross-layer [`Hint`] of `shared/spec/hints.md` (its vocabulary is [`crate::hint`]).
//! Workload crates produce requests through [`RequestSource`]; the core never parses files.

use serde::{Deserialize, Serialize};

/// What a host request asks the device to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    /// Deallocate (TRIM / discard): the range's mapping is dropped.
    Trim,
    /// Flush the device's volatile write buffer (no data).
    Flush,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::Flush => "flush",
        }
    }
}

/// Linux `F_SET_RW_HINT` write-life hints (`include/uapi/linux/fcntl.h`).
///
/// Serde spells the values as the hint vocabulary does ([`crate::hint`]): `not_set`, with the
/// older `notset` still read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteLife {
    #[serde(alias = "notset")]
    NotSet = 0,
    None = 1,
    Short = 2,
    Medium = 3,
    Long = 4,
    Extreme = 5,
}

impl WriteLife {
    pub fn from_index(value: u8) -> Option<WriteLife> {
        Some(match value {
            0 => WriteLife::NotSet,
            1 => WriteLife::None,
            2 => WriteLife::Short,
            3 => WriteLife::Medium,
            4 => WriteLife::Long,
            5 => WriteLife::Extreme,
            _ => return None,
        })
    }
}

/// SEA-SSD's one-bit classification hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeaClass {
    /// Short-lived data (rewritten soon): the `dyn` segment.
    Dyn,
    /// Everything else: the `stat` segment.
    Stat,
}

/// FlexECC's reliability hint on writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reliability {
    /// The only copy: protect with ECC.
    Dirty,
    /// A copy of data that lives elsewhere: detection (EDC) suffices.
    Clean,
}

/// Hints a host layer attaches to one request. Every field is optional; a device that ignores
/// all of them behaves like the baseline. The names, aliases and value spellings every entry
/// point accepts, the parser (`FromStr`) and the formatter (`Display`) are in [`crate::hint`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hint {
    /// Linux write-life hint.
    pub write_life: Option<WriteLife>,
    /// NVMe Streams directive: stream identifier.
    pub stream: Option<u16>,
    /// NVMe FDP placement identifier (reclaim group and handle folded into one index).
    pub placement_id: Option<u16>,
    /// SEA-SSD classification.
    pub sea_class: Option<SeaClass>,
    /// Melded pages: data with the same group id will be read together.
    pub read_group: Option<u64>,
    /// FlexECC: dirty or clean data.
    pub reliability: Option<Reliability>,
    /// FlexECC: this read writes dirty data back to its backing store.
    pub flush_read: bool,
}

impl Hint {
    pub fn is_empty(&self) -> bool {
        *self == Hint::default()
    }
}

/// One request from a host layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRequest {
    /// Arrival time in simulated ns for open-loop replay; `None` in closed-loop workloads.
    pub arrival_ns: Option<u64>,
    pub op: Op,
    /// Byte offset into the exported logical space.
    pub offset: u64,
    /// Length in bytes (zero only for `Flush`).
    pub length: u64,
    pub hint: Hint,
    /// Force Unit Access (a write only): it completes once its data is on flash, as a write
    /// with NVMe's FUA bit, an `O_SYNC`/`O_DSYNC` write or fio's `sync=1` does. The device
    /// makes it durable as a flush issued with it would (the pages still filling are padded
    /// and programmed); on a drive with power-loss protection it is any write.
    #[serde(default)]
    pub fua: bool,
}

impl HostRequest {
    pub fn new(op: Op, offset: u64, length: u64) -> Self {
        HostRequest {
            arrival_ns: None,
            op,
            offset,
            length,
            hint: Hint::default(),
            fua: false,
        }
    }
}

/// Error type a source reports for a request it cannot produce (a trace line that does not
/// parse, say). Boxed so that the core does not depend on any workload crate.
pub type SourceError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A stream of host requests: a fio job generator, a trace reader, an in-memory list.
///
/// Sources are pulled lazily so that multi-gigabyte traces replay in constant memory.
pub trait RequestSource: Send {
    /// The next request, `None` at the end, or the error that stops the run.
    fn next_request(&mut self) -> Option<Result<HostRequest, SourceError>>;

    /// How many requests the source will yield, when known (drives progress bars).
    fn len_hint(&self) -> Option<u64> {
        None
    }

    /// The requests still to come, when the source holds them in memory: a run then issues
    /// them where they are, and takes them with [`RequestSource::skip`]. `None` (the default):
    /// only through `next_request`.
    fn pending(&self) -> Option<&[HostRequest]> {
        None
    }

    /// Drop the next `n` requests (those [`RequestSource::pending`] showed).
    fn skip(&mut self, n: usize) {
        for _ in 0..n {
            if self.next_request().is_none() {
                break;
            }
        }
    }

    /// Does the job end with a flush once all its requests are done (fio's `end_fsync`)? The
    /// run then issues one after its last completion, and reports it as fio does: in the
    /// job's sync latency, not in its count of syncs. Closed loops only (with or without think
    /// time): an open-loop run refuses it.
    fn ends_with_flush(&self) -> bool {
        false
    }
}

/// How many requests ahead [`VecSource`] prefetches.
const REPLAY_PREFETCH_AHEAD: usize = 16;

/// A source replaying requests held in memory.
pub struct VecSource {
    requests: std::vec::IntoIter<HostRequest>,
    total: u64,
}

impl VecSource {
    pub fn new(requests: Vec<HostRequest>) -> Self {
        let total = requests.len() as u64;
        VecSource {
            requests: requests.into_iter(),
            total,
        }
    }
}

impl RequestSource for VecSource {
    fn next_request(&mut self) -> Option<Result<HostRequest, SourceError>> {
        // A long list is far larger than the caches and the simulation between two requests
        // evicts the hardware prefetcher's lines: ask for every line of the request 16 ahead.
        crate::nand::prefetch::prefetch_item(self.requests.as_slice(), REPLAY_PREFETCH_AHEAD);
        self.requests.next().map(Ok)
    }

    fn len_hint(&self) -> Option<u64> {
        Some(self.total)
    }

    fn pending(&self) -> Option<&[HostRequest]> {
        Some(self.requests.as_slice())
    }

    fn skip(&mut self, n: usize) {
        if n > 0 {
            self.requests.nth(n - 1);
        }
    }
}
