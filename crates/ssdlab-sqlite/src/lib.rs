//! SQLite's file format as the SQLite coupling reads it, and SEA-SSD's engine-side rules: pure
//! logic, no I/O and no Python, so that the compiled file object of `ssdlab._core` and the
//! Python reference path share one implementation.
//!
//! - [`freelist`]: which pages of a main database file are free (their device space can be
//!   trimmed), from the pages SQLite writes and reads.
//! - [`sea`]: SEA-SSD's classification of database page writes (`dyn` when rewritten within
//!   the last few checkpoints).
//! - [`wal`]: the WAL header and frame layout.

pub mod freelist;
pub mod sea;
pub mod wal;
