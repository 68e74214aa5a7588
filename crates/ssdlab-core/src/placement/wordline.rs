//! The wordline-aware write scheduler of melded pages (Arpith K., Gopinath): writes that carry
//! a read-group hint fill the LSB, CSB and MSB pages of one wordline with one group, so that a
//! later large read of the group senses each wordline once (a melded read), and a group's
//! consecutive wordlines stripe over the planes in channel-way-die-plane order, so the read
//! has every channel and die to itself.
//!
//! A group opens a wordline on the next plane in stripe order whose frontier (of the write's
//! placement handle) is at a wordline boundary and that no other group holds; its following
//! mapping units go there until the wordline is full, then it opens the next. The plane is held
//! for the group meanwhile. Data is placed as it arrives rather than buffered in the
//! controller: a wordline whose group stops writing is released after
//! `placement.read_group_timeout_ns` without a write of the group, and its remaining pages
//! then take normal placement. A wordline whose frontier moved under the group (an unhinted
//! write chose the plane) is given up too. With every plane held or unaligned, the write falls
//! back to normal placement (counted).

use crate::nand::Geometry;
use std::collections::BTreeMap;

const FREE: u64 = u64::MAX;

#[derive(Debug, Clone, Copy)]
struct OpenWordline {
    plane: u32,
    /// Units of the wordline this group still fills.
    units_left: u32,
    last_write_ns: u64,
}

/// Counters of the read-group scheduler, reported in `ssd.read_groups`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadGroupCounters {
    /// Mapping units placed into a group's wordline.
    pub units_placed: u64,
    /// Wordlines opened for a group.
    pub wordlines_opened: u64,
    /// Units that found no free aligned plane and took normal placement.
    pub units_fallback: u64,
    /// Open wordlines released by the timeout or given up because their frontier moved.
    pub wordlines_abandoned: u64,
}

pub struct ReadGroupPlacer {
    order: Vec<u32>,
    cursor: usize,
    units_per_wordline: u32,
    timeout_ns: u64,
    /// By group id: the wordline it is filling (ordered map: iteration order is fixed).
    open: BTreeMap<u64, OpenWordline>,
    /// Per plane: the group holding it, or `FREE`.
    holder: Vec<u64>,
    counters: ReadGroupCounters,
}

impl ReadGroupPlacer {
    pub fn new(geo: &Geometry, units_per_page: u32, timeout_ns: u64) -> Self {
        ReadGroupPlacer {
            order: geo.stripe_order.clone(),
            cursor: 0,
            units_per_wordline: geo.bits_per_cell.max(1) * units_per_page,
            timeout_ns,
            open: BTreeMap::new(),
            holder: vec![FREE; geo.planes as usize],
            counters: ReadGroupCounters::default(),
        }
    }

    pub fn counters(&self) -> ReadGroupCounters {
        self.counters
    }

    pub fn reset_counters(&mut self) {
        self.counters = ReadGroupCounters::default();
    }

    /// The plane for the next mapping unit of `group`, or `None` for normal placement.
    /// `frontier_units(plane)` is how many units the write's handle has in its open block on
    /// that plane (`None`: unknown, taken as aligned).
    pub fn place(
        &mut self,
        group: u64,
        now_ns: u64,
        frontier_units: impl Fn(u32) -> Option<u32>,
    ) -> Option<u32> {
        self.expire(now_ns);
        let upw = self.units_per_wordline;
        if let Some(o) = self.open.get(&group).copied() {
            let expected = upw - o.units_left;
            let at = frontier_units(o.plane).map_or(expected, |u| u % upw);
            if at == expected {
                self.take_unit(group, o, now_ns);
                return Some(o.plane);
            }
            self.release(group);
            self.counters.wordlines_abandoned += 1;
        }
        let n = self.order.len();
        for k in 0..n {
            let position = (self.cursor + k) % n;
            let plane = self.order[position];
            if self.holder[plane as usize] != FREE
                || frontier_units(plane).is_some_and(|u| u % upw != 0)
            {
                continue;
            }
            self.cursor = (position + 1) % n;
            self.counters.wordlines_opened += 1;
            let o = OpenWordline {
                plane,
                units_left: upw,
                last_write_ns: now_ns,
            };
            self.holder[plane as usize] = group;
            self.open.insert(group, o);
            self.take_unit(group, o, now_ns);
            return Some(plane);
        }
        self.counters.units_fallback += 1;
        None
    }

