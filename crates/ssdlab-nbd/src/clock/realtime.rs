//! Real-time clock: simulated nanosecond 0 is the instant the server started.

use super::{Clock, ConnectionClock};
use std::time::{Duration, Instant};

pub struct Realtime {
    epoch: Instant,
}

impl Realtime {
    pub fn starting_now() -> Self {
        Realtime {
            epoch: Instant::now(),
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

    fn deadline(&self, complete_ns: u64) -> Option<Instant> {
        Some(self.epoch + Duration::from_nanos(complete_ns))
    }

    fn replied(&self, _connection: &mut ConnectionClock, _complete_ns: u64) {}
}
