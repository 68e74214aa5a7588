//! Timed hardware resources: each die and each channel is busy until some time.
//!
//! This is mechanism, not policy: callers ask for an operation with a ready time and get its
//! completion; the resource never chooses what to do. Operations are reserved in the order the
//! device issues them (first come, first served per resource), so a run is a pure function of its
//! inputs. A die executes one array operation at a time; the bus of a channel carries one
//! transfer at a time; array operations on different dies overlap with each other and with bus
//! transfers. Without cache read, a die's page register is held until its data has left over the
//! bus; with cache read the die may sense the next page while the register drains. Without cache
//! program, data is transferred into a die only when it is idle; with it, the transfer may
//! overlap the die's previous program.

use strength_reduce::StrengthReducedU32;

/// When each die and channel becomes free, and how long each was busy.
#[derive(Debug, Clone)]
pub struct Timeline {
    die_free_ns: Vec<u64>,
    channel_free_ns: Vec<u64>,
    /// Multiply-and-shift division: every reservation looks up its die's channel.
    dies_per_channel: StrengthReducedU32,
    cache_read: bool,
    cache_program: bool,
    /// Array-busy time of each die.
    pub busy_per_die_ns: Vec<u64>,
    /// Total bus-busy time over all channels.
    pub channel_busy_ns: u64,
}

/// Completion of one (possibly multi-plane) operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpTiming {
    /// When the array operation started on the die.
    pub array_start_ns: u64,
    /// When the last byte of the operation has crossed the bus (reads) or the program has
    /// finished (writes).
    pub end_ns: u64,
}

impl Timeline {
    pub fn new(dies: u32, channels: u32, cache_read: bool, cache_program: bool) -> Self {
        Timeline {
            die_free_ns: vec![0; dies as usize],
            channel_free_ns: vec![0; channels as usize],
            dies_per_channel: StrengthReducedU32::new(dies / channels),
            cache_read,
            cache_program,
            busy_per_die_ns: vec![0; dies as usize],
            channel_busy_ns: 0,
        }
    }

    /// When each die is free of the work reserved on it.
    pub fn die_free_slice(&self) -> &[u64] {
        &self.die_free_ns
    }

    /// Make `die` busy until `until_ns` (the event engine hands its dies back this way).
    pub fn set_die_free_ns(&mut self, die: u32, until_ns: u64) {
        self.die_free_ns[die as usize] = until_ns;
    }

    pub fn set_channel_free_ns(&mut self, channel: u32, until_ns: u64) {
        self.channel_free_ns[channel as usize] = until_ns;
    }

    pub fn channel_free_ns(&self, channel: u32) -> u64 {
        self.channel_free_ns[channel as usize]
    }

    #[inline]
    fn channel_of(&self, die: u32) -> usize {
        (die / self.dies_per_channel) as usize
    }

    pub fn die_free_ns(&self, die: u32) -> u64 {
        self.die_free_ns[die as usize]
    }

    /// Array read of `pages` pages (one per plane, so one sensing of `array_ns`) on `die`,
    /// then `pages` bus transfers of `transfer_ns` each (none when `transfer_ns` is 0, as in
    /// copyback). Returns when the last transfer ends.
    #[inline]
    pub fn read(
        &mut self,
        die: u32,
        ready_ns: u64,
        array_ns: u64,
        pages: u32,
        transfer_ns: u64,
    ) -> OpTiming {
        let d = die as usize;
        let start = ready_ns.max(self.die_free_ns[d]);
        let sensed = start + array_ns;
        self.busy_per_die_ns[d] += array_ns;
        if transfer_ns == 0 {
            self.die_free_ns[d] = sensed;
            return OpTiming {
                array_start_ns: start,
                end_ns: sensed,
            };
        }
        let c = self.channel_of(die);
        let mut end = sensed.max(self.channel_free_ns[c]);
        for _ in 0..pages {
            end += transfer_ns;
        }
        self.channel_free_ns[c] = end;
        self.channel_busy_ns += transfer_ns * pages as u64;
        self.die_free_ns[d] = if self.cache_read { sensed } else { end };
        OpTiming {
            array_start_ns: start,
            end_ns: end,
        }
    }

    /// `pages` bus transfers into `die` (none when `transfer_ns` is 0) followed by one program
    /// of `program_ns` (multi-plane when pages > 1). Returns when the program ends.
    #[inline]
    pub fn program(
        &mut self,
        die: u32,
        ready_ns: u64,
        program_ns: u64,
        pages: u32,
        transfer_ns: u64,
    ) -> OpTiming {
        let d = die as usize;
        let mut data_in = ready_ns;
        if transfer_ns > 0 {
            let c = self.channel_of(die);
            let mut start = ready_ns.max(self.channel_free_ns[c]);
            if !self.cache_program {
                start = start.max(self.die_free_ns[d]);
            }
            data_in = start + transfer_ns * pages as u64;
            self.channel_free_ns[c] = data_in;
            self.channel_busy_ns += transfer_ns * pages as u64;
        }
        let start = data_in.max(self.die_free_ns[d]);
        let end = start + program_ns;
        self.die_free_ns[d] = end;
        self.busy_per_die_ns[d] += program_ns;
        OpTiming {
            array_start_ns: start,
            end_ns: end,
        }
    }

    /// Block erase on `die`.
    #[inline]
    pub fn erase(&mut self, die: u32, ready_ns: u64, erase_ns: u64) -> OpTiming {
        let d = die as usize;
        let start = ready_ns.max(self.die_free_ns[d]);
        self.die_free_ns[d] = start + erase_ns;
        self.busy_per_die_ns[d] += erase_ns;
        OpTiming {
            array_start_ns: start,
            end_ns: start + erase_ns,
        }
    }

    pub fn reset(&mut self) {
        self.die_free_ns.iter_mut().for_each(|t| *t = 0);
        self.channel_free_ns.iter_mut().for_each(|t| *t = 0);
        self.busy_per_die_ns.iter_mut().for_each(|t| *t = 0);
        self.channel_busy_ns = 0;
    }

    /// Account array time spent outside this timeline (by the event engine).
    pub fn add_busy(&mut self, die: u32, busy_ns: u64) {
        self.busy_per_die_ns[die as usize] += busy_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_holds_die_until_transfer_without_cache_read() {
        let mut t = Timeline::new(2, 1, false, false);
        let a = t.read(0, 0, 50_000, 1, 5_000);
        assert_eq!(a.end_ns, 55_000);
        // Second die on the same channel overlaps its array read but waits for the bus.
        let b = t.read(1, 0, 50_000, 1, 5_000);
        assert_eq!(b.end_ns, 60_000);
        // Same die again: starts when its register has drained.
        let c = t.read(0, 0, 50_000, 1, 5_000);
        assert_eq!(c.array_start_ns, 55_000);
        assert_eq!(c.end_ns, 110_000);
    }

    #[test]
    fn cache_read_frees_die_at_end_of_sensing() {
        let mut t = Timeline::new(1, 1, true, false);
        t.read(0, 0, 50_000, 1, 5_000);
        let c = t.read(0, 0, 50_000, 1, 5_000);
        assert_eq!(c.array_start_ns, 50_000);
    }

    #[test]
    fn program_transfers_then_programs_and_multiplane_shares_one_program() {
        let mut t = Timeline::new(1, 1, false, false);
        let p = t.program(0, 1_000, 200_000, 2, 5_000);
        assert_eq!(p.array_start_ns, 11_000);
        assert_eq!(p.end_ns, 211_000);
        let e = t.erase(0, 0, 1_500_000);
        assert_eq!(e.end_ns, 1_711_000);
    }
}
