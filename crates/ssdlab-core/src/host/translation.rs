//! Timing of a cached-mapping FTL's translation work (DFTL): translation-page reads and
//! programs and device-CPU time, a chain the host access that needs the mapping waits for.
//! The reservation path reserves the chain on the timeline here; the event engine turns it
//! into chained transactions (`engine.rs`). Both count it the same way.

use super::Device;
use crate::ftl::FlashOp;

impl Device {
    /// Count a translation-page read (through the controller, with its OOB); returns tR.
    pub(super) fn count_translation_read(&mut self, ppa: u32) -> u64 {
        let t_read = self.derived.read_ns[self.geo.page_type(ppa) as usize];
        let xfer = self.derived.page_transfer_ns;
        let f = &mut self.flash;
        f.array_reads += 1;
        f.oob_reads += 1;
        f.bytes_transferred += self.config.geometry.page_size_bytes as u64;
        f.codewords_decoded += self.derived.codewords_per_page as u64;
        self.work.reads += 1;
        self.work.translation_reads += 1;
        self.work.oob_reads += 1;
        self.work.flash_ns += t_read + xfer;
        t_read
    }

    /// Count a translation-page program (with its OOB); returns tPROG.
    pub(super) fn count_translation_program(&mut self, ppa: u32) -> u64 {
        let t_prog = self.derived.program_ns[self.geo.page_type(ppa) as usize];
        let xfer = self.derived.page_transfer_ns;
        let f = &mut self.flash;
        f.programs += 1;
        f.oob_writes += 1;
        f.bytes_transferred += self.config.geometry.page_size_bytes as u64;
        f.codewords_encoded += self.derived.codewords_per_page as u64;
        self.work.programs += 1;
        self.work.translation_writes += 1;
        self.work.flash_ns += t_prog + xfer;
        t_prog
    }

    /// Device-CPU time `ns` taken at or after `ready_ns` (the CPU is one serial resource);
    /// returns when it is done.
    pub(super) fn charge_cpu(&mut self, ready_ns: u64, ns: u64) -> u64 {
        let done = ready_ns.max(self.cpu_free_ns) + ns;
        self.cpu_free_ns = done;
        self.work.device_cpu_ns += ns;
        // The FTL produced this CPU work with its lookups just now: take their hits and misses.
        self.note_mapping_cache();
        done
    }

    /// Add the mapping-cache hits and misses since the last note to the request's work. Both
    /// submission paths note at every translation chain (each lookup costs device CPU, so a
    /// request that looked a mapping up has one); direct submission notes again at the end.
    pub(super) fn note_mapping_cache(&mut self) {
        if let Some(c) = self.ftl.dftl_counters() {
            // Counters that went back were reset (after preconditioning): count from zero.
            let (hits, misses) = self.mapping_cache_seen;
            self.work.mapping_hits += c.hits.checked_sub(hits).unwrap_or(c.hits) as u32;
            self.work.mapping_misses += c.misses.checked_sub(misses).unwrap_or(c.misses) as u32;
            self.mapping_cache_seen = (c.hits, c.misses);
        }
    }

    /// Reservation path: time one translation step of a chain that has reached `chain_ns`;
    /// returns when the step is done. Other operations leave the chain where it is.
    pub(super) fn reserve_translation_step(&mut self, op: &FlashOp, chain_ns: u64) -> u64 {
        let xfer = self.derived.page_transfer_ns;
        match *op {
            FlashOp::TranslationRead { ppa } => {
                let t_read = self.count_translation_read(ppa);
                let r = self
                    .timeline
                    .read(self.geo.die_of(ppa), chain_ns, t_read, 1, xfer);
                r.end_ns + self.derived.decode_ns
            }
            FlashOp::TranslationProgram { ppa } => {
                let t_prog = self.count_translation_program(ppa);
                let ready = chain_ns + self.derived.encode_ns;
                let p = self
                    .timeline
                    .program(self.geo.die_of(ppa), ready, t_prog, 1, xfer);
                p.end_ns
            }
            FlashOp::DeviceCpu { ns } => self.charge_cpu(chain_ns, ns),
            _ => chain_ns,
        }
    }
}
