//! Virtual clock: as fast as possible, simulated time advancing as a closed loop would.
//!
//! A client keeps a number of requests in flight and sends a new one when a reply arrives. So a
//! request that arrives while the client holds replies it has not yet "used" is issued at the
//! earliest of their completion times; the first requests of a connection are issued at the
//! device's current time (the device raises any earlier issue time to its clock).

use super::{Clock, ConnectionClock};
use std::cmp::Reverse;
use std::time::Instant;

pub struct Virtual;

impl Clock for Virtual {
    fn name(&self) -> &'static str {
        "virtual"
    }

    fn issue_ns(&self, connection: &mut ConnectionClock, _received: Instant) -> u64 {
        connection
            .freed_slots
            .pop()
            .map_or(0, |Reverse(complete_ns)| complete_ns)
    }

    fn deadline(&self, _connection: &mut ConnectionClock, _complete_ns: u64) -> Option<Instant> {
        None
    }

    fn holds_replies(&self) -> bool {
        false
    }

    fn replied(&self, connection: &mut ConnectionClock, complete_ns: u64) {
        connection.freed_slots.push(Reverse(complete_ns));
    }
}
