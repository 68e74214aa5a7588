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
use std::time::{Duration, Instant};

/// Per-connection clock state.
#[derive(Debug, Default)]
pub struct ConnectionClock {
    /// Virtual: completion times of replies sent whose queue slot no request has taken yet.
    pub freed_slots: BinaryHeap<Reverse<u64>>,
    /// Real time: this connection's estimate (running lower quartile of the gaps) of the
    /// transport share of a client's round trip (reply delivery and its next request's
    /// delivery), ns.
    pub overhead_estimate_ns: Option<u64>,
    /// Real time: when the last reply left with nothing else outstanding.
    pub idle_since: Option<Instant>,
    /// Real time: sum and count of the compensation applied, for the summary.
    pub compensation_sum_ns: u64,
    pub compensated_replies: u64,
}

/// Only a gap shorter than this between a reply and the next request is client overhead;
/// a longer one is the client thinking.
const MAX_OVERHEAD_GAP: Duration = Duration::from_millis(2);
/// Steps of the running lower quartile of the gaps, in ns: up by one step for a longer gap,
/// down by three for a shorter one, which settles where a quarter of the gaps fall below.
/// A quantile rather than the mean: on a virtual machine a few wake-ups take milliseconds,
/// and one of them would shift every reply of the next few hundred requests. The lower
/// quartile rather than the median: a gap also holds the client's own processing between a
/// reply and its next request, which is no part of the latency it measures and grows on a
/// loaded machine (seen: a median of 181 us against 65 us unloaded, sending writes 36 us
/// early at the median).
const OVERHEAD_STEP_UP_NS: u64 = 500;
const OVERHEAD_STEP_DOWN_NS: u64 = 3 * OVERHEAD_STEP_UP_NS;

impl ConnectionClock {
    /// The connection went idle (its last outstanding reply left) at `at`.
    pub fn went_idle(&mut self, at: Instant) {
        self.idle_since = Some(at);
    }

    /// A request arrived at `at`: if the connection was idle, the gap since its last reply is
    /// returned (in ns), and if short it is one sample of the client's round-trip overhead.
    pub fn request_arrived(&mut self, at: Instant) -> Option<u64> {
        let since = self.idle_since.take()?;
        let gap = at.saturating_duration_since(since);
        let gap_ns = gap.as_nanos() as u64;
        if gap > MAX_OVERHEAD_GAP {
            return Some(gap_ns);
        }
        // A stochastic-approximation quantile: step towards each sample, never past it.
        self.overhead_estimate_ns = Some(match self.overhead_estimate_ns {
            None => gap_ns,
            Some(old) if gap_ns > old => old + OVERHEAD_STEP_UP_NS.min(gap_ns - old),
            Some(old) => old - OVERHEAD_STEP_DOWN_NS.min(old - gap_ns),
        });
        Some(gap_ns)
    }
}

pub trait Clock: Send + Sync {
    /// The name users pick it by (`--clock`).
    fn name(&self) -> &'static str;

    /// Simulated issue time of a request received at `received` on a connection.
    fn issue_ns(&self, connection: &mut ConnectionClock, received: Instant) -> u64;

    /// When the reply to a request completing at `complete_ns` may go out; `None`: at once.
    fn deadline(&self, connection: &mut ConnectionClock, complete_ns: u64) -> Option<Instant>;

    /// Whether replies wait for deadlines.
    fn holds_replies(&self) -> bool;

    /// The reply of a request that completed at `complete_ns` went out.
    fn replied(&self, connection: &mut ConnectionClock, complete_ns: u64);

    /// The fixed compensation (real time), or `None` when it is measured per connection.
    fn fixed_compensation_ns(&self) -> Option<u64> {
        Some(0)
    }
}

/// The clock named `name` (`realtime` or `virtual`), starting now. `compensation_ns` fixes
/// the real-time clock's compensation; `None` measures it per connection.
pub fn by_name(name: &str, compensation_ns: Option<u64>) -> Option<Box<dyn Clock>> {
    match name {
        "realtime" => Some(Box::new(Realtime::starting_now(compensation_ns))),
        "virtual" => Some(Box::new(Virtual)),
        _ => None,
    }
}
