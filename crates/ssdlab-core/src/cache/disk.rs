//! A hard disk behind the SSD cache: seek by distance, rotation, transfer, one actuator with its
//! own first-come-first-served queue, and (optionally) the blocks' data.
//!
//! Seek time grows with the square root of the distance in cylinders (the head accelerates
//! over half the distance and decelerates over the other; Ruemmler & Wilkes, "An introduction
//! to disk drive modeling", 1994): seek(d) = min + (max − min)·√(d / (cylinders − 1)) for
//! d > 0, zero for d = 0. Rotation is positional: the platter turns at a fixed speed from time
//! 0, a block sits at a fixed angle on its track, and the head waits until that angle passes
//! under it after the seek. Transfer is bytes over the media rate. The disk serves one request
//! at a time in arrival order (its queue is the busy-until time of the actuator).

use super::divisor::Divisor;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The `disk` part of a cache configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiskConfig {
    pub capacity_bytes: u64,
    pub rpm: u32,
    /// Track-to-track (one cylinder) and full-stroke seek.
    pub seek_min_ns: u64,
    pub seek_max_ns: u64,
    /// Blocks of `block_bytes` per track (all tracks alike: no zoning).
    pub blocks_per_track: u32,
    /// Tracks per cylinder (surfaces).
    pub heads: u32,
    pub transfer_mbps: u32,
    /// Controller overhead per request.
    pub overhead_ns: u64,
}

impl Default for DiskConfig {
    fn default() -> Self {
        // A 10k rpm enterprise disk: about 5 ms per random 4 KiB access (2 ms seek on average,
        // 3 ms rotation), 150 MB/s on the media.
        DiskConfig {
            capacity_bytes: 16 << 30,
            rpm: 10_000,
            seek_min_ns: 300_000,
            seek_max_ns: 4_000_000,
            blocks_per_track: 256,
            heads: 4,
            transfer_mbps: 150,
            overhead_ns: 50_000,
        }
    }
}

/// Counters of the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DiskCounters {
    pub reads: u64,
    pub writes: u64,
    pub blocks_read: u64,
    pub blocks_written: u64,
    pub busy_ns: u64,
    /// Time requests waited in the disk's queue.
    pub queue_ns: u64,
}

/// The disk: head position, actuator queue, counters and the blocks' data.
#[derive(Debug, Clone)]
pub struct Disk {
    config: DiskConfig,
    block_bytes: u32,
    cylinders: u64,
    blocks_per_cylinder: Divisor,
    blocks_per_track: Divisor,
    rotation_ns: u64,
    /// The transfer of one block (most accesses).
    block_transfer_ns: u64,
    cylinder: u64,
    free_ns: u64,
    counters: DiskCounters,
    data: Option<HashMap<u64, Box<[u8]>>>,
}

impl Disk {
    pub fn new(config: &DiskConfig, block_bytes: u32, store_data: bool) -> Disk {
        let blocks = config.capacity_bytes / block_bytes as u64;
        let blocks_per_cylinder = config.blocks_per_track as u64 * config.heads as u64;
        Disk {
            config: config.clone(),
            block_bytes,
            cylinders: blocks.div_ceil(blocks_per_cylinder).max(1),
            blocks_per_cylinder: Divisor::new(blocks_per_cylinder),
            blocks_per_track: Divisor::new(config.blocks_per_track as u64),
            rotation_ns: 60_000_000_000 / config.rpm as u64,
            block_transfer_ns: (block_bytes as u64 * 1000).div_ceil(config.transfer_mbps as u64),
            cylinder: 0,
            free_ns: 0,
            counters: DiskCounters::default(),
            data: store_data.then(HashMap::new),
        }
    }

    pub fn blocks(&self) -> u64 {
        self.config.capacity_bytes / self.block_bytes as u64
    }

