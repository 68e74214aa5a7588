//! NAND hardware: geometry and addressing, the timed resources (dies and channels), and the
//! optional page-data store of data-driven mode.
//!
//! Physical page numbers (`ppa`, u32) are laid out plane-major: plane → block → page, and planes
//! are numbered channel-major (channel → chip → die → plane), so a block's pages and a plane's
//! blocks are contiguous ranges. Write striping uses a separate CWDP order (channel first, then
//! chip, die, plane, as MQSim's default plane-allocation scheme) so that consecutive pages of a
//! frontier land on different channels.

pub mod die;
pub mod prefetch;
pub mod store;
pub mod table;
pub mod timing;

use crate::config::{Config, Derived};
use strength_reduce::StrengthReducedU32;

/// Sentinel for "no page / no block".
pub const NONE: u32 = u32::MAX;

/// Geometry with the address arithmetic every layer shares.
#[derive(Debug, Clone)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_size_bytes: u32,
    pub bits_per_cell: u32,
    pub dies: u32,
    pub planes: u32,
    pub blocks: u32,
    pub physical_pages: u64,
    pub dies_per_channel: u32,
    /// Planes in CWDP order: position i of a write frontier's stripe.
    pub stripe_order: Vec<u32>,
    /// Die of every block: one table look-up instead of three divisions on the hot path.
    block_die: Vec<u32>,
    /// The divisors of the address arithmetic as multiply-and-shift: every GC move and host
    /// page divides by them, and a hardware division costs tens of cycles.
    div: Divisors,
}

#[derive(Debug, Clone, Copy)]
struct Divisors {
    pages_per_block: StrengthReducedU32,
    blocks_per_plane: StrengthReducedU32,
    planes_per_die: StrengthReducedU32,
    dies_per_channel: StrengthReducedU32,
    bits_per_cell: StrengthReducedU32,
}

impl Geometry {
    pub fn new(config: &Config, derived: &Derived) -> Geometry {
        let g = &config.geometry;
        let mut stripe_order = Vec::with_capacity(derived.planes as usize);
        for plane in 0..g.planes_per_die {
            for die in 0..g.dies_per_chip {
                for chip in 0..g.chips_per_channel {
                    for channel in 0..g.channels {
                        let die_index =
                            (channel * g.chips_per_channel + chip) * g.dies_per_chip + die;
                        stripe_order.push(die_index * g.planes_per_die + plane);
                    }
                }
            }
        }
        let block_die = (0..derived.blocks)
            .map(|block| block / g.blocks_per_plane / g.planes_per_die)
            .collect();
        let dies_per_channel = g.chips_per_channel * g.dies_per_chip;
        Geometry {
            block_die,
            div: Divisors {
                pages_per_block: StrengthReducedU32::new(g.pages_per_block),
                blocks_per_plane: StrengthReducedU32::new(g.blocks_per_plane),
                planes_per_die: StrengthReducedU32::new(g.planes_per_die),
                dies_per_channel: StrengthReducedU32::new(dies_per_channel),
                bits_per_cell: StrengthReducedU32::new(derived.bits_per_cell),
            },
            channels: g.channels,
            chips_per_channel: g.chips_per_channel,
            dies_per_chip: g.dies_per_chip,
            planes_per_die: g.planes_per_die,
            blocks_per_plane: g.blocks_per_plane,
            pages_per_block: g.pages_per_block,
            page_size_bytes: g.page_size_bytes,
            bits_per_cell: derived.bits_per_cell,
            dies: derived.dies,
            planes: derived.planes,
            blocks: derived.blocks,
            physical_pages: derived.physical_pages,
            dies_per_channel,
            stripe_order,
        }
    }

