//! The device's FlexECC hooks (see [`crate::ecc::flex`] for the model): which region a write
//! goes to, the codec time of each page by its code, the bit errors of a read and what the code
//! makes of them, and the page-state transitions of host writes, flush reads and trims.
//!
//! Both the reservation path and the event engine (every scheduler, with or without suspend)
//! call them, at the same points of a request; nothing here runs while `flexecc.mode = "off"`.

use super::Device;
use crate::config::{Config, Derived};
use crate::ecc::bits::{self, CodewordLayout};
use crate::ecc::flex::{codec_ns, Code, FlexEccMode, Injection};
use crate::request::HostRequest;

/// With FlexECC on, the device-wide decode time is the fastest code's (the reservation path
/// takes the later of it and [`Device::flex_decode`]'s per-page figure), and the encode time
/// is BCH's (a write's own code's replaces it in `execute_write`).
pub(super) fn adjust_derived(config: &Config, derived: &mut Derived) {
    let f = &config.flexecc;
    match f.mode {
        FlexEccMode::Off => {}
        FlexEccMode::AllBch => {
            derived.decode_ns = f.bch_decode_clean_ns;
            derived.encode_ns = f.bch_encode_ns;
        }
        FlexEccMode::Flex => {
            derived.decode_ns = f.bch_decode_clean_ns.min(f.crc_decode_ns);
            derived.encode_ns = f.bch_encode_ns;
        }
    }
}

impl Device {
    /// The handle of a write that placement resolved to `resolved`, and its encode time.
    #[inline]
    pub(super) fn flex_write_handle(&self, req: &HostRequest, resolved: u32) -> (u32, u64) {
        match self.ftl.flex_pages() {
            Some(flex) => {
                let handle = flex.write_handle(&req.hint, resolved);
                let (encode, _, _) = codec_ns(&self.config.flexecc, flex.code_of(handle));
                (handle, encode)
            }
            None => (resolved, self.derived.encode_ns),
        }
    }

    /// A host write of `units` units from `first_unit` at `now_ns`: new versions, dirty or
    /// clean by the hint.
    pub(super) fn flex_note_write(
        &mut self,
        req: &HostRequest,
        first_unit: u64,
        units: u64,
        now_ns: u64,
    ) {
        if self.ftl.flex_pages().is_none() {
            return;
        }
        for unit in first_unit..first_unit + units {
            let Some(pu) = self.ftl.mapped(unit) else {
                continue;
            };
            if let Some(flex) = self.ftl.flex_pages_mut() {
                flex.on_host_write(unit, pu, &req.hint, now_ns);
            }
        }
    }

    /// After a read: the bytes of pages that failed are returned as read, flipped bits and all
    /// (the host was told: EIO), and a read with the flush-read hint makes its ECC-dirty units
    /// ECC-clean.
    pub(super) fn flex_note_read(
        &mut self,
        req: &HostRequest,
        first_unit: u64,
        units: u64,
        out: Option<&mut [u8]>,
    ) {
        if !self.flex_failed.is_empty() {
            let failed = std::mem::take(&mut self.flex_failed);
            if let Some(out) = out {
                self.corrupt_returned_bytes(req, first_unit, units, &failed, out);
            }
        }
        if !req.hint.flush_read || self.ftl.flex_pages().is_none() {
            return;
        }
        for unit in first_unit..first_unit + units {
            let Some(pu) = self.ftl.mapped(unit) else {
                continue;
            };
            let handle = self.ftl.block_handle_of(pu);
            if let Some(flex) = self.ftl.flex_pages_mut() {
                flex.on_flush_read(unit, handle);
            }
        }
    }

    /// Flip, in the host's buffer, the bits that failed pages of this read came back with.
    fn corrupt_returned_bytes(
        &self,
        req: &HostRequest,
        first_unit: u64,
        units: u64,
        failed: &[(u32, Vec<u32>)],
        out: &mut [u8],
    ) {
        let unit_bytes = self.unit_bytes;
        for unit in first_unit..first_unit + units {
            let Some(pu) = self.ftl.mapped(unit) else {
                continue;
            };
            let Some((_, flips)) = failed.iter().find(|(ppa, _)| *ppa == pu >> self.unit_shift)
            else {
                continue;
            };
            let (lo, hi) = super::page_span(req, unit, unit_bytes);
            let at = (unit * unit_bytes + lo - req.offset) as usize;
            for &bit in flips {
                let byte = (bit / 8) as u64;
                if (lo..hi).contains(&byte) {
                    out[at + (byte - lo) as usize] ^= 1 << (bit % 8);
                }
            }
        }
    }

    /// A trimmed unit has no state.
    pub(super) fn flex_note_trim(&mut self, unit: u64) {
        if let Some(flex) = self.ftl.flex_pages_mut() {
            flex.on_trim(unit);
        }
    }

    /// Decode time of a GC move through the controller from `src` to `dst` (pages): the
    /// source's code decodes, the destination's encodes (a BCH→CRC conversion is both).
    pub(super) fn flex_gc_codec_ns(&self, src: u32, dst: u32) -> u64 {
        let Some(flex) = self.ftl.flex_pages() else {
            return self.derived.decode_ns + self.derived.encode_ns;
        };
        let code = |ppa: u32| flex.code_of(self.ftl.block_handle_of(ppa << self.unit_shift));
        let (_, decode, _) = codec_ns(&self.config.flexecc, code(src));
        let (encode, _, _) = codec_ns(&self.config.flexecc, code(dst));
        decode + encode
    }

