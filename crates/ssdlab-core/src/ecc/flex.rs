//! FlexECC's device side (Huang, Subedi, He, He, Zhou; USENIX ATC 2014): ECC and EDC regions,
//! the page states a cache's hints drive, and the codec times of each code.
//!
//! A cache tells the SSD what each write is. A *dirty write* (the only copy) is protected by
//! ECC (BCH) and goes to the ECC region; a *clean write* (a fill after a miss: a copy of disk
//! data) only needs detection (EDC, a CRC) and goes to the EDC region. A region is a set of
//! blocks programmed under one code: the EDC region is the blocks of placement handle
//! `flexecc.edc_handle`, with its own host and GC open blocks, and every other block is ECC.
//! A *flush read* (dirty data written back to the disk) leaves the page clean, still under
//! BCH; when GC moves such a page it is re-encoded with CRC into the EDC region. Page states:
//!
//! | state      | region | reached by                                   |
//! |------------|--------|----------------------------------------------|
//! | ECC-dirty  | ECC    | dirty write (or an unhinted write)           |
//! | ECC-clean  | ECC    | flush read of an ECC-dirty page              |
//! | EDC-clean  | EDC    | clean write; GC move of an ECC-clean page    |
//!
//! A host read leaves the state as it is and costs the decode of the page's code. The state is
//! the region of the block holding the unit (the FTL knows it) plus one bit per logical unit,
//! "flushed", for the ECC-clean pages; memory is one bit per logical mapping unit. The module
//! also keeps the counters the paper reports: BCH reads, CRC reads, CRC moves (GC moves of
//! EDC pages) and BCH→CRC conversions (GC moves that re-protect an ECC-clean page).
//!
//! `flexecc.mode = "all_bch"` is the baseline: the same hints are received and counted, every
//! page is BCH; `"flex"` honours them; `"off"` (the default) leaves the device as it was.

use crate::config::{Config, ConfigError};
use crate::request::{Hint, Reliability};
use serde::{Deserialize, Serialize};

/// `flexecc.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FlexEccMode {
    /// No FlexECC model: the `[ecc]` table's codec for every page.
    #[default]
    Off,
    /// The baseline: hints are counted, every page is BCH.
    AllBch,
    /// FlexECC: clean writes go to the EDC (CRC) region, flushed pages move there at GC.
    Flex,
}

impl FlexEccMode {
    pub fn name(self) -> &'static str {
        match self {
            FlexEccMode::Off => "off",
            FlexEccMode::AllBch => "all_bch",
            FlexEccMode::Flex => "flex",
        }
    }
}

/// The `[flexecc]` table. Codec times are per page, after the transfer on reads and before it
/// on writes (the paper's figures are per 4 KiB page). The code's strength (t per codeword)
/// and the RBER model's P/E part come from `[ecc]`; the retention part is here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlexEccConfig {
    pub mode: FlexEccMode,
    /// The placement handle whose blocks form the EDC region (`mode = "flex"`).
    pub edc_handle: u32,
    pub crc_encode_ns: u64,
    pub crc_decode_ns: u64,
    pub bch_encode_ns: u64,
    /// BCH decode of a page without bit errors.
    pub bch_decode_clean_ns: u64,
    /// BCH decode of a page with at least one bit error (syndromes non-zero: Berlekamp–Massey
    /// and Chien search run).
    pub bch_decode_error_ns: u64,
    /// RBER grows with retention: × (1 + age / retention_scale_ns)^retention_exponent, the age
    /// being the time since the unit was last programmed (host write or GC move).
    pub retention_scale_ns: f64,
    pub retention_exponent: f64,
    /// How bit errors arise: `per_read` draws them at every read from the RBER (binomial per
    /// codeword); `points` injects N = RBER × device data bits single-bit corruptions into
    /// stored pages at seeded uniform (time, page) points that a host plans
    /// ([`crate::cache::FlashCache`] does), so every workload sees the same count.
    pub injection: Injection,
}

