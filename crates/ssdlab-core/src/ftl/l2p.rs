//! The page-mapping FTL's logical-to-physical map: one entry per logical mapping unit, on huge
//! pages, indexed at random.
//!
//! GC rewrites entries at random places. In a map larger than the last-level cache a plain store
//! first reads its line from memory, and the store buffer fills with such misses, so GC's
//! updates of a large map are non-temporal stores (MOVNTI), which write the four bytes without
//! the read. Those are weakly ordered, and Rust's rule for them is that the storing thread
//! orders them (SFENCE) before the entries they wrote are accessed again in any way. The map
//! keeps that rule itself, without waiting for stores still on their way to memory (which is
//! what a fence right after GC's stores would do, and all the gain would go):
//! - the entries streamed since the last fence are marked in a small bit filter, and an access
//!   to an entry whose bit is set fences first (an access to any other entry needs none);
//! - the next batch of streamed stores fences before it starts, microseconds later, when the
//!   previous batch has long reached memory, and clears the filter;
//! - access to the whole map, and its drop, fence first.

use crate::nand::prefetch::prefetch_address;
use crate::nand::table::huge_table;
use std::sync::atomic::{AtomicBool, Ordering};

/// A map larger than this outgrows the last-level cache: GC's random updates are streamed.
const STREAMED_BYTES: usize = 32 << 20;

/// Bits of the filter of entries streamed since the last fence: a GC step streams a few dozen,
/// so an access to another entry finds its bit set about once in a hundred.
const FILTER_BITS: u32 = 12;
const FILTER_WORDS: usize = (1 << FILTER_BITS) / 64;

/// The filter bit of entry `unit` (a multiplicative hash: units near each other spread).
#[inline(always)]
fn filter_bit(unit: usize) -> (usize, u64) {
    let bit = (unit as u32).wrapping_mul(0x9E37_79B1) >> (32 - FILTER_BITS);
    ((bit / 64) as usize, 1 << (bit % 64))
}

pub(crate) struct L2p {
    entries: Vec<u32>,
    /// GC's updates may be streamed (the map is larger than `STREAMED_BYTES`), and are while
    /// `allowed`.
    large: bool,
    allowed: bool,
    /// Streamed stores not ordered yet, and the filter bits of their entries. Atomic only to
    /// keep the map `Sync`: one thread owns it (`&mut` for every store), so relaxed accesses
    /// suffice.
    unsettled: AtomicBool,
    filter: Box<[u64; FILTER_WORDS]>,
    /// The filter has bits set (an access that fences leaves them: it cannot clear them
    /// through `&self`, so the next batch does).
    marked: bool,
}

impl L2p {
    /// `len` entries, all `value`.
    pub(crate) fn new(len: usize, value: u32) -> L2p {
        L2p {
            entries: huge_table(len, value),
            large: len * std::mem::size_of::<u32>() > STREAMED_BYTES,
            allowed: false,
            unsettled: AtomicBool::new(false),
            filter: Box::new([0; FILTER_WORDS]),
            marked: false,
        }
    }

    /// Stream GC's updates while allowed whatever the map's size, or never (tests of both
    /// paths).
    #[cfg(test)]
    pub(crate) fn set_large(&mut self, large: bool) {
        self.settle();
        self.large = large;
    }

    /// Allow streamed stores from now on, or order those made and store plainly from now on.
    pub(crate) fn allow_streaming(&mut self, on: bool) {
        if !on {
            self.settle();
        }
        self.allowed = on;
    }

    /// Are GC's updates streamed now? (Then they need no prefetch.)
    #[inline]
    pub(crate) fn streamed(&self) -> bool {
        self.large && self.allowed
    }

