//! The wordline-aware write scheduler of melded pages (Arpith K., Gopinath): writes that carry
//! a read-group hint fill the LSB, CSB and MSB pages of one wordline with one group, so that a
//! later large read of the group senses each wordline once (a melded read), and a group's
//! consecutive wordlines stripe over the planes in channel-way-die-plane order, so the read
//! has every channel and die to itself.
//!
//! A group opens a wordline on the next plane in stripe order (its own cursor: a group's
//! consecutive wordlines go to consecutive planes however groups interleave; a new group starts
//! after the last wordline opened) whose frontier (of the write's placement handle) is at a
//! wordline boundary and that no other group holds; its following
//! mapping units go there until the wordline is full, then it opens the next. The plane is held
//! for the group meanwhile. Data is placed as it arrives rather than buffered in the
//! controller, so a wordline waits for the rest of its group on the flash frontier, not in
//! DRAM: after `placement.read_group_timeout_ns` without a write of the group its plane is
//! released, normal placement may fill the wordline's remaining pages, and the group resumes
//! it only if it writes again first (its frontier check; otherwise it opens a new one). With
//! every plane held or unaligned, the write falls back to normal placement (counted).

use crate::nand::Geometry;
use std::collections::BTreeMap;

const FREE: u64 = u64::MAX;
const MAX_GROUP_CURSORS: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct OpenWordline {
    plane: u32,
    /// Units of the wordline this group still fills.
    units_left: u32,
    /// Where the plane's frontier must be for the group's next unit (units into its block):
    /// anything else means other data was written there.
    next_unit: Option<u32>,
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
    /// Open wordlines given up because other data reached their frontier first.
    pub wordlines_abandoned: u64,
    /// Planes of open wordlines released by the timeout.
    pub wordlines_released: u64,
    /// Groups learnt from large reads (`placement.learn_read_groups`).
    pub groups_learnt: u64,
}

pub struct ReadGroupPlacer {
    order: Vec<u32>,
    cursor: usize,
    units_per_wordline: u32,
    /// A full open block and a fresh one are the same frontier position: positions are kept
    /// modulo this.
    units_per_block: u32,
    timeout_ns: u64,
    /// By group id: the wordline it is filling (ordered map: iteration order is fixed).
    open: BTreeMap<u64, OpenWordline>,
    /// Per plane: the group holding it, or `FREE`.
    holder: Vec<u64>,
    /// Per group: where in the stripe its next wordline goes, so that any run of a group's
    /// wordlines spreads evenly over the planes even when groups are written interleaved
    /// (at most `MAX_GROUP_CURSORS`; past that, those of groups with no open wordline are
    /// forgotten and such a group starts again at the shared cursor).
    group_cursor: BTreeMap<u64, usize>,
    counters: ReadGroupCounters,
    /// Learnt mode: per logical unit, the group learnt for it (0: none), and the last number
    /// handed out (a u32 per unit keeps the table at 4 B per logical unit).
    learnt: Vec<u32>,
    learnt_groups: u32,
}

impl ReadGroupPlacer {
    pub fn new(geo: &Geometry, units_per_page: u32, timeout_ns: u64) -> Self {
        ReadGroupPlacer {
            order: geo.stripe_order.clone(),
            cursor: 0,
            units_per_wordline: geo.bits_per_cell.max(1) * units_per_page,
            units_per_block: geo.pages_per_block * units_per_page,
            timeout_ns,
            open: BTreeMap::new(),
            holder: vec![FREE; geo.planes as usize],
            group_cursor: BTreeMap::new(),
            counters: ReadGroupCounters::default(),
            learnt: Vec::new(),
            learnt_groups: 0,
        }
    }

    /// Keep a learnt group per logical unit from now on.
    pub fn learn(&mut self, logical_units: u64) {
        self.learnt = vec![0; logical_units as usize];
    }

    /// Learnt mode: units `first .. first + count` were read together; they become a new
    /// group (numbers wrap past u32::MAX, skipping 0).
    pub fn learn_group(&mut self, first: u64, count: u64) {
        if self.learnt.is_empty() {
            return;
        }
        self.learnt_groups = self.learnt_groups.checked_add(1).unwrap_or(1);
        self.counters.groups_learnt += 1;
        let end = ((first + count) as usize).min(self.learnt.len());
        for g in &mut self.learnt[first as usize..end] {
            *g = self.learnt_groups;
        }
    }