/// `flexecc.injection`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Injection {
    #[default]
    PerRead,
    Points,
}

impl Default for FlexEccConfig {
    fn default() -> Self {
        FlexEccConfig {
            mode: FlexEccMode::Off,
            edc_handle: 1,
            crc_encode_ns: 800,
            crc_decode_ns: 800,
            bch_encode_ns: 800,
            bch_decode_clean_ns: 5_000,
            bch_decode_error_ns: 10_000,
            // A month of retention doubles the RBER with exponent 1.
            retention_scale_ns: 30.0 * 86_400e9,
            retention_exponent: 1.0,
            injection: Injection::PerRead,
        }
    }
}

impl FlexEccConfig {
    /// At its defaults (the model off): left out of the canonical form, so that the hash of
    /// every configuration without FlexECC is what it was before the table existed.
    pub fn is_default(&self) -> bool {
        *self == FlexEccConfig::default()
    }
}

/// Check the `[flexecc]` table and the `[ecc]` values the error model reads.
pub fn validate(
    config: &Config,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let ecc = &config.ecc;
    if !(ecc.rber_base.is_finite() && (0.0..0.5).contains(&ecc.rber_base)) {
        return Err(invalid(
            "ecc.rber_base",
            format!(
                "expected a raw bit error rate in [0, 0.5), got {}",
                ecc.rber_base
            ),
        ));
    }
    if ecc.code == crate::config::EccCode::Bch && ecc.correctable_bits == 0 {
        return Err(invalid(
            "ecc.correctable_bits",
            "expected t >= 1 with ecc.code = \"bch\" (a BCH code that corrects nothing is \
             an EDC: use ecc.code = \"crc\")"
                .into(),
        ));
    }
    let f = &config.flexecc;
    if !(f.retention_scale_ns.is_finite() && f.retention_scale_ns > 0.0) {
        return Err(invalid(
            "flexecc.retention_scale_ns",
            format!("expected a positive time, got {}", f.retention_scale_ns),
        ));
    }
    if !(f.retention_exponent.is_finite() && f.retention_exponent >= 0.0) {
        return Err(invalid(
            "flexecc.retention_exponent",
            format!("expected a number >= 0, got {}", f.retention_exponent),
        ));
    }
    if f.mode == FlexEccMode::Off {
        return Ok(());
    }
    if f.mode == FlexEccMode::Flex
        && (f.edc_handle == 0 || f.edc_handle >= config.placement.handles)
    {
        return Err(invalid(
            "flexecc.edc_handle",
            format!(
                "expected a placement handle in 1..{} for the EDC region (handle 0 is the ECC \
                 region; raise placement.handles to add one), got {}",
                config.placement.handles, f.edc_handle
            ),
        ));
    }
    if config.ftl.gc_copyback {
        return Err(invalid(
            "ftl.gc_copyback",
            "FlexECC re-encodes pages that GC moves (BCH→CRC conversions): expected \
             ftl.gc_copyback = false"
                .into(),
        ));
    }
    let page = config.geometry.page_size_bytes;
    let unit = config.ftl.mapping_unit_bytes.unwrap_or(page.min(4096));
    if unit != page || !page.is_multiple_of(ecc.codeword_bytes) {
        return Err(invalid(
            "ftl.mapping_unit_bytes",
            format!(
                "FlexECC keeps one code per page: expected one mapping unit per page \
                 ({page} B, got {unit} B) and a whole number of ecc.codeword_bytes \
                 ({}) per page",
                ecc.codeword_bytes
            ),
        ));
    }
    if ecc.code != crate::config::EccCode::Bch {
        return Err(invalid(
            "ecc.code",
            "FlexECC protects dirty pages with BCH: expected ecc.code = \"bch\"".into(),
        ));
    }
    Ok(())
}

/// The state of a logical unit's page (see the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PageState {
    EccDirty,
    EccClean,
    EdcClean,
}

/// The code protecting a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Bch,
    Crc,
}

