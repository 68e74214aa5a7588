//! The placement-handle table: every hint standard that steers where a write goes resolves here
//! to one internal handle (a write frontier of the FTL).
//!
//! Precedence, most specific first: an NVMe FDP placement identifier, an NVMe stream id, the
//! SEA-SSD class, then the Linux write-life hint; no hint (or `honor_hints = false`, the
//! baseline of every experiment) is handle 0, as FDP sends writes without a placement id to
//! handle 0. Per-handle counters follow FDP's log: host bytes written, media bytes written and
//! media bytes erased.

pub mod allocation;
pub mod wordline;

use crate::config::PlacementConfig;
use crate::request::{Hint, SeaClass};
use serde::Serialize;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PlacementError {
    #[error("{what} {id} is out of range: the device has {handles} placement handle(s) (placement.handles)")]
    OutOfRange {
        what: &'static str,
        id: u32,
        handles: u32,
    },
}

/// FDP-style counters of one placement handle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HandleCounters {
    pub host_bytes_written: u64,
    pub media_bytes_written: u64,
    pub media_bytes_erased: u64,
}

/// The (dyn, stat) handles of SEA-SSD's classes, clamped to the last handle.
pub fn sea_handles(config: &PlacementConfig) -> (u32, u32) {
    let last = config.handles - 1;
    (
        config.sea_dyn_handle.min(last),
        config.sea_stat_handle.min(last),
    )
}

#[derive(Debug, Clone)]
pub struct PlacementTable {
    honor_hints: bool,
    handles: u32,
    write_life: [u32; 6],
    sea_dyn: u32,
    sea_stat: u32,
}

impl PlacementTable {
    pub fn new(config: &PlacementConfig) -> Self {
        let last = config.handles - 1;
        let mut write_life = [0; 6];
        for (slot, &handle) in write_life.iter_mut().zip(&config.write_life_handles) {
            *slot = handle.min(last);
        }
        let (sea_dyn, sea_stat) = sea_handles(config);
        PlacementTable {
            honor_hints: config.honor_hints,
            handles: config.handles,
            write_life,
            sea_dyn,
            sea_stat,
        }
    }

    pub fn handles(&self) -> u32 {
        self.handles
    }

    /// The handle a write with `hint` goes to.
    #[inline]
    pub fn resolve(&self, hint: &Hint) -> Result<u32, PlacementError> {
        if !self.honor_hints {
            return Ok(0);
        }
        let check = |what, id: u32| {
            if id < self.handles {
                Ok(id)
            } else {
                Err(PlacementError::OutOfRange {
                    what,
                    id,
                    handles: self.handles,
                })
            }
        };
        if let Some(pid) = hint.placement_id {
            return check("placement id", pid as u32);
        }
        if let Some(stream) = hint.stream {
            return check("stream", stream as u32);
        }
        if let Some(class) = hint.sea_class {
            return Ok(match class {
                SeaClass::Dyn => self.sea_dyn,
                SeaClass::Stat => self.sea_stat,
            });
        }
        if let Some(life) = hint.write_life {
            return Ok(self.write_life[life as usize]);
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::WriteLife;

    #[test]
    fn precedence_and_baseline() {
        let cfg = PlacementConfig {
            handles: 4,
            ..Default::default()
        };
        let t = PlacementTable::new(&cfg);
        let hint = Hint {
            placement_id: Some(3),
            stream: Some(1),
            write_life: Some(WriteLife::Short),
            ..Default::default()
        };
        assert_eq!(t.resolve(&hint), Ok(3));
        assert_eq!(
            t.resolve(&Hint {
                stream: Some(2),
                ..Default::default()
            }),
            Ok(2)
        );
        assert_eq!(
            t.resolve(&Hint {
                sea_class: Some(SeaClass::Dyn),
                ..Default::default()
            }),
            Ok(1)
        );
        assert_eq!(
            t.resolve(&Hint {
                write_life: Some(WriteLife::Extreme),
                ..Default::default()
            }),
            Ok(3)
        );
        assert_eq!(t.resolve(&Hint::default()), Ok(0));
        assert!(t
            .resolve(&Hint {
                placement_id: Some(4),
                ..Default::default()
            })
            .is_err());
        let baseline = PlacementTable::new(&PlacementConfig {
            handles: 4,
            honor_hints: false,
            ..Default::default()
        });
        assert_eq!(baseline.resolve(&hint), Ok(0));
    }
}
