//! Which pages of a main database file are free, read from what SQLite writes to it.
//!
//! The database header (page 1) holds the freelist's first trunk page at bytes 32-35 and its
//! total page count at 36-39, big endian (SQLite's file format, section 1.3.8). A trunk page
//! holds the next trunk's number (bytes 0-3), a leaf count L (4-7) and L leaf page numbers.
//! Leaf pages hold nothing SQLite will read back, so their device space can be trimmed; trunk
//! pages hold the list and stay.
//!
//! The tracker sees every page written to the file (and page 1 and wanted trunk pages when
//! they are read, so a reopened database is known too). SQLite writes page 1 before the trunk
//! pages of a checkpoint, so the chain is walked when the file is synced, when every page of
//! the change is there: [`FreelistTracker::resolve`] returns the leaves that became free since
//! the last walk.

use crate::wal::be_u32;
use std::collections::{HashMap, HashSet};

/// Bytes of the database header SQLite writes at the start of page 1.
pub const HEADER_BYTES: usize = 100;

/// Pages kept between walks at most (64 MiB of 4 KiB pages). Without syncs
/// (`synchronous=OFF`) there are no walks; past this the tracker forgets and trims nothing
/// until the next walk.
pub const MAX_RECENT_PAGES: usize = 16384;

const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The free leaf pages of one main database file. `P` holds a page's bytes as the caller has
/// them (the Python binding keeps SQLite's own bytes objects, without a copy).
#[derive(Debug)]
pub struct FreelistTracker<P> {
    /// The database's page size (0 until the header is seen).
    pub page_size: u32,
    /// The first trunk page and the freelist's page count, from the header.
    pub first_trunk: u32,
    pub free_count: u32,
    /// Whether the header says WAL mode (file format version numbers 2).
    pub wal_mode: bool,
    /// Leaf pages free at the last walk (already trimmed or queued for it).
    free_leaves: HashSet<u32>,
    /// Parsed trunk pages of the last walk: page -> (next trunk, leaves).
    trunks: HashMap<u32, (u32, Vec<u32>)>,
    /// Pages seen since the last walk.
    recent: HashMap<u32, P>,
    wanted: HashSet<u32>,
    overflowed: bool,
}

impl<P> Default for FreelistTracker<P> {
    fn default() -> Self {
        FreelistTracker {
            page_size: 0,
            first_trunk: 0,
            free_count: 0,
            wal_mode: false,
            free_leaves: HashSet::new(),
            trunks: HashMap::new(),
            recent: HashMap::new(),
            wanted: HashSet::new(),
            overflowed: false,
        }
    }
}

