//! GC data stays in its victim's plane (copyback possible).

use super::{FreeBlocks, GcDestination};

pub struct VictimPlane;

impl GcDestination for VictimPlane {
    fn choose(&mut self, victim_plane: u32, _free: &FreeBlocks<'_>) -> u32 {
        victim_plane
    }
}