/// FlexECC's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FlexCounters {
    /// Host writes by hint, in mapping units.
    pub dirty_writes: u64,
    pub clean_writes: u64,
    /// Mapping units read with the flush-read hint, and those of them that became ECC-clean.
    pub flush_reads: u64,
    pub ecc_dirty_to_clean: u64,
    /// Host page reads decoded by each code.
    pub bch_reads: u64,
    /// Host page reads that found bit errors (corruptions met, either code).
    pub reads_with_bit_errors: u64,
    /// Corruptions injected into stored pages (`flexecc.injection = "points"`).
    pub injected_corruptions: u64,
    pub crc_reads: u64,
    /// BCH reads of pages that had bit errors (the slower decode), and those corrected.
    pub bch_reads_with_errors: u64,
    pub bch_corrected_pages: u64,
    /// Page reads a CRC found corrupt, and BCH reads beyond t.
    pub crc_failures: u64,
    pub bch_failures: u64,
    /// GC moves of EDC-clean units (CRC to CRC).
    pub crc_moves: u64,
    /// GC moves of ECC-dirty units (BCH to BCH).
    pub bch_moves: u64,
    /// GC moves that re-protected an ECC-clean unit with CRC in the EDC region.
    pub bch_to_crc: u64,
}

/// Per-logical-unit FlexECC state, owned by the FTL (GC consults it) and driven by the device.
#[derive(Debug, Clone)]
pub struct FlexPages {
    mode: FlexEccMode,
    edc_handle: u32,
    /// One bit per logical unit: flushed while in the ECC region (ECC-clean).
    flushed: Vec<u64>,
    /// When each physical unit was last programmed (host write or GC move): its retention age.
    written_ns: Vec<u64>,
    /// Injected single-bit corruptions per physical unit (`flexecc.injection = "points"`).
    injected: std::collections::BTreeMap<u32, u32>,
    counters: FlexCounters,
}

impl FlexPages {
    /// The state of a device with `logical_units` and `physical_units` mapping units, or None
    /// when the model is off.
    pub fn new(config: &Config, logical_units: u64, physical_units: u64) -> Option<FlexPages> {
        let f = &config.flexecc;
        (f.mode != FlexEccMode::Off).then(|| FlexPages {
            mode: f.mode,
            edc_handle: f.edc_handle,
            flushed: vec![0; logical_units.div_ceil(64) as usize],
            written_ns: vec![0; physical_units as usize],
            injected: std::collections::BTreeMap::new(),
            counters: FlexCounters::default(),
        })
    }

    pub fn mode(&self) -> FlexEccMode {
        self.mode
    }

    #[inline]
    fn flushed(&self, unit: u64) -> bool {
        self.flushed[(unit / 64) as usize] >> (unit % 64) & 1 == 1
    }

    #[inline]
    fn set_flushed(&mut self, unit: u64, on: bool) {
        let (word, bit) = ((unit / 64) as usize, unit % 64);
        if on {
            self.flushed[word] |= 1 << bit;
        } else {
            self.flushed[word] &= !(1 << bit);
        }
    }

    /// The handle a write goes to: clean writes to the EDC region in `flex` mode, everything
    /// else where placement put it (`resolved`).
    #[inline]
    pub fn write_handle(&self, hint: &Hint, resolved: u32) -> u32 {
        match (self.mode, hint.reliability) {
            (FlexEccMode::Flex, Some(Reliability::Clean)) => self.edc_handle,
            _ => resolved,
        }
    }

    /// The code of a page in a block of `block_handle`.
    #[inline]
    pub fn code_of(&self, block_handle: u32) -> Code {
        if self.mode == FlexEccMode::Flex && block_handle == self.edc_handle {
            Code::Crc
        } else {
            Code::Bch
        }
    }

    /// The state of logical unit `unit` held in a block of `block_handle`.
    pub fn state(&self, unit: u64, block_handle: u32) -> PageState {
        match (self.code_of(block_handle), self.flushed(unit)) {
            (Code::Crc, _) => PageState::EdcClean,
            (Code::Bch, true) => PageState::EccClean,
            (Code::Bch, false) => PageState::EccDirty,
        }
    }

