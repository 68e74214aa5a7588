//! The host side of the SQLite coupling: SQLite's file format as the coupling reads it,
//! SEA-SSD's engine-side rules, and NoFTL's host FTL. No Python here, so that the compiled file
//! object of `ssdlab._core` and the Python store share one implementation.
//!
//! - [`freelist`]: which pages of a main database file are free (their device space can be
//!   trimmed), from the pages SQLite writes and reads.
//! - [`sea`]: SEA-SSD's classification of database page writes (`dyn` when rewritten within
//!   the last few checkpoints).
//! - [`wal`]: the WAL header and frame layout.
//! - [`hostftl`]: NoFTL's storage manager, the page map a database keeps over native flash.
//! - [`realtime`]: the arithmetic of pacing a device to the wall clock (`cpu="realtime"`).

pub mod freelist;
pub mod hostftl;
pub mod realtime;
pub mod sea;
pub mod wal;
