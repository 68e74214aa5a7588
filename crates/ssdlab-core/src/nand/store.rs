//! Data of data-driven mode, stored by physical mapping unit (what the FTL maps: a whole page,
//! or one of the units a page packs).
//!
//! Only written units hold memory. GC moves data with the unit, an erase drops the block's
//! units, and a unit that was mapped but never given data (preconditioning writes) reads as
//! zeros, so reads always return exactly what the host last wrote.

use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct UnitStore {
    units: HashMap<u32, Box<[u8]>>,
    unit_size: usize,
}

impl UnitStore {
    pub fn new(unit_size: usize) -> Self {
        UnitStore {
            units: HashMap::new(),
            unit_size,
        }
    }

    pub fn get(&self, unit: u32) -> Option<&[u8]> {
        self.units.get(&unit).map(|b| &b[..])
    }

    pub fn put(&mut self, unit: u32, data: Box<[u8]>) {
        debug_assert_eq!(data.len(), self.unit_size);
        self.units.insert(unit, data);
    }

    /// Drop the data of a unit that no longer holds live data (overwritten or trimmed), so
    /// that memory follows live data rather than everything ever written.
    pub fn remove(&mut self, unit: u32) {
        self.units.remove(&unit);
    }

    /// GC relocation: the data follows the unit.
    pub fn relocate(&mut self, src: u32, dst: u32) {
        if let Some(data) = self.units.remove(&src) {
            self.units.insert(dst, data);
        }
    }

    pub fn erase(&mut self, first_unit: u32, units: u32) {
        if self.units.is_empty() {
            return;
        }
        for unit in first_unit..first_unit + units {
            self.units.remove(&unit);
        }
    }

    pub fn unit_size(&self) -> usize {
        self.unit_size
    }

    pub fn stored_units(&self) -> usize {
        self.units.len()
    }
}