    /// Order the streamed stores made so far before the accesses that follow. (The filter
    /// keeps its bits until the next batch clears them: a bit set too many only costs a fence.)
    #[inline(always)]
    fn settle(&self) {
        if self.unsettled.load(Ordering::Relaxed) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: SFENCE only orders this thread's earlier stores.
            unsafe {
                std::arch::x86_64::_mm_sfence();
            }
            self.unsettled.store(false, Ordering::Relaxed);
        }
    }

    /// Settle if entry `unit` may have been streamed since the last fence.
    #[inline(always)]
    fn settle_for(&self, unit: usize) {
        if self.unsettled.load(Ordering::Relaxed) {
            let (word, bit) = filter_bit(unit);
            if self.filter[word] & bit != 0 {
                self.settle();
            }
        }
    }

    #[inline]
    pub(crate) fn get(&self, unit: usize) -> Option<u32> {
        self.settle_for(unit);
        self.entries.get(unit).copied()
    }

    /// Entry `unit` (which must exist).
    #[inline]
    pub(crate) fn at(&self, unit: usize) -> u32 {
        self.settle_for(unit);
        self.entries[unit]
    }

    #[inline]
    pub(crate) fn set(&mut self, unit: usize, value: u32) {
        self.settle_for(unit);
        self.entries[unit] = value;
    }

    /// A batch of GC updates begins (one GC step's): the previous batch's streamed stores,
    /// microseconds old, are ordered now, and the filter starts empty.
    #[inline]
    pub(crate) fn begin_far_updates(&mut self) {
        self.settle();
        if self.marked {
            self.filter.fill(0);
            self.marked = false;
        }
    }

    /// Store `value` in entry `unit` past the caches and mark it in the filter. The caller
    /// sets `marked` and `unsettled` (once for a run of entries).
    #[inline(always)]
    fn stream_entry(&mut self, unit: usize, value: u32) {
        let slot = &mut self.entries[unit];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `slot` is a valid, aligned, exclusive reference, and MOVNTI writes exactly it;
        // the caller sets `unsettled` before any other access to the map, which makes every
        // later access through it order the store first (and the map is only accessed through
        // its methods).
        unsafe {
            std::arch::x86_64::_mm_stream_si32(slot as *mut u32 as *mut i32, value as i32);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            *slot = value;
        }
        let (word, bit) = filter_bit(unit);
        self.filter[word] |= bit;
    }

    /// GC's update of entry `unit`: streamed in a large map (within a batch begun with
    /// [`L2p::begin_far_updates`]), a plain store otherwise.
    #[inline(always)]
    pub(crate) fn set_far(&mut self, unit: usize, value: u32) {
        if !self.streamed() {
            return self.set(unit, value);
        }
        self.stream_entry(unit, value);
        self.marked = true;
        *self.unsettled.get_mut() = true;
    }

    /// GC's updates of a run of entries, the entry of each `moves[k].1` to `first + k`,
    /// streamed (the map is [`L2p::streamed`], within a batch begun with
    /// [`L2p::begin_far_updates`]); each entry once.
    #[inline]
    pub(crate) fn stream_run(&mut self, moves: &[(u32, u32)], first: u32) {
        debug_assert!(self.streamed());
        for (k, &(_, unit)) in moves.iter().enumerate() {
            self.stream_entry(unit as usize, first + k as u32);
        }
        self.marked = true;
        *self.unsettled.get_mut() = true;
    }

    /// Hint that entry `unit` will be read soon (from its address: not an access).
    #[inline(always)]
    pub(crate) fn prefetch(&self, unit: usize) {
        if unit < self.entries.len() {
            prefetch_address(self.entries.as_ptr().wrapping_add(unit));
        }
    }

    /// Every entry, in order.
    pub(crate) fn entries(&self) -> &[u32] {
        self.settle();
        &self.entries
    }

    /// Set every entry to `value`.
    pub(crate) fn fill(&mut self, value: u32) {
        self.settle();
        self.entries.iter_mut().for_each(|e| *e = value);
    }
}

impl Drop for L2p {
    fn drop(&mut self) {
        // The memory goes back to the allocator: no streamed store may be left unordered.
        self.settle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_and_plain_updates_read_back_alike() {
        for streamed in [false, true] {
            let mut map = L2p::new(1 << 12, u32::MAX);
            map.set_large(streamed);
            map.allow_streaming(true);
            assert_eq!(map.streamed(), streamed);
            for unit in (0..1 << 12).step_by(7) {
                map.set_far(unit, unit as u32 * 3);
                // Read back at once: the access orders the store first.
                assert_eq!(map.at(unit), unit as u32 * 3);
            }
            // A new batch orders the last one and empties the filter, whether or not an
            // access has fenced since.
            map.begin_far_updates();
            assert!(!map.unsettled.load(Ordering::Relaxed));
            assert!(
                map.filter.iter().all(|&w| w == 0),
                "the filter starts empty"
            );
            map.set_far(3, 30);
            assert_eq!(map.unsettled.load(Ordering::Relaxed), streamed);
            // Another entry whose filter bit is clear is read without a fence; the streamed
            // one orders its store first.
            let other = (4..1 << 12)
                .find(|&u| filter_bit(u) != filter_bit(3))
                .unwrap();
            let _ = map.at(other);
            assert_eq!(map.unsettled.load(Ordering::Relaxed), streamed);
            assert_eq!(map.at(3), 30);
            assert!(!map.unsettled.load(Ordering::Relaxed));
            map.set(5, 1);
            assert_eq!(map.get(5), Some(1));
            assert_eq!(map.get(1 << 12), None);
            assert_eq!(map.entries()[14], 42);
            map.fill(9);
            assert!(map.entries().iter().all(|&e| e == 9));
            // Disallowing orders what was streamed, and stores plainly from then on.
            map.set_far(7, 70);
            map.allow_streaming(false);
            assert!(!map.unsettled.load(Ordering::Relaxed));
            assert!(!map.streamed());
            map.set_far(8, 80);
            assert!(!map.unsettled.load(Ordering::Relaxed));
            assert_eq!((map.at(7), map.at(8)), (70, 80));
        }
        // Only a map beyond the last-level cache streams, and only while allowed.
        let mut small = L2p::new(1 << 20, 0);
        small.allow_streaming(true);
        assert!(!small.streamed());
        let mut large = L2p::new(16 << 20, 0);
        assert!(!large.streamed());
        large.allow_streaming(true);
        assert!(large.streamed());
    }
}