    /// The group learnt for logical unit `unit`, if any.
    pub fn learnt_group_of(&self, unit: u64) -> Option<u32> {
        self.learnt.get(unit as usize).copied().filter(|&g| g != 0)
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
        let per_block = self.units_per_block;
        let frontier_units = |plane| frontier_units(plane).map(|u| u % per_block);
        self.expire(now_ns);
        let upw = self.units_per_wordline;
        if let Some(o) = self.open.get(&group).copied() {
            if frontier_units(o.plane) == o.next_unit {
                self.take_unit(group, o, now_ns);
                return Some(o.plane);
            }
            self.release(group);
            self.counters.wordlines_abandoned += 1;
        }
        let n = self.order.len();
        let start = self
            .group_cursor
            .get(&group)
            .copied()
            .unwrap_or(self.cursor);
        for k in 0..n {
            let position = (start + k) % n;
            let plane = self.order[position];
            if self.holder[plane as usize] != FREE
                || frontier_units(plane).is_some_and(|u| u % upw != 0)
            {
                continue;
            }
            self.cursor = (position + 1) % n;
            if self.group_cursor.len() >= MAX_GROUP_CURSORS {
                let open = &self.open;
                self.group_cursor.retain(|g, _| open.contains_key(g));
            }
            self.group_cursor.insert(group, self.cursor);
            self.counters.wordlines_opened += 1;
            let o = OpenWordline {
                plane,
                units_left: upw,
                next_unit: frontier_units(plane),
                last_write_ns: now_ns,
            };
            // A group has one open wordline: the one it left (timed out) is given up.
            self.release(group);
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
        o.next_unit = o.next_unit.map(|u| (u + 1) % self.units_per_block);
        o.last_write_ns = now_ns;
        if o.units_left == 0 {
            self.release(group);
        } else {
            self.open.insert(group, o);
        }
    }

    fn release(&mut self, group: u64) {
        if let Some(o) = self.open.remove(&group) {
            if self.holder[o.plane as usize] == group {
                self.holder[o.plane as usize] = FREE;
            }
        }
    }

    /// Release the planes of wordlines whose group has not written for the timeout: another
    /// group may take such a plane once normal placement has filled its wordline. The group
    /// itself resumes its wordline if it writes again before that (its frontier check).
    fn expire(&mut self, now_ns: u64) {
        let timeout = self.timeout_ns;
        for (&group, o) in &self.open {
            let held = &mut self.holder[o.plane as usize];
            if *held == group && now_ns.saturating_sub(o.last_write_ns) > timeout {
                *held = FREE;
                self.counters.wordlines_released += 1;
            }
        }
    }
}

/// GC of read groups: the order in which to move one GC step's valid units so that each read
/// group's units fill the wordlines of GC's destination together. `units` are (source unit,
/// logical unit) in the victim's physical order, `group_of(source)` their group (0: none),
/// `position` how many units the destination's current wordline already holds. A group's
/// units go in logical order, cut into wordlines' worth (`units_per_wordline`), each started
/// at a wordline boundary; ungrouped units (moving as before, in physical order) fill the
/// space up to each boundary, and the rest follow. With no ungrouped unit left to fill, a
/// group's wordline starts where the frontier is. Returns the order and, per unit, its chunk
/// (a wordline's worth of one group, numbered from 1; 0: ungrouped).
pub fn gc_wordline_order(
    units: &[(u32, u32)],
    group_of: impl Fn(u32) -> u32,
    units_per_wordline: u32,
    position: u32,
) -> (Vec<(u32, u32)>, Vec<u32>) {
    let upw = units_per_wordline.max(1);
    let mut fillers = std::collections::VecDeque::new();
    // Groups in order of first appearance (deterministic), each with its units.
    let mut groups: Vec<(u32, Vec<(u32, u32)>)> = Vec::new();
    for &(src, lun) in units {
        match group_of(src) {
            0 => fillers.push_back((src, lun)),
            g => match groups.iter_mut().find(|(id, _)| *id == g) {
                Some((_, members)) => members.push((src, lun)),
                None => groups.push((g, vec![(src, lun)])),
            },
        }
    }
    let mut order = Vec::with_capacity(units.len());
    let mut chunk_of = Vec::with_capacity(units.len());
    let mut position = position % upw;
    let mut chunk = 0;
    for (_, mut members) in groups {
        members.sort_unstable_by_key(|&(_, lun)| lun);
        for wordline in members.chunks(upw as usize) {
            while position != 0 {
                let Some(filler) = fillers.pop_front() else {
                    break;
                };
                order.push(filler);
                chunk_of.push(0);
                position = (position + 1) % upw;
            }
            chunk += 1;
            for &unit in wordline {
                order.push(unit);
                chunk_of.push(chunk);
            }
            position = (position + wordline.len() as u32) % upw;
        }
    }
    for filler in fillers {
        order.push(filler);
        chunk_of.push(0);
    }
    (order, chunk_of)
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
    fn each_group_stripes_its_own_wordlines_when_groups_interleave() {
        let geo = tlc(2); // 4 planes
        let mut placer = ReadGroupPlacer::new(&geo, 1, 1_000_000);
        let mut frontier = vec![0; geo.planes as usize];
        let mut by_group: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        // Two groups write two wordlines at a time in turn. With one cursor shared by all
        // groups, group 0 would get planes 0 and 1 of the stripe only, group 1 the others.
        for round in 0..12 {
            let g = round % 2;
            for _ in 0..6 {
                by_group
                    .entry(g)
                    .or_default()
                    .push(run(&mut placer, &mut frontier, g, 0).unwrap());
            }
        }
        for planes in by_group.values() {
            let wordlines: Vec<u32> = planes.chunks(3).map(|c| c[0]).collect();
            // Any 4 consecutive wordlines of a group cover the 4 planes.
            for w in wordlines.windows(4) {
                let distinct: std::collections::BTreeSet<u32> = w.iter().copied().collect();
                assert_eq!(distinct.len(), 4, "{by_group:?}");
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
        // Past the timeout both are released, but neither is at a wordline boundary.
        assert_eq!(run(&mut placer, &mut frontier, 3, 2_000), None);
        let c = placer.counters();
        assert_eq!((c.units_fallback, c.wordlines_released), (2, 2));
        // Group 1 comes back before anything else wrote to its plane: it resumes there.
        assert_eq!(run(&mut placer, &mut frontier, 1, 2_100), Some(a));
        // Normal placement fills group 2's wordline; a new group may then take the plane, and
        // group 2, finding its frontier moved, opens a new wordline (none is free: fallback).
        frontier[b as usize] += 2;
        assert_eq!(run(&mut placer, &mut frontier, 3, 2_200), Some(b));
        assert_eq!(run(&mut placer, &mut frontier, 2, 2_300), None);
        assert_eq!(placer.counters().wordlines_abandoned, 1);
    }

    #[test]
    fn gc_order_puts_each_group_on_whole_wordlines() {
        // Source units 0..12: group 7 at 1, 4, 6, 9, 10, 11 (logical order reversed for 9..11),
        // group 8 at 2, 5, 8; the rest ungrouped. The destination's wordline holds 1 unit.
        let group = |src: u32| match src {
            1 | 4 | 6 | 9 | 10 | 11 => 7,
            2 | 5 | 8 => 8,
            _ => 0,
        };
        let units: Vec<(u32, u32)> = (0..12)
            .map(|s| (s, if s >= 9 { 29 - s } else { s }))
            .collect();
        let (order, chunks) = gc_wordline_order(&units, group, 3, 1);
        let srcs: Vec<u32> = order.iter().map(|&(s, _)| s).collect();
        // Fillers 0, 3 reach the boundary; group 7 by logical unit: 1, 4, 6 | 11, 10, 9;
        // group 8: 2, 5, 8; filler 7 last.
        assert_eq!(srcs, vec![0, 3, 1, 4, 6, 11, 10, 9, 2, 5, 8, 7]);
        assert_eq!(chunks, vec![0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 0]);
    }
}