    #[inline]
    pub fn block_of(&self, ppa: u32) -> u32 {
        ppa / self.div.pages_per_block
    }
    #[inline]
    pub fn page_in_block(&self, ppa: u32) -> u32 {
        ppa % self.div.pages_per_block
    }
    /// Where physical page `ppa` is: (die, plane, block, page in block), from one division
    /// by the block size.
    #[inline]
    pub fn locate(&self, ppa: u32) -> (u32, u32, u32, u32) {
        let block = self.block_of(ppa);
        let page_in_block = ppa - block * self.pages_per_block;
        let plane = self.plane_of_block(block);
        (self.die_of_plane(plane), plane, block, page_in_block)
    }
    #[inline]
    pub fn first_page(&self, block: u32) -> u32 {
        block * self.pages_per_block
    }
    /// The physical pages of `block`.
    #[inline]
    pub fn block_pages(&self, block: u32) -> std::ops::Range<u32> {
        let first = self.first_page(block);
        first..first + self.pages_per_block
    }
    #[inline]
    pub fn plane_of_block(&self, block: u32) -> u32 {
        block / self.div.blocks_per_plane
    }
    #[inline]
    pub fn plane_of(&self, ppa: u32) -> u32 {
        self.plane_of_block(self.block_of(ppa))
    }
    #[inline]
    pub fn die_of_plane(&self, plane: u32) -> u32 {
        plane / self.div.planes_per_die
    }
    #[inline]
    pub fn die_of(&self, ppa: u32) -> u32 {
        self.block_die[self.block_of(ppa) as usize]
    }
    #[inline]
    pub fn die_of_block(&self, block: u32) -> u32 {
        self.block_die[block as usize]
    }
    #[inline]
    pub fn channel_of_die(&self, die: u32) -> u32 {
        die / self.div.dies_per_channel
    }
    /// Page type (0 = LSB) of a page: pages of a wordline are consecutive in a block.
    #[inline]
    pub fn page_type(&self, ppa: u32) -> u32 {
        // Blocks hold whole wordlines, so ppa % bits equals (ppa % pages_per_block) % bits.
        // (One bit per cell is a power of two: a mask of 0, no division.)
        ppa % self.div.bits_per_cell
    }
    /// Wordline index, unique over the device.
    #[inline]
    pub fn wordline(&self, ppa: u32) -> u32 {
        ppa / self.div.bits_per_cell
    }
    /// Blocks of one plane as a global block range.
    pub fn plane_blocks(&self, plane: u32) -> std::ops::Range<usize> {
        let start = (plane * self.blocks_per_plane) as usize;
        start..start + self.blocks_per_plane as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addressing_round_trips_and_stripes_channel_first() {
        let cfg = Config::from_toml(
            "[geometry]\nchannels=2\nchips_per_channel=2\ndies_per_chip=2\nplanes_per_die=2\nblocks_per_plane=128\npages_per_block=48\n",
            "t",
            &[],
        )
        .unwrap();
        let g = Geometry::new(&cfg, &cfg.derived());
        assert_eq!(g.planes, 16);
        assert_eq!(g.stripe_order.len(), 16);
        let channels: Vec<u32> = g
            .stripe_order
            .iter()
            .take(4)
            .map(|&p| g.channel_of_die(g.die_of_plane(p)))
            .collect();
        assert_eq!(channels, vec![0, 1, 0, 1]);
        let mut sorted = g.stripe_order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..16).collect::<Vec<_>>());
        let ppa = g.first_page(5 * 128 + 3) + 7;
        assert_eq!(g.plane_of(ppa), 5);
        assert_eq!(g.die_of(ppa), 2);
        assert_eq!(g.page_type(ppa), 1);
    }

    #[test]
    fn address_arithmetic_equals_plain_division_for_any_divisors() {
        // Odd and power-of-two sizes, one and three bits per cell: the multiply-and-shift
        // forms must agree with `/` and `%` on every page, the last one included.
        for (cell, bits) in [("slc", 1), ("tlc", 3)] {
            let cfg = Config::from_toml(
                &format!(
                    "[geometry]\nchannels=3\nchips_per_channel=1\ndies_per_chip=3\n\
                     planes_per_die=3\nblocks_per_plane=37\npages_per_block=1152\n\
                     over_provisioning=0.2\n[cell]\ntype=\"{cell}\"\n"
                ),
                "t",
                &[],
            )
            .unwrap();
            let g = Geometry::new(&cfg, &cfg.derived());
            assert_eq!(g.bits_per_cell, bits, "{cell}");
            let pages = g.physical_pages as u32;
            for ppa in (0..pages).step_by(7).chain([pages - 1]) {
                let block = ppa / 1152;
                assert_eq!(g.block_of(ppa), block);
                assert_eq!(g.page_in_block(ppa), ppa % 1152);
                assert_eq!(g.plane_of(ppa), block / 37);
                assert_eq!(g.die_of(ppa), block / 37 / 3);
                assert_eq!(g.channel_of_die(g.die_of(ppa)), block / 37 / 3 / 3);
                assert_eq!(g.page_type(ppa), ppa % bits, "{cell}");
                assert_eq!(g.wordline(ppa), ppa / bits, "{cell}");
                let (die, plane, b, page) = g.locate(ppa);
                assert_eq!(
                    (die, plane, b, page),
                    (block / 37 / 3, block / 37, block, ppa % 1152)
                );
            }
        }
    }
}
