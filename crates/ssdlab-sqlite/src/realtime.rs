//! Pacing a device to the wall clock, as a real-time emulator does (the SQLite coupling's
//! `cpu="realtime"`): device time `origin_device + (wall - origin_wall)`. Before a request the
//! device's clock moves up to the wall time (the host's time since its last request passes on
//! the device too); after it, the host waits until the wall clock reaches the request's
//! completion. So at every request the simulated clock equals the wall clock since the origin:
//! the host's work between requests (SQLite, Python, the simulation's own cost) is idle device
//! time. The origin is taken at the first request, and again whenever something else moved the
//! device's clock since the last one (a reset of the measurements, another connection's
//! requests), so that the pacing never waits for time it did not see pass. The caller reads
//! the clocks and does the waiting; this is the arithmetic.

/// One host's pacing state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pacer {
    origin_wall_ns: u64,
    origin_device_ns: u64,
    last_device_ns: Option<u64>,
    /// Wall time spent waiting for completions.
    pub waited_ns: u64,
    /// Requests paced.
    pub requests: u64,
}

impl Pacer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Before a request, with the device's clock and the wall clock now: the device time to
    /// advance to, if any.
    pub fn issue(&mut self, device_now: u64, wall_now: u64) -> Option<u64> {
        if self.last_device_ns != Some(device_now) {
            self.origin_wall_ns = wall_now;
            self.origin_device_ns = device_now;
            return None;
        }
        let target = self.origin_device_ns + wall_now.saturating_sub(self.origin_wall_ns);
        (target > device_now).then_some(target)
    }

    /// After a request, with the device's clock (the request's completion) and the wall clock
    /// now: the wall time to wait until, if it is still ahead.
    pub fn complete(&mut self, device_now: u64, wall_now: u64) -> Option<u64> {
        self.requests += 1;
        self.last_device_ns = Some(device_now);
        let wake = self.origin_wall_ns + device_now.saturating_sub(self.origin_device_ns);
        if wake <= wall_now {
            return None;
        }
        self.waited_ns += wake - wall_now;
        Some(wake)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_time_follows_wall_time_from_the_origin() {
        let mut p = Pacer::new();
        // First request: the origin (device 1,000 at wall 50,000); nothing to advance.
        assert_eq!(p.issue(1_000, 50_000), None);
        // It completes at device 3,000: wait until wall 52,000.
        assert_eq!(p.complete(3_000, 50_500), Some(52_000));
        assert_eq!(p.waited_ns, 1_500);
        // The host then works until wall 60,000: the device's clock moves to 11,000.
        assert_eq!(p.issue(3_000, 60_000), Some(11_000));
        // Completed at 12,000 while the wall clock is already at 70,000: no wait.
        assert_eq!(p.complete(12_000, 70_000), None);
        // Something else moved the device's clock: a new origin, nothing advanced.
        assert_eq!(p.issue(20_000, 80_000), None);
        assert_eq!(p.complete(20_500, 80_100), Some(80_500));
        assert_eq!(p.requests, 3);
    }
}
