//! Data of data-driven mode, stored by physical mapping unit (what the FTL maps: a whole page,
//! or one of the units a page packs).
//!
//! Only written units hold memory. GC moves data with the unit, an erase drops the block's
//! units, and a unit that was mapped but never given data (preconditioning writes) reads as
//! zeros, so reads always return exactly what the host last wrote.

//!
//! Buffers of dropped units are kept in a bounded pool and reused by the next write: a 4 KiB
//! `malloc` per unit written and a `free` per unit dropped made glibc trim and regrow its heap,
//! which cost more than the rest of a simulated write (page faults on every regrowth).

use std::collections::HashMap;

/// At most this many spare unit buffers are kept for reuse (16 MiB of 4 KiB units), so memory
/// still follows live data within a bounded slack.
const SPARE_UNITS_MAX: usize = 4096;

#[derive(Debug, Default)]
pub struct UnitStore {
    units: HashMap<u32, Box<[u8]>>,
    unit_size: usize,
    /// Buffers of dropped units, each `unit_size` long, for the next writes.
    spare: Vec<Box<[u8]>>,
}

impl UnitStore {
    pub fn new(unit_size: usize) -> Self {
        UnitStore {
            units: HashMap::new(),
            unit_size,
            spare: Vec::new(),
        }
    }

    /// Keep a dropped unit's buffer for reuse (while the pool has room).
    fn recycle(&mut self, buffer: Box<[u8]>) {
        if self.spare.len() < SPARE_UNITS_MAX && buffer.len() == self.unit_size {
            self.spare.push(buffer);
        }
    }

    /// Store a copy of `bytes` (one whole unit) as `unit`'s data, in a reused buffer when one
    /// is spare.
    pub fn put_copy(&mut self, unit: u32, bytes: &[u8]) {
        debug_assert_eq!(bytes.len(), self.unit_size);
        let buffer = match self.spare.pop() {
            Some(mut buffer) => {
                buffer.copy_from_slice(bytes);
                buffer
            }
            None => bytes.into(),
        };
        self.put(unit, buffer);
    }

    pub fn get(&self, unit: u32) -> Option<&[u8]> {
        self.units.get(&unit).map(|b| &b[..])
    }

    pub fn put(&mut self, unit: u32, data: Box<[u8]>) {
        debug_assert_eq!(data.len(), self.unit_size);
        if let Some(old) = self.units.insert(unit, data) {
            self.recycle(old);
        }
    }

    /// Drop the data of a unit that no longer holds live data (overwritten or trimmed), so
    /// that memory follows live data rather than everything ever written.
    pub fn remove(&mut self, unit: u32) {
        if let Some(old) = self.units.remove(&unit) {
            self.recycle(old);
        }
    }

    /// GC relocation: the data follows the unit.
    pub fn relocate(&mut self, src: u32, dst: u32) {
        if let Some(data) = self.units.remove(&src) {
            self.put(dst, data);
        }
    }

    pub fn erase(&mut self, first_unit: u32, units: u32) {
        if self.units.is_empty() {
            return;
        }
        for unit in first_unit..first_unit + units {
            self.remove(unit);
        }
    }

    pub fn unit_size(&self) -> usize {
        self.unit_size
    }

    pub fn stored_units(&self) -> usize {
        self.units.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_buffers_hold_exactly_the_new_bytes() {
        let mut store = UnitStore::new(4);
        store.put_copy(1, &[1, 1, 1, 1]);
        store.remove(1);
        assert_eq!(store.spare.len(), 1);
        store.put_copy(2, &[2, 3, 4, 5]);
        assert!(store.spare.is_empty(), "the dropped buffer is reused");
        assert_eq!(store.get(2), Some(&[2, 3, 4, 5][..]));
        assert_eq!(store.get(1), None);
        // An overwrite recycles the old buffer; an erase recycles the block's units.
        store.put_copy(2, &[6, 6, 6, 6]);
        assert_eq!(store.spare.len(), 1);
        store.put_copy(3, &[7, 7, 7, 7]);
        store.erase(2, 2);
        assert_eq!(store.stored_units(), 0);
        assert_eq!(store.spare.len(), 2);
    }

    #[test]
    fn the_pool_is_bounded() {
        let mut store = UnitStore::new(1);
        for unit in 0..(SPARE_UNITS_MAX as u32 + 10) {
            store.put(unit, Box::new([0u8]));
        }
        store.erase(0, SPARE_UNITS_MAX as u32 + 10);
        assert_eq!(store.spare.len(), SPARE_UNITS_MAX);
    }
}