    /// A host write of `unit`: a new version, dirty unless the hint says clean. In the
    /// baseline a clean write is an ECC page that is already clean (nothing to flush).
    /// `physical` is where it landed.
    pub fn on_host_write(&mut self, unit: u64, physical: u32, hint: &Hint, now_ns: u64) {
        self.written_ns[physical as usize] = now_ns;
        self.injected.remove(&physical);
        let clean = hint.reliability == Some(Reliability::Clean);
        if clean {
            self.counters.clean_writes += 1;
        } else {
            self.counters.dirty_writes += 1;
        }
        self.set_flushed(unit, clean && self.mode == FlexEccMode::AllBch);
    }

    /// A flush read of `unit` held in a block of `block_handle`: an ECC-dirty page becomes
    /// ECC-clean.
    pub fn on_flush_read(&mut self, unit: u64, block_handle: u32) {
        self.counters.flush_reads += 1;
        if self.state(unit, block_handle) == PageState::EccDirty {
            self.counters.ecc_dirty_to_clean += 1;
            self.set_flushed(unit, true);
        }
    }

    /// Unit `unit` was trimmed: no state.
    pub fn on_trim(&mut self, unit: u64) {
        self.set_flushed(unit, false);
    }

    /// GC of a victim of `victim_handle` moves `unit`: the handle whose GC frontier takes it.
    /// An ECC-clean unit is re-protected with CRC in the EDC region (`flex` mode only).
    #[inline]
    pub fn gc_target(&self, victim_handle: u32, unit: u64) -> Option<u32> {
        (self.mode == FlexEccMode::Flex && victim_handle != self.edc_handle && self.flushed(unit))
            .then_some(self.edc_handle)
    }

    /// The EDC handle, whose GC frontier a victim's conversions fill.
    pub fn edc_handle(&self) -> u32 {
        self.edc_handle
    }

    /// GC moved `unit` from a block of `from_handle` to physical unit `physical` in a block of
    /// `to_handle` at `now_ns`.
    /// A corruption in the source moves with a CRC page (detection only) and is corrected on
    /// the way by BCH.
    pub fn on_gc_move(
        &mut self,
        unit: u64,
        (from_handle, to_handle): (u32, u32),
        (source, physical): (u32, u32),
        now_ns: u64,
    ) {
        self.written_ns[physical as usize] = now_ns;
        self.injected.remove(&physical);
        if let Some(flips) = self.injected.remove(&source) {
            if self.code_of(from_handle) == Code::Crc {
                self.injected.insert(physical, flips);
            }
        }
        match (self.code_of(from_handle), self.code_of(to_handle)) {
            (Code::Crc, _) => self.counters.crc_moves += 1,
            (Code::Bch, Code::Crc) => {
                self.counters.bch_to_crc += 1;
                self.set_flushed(unit, false);
            }
            (Code::Bch, Code::Bch) => self.counters.bch_moves += 1,
        }
    }

    /// Flip one bit of the data stored in physical unit `physical` (a planned corruption).
    pub fn inject(&mut self, physical: u32) {
        *self.injected.entry(physical).or_insert(0) += 1;
        self.counters.injected_corruptions += 1;
    }

    /// Injected flips carried by physical unit `physical`.
    #[inline]
    pub fn injected_at(&self, physical: u32) -> u32 {
        if self.injected.is_empty() {
            return 0;
        }
        self.injected.get(&physical).copied().unwrap_or(0)
    }