    /// Seek time over `distance` cylinders.
    pub fn seek_ns(&self, distance: u64) -> u64 {
        if distance == 0 {
            return 0;
        }
        let span = (self.cylinders - 1).max(1) as f64;
        let c = &self.config;
        c.seek_min_ns
            + ((c.seek_max_ns - c.seek_min_ns) as f64 * (distance as f64 / span).sqrt()) as u64
    }

    /// Wait from `at_ns` until the start of `block` passes under the head.
    pub fn rotation_wait_ns(&self, block: u64, at_ns: u64) -> u64 {
        let target = self
            .blocks_per_track
            .div(self.blocks_per_track.rem(block) * self.rotation_ns);
        let angle = at_ns % self.rotation_ns;
        (target + self.rotation_ns - angle) % self.rotation_ns
    }

    pub fn transfer_ns(&self, blocks: u64) -> u64 {
        if blocks == 1 {
            return self.block_transfer_ns;
        }
        (blocks * self.block_bytes as u64 * 1000).div_ceil(self.config.transfer_mbps as u64)
    }

    /// Serve an access of `blocks` blocks from `block` arriving at `arrival_ns`: returns its
    /// completion time.
    pub fn access(&mut self, block: u64, blocks: u64, write: bool, arrival_ns: u64) -> u64 {
        let start = arrival_ns.max(self.free_ns);
        let cylinder = self.blocks_per_cylinder.div(block);
        let mut t =
            start + self.config.overhead_ns + self.seek_ns(cylinder.abs_diff(self.cylinder));
        t += self.rotation_wait_ns(block, t);
        t += self.transfer_ns(blocks);
        self.cylinder = self
            .blocks_per_cylinder
            .div(block + blocks.saturating_sub(1));
        self.free_ns = t;
        let c = &mut self.counters;
        c.queue_ns += start - arrival_ns;
        c.busy_ns += t - start;
        if write {
            c.writes += 1;
            c.blocks_written += blocks;
        } else {
            c.reads += 1;
            c.blocks_read += blocks;
        }
        t
    }

    /// Data mode: the block's content (zeros if never written).
    pub fn read_data(&self, block: u64, out: &mut [u8]) {
        match self.data.as_ref().and_then(|d| d.get(&block)) {
            Some(bytes) => out.copy_from_slice(bytes),
            None => out.fill(0),
        }
    }

    pub fn write_data(&mut self, block: u64, bytes: &[u8]) {
        if let Some(d) = &mut self.data {
            d.insert(block, bytes.into());
        }
    }

    /// When the actuator is free (the end of the last access).
    pub fn free_ns(&self) -> u64 {
        self.free_ns
    }

    pub fn counters(&self) -> DiskCounters {
        self.counters
    }

    pub fn stores_data(&self) -> bool {
        self.data.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_is_overhead_seek_rotation_and_transfer() {
        let cfg = DiskConfig::default();
        let mut disk = Disk::new(&cfg, 4096, false);
        let rotation = 6_000_000; // 10k rpm
        assert_eq!(disk.rotation_ns, rotation);
        // Block 0 at time 0 on cylinder 0: no seek, the block is under the head now.
        let t = disk.access(0, 1, false, 0);
        let xfer = (4096u64 * 1000).div_ceil(150);
        assert_eq!(t, rotation + xfer);
        // The full stroke costs the maximum seek.
        let last = disk.blocks() - 1;
        assert_eq!(disk.seek_ns(disk.cylinders - 1), cfg.seek_max_ns);
        assert_eq!(
            disk.seek_ns(1),
            cfg.seek_min_ns
                + ((cfg.seek_max_ns - cfg.seek_min_ns) as f64
                    * (1.0 / (disk.cylinders - 1) as f64).sqrt()) as u64
        );
        // A request arriving while the disk is busy waits in its queue.
        let done = disk.access(last, 1, true, 0);
        let seek_end = t + cfg.overhead_ns + cfg.seek_max_ns;
        let wait = disk.rotation_wait_ns(last, seek_end);
        assert_eq!(done, seek_end + wait + xfer);
        assert_eq!(disk.counters().queue_ns, t);
        assert!(wait < rotation);
    }
}
