//! SEA-SSD's classification of main-database page writes (Sun, Arakawa, Takeuchi, TCAS-I 2014):
//! a page written again within the last `recent_checkpoints` checkpoints of its database (or
//! earlier in the current one) is `dyn`, short-lived; any other page write is `stat`. A
//! *checkpoint* is a sync of the main database file (in WAL mode, the end of each checkpoint;
//! with a rollback journal, each commit). The rest of the rules (every log and temporary-file
//! write is `dyn`; a WAL frame predicts its page's next write) need no history and live with
//! the VFS.

use std::collections::HashMap;

/// Tables larger than this are pruned of pages older than the horizon at each checkpoint, so
/// the table stays as small as the set of recently written pages.
const PRUNE_ABOVE: usize = 1024;

/// One main database file's checkpoint count and the checkpoint each page was last written in.
#[derive(Debug, Clone, Default)]
pub struct PageEpochs {
    checkpoint: u64,
    last_written: HashMap<u32, u64>,
}

impl PageEpochs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Checkpoints ended so far.
    pub fn checkpoints(&self) -> u64 {
        self.checkpoint
    }

    /// Pages remembered.
    pub fn remembered(&self) -> usize {
        self.last_written.len()
    }

    /// Record a write of `page_number` and say whether it is `dyn` (true) or `stat`.
    pub fn write(&mut self, page_number: u32, recent_checkpoints: u64) -> bool {
        let now = self.checkpoint;
        let last = self.last_written.insert(page_number, now);
        last.is_some_and(|last| now - last <= recent_checkpoints)
    }

    /// One checkpoint ended.
    pub fn checkpoint(&mut self, recent_checkpoints: u64) {
        self.checkpoint += 1;
        if self.last_written.len() > PRUNE_ABOVE {
            let horizon = self.checkpoint.saturating_sub(recent_checkpoints);
            self.last_written.retain(|_, &mut seen| seen >= horizon);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_dyn_while_rewritten_within_the_window() {
        let mut epochs = PageEpochs::new();
        assert!(!epochs.write(3, 2), "first write: stat");
        assert!(epochs.write(3, 2), "again in the same checkpoint: dyn");
        epochs.checkpoint(2);
        epochs.checkpoint(2);
        assert!(epochs.write(3, 2), "two checkpoints later: still dyn");
        epochs.checkpoint(2);
        epochs.checkpoint(2);
        epochs.checkpoint(2);
        assert!(!epochs.write(3, 2), "three checkpoints later: stat");
        assert!(!epochs.write(4, 0));
        assert!(
            epochs.write(4, 0),
            "window 0: dyn only within one checkpoint"
        );
    }

    #[test]
    fn old_pages_are_pruned_from_large_tables() {
        let mut epochs = PageEpochs::new();
        for page in 0..2000 {
            epochs.write(page, 1);
        }
        epochs.checkpoint(1);
        assert_eq!(epochs.remembered(), 2000, "within the horizon");
        epochs.checkpoint(1);
        assert_eq!(epochs.remembered(), 0);
        assert_eq!(epochs.checkpoints(), 2);
    }
}