    fn take_unit(&mut self, group: u64, mut o: OpenWordline, now_ns: u64) {
        self.counters.units_placed += 1;
        o.units_left -= 1;
        o.last_write_ns = now_ns;
        if o.units_left == 0 {
            self.release(group);
        } else {
            self.open.insert(group, o);
        }
    }

    fn release(&mut self, group: u64) {
        if let Some(o) = self.open.remove(&group) {
            self.holder[o.plane as usize] = FREE;
        }
    }

    /// Release the wordlines whose group has not written for the timeout.
    fn expire(&mut self, now_ns: u64) {
        let timeout = self.timeout_ns;
        let stale: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, o)| now_ns.saturating_sub(o.last_write_ns) > timeout)
            .map(|(&g, _)| g)
            .collect();
        for g in stale {
            self.release(g);
            self.counters.wordlines_abandoned += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn tlc(channels: u32) -> Geometry {
        let text = format!(
            "[geometry]\nchannels={channels}\nchips_per_channel=2\ndies_per_chip=1\nplanes_per_die=1\n\
             blocks_per_plane=64\npages_per_block=48\nover_provisioning=0.3\n[cell]\ntype=\"tlc\"\n"
        );
        let cfg = Config::from_toml(&text, "t", &[]).unwrap();
        Geometry::new(&cfg, &cfg.derived())
    }

    /// Simulated frontiers: units written per plane.
    fn run(
        placer: &mut ReadGroupPlacer,
        frontier: &mut [u32],
        group: u64,
        now: u64,
    ) -> Option<u32> {
        let f = frontier.to_vec();
        let plane = placer.place(group, now, |p| Some(f[p as usize]))?;
        frontier[plane as usize] += 1;
        Some(plane)
    }

    #[test]
    fn a_group_fills_whole_wordlines_striped_channel_first() {
        let geo = tlc(2);
        let mut placer = ReadGroupPlacer::new(&geo, 1, 1_000);
        let mut frontier = vec![0; geo.planes as usize];
        let planes: Vec<u32> = (0..12)
            .map(|_| run(&mut placer, &mut frontier, 7, 0).unwrap())
            .collect();
        let wordlines: Vec<u32> = planes
            .chunks(3)
            .map(|c| {
                assert!(c.iter().all(|&p| p == c[0]), "{planes:?}");
                c[0]
            })
            .collect();
        assert_eq!(wordlines, geo.stripe_order[..4].to_vec());
        assert!(frontier.iter().all(|u| u % 3 == 0));
    }

    #[test]
    fn interleaved_groups_keep_their_own_wordlines() {
        let geo = tlc(2);
        let mut placer = ReadGroupPlacer::new(&geo, 1, 1_000);
        let mut frontier = vec![0; geo.planes as usize];
        let mut by_group: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for i in 0..24u64 {
            let g = i % 3;
            by_group
                .entry(g)
                .or_default()
                .push(run(&mut placer, &mut frontier, g, 0).unwrap());
        }
        for planes in by_group.values() {
            for c in planes.chunks(3) {
                assert!(c.iter().all(|&p| p == c[0]), "{by_group:?}");
            }
        }
    }

    #[test]
    fn timeout_releases_a_partial_wordline_and_busy_planes_fall_back() {
        let geo = tlc(1); // 2 planes
        let mut placer = ReadGroupPlacer::new(&geo, 1, 1_000);
        let mut frontier = vec![0; 2];
        let a = run(&mut placer, &mut frontier, 1, 0).unwrap();
        let b = run(&mut placer, &mut frontier, 2, 0).unwrap();
        assert_ne!(a, b);
        // Both planes are held by partial wordlines: group 3 takes normal placement.
        assert_eq!(run(&mut placer, &mut frontier, 3, 10), None);
        assert_eq!(placer.counters().units_fallback, 1);
        // Group 1 stops writing; past the timeout its plane is free again, but its frontier is
        // not at a wordline boundary, so a new group waits for group 2's plane... which is held.
        assert_eq!(run(&mut placer, &mut frontier, 3, 2_000), None);
        assert_eq!(placer.counters().wordlines_abandoned, 2);
        // Normal placement fills plane a's wordline; then it is aligned and free.
        frontier[a as usize] += 2;
        frontier[b as usize] += 2;
        assert!(run(&mut placer, &mut frontier, 3, 2_100).is_some());
    }
}