    /// Retention age at `now_ns` of the data in physical unit `physical`.
    #[inline]
    pub fn age_ns_of_page(&self, physical: u32, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.written_ns[physical as usize])
    }

    /// A host read of a page under `code`: its outcome.
    pub fn on_host_read(&mut self, code: Code, bit_errors: bool, failed: bool) {
        let c = &mut self.counters;
        c.reads_with_bit_errors += bit_errors as u64;
        match code {
            Code::Bch => {
                c.bch_reads += 1;
                if bit_errors {
                    c.bch_reads_with_errors += 1;
                    if failed {
                        c.bch_failures += 1;
                    } else {
                        c.bch_corrected_pages += 1;
                    }
                }
            }
            Code::Crc => {
                c.crc_reads += 1;
                if failed {
                    c.crc_failures += 1;
                }
            }
        }
    }

    pub fn counters(&self) -> FlexCounters {
        self.counters
    }

    pub fn reset_counters(&mut self) {
        self.counters = FlexCounters::default();
    }
}

/// Codec time of a page: (encode ns, decode ns without errors, decode ns with errors).
pub fn codec_ns(config: &FlexEccConfig, code: Code) -> (u64, u64, u64) {
    match code {
        Code::Bch => (
            config.bch_encode_ns,
            config.bch_decode_clean_ns,
            config.bch_decode_error_ns,
        ),
        Code::Crc => (
            config.crc_encode_ns,
            config.crc_decode_ns,
            config.crc_decode_ns,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(mode: FlexEccMode) -> FlexPages {
        let mut config = Config::default();
        config.flexecc.mode = mode;
        FlexPages::new(&config, 1000, 1200).expect("on")
    }

    fn hint(rel: Option<Reliability>) -> Hint {
        Hint {
            reliability: rel,
            ..Default::default()
        }
    }

    #[test]
    fn transitions_follow_the_papers_table() {
        let mut p = pages(FlexEccMode::Flex);
        let dirty = hint(Some(Reliability::Dirty));
        let clean = hint(Some(Reliability::Clean));
        // Dirty write: ECC region, ECC-dirty.
        assert_eq!(p.write_handle(&dirty, 0), 0);
        p.on_host_write(7, 7, &dirty, 0);
        assert_eq!(p.state(7, 0), PageState::EccDirty);
        assert_eq!(p.gc_target(0, 7), None);
        // Flush read: ECC-clean; GC re-protects it with CRC.
        p.on_flush_read(7, 0);
        assert_eq!(p.state(7, 0), PageState::EccClean);
        assert_eq!(p.gc_target(0, 7), Some(1));
        p.on_gc_move(7, (0, 1), (99, 100), 0);
        assert_eq!(p.state(7, 1), PageState::EdcClean);
        // A second flush read of a clean page changes nothing.
        p.on_flush_read(7, 1);
        assert_eq!(p.state(7, 1), PageState::EdcClean);
        // GC of an EDC page stays in the EDC region.
        assert_eq!(p.gc_target(1, 7), None);
        p.on_gc_move(7, (1, 1), (99, 100), 0);
        // Clean write: EDC region.
        assert_eq!(p.write_handle(&clean, 0), 1);
        p.on_host_write(8, 8, &clean, 0);
        assert_eq!(p.state(8, 1), PageState::EdcClean);
        // A dirty overwrite of a flushed page is dirty again.
        p.on_flush_read(9, 0);
        p.on_host_write(9, 9, &dirty, 0);
        assert_eq!(p.state(9, 0), PageState::EccDirty);
        let c = p.counters();
        assert_eq!(
            (
                c.bch_to_crc,
                c.crc_moves,
                c.flush_reads,
                c.ecc_dirty_to_clean
            ),
            (1, 1, 3, 2)
        );
        assert_eq!((c.dirty_writes, c.clean_writes), (2, 1));
    }

    #[test]
    fn baseline_keeps_everything_under_bch() {
        let mut p = pages(FlexEccMode::AllBch);
        let clean = hint(Some(Reliability::Clean));
        assert_eq!(p.write_handle(&clean, 0), 0);
        p.on_host_write(3, 3, &clean, 0);
        assert_eq!(p.state(3, 0), PageState::EccClean);
        assert_eq!(p.code_of(1), Code::Bch);
        assert_eq!(p.gc_target(0, 3), None);
    }
}