impl<P: AsRef<[u8]>> FreelistTracker<P> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Leaf pages free at the last walk.
    pub fn free_leaves(&self) -> &HashSet<u32> {
        &self.free_leaves
    }

    /// Page 1 (or at least its first 100 bytes) was written or read.
    pub fn observe_header(&mut self, data: &[u8]) {
        if data.len() < HEADER_BYTES || &data[..16] != MAGIC {
            return;
        }
        let raw_size = u32::from(data[16]) << 8 | u32::from(data[17]);
        self.page_size = if raw_size == 1 { 65536 } else { raw_size };
        self.wal_mode = data[18] == 2;
        self.first_trunk = be_u32(data, 32).unwrap_or(0);
        self.free_count = be_u32(data, 36).unwrap_or(0);
    }

    /// Whether a page read now would be kept: page 1, or a trunk page the last walk missed.
    pub fn wants(&self, page_number: u32) -> bool {
        page_number == 1 || self.wanted.contains(&page_number)
    }

    /// A whole page was written (or read). Pages read are kept only when a walk needs them.
    pub fn observe_page(&mut self, page_number: u32, data: P, written: bool) {
        if page_number == 1 {
            self.observe_header(data.as_ref());
        }
        if written || self.wanted.contains(&page_number) {
            if self.recent.len() >= MAX_RECENT_PAGES {
                self.recent.clear();
                self.overflowed = true;
            }
            self.recent.insert(page_number, data);
        }
    }

    /// Walk the chain and return the leaves newly free since the last walk, sorted.
    ///
    /// A trunk page whose content the tracker never saw ends the walk: the leaves found so far
    /// are certainly free, the rest are left alone (wanted on their next read or write).
    pub fn resolve(&mut self) -> Vec<u32> {
        self.wanted.clear();
        if self.overflowed {
            // Some pages written since the last walk were not kept: a trunk known from before
            // may be stale. Start over from what the next walk sees.
            self.overflowed = false;
            self.recent.clear();
            self.trunks.clear();
            return Vec::new();
        }
        let per_trunk = if self.page_size != 0 {
            i64::from(self.page_size / 4) - 2
        } else {
            0
        };
        let mut leaves = HashSet::new();
        let mut trunks = HashMap::new();
        let mut trunk = self.first_trunk;
        let mut remaining = i64::from(self.free_count);
        while trunk != 0 && remaining > 0 && !trunks.contains_key(&trunk) {
            let Some(parsed) = self.parse_trunk(trunk, per_trunk) else {
                self.wanted.insert(trunk);
                break;
            };
            let next = parsed.0;
            leaves.extend(parsed.1.iter().copied());
            remaining -= 1 + parsed.1.len() as i64;
            trunks.insert(trunk, parsed);
            trunk = next;
        }
        self.trunks = trunks;
        self.recent.clear();
        let mut newly_free: Vec<u32> = leaves.difference(&self.free_leaves).copied().collect();
        newly_free.sort_unstable();
        self.free_leaves = leaves;
        newly_free
    }

    fn parse_trunk(&self, page_number: u32, per_trunk: i64) -> Option<(u32, Vec<u32>)> {
        let Some(data) = self.recent.get(&page_number) else {
            return self.trunks.get(&page_number).cloned();
        };
        let data = data.as_ref();
        let next = be_u32(data, 0)?;
        let count = be_u32(data, 4)?;
        if i64::from(count) > per_trunk || 8 + 4 * count as usize > data.len() {
            return None; // not a trunk page after all: the file is not what the header says
        }
        let leaves = (0..count as usize)
            .filter_map(|i| be_u32(data, 8 + 4 * i))
            .filter(|&leaf| leaf > 1)
            .collect();
        Some((next, leaves))
    }

    /// The file was truncated: pages from `first_page` on no longer exist.
    pub fn forget_pages_from(&mut self, first_page: u32) {
        self.free_leaves.retain(|&page| page < first_page);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(page_size: u16, first_trunk: u32, free_count: u32) -> Vec<u8> {
        let mut page = vec![0u8; page_size as usize];
        page[..16].copy_from_slice(MAGIC);
        page[16..18].copy_from_slice(&page_size.to_be_bytes());
        page[18] = 2;
        page[32..36].copy_from_slice(&first_trunk.to_be_bytes());
        page[36..40].copy_from_slice(&free_count.to_be_bytes());
        page
    }

    fn trunk(page_size: usize, next: u32, leaves: &[u32]) -> Vec<u8> {
        let mut page = vec![0u8; page_size];
        page[..4].copy_from_slice(&next.to_be_bytes());
        page[4..8].copy_from_slice(&(leaves.len() as u32).to_be_bytes());
        for (i, leaf) in leaves.iter().enumerate() {
            page[8 + 4 * i..12 + 4 * i].copy_from_slice(&leaf.to_be_bytes());
        }
        page
    }

    #[test]
    fn a_two_trunk_chain_frees_its_leaves_once() {
        let mut tracker = FreelistTracker::<Vec<u8>>::new();
        tracker.observe_page(1, header(1024, 10, 6), true);
        tracker.observe_page(10, trunk(1024, 20, &[11]), true);
        tracker.observe_page(20, trunk(1024, 0, &[21, 22]), true);
        assert_eq!(tracker.page_size, 1024);
        assert!(tracker.wal_mode);
        assert_eq!(tracker.resolve(), vec![11, 21, 22]);
        // The same chain walked again: nothing newly free.
        tracker.observe_page(1, header(1024, 10, 6), true);
        assert_eq!(tracker.resolve(), Vec::<u32>::new());
        let mut free: Vec<u32> = tracker.free_leaves().iter().copied().collect();
        free.sort_unstable();
        assert_eq!(free, vec![11, 21, 22]);
        tracker.forget_pages_from(22);
        assert!(!tracker.free_leaves().contains(&22));
    }

    #[test]
    fn an_unseen_trunk_is_wanted_on_its_next_read() {
        let mut tracker = FreelistTracker::<Vec<u8>>::new();
        tracker.observe_page(1, header(1024, 5, 3), false);
        assert_eq!(tracker.resolve(), Vec::<u32>::new());
        assert!(tracker.wants(5));
        tracker.observe_page(5, trunk(1024, 0, &[6, 7]), false);
        tracker.observe_page(1, header(1024, 5, 3), false);
        assert_eq!(tracker.resolve(), vec![6, 7]);
    }

    #[test]
    fn a_page_that_is_no_trunk_ends_the_walk() {
        let mut tracker = FreelistTracker::<Vec<u8>>::new();
        tracker.observe_page(1, header(1024, 5, 3), true);
        let mut bogus = trunk(1024, 0, &[]);
        bogus[4..8].copy_from_slice(&10_000u32.to_be_bytes());
        tracker.observe_page(5, bogus, true);
        assert_eq!(tracker.resolve(), Vec::<u32>::new());
        assert!(tracker.wants(5));
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever bytes a file holds, observing and walking them never panics, and every
        /// leaf reported free is a page number above 1.
        #[test]
        fn arbitrary_pages_never_panic(
            pages in proptest::collection::vec(
                (1u32..40, proptest::collection::vec(any::<u8>(), 0..600)), 0..30),
            header_page in proptest::collection::vec(any::<u8>(), 100..600),
        ) {
            let mut tracker = FreelistTracker::<Vec<u8>>::new();
            let mut header_page = header_page;
            header_page[..16].copy_from_slice(MAGIC);
            tracker.observe_page(1, header_page, true);
            for (number, data) in pages {
                tracker.observe_page(number, data, number % 2 == 0);
                for leaf in tracker.resolve() {
                    prop_assert!(leaf > 1);
                }
            }
        }
    }
}
