//! How simulated time relates to wall-clock time: the one replaceable policy of the emulator.
//!
//! - [`Realtime`]: simulated time is wall time since the server started. A request is issued at
//!   the moment it arrives and its reply is held until the wall-clock instant of its modelled
//!   completion, so that a client measures the modelled latency.
//! - [`Virtual`]: replies go out as soon as the model has computed them; simulated time advances
//!   as a closed loop would, each new request on a connection taking the slot of the
//!   earliest-completed reply the client has already received.

mod realtime;
mod virtual_time;

pub use realtime::Realtime;
pub use virtual_time::Virtual;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Per-connection clock state (only the virtual clock uses it).
#[derive(Debug, Default)]
pub struct ConnectionClock {
    /// Completion times of replies sent whose queue slot no request has taken yet.
    pub freed_slots: BinaryHeap<Reverse<u64>>,
}

pub trait Clock: Send + Sync {
    /// The name users pick it by (`--clock`).
    fn name(&self) -> &'static str;

    /// Simulated issue time of a request received at `received` on a connection.
    fn issue_ns(&self, connection: &mut ConnectionClock, received: Instant) -> u64;

    /// When the reply to a request completing at `complete_ns` may go out; `None`: at once.
    fn deadline(&self, complete_ns: u64) -> Option<Instant>;

    /// The reply of a request that completed at `complete_ns` went out.
    fn replied(&self, connection: &mut ConnectionClock, complete_ns: u64);
}

/// The clock named `name` (`realtime` or `virtual`), starting now.
pub fn by_name(name: &str) -> Option<Box<dyn Clock>> {
    match name {
        "realtime" => Some(Box::new(Realtime::starting_now())),
        "virtual" => Some(Box::new(Virtual)),
        _ => None,
    }
}