    /// Decode of host page `ppa` whose data left the die at `transferred_ns`: bit errors drawn
    /// at the unit's RBER (wear and retention), then what its code makes of them. Returns (the
    /// time the data is ready, whether the read failed: BCH beyond t, or a CRC mismatch).
    pub(super) fn flex_decode(&mut self, ppa: u32, transferred_ns: u64) -> (u64, bool) {
        let pu = ppa << self.unit_shift;
        let handle = self.ftl.block_handle_of(pu);
        let Some(flex) = self.ftl.flex_pages() else {
            return (transferred_ns + self.derived.decode_ns, false);
        };
        let code = flex.code_of(handle);
        let p = bits::rber(
            &self.config,
            self.ftl.erase_count_of(ppa),
            flex.age_ns_of_page(pu, transferred_ns),
        );
        let layout = CodewordLayout {
            codewords: self.derived.codewords_per_page,
            codeword_bytes: self.config.ecc.codeword_bytes,
            t: self.config.ecc.correctable_bits,
        };
        let injected = flex.injected_at(pu);
        let p = if self.config.flexecc.injection == Injection::Points {
            0.0 // the errors are the planned corruptions only
        } else {
            p
        };
        let data = self.store.as_ref().and_then(|s| s.get(pu));
        let mut errors = bits::read_page(
            &mut self.rng,
            layout,
            code,
            p,
            data,
            &mut self.flex_scratch.0,
            &mut self.flex_scratch.1,
        );
        if injected > 0 {
            // Planned corruptions sit in the first codeword, at its first bits (a CRC-32C
            // detects any 1 to 3 flipped bits, so where does not matter for detection).
            let cw_bits = layout.codeword_bytes * 8;
            let first = self.flex_scratch.1.iter().filter(|&&b| b < cw_bits).count() as u32;
            self.flex_scratch.1.extend(0..injected.min(cw_bits));
            let was_failed = match code {
                Code::Bch => first > layout.t,
                Code::Crc => first > 0,
            };
            let fails = match code {
                Code::Bch => first + injected > layout.t,
                Code::Crc => true,
            };
            errors.bit_errors += injected;
            errors.codewords_with_errors += (first == 0) as u32;
            errors.failed_codewords += (fails && !was_failed) as u32;
        }
        let (_, clean_ns, error_ns) = codec_ns(&self.config.flexecc, code);
        let decode = if errors.bit_errors > 0 {
            error_ns
        } else {
            clean_ns
        };
        let failed = errors.failed();
        if code == Code::Bch && errors.bit_errors > 0 {
            self.flash.corrected_codewords +=
                (errors.codewords_with_errors - errors.failed_codewords) as u64;
        }
        if failed {
            self.flash.uncorrectable_pages += 1;
            if data.is_some() {
                self.flex_failed.push((ppa, self.flex_scratch.1.clone()));
            }
        }
        if let Some(flex) = self.ftl.flex_pages_mut() {
            flex.on_host_read(code, errors.bit_errors > 0, failed);
        }
        (transferred_ns + decode, failed)
    }

    /// The event engine's decode of a host read of `pages` pages from `ppa` whose data is on
    /// the controller at `now_ns`: each page by its own code, as [`Device::flex_decode`] does on
    /// the reservation path. Returns (the decode time beyond the engine's device-wide
    /// `decode_ns`, whether a page failed).
    pub(super) fn flex_engine_decode(&mut self, ppa: u32, pages: u32, now_ns: u64) -> (u64, bool) {
        let mut ready = now_ns + self.derived.decode_ns;
        let mut failed = false;
        for page in ppa..ppa + pages.max(1) {
            let (done, bad) = self.flex_decode(page, now_ns);
            ready = ready.max(done);
            failed |= bad;
        }
        (ready - now_ns - self.derived.decode_ns, failed)
    }

    /// Flip one bit of the page holding the logical unit at byte `offset` (a planned
    /// corruption, `flexecc.injection = "points"`); false if nothing is stored there.
    pub fn inject_bit_flip(&mut self, offset: u64) -> bool {
        let Some(pu) = self.ftl.mapped(self.unit_of(offset)) else {
            return false;
        };
        match self.ftl.flex_pages_mut() {
            Some(flex) => {
                flex.inject(pu);
                true
            }
            None => false,
        }
    }

    /// The EDC region's placement handle when FlexECC is on (`flexecc.mode = "flex"`).
    pub fn flexecc_edc_handle(&self) -> Option<u32> {
        let flex = self.ftl.flex_pages()?;
        (flex.mode() == FlexEccMode::Flex).then(|| flex.edc_handle())
    }

    /// The placement handle of the block holding the logical unit at byte `offset`.
    pub fn block_handle_of_offset(&self, offset: u64) -> Option<u32> {
        let pu = self.ftl.mapped(self.unit_of(offset))?;
        Some(self.ftl.block_handle_of(pu))
    }

    /// FlexECC's counters and settings, for the `ssd` report (None while off).
    pub fn flexecc_json(&self) -> Option<serde_json::Value> {
        let flex = self.ftl.flex_pages()?;
        let mut v = serde_json::to_value(flex.counters()).expect("counters serialise");
        v["mode"] = flex.mode().name().into();
        v["edc_handle"] = flex.edc_handle().into();
        Some(v)
    }
}
