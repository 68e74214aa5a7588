//! Where GC sends a victim's valid data: the plane whose GC frontier receives it. Keeping it in
//! the victim's plane allows copyback (the data never leaves the die); sending it to another
//! plane spreads GC's programs over dies that have free space, at the price of a trip through
//! the controller. Adding a policy touches its own file and the registry in [`gc_destination`].

mod most_free;
mod victim_plane;

pub use most_free::MostFree;
pub use victim_plane::VictimPlane;

use crate::config::GcDestinationKind;

/// The free-block counts of a device's planes, as the destination policy sees them.
pub struct FreeBlocks<'a> {
    /// Free blocks of a plane.
    pub of: &'a dyn Fn(u32) -> usize,
    pub planes: u32,
    /// A plane other than the victim's is chosen only if it keeps more than this many free
    /// blocks: foreign GC data never pushes a plane to its own foreground-GC watermark.
    pub keep: usize,
}

pub trait GcDestination: Send {
    /// The plane that receives the valid data of a victim in `victim_plane`.
    fn choose(&mut self, victim_plane: u32, free: &FreeBlocks<'_>) -> u32;
}

/// The policy registry.
pub fn gc_destination(kind: GcDestinationKind) -> Box<dyn GcDestination> {
    match kind {
        GcDestinationKind::VictimPlane => Box::new(VictimPlane),
        GcDestinationKind::MostFree => Box::new(MostFree),
    }
}
