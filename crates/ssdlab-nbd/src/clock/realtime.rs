//! Real-time clock: simulated nanosecond 0 is the instant the server started, and a reply is
//! due when the model says its request completes.
//!
//! A client measures more than the model: the reply's delivery, which on a virtual machine
//! means waking an idle vCPU (tens to hundreds of microseconds here), its own processing, and
//! the delivery of its next request. The server spins while it waits for requests, so its
//! side adds little; the rest it makes up for by sending each reply that much early. The
//! amount is measured per connection: whenever a reply leaves a connection with nothing
//! outstanding, the gap until the client's next request is a sample of that overhead, and a
//! running lower quartile of the samples is the compensation (`--compensate auto`), so that
//! the client's median latency is the model's (its mean carries the machine's rare long
//! wake-ups). The quartile, not the median, because a gap also holds the client's processing,
//! which its latency does not. A fixed amount can be given instead (0 turns it off). Replies
//! never leave before their request arrived.

use super::{Clock, ConnectionClock};
use std::time::{Duration, Instant};

pub struct Realtime {
    epoch: Instant,
    fixed_compensation_ns: Option<u64>,
}

impl Realtime {
    pub fn starting_now(fixed_compensation_ns: Option<u64>) -> Self {
        Realtime {
            epoch: Instant::now(),
            fixed_compensation_ns,
        }
    }
}

impl Clock for Realtime {
    fn name(&self) -> &'static str {
        "realtime"
    }

    fn issue_ns(&self, _connection: &mut ConnectionClock, received: Instant) -> u64 {
        received.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    fn deadline(&self, connection: &mut ConnectionClock, complete_ns: u64) -> Option<Instant> {
        let compensation = self
            .fixed_compensation_ns
            .or(connection.overhead_estimate_ns)
            .unwrap_or(0);
        connection.compensation_sum_ns += compensation;
        connection.compensated_replies += 1;
        let due = self.epoch + Duration::from_nanos(complete_ns);
        Some(
            due.checked_sub(Duration::from_nanos(compensation))
                .unwrap_or(due),
        )
    }

    fn holds_replies(&self) -> bool {
        true
    }

    fn replied(&self, _connection: &mut ConnectionClock, _complete_ns: u64) {}

    fn fixed_compensation_ns(&self) -> Option<u64> {
        self.fixed_compensation_ns
    }
}
