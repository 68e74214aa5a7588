//! Queued reads that together want a wordline become one melded read (`host.melded_reads =
//! "auto"`; see `host::meld`). When a die starts a single-page host read, the host reads queued
//! behind it for other pages of the same wordline -- the first `JOIN_WINDOW` of its queue, so a
//! start costs the same for any queue length -- join it if the pages they want together cost
//! less die time melded than one by one. Each keeps its own request; the die senses once and
//! the whole wordline crosses the channel.

use super::{Device, MeldedReads, TxnClass, TxnKind, NONE};

const JOIN_WINDOW: usize = 16;

impl Device {
    /// Join the queued reads of `leader`'s wordline to it (already taken from queue `q` of
    /// `die`); returns the chain's last member and the member count, or `None` to read alone.
    pub(super) fn join_queued_wordline(
        &mut self,
        die: u32,
        q: usize,
        leader: u32,
    ) -> Option<(u32, u32)> {
        let bits = self.geo.bits_per_cell;
        if self.config.host.melded_reads != MeldedReads::Auto || bits < 2 {
            return None;
        }
        let e = self.engine.as_ref().expect("engine");
        let lt = e.txns[leader as usize];
        if lt.kind != TxnKind::Read || lt.class != TxnClass::HostRead || lt.transfers != 1 {
            return None;
        }
        let wordline = self.geo.wordline(lt.ppa);
        // Distinct pages of the wordline, bit k set for page type k (at most 32 bits per cell).
        let mut types = 1u32 << self.geo.page_type(lt.ppa);
        let mut mates = [0usize; JOIN_WINDOW];
        let mut found = 0;
        for (i, &id) in e.dies[die as usize].queues[q]
            .iter()
            .take(JOIN_WINDOW)
            .enumerate()
        {
            let t = e.txns[id as usize];
            let bit = 1u32 << self.geo.page_type(t.ppa);
            if t.kind == TxnKind::Read
                && t.class == TxnClass::HostRead
                && t.transfers == 1
                && self.geo.wordline(t.ppa) == wordline
                && types & bit == 0
            {
                types |= bit;
                mates[found] = i;
                found += 1;
            }
        }
        if found == 0 {
            return None;
        }
        let first = lt.ppa - self.geo.page_type(lt.ppa);
        let wanted = (0..bits)
            .filter(|k| types & (1 << k) != 0)
            .map(|k| first + k);
        if !self.should_meld(wanted) {
            return None;
        }
        let d = die as usize;
        let e = self.engine.as_mut().expect("engine");
        let mut tail = leader;
        // Remove from the back so the earlier indices stay valid.
        for &i in mates[..found].iter().rev() {
            let id = e.dies[d].queues[q].remove(i).expect("a queued mate");
            e.dies[d].queued -= 1;
            e.txns[id as usize].group_next = NONE;
            e.txns[tail as usize].group_next = id;
            tail = id;
        }
        e.txns[tail as usize].group_next = NONE;
        let members = found as u32 + 1;
        // Each member was counted as a page read; the melded read senses once and transfers
        // the whole wordline.
        self.flash.melded_reads += 1;
        self.flash.array_reads += (bits - members) as u64;
        self.flash.bytes_transferred += (bits - members) as u64 * self.page_size() as u64;
        Some((tail, members))
    }
}
