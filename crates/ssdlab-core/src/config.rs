//! Typed device configuration: one serde tree, defaults filled in one place, derived values
//! computed and checked in one function ([`Config::validate`]) with the reason for each check.
//!
//! A configuration is read from TOML (a preset or a user file), `key=value` overrides are applied
//! to the TOML tree before it is typed (so an override is checked exactly like a file entry), and
//! every error names the key and what was expected. The config hash is taken over the canonical
//! JSON form after defaults, so two files that differ only in layout or comments hash the same.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// A configuration that cannot be used, with the file (or override) and key at fault.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    #[error("{source_name}: {message}")]
    Parse {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: key '{key}': {message}")]
    Invalid {
        source_name: String,
        key: String,
        message: String,
    },
    #[error("override '{item}': {message}")]
    Override { item: String, message: String },
    #[error("unknown preset '{name}' (known presets: {known})")]
    UnknownPreset { name: String, known: String },
}

/// Cell technology: bits stored per cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellKind {
    Slc,
    Mlc,
    Tlc,
    Qlc,
}

impl CellKind {
    pub fn bits_per_cell(self) -> u32 {
        match self {
            CellKind::Slc => 1,
            CellKind::Mlc => 2,
            CellKind::Tlc => 3,
            CellKind::Qlc => 4,
        }
    }

    /// Read reference voltages needed to read each page type of a wordline, for the
    /// binary-reflected Gray codings used in the literature (TLC: LSB needs V3; CSB V1,V5; MSB
    /// V0,V2,V4,V6). A melded whole-wordline read needs all `2^bits - 1` references once.
    pub fn sensings_per_page_type(self) -> &'static [u64] {
        match self {
            CellKind::Slc => &[1],
            CellKind::Mlc => &[1, 2],
            CellKind::Tlc => &[1, 2, 4],
            CellKind::Qlc => &[1, 2, 4, 8],
        }
    }

    pub fn page_type_names(self) -> &'static [&'static str] {
        match self {
            CellKind::Slc => &["slc"],
            CellKind::Mlc => &["lsb", "msb"],
            CellKind::Tlc => &["lsb", "csb", "msb"],
            CellKind::Qlc => &["lsb", "csb", "msb", "tsb"],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GeometryConfig {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_size_bytes: u32,
    pub oob_size_bytes: u32,
    /// Physical capacity above the exported logical capacity, as a fraction of logical capacity.
    pub over_provisioning: f64,
}

impl Default for GeometryConfig {
    fn default() -> Self {
        GeometryConfig {
            channels: 8,
            chips_per_channel: 4,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 512,
            pages_per_block: 384,
            page_size_bytes: 4096,
            oob_size_bytes: 128,
            over_provisioning: 0.07,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CellConfig {
    #[serde(rename = "type")]
    pub kind: CellKind,
    /// Fixed part X of tR = X + k·Y (addressing, pass voltages, post-processing).
    pub read_x_ns: u64,
    /// Per-reference-voltage part Y of tR = X + k·Y.
    pub read_y_ns: u64,
    /// Explicit tR per page type (LSB first); overrides the formula when non-empty.
    pub read_ns: Vec<u64>,
    /// Explicit melded whole-wordline read time; 0 means X + (2^bits - 1)·Y.
    pub melded_read_ns: u64,
    /// tPROG per page type (LSB first); one value applies to every type.
    pub program_ns: Vec<u64>,
    pub erase_ns: u64,
    /// Program and erase suspend/resume for reads (Wu & He, FAST 2012).
    pub suspend: bool,
    /// Time to suspend a program or erase; needs `suspend` (default 20 us when it is on).
    pub suspend_ns: Option<u64>,
    /// Time to resume a suspended operation; needs `suspend` (default 20 us).
    pub resume_ns: Option<u64>,
    /// Suspensions allowed per operation; needs `suspend` (default 16: read-modify-write reads
    /// suspend too, and a cap of a few would leave host reads behind programs at their cap).
    pub max_suspends: Option<u32>,
    /// Program/erase cycles a block survives (the native interface refuses an erase past it
    /// and marks the block bad). Unset: 100k SLC, 10k MLC, 3k TLC, 1k QLC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endurance_cycles: Option<u32>,
}

impl Default for CellConfig {
    fn default() -> Self {
        CellConfig {
            kind: CellKind::Tlc,
            read_x_ns: 38_000,
            read_y_ns: 20_000,
            read_ns: Vec::new(),
            melded_read_ns: 0,
            program_ns: vec![700_000],
            erase_ns: 3_500_000,
            suspend: false,
            suspend_ns: None,
            resume_ns: None,
            max_suspends: None,
            endurance_cycles: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelConfig {
    /// Transfer rate in mega-transfers per second.
    pub rate_mtps: u32,
    pub bus_width_bytes: u32,
    /// Command and address cycles charged on the bus with every transfer.
    pub command_overhead_ns: u64,
    /// Cache read: the die starts its next array read while the register drains over the bus.
    pub cache_read: bool,
    /// Cache program: data for the next program is transferred while the die is still busy.
    pub cache_program: bool,
    /// A page transfer carries the page's OOB (spare) bytes too, as real NAND does when the
    /// spare area is read or written with the page.
    pub transfer_oob: bool,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            rate_mtps: 800,
            bus_width_bytes: 1,
            command_overhead_ns: 0,
            cache_read: false,
            cache_program: false,
            transfer_oob: false,
        }
    }
}

/// What a read of a never-written (or trimmed) page costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnmappedRead {
    /// Zeros from the controller without touching flash (what NVMe deallocated reads do).
    Zero,
    /// A full flash read, as if the page were mapped (some benchmarks expect this).
    Flash,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostConfig {
    /// Queue depth used for trace replay when the workload does not set its own.
    pub queue_depth: u32,
    /// Host link bandwidth in MB/s (10^6 B/s); 0 models an infinitely fast link.
    pub link_mbps: u64,
    pub unmapped_read: UnmappedRead,
    /// When a read senses a whole wordline at once (melded pages): off, on or auto (see
    /// [`MeldedReads`]).
    pub melded_reads: MeldedReads,
}

/// Melded reads (Arpith K., Gopinath: melded pages): one sensing of every reference voltage of a
/// wordline returns all its pages, X + (2^bits - 1)·Y instead of one X per page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MeldedReads {
    /// Every page is read on its own (normal TLC).
    #[default]
    Off,
    /// Every read senses its whole wordline and transfers all of its pages (the paper's melded
    /// controller, for data placed a wordline per read group).
    On,
    /// Per wordline: meld when the pages wanted from it -- by this request and by host reads
    /// already queued at its die -- cost less die time melded than read one by one (always
    /// when they are the whole wordline); otherwise normal reads.
    Auto,
}

impl MeldedReads {
    pub const ALL: &'static [MeldedReads] = &[MeldedReads::Off, MeldedReads::On, MeldedReads::Auto];

    pub fn name(self) -> &'static str {
        match self {
            MeldedReads::Off => "off",
            MeldedReads::On => "on",
            MeldedReads::Auto => "auto",
        }
    }
}

/// `off`, `on`, `auto`; `false` and `true` (the switch's older spelling) mean off and auto.
impl<'de> Deserialize<'de> for MeldedReads {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = MeldedReads;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("one of \"off\", \"on\", \"auto\"")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<MeldedReads, E> {
                Ok(if v {
                    MeldedReads::Auto
                } else {
                    MeldedReads::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<MeldedReads, E> {
                match v {
                    "off" => Ok(MeldedReads::Off),
                    "on" => Ok(MeldedReads::On),
                    "auto" => Ok(MeldedReads::Auto),
                    other => Err(E::custom(format!(
                        "unknown melded_reads value \"{other}\", expected one of \"off\", \"on\", \"auto\""
                    ))),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            queue_depth: 32,
            link_mbps: 3938,
            unmapped_read: UnmappedRead::Zero,
            melded_reads: MeldedReads::Off,
        }
    }
}

/// How a die chooses its next transaction (one file per policy in `sched/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SchedulerKind {
    /// First come, first served: each operation is reserved on its die and channel when its
    /// request is issued (the exact closed-form model).
    Fcfs,
    /// Host reads, then host writes, then GC, then erases, with aging.
    #[default]
    Priority,
    /// Reads first (host or GC), then programs, then erases, preferring work whose channel is
    /// free (MQSim's out-of-order TSU).
    OutOfOrder,
}

impl SchedulerKind {
    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::Fcfs => "fcfs",
            SchedulerKind::Priority => "priority",
            SchedulerKind::OutOfOrder => "out_of_order",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControllerConfig {
    /// Device-CPU time per host request (command parsing, queue handling).
    pub cpu_ns_per_request: u64,
    /// Device-CPU time per mapping lookup or update (one per page).
    pub cpu_ns_per_page: u64,
    /// DRAM write buffer in pages; 0 disables it: a write that fills a page completes after
    /// its program, and the units of a page still filling wait in the controller.
    pub write_buffer_pages: u32,
    /// Die scheduling policy: fcfs, priority or out_of_order.
    pub scheduler: SchedulerKind,
    /// Priority scheduling: a waiting transaction rises one class per this much waiting.
    pub aging_ns: u64,
    /// Power-loss protection (hold-up capacitors, as on enterprise drives): data the controller
    /// has accepted is durable, so a flush completes at once, pads no page and waits for no
    /// program, and a power loss programs the pages still filling instead of losing them.
    /// Left out of the canonical form while off, so that configurations without it keep their
    /// hashes.
    #[serde(skip_serializing_if = "is_false")]
    pub power_loss_protection: bool,
    /// A volatile write cache (NVMe's Volatile Write Cache, on by default as on client
    /// drives): a write is done once the controller has its data, and a flush makes it
    /// durable. Off (`nvme set-feature -f 6 -v 0`, `hdparm -W0`), every write is done once
    /// its data is on flash, as a FUA write is, and a flush has nothing to wait for. Left out
    /// of the canonical form while on, so that configurations without it keep their hashes.
    #[serde(skip_serializing_if = "is_true")]
    pub volatile_write_cache: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_true(value: &bool) -> bool {
    *value
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            cpu_ns_per_request: 0,
            cpu_ns_per_page: 0,
            write_buffer_pages: 0,
            scheduler: SchedulerKind::Priority,
            aging_ns: 5_000_000,
            power_loss_protection: false,
            volatile_write_cache: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EccCode {
    None,
    Crc,
    Bch,
    Ldpc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EccConfig {
    pub code: EccCode,
    /// Data bytes per codeword.
    pub codeword_bytes: u32,
    /// Correctable bits per codeword (BCH t; LDPC hard-decision capability).
    pub correctable_bits: u32,
    /// Encode time per codeword; codewords of a page are encoded in parallel.
    pub encode_ns: u64,
    /// Decode time per codeword; 0 takes the code's reference figure (see `ecc`).
    pub decode_ns: u64,
    /// LDPC: extra time per soft-decoding round (each also re-reads the page).
    pub soft_decode_ns: u64,
    /// Read retries (BCH) or soft-decoding rounds (LDPC) before an error is uncorrectable.
    pub max_read_retries: u32,
    /// Raw bit error rate of a fresh block; 0 disables error injection.
    pub rber_base: f64,
    /// RBER = base · (1 + PE/pe_scale)^pe_exponent.
    pub rber_pe_scale: f64,
    pub rber_pe_exponent: f64,
    /// Each read retry (shifted reference voltages) scales the RBER by this factor.
    pub retry_rber_factor: f64,
}

impl Default for EccConfig {
    fn default() -> Self {
        EccConfig {
            code: EccCode::Bch,
            codeword_bytes: 1024,
            correctable_bits: 40,
            encode_ns: 800,
            decode_ns: 0,
            soft_decode_ns: 40_000,
            max_read_retries: 3,
            rber_base: 0.0,
            rber_pe_scale: 3000.0,
            rber_pe_exponent: 2.0,
            retry_rber_factor: 0.5,
        }
    }
}

/// Energy figures; the defaults are illustrative orders of magnitude from measurements of
/// MLC parts (Grupp et al., MICRO 2009), to be replaced by a preset's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnergyConfig {
    pub read_nj: f64,
    pub program_nj: f64,
    pub erase_nj: f64,
    pub transfer_pj_per_byte: f64,
    pub ecc_decode_nj: f64,
    /// Controller power while idle, charged over the whole simulated time.
    pub idle_w: f64,
}

impl Default for EnergyConfig {
    fn default() -> Self {
        EnergyConfig {
            read_nj: 2_000.0,
            program_nj: 20_000.0,
            erase_nj: 150_000.0,
            transfer_pj_per_byte: 15.0,
            ecc_decode_nj: 50.0,
            idle_w: 0.1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FtlKind {
    PageMap,
    /// Demand-based page mapping with a cached mapping table (`ftl/dftl.rs`).
    Dftl,
}

/// How DFTL finds the entry to evict from its cached mapping table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DftlVictimSearch {
    /// Scan the whole cached table for the least recently used entry (FlashSim's DFTL).
    #[default]
    Scan,
    /// Take the tail of an LRU list, O(1).
    Lru,
}

/// DFTL's settings with their defaults filled in ([`FtlConfig::dftl`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DftlSettings {
    pub cached_fraction: f64,
    pub victim_search: DftlVictimSearch,
    pub cpu_lookup_ns: u64,
    pub cpu_eviction_ns: u64,
    pub cpu_scan_entry_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GcPolicyKind {
    Greedy,
    CostBenefit,
    Fifo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WearLevelingKind {
    /// Free blocks are used in the order they were freed.
    None,
    /// Dynamic: allocate the least-worn free block of the plane.
    Dynamic,
}

/// `name()` on the configuration's choice enums: the spelling the configuration file uses,
/// for reports and messages. Reports used to print `Debug` lowercased, which turns
/// `cost_benefit` into `costbenefit`, a value the configuration then refuses. `ALL` lists the
/// variants; the `match` is exhaustive, so a new variant cannot be left without a name, and a
/// test checks each name against serde's spelling.
macro_rules! config_names {
    ($($kind:ident { $($variant:ident => $name:literal),+ $(,)? })+) => {$(
        impl $kind {
            pub const ALL: &'static [$kind] = &[$($kind::$variant),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($kind::$variant => $name),+
                }
            }
        }
    )+};
}

config_names! {
    CellKind { Slc => "slc", Mlc => "mlc", Tlc => "tlc", Qlc => "qlc" }
    UnmappedRead { Zero => "zero", Flash => "flash" }
    EccCode { None => "none", Crc => "crc", Bch => "bch", Ldpc => "ldpc" }
    FtlKind { PageMap => "page_map", Dftl => "dftl" }
    DftlVictimSearch { Scan => "scan", Lru => "lru" }
    GcPolicyKind { Greedy => "greedy", CostBenefit => "cost_benefit", Fifo => "fifo" }
    WearLevelingKind { None => "none", Dynamic => "dynamic" }
    GcDestinationKind { VictimPlane => "victim_plane", MostFree => "most_free" }
}

/// Where GC moves a victim's valid data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GcDestinationKind {
    /// The victim's own plane (copyback possible).
    #[default]
    VictimPlane,
    /// The plane with the most free blocks, on any die (through the controller).
    MostFree,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FtlConfig {
    pub kind: FtlKind,
    pub gc_policy: GcPolicyKind,
    /// Foreground GC runs in a plane whose free blocks fall to this many.
    pub gc_fg_free_blocks: u32,
    /// Background GC runs in idle time in a plane with fewer free blocks than this.
    pub gc_bg_free_blocks: u32,
    /// A die must have been idle this long before background GC starts on it.
    pub gc_bg_idle_ns: u64,
    /// GC moves pages inside the die (copyback) instead of through the controller.
    pub gc_copyback: bool,
    /// Pages a GC step moves before host work may run again (foreground steps scale this by
    /// the free-block shortage).
    pub gc_step_pages: u32,
    pub wear_leveling: WearLevelingKind,
    /// The plane a victim's valid data moves to.
    pub gc_destination: GcDestinationKind,
    /// Bytes the FTL maps as one unit (a power of two from 512 up to the page size); several
    /// units fill one flash page through the write buffer. Unset: 4096, or the page size if
    /// that is smaller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mapping_unit_bytes: Option<u32>,
    /// DFTL: fraction of all mappings its cached mapping table holds, in (0, 1] (default
    /// 0.02, the NoFTL paper's 2 %).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dftl_cached_fraction: Option<f64>,
    /// DFTL: how an eviction finds its victim, `scan` (default) or `lru`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dftl_victim_search: Option<DftlVictimSearch>,
    /// DFTL: device-CPU time per mapping lookup (default 100 ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dftl_cpu_lookup_ns: Option<u64>,
    /// DFTL: device-CPU time per eviction besides the victim search (default 500 ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dftl_cpu_eviction_ns: Option<u64>,
    /// DFTL: device-CPU time per cached entry a `scan` victim search looks at (default 2 ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dftl_cpu_scan_entry_ns: Option<u64>,
}

impl FtlConfig {
    /// DFTL's settings, defaults filled in.
    pub fn dftl(&self) -> DftlSettings {
        DftlSettings {
            cached_fraction: self.dftl_cached_fraction.unwrap_or(0.02),
            victim_search: self.dftl_victim_search.unwrap_or_default(),
            cpu_lookup_ns: self.dftl_cpu_lookup_ns.unwrap_or(100),
            cpu_eviction_ns: self.dftl_cpu_eviction_ns.unwrap_or(500),
            cpu_scan_entry_ns: self.dftl_cpu_scan_entry_ns.unwrap_or(2),
        }
    }
}

impl Default for FtlConfig {
    fn default() -> Self {
        FtlConfig {
            kind: FtlKind::PageMap,
            gc_policy: GcPolicyKind::Greedy,
            gc_fg_free_blocks: 2,
            gc_bg_free_blocks: 4,
            gc_bg_idle_ns: 1_000_000,
            gc_copyback: true,
            gc_step_pages: 32,
            wear_leveling: WearLevelingKind::Dynamic,
            gc_destination: GcDestinationKind::VictimPlane,
            mapping_unit_bytes: None,
            dftl_cached_fraction: None,
            dftl_victim_search: None,
            dftl_cpu_lookup_ns: None,
            dftl_cpu_eviction_ns: None,
            dftl_cpu_scan_entry_ns: None,
        }
    }
}

/// How the plane of each host page is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AllocationKind {
    /// The least-loaded die at the time the page is placed, channel-first among equals.
    #[default]
    Dynamic,
    /// A fixed channel-way-die-plane stripe per placement handle (with single-plane dies, the
    /// melded-pages paper's normal TLC layout: logical pages channel-first, each die filling
    /// its wordlines in order).
    Static,
    /// The same stripe, a whole wordline (one page per bit of a cell) per plane before the
    /// next: the melded layout, consecutive pages share a wordline.
    Wordline,
}

impl AllocationKind {
    pub fn name(self) -> &'static str {
        match self {
            AllocationKind::Dynamic => "dynamic",
            AllocationKind::Static => "static",
            AllocationKind::Wordline => "wordline",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlacementConfig {
    /// Use hints to choose a write frontier; off gives every experiment its baseline.
    pub honor_hints: bool,
    /// Plane allocation of host pages: dynamic or static.
    pub allocation: AllocationKind,
    /// Placement handles (write frontiers); stream ids and FDP placement ids index them.
    pub handles: u32,
    /// Handle for each Linux write-life hint, indexed NOT_SET, NONE, SHORT, MEDIUM, LONG,
    /// EXTREME; values past the last handle are clamped to it.
    pub write_life_handles: Vec<u32>,
    pub sea_dyn_handle: u32,
    pub sea_stat_handle: u32,
    /// Read-group hints (melded pages): a group's wordline left partly filled this long
    /// without a write of the group is released to normal placement.
    pub read_group_timeout_ns: u64,
    /// Learn read groups from reads (melded pages): the logical units of a host read of at
    /// least a wordline's worth of mapping units become one group, which later unhinted
    /// writes of those units are placed by.
    pub learn_read_groups: bool,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            honor_hints: true,
            allocation: AllocationKind::Dynamic,
            handles: 1,
            write_life_handles: vec![0, 0, 1, 2, 3, 4],
            sea_dyn_handle: 1,
            sea_stat_handle: 0,
            read_group_timeout_ns: 1_000_000,
            learn_read_groups: false,
        }
    }
}

/// SEA-SSD's device side (Sun, Arakawa, Takeuchi, TCAS-I 2014): how the settings hint sizes
/// the `dyn` segment and how the prediction hint is kept. The paper gives no formula; these are
/// the assumptions, each a parameter (see `ftl/segments.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SeaConfig {
    /// Share of the engine's cache assumed dirty at most (InnoDB's max dirty pages, SQLite's
    /// pages not yet checkpointed): dyn = (WAL + cache × this) × `dyn_multiplier`. An
    /// assumption: the paper leaves the formula open.
    pub dirty_fraction: f64,
    /// Scales the dyn segment the settings hint asks for.
    pub dyn_multiplier: f64,
    /// Predicted logical units remembered: the table holds the latest this many predictions
    /// (a bounded FIFO); an older one expires.
    pub predict_table_entries: u32,
    /// GC in the stat segment moves a predicted unit to the dyn segment (off: predictions
    /// are only counted).
    pub migrate_predicted: bool,
    /// How far the sized segments bend: a plane collects in the segment its quota names
    /// unless the best victim of all blocks costs at most this fraction of what that
    /// segment's best costs, in valid units copied per unit freed; it is then collected
    /// instead (0: only when the segment's best frees nothing; 1: whenever it is cheaper). Without it, a quota smaller than dyn's live data makes
    /// dyn copy its own data over and over (TPC-C on SQLite: WAF 17 instead of 1.3), and one
    /// larger than dyn needs keeps dyn's nearly empty blocks from stat. An assumption: the
    /// paper gives no GC policy.
    pub cross_segment_ratio: f64,
}

impl SeaConfig {
    /// Upper bound of `sea.predict_table_entries`: the table's memory (about 24 B an entry)
    /// stays below half a gigabyte.
    pub const MAX_PREDICT_TABLE_ENTRIES: u32 = 1 << 24;
    /// Upper bound of `sea.dyn_multiplier`.
    pub const MAX_DYN_MULTIPLIER: f64 = 1000.0;
}

impl Default for SeaConfig {
    fn default() -> Self {
        SeaConfig {
            dirty_fraction: 0.25,
            dyn_multiplier: 1.0,
            predict_table_entries: 65_536,
            migrate_predicted: true,
            cross_segment_ratio: 0.5,
        }
    }
}

// Both off by default: each keeps data that grows with the run, which only a user who asked
// for it should pay for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct StatsConfig {
    /// Width of one time-series interval in simulated ns; 0 (the default) disables the time
    /// series. The series holds a bounded number of rows and widens its intervals when it
    /// fills up (see `stats::TimeSeries`).
    pub interval_ns: u64,
    /// Keep a per-request log (request #, op, address, size, flash work, durations).
    pub request_log: bool,
}

impl StatsConfig {
    /// Interval of a time series asked for without a width: 10 ms of simulated time.
    pub const DEFAULT_INTERVAL_NS: u64 = 10_000_000;
}

/// The whole device description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub name: String,
    pub description: String,
    pub geometry: GeometryConfig,
    pub cell: CellConfig,
    pub channel: ChannelConfig,
    pub host: HostConfig,
    pub controller: ControllerConfig,
    pub ecc: EccConfig,
    pub energy: EnergyConfig,
    pub ftl: FtlConfig,
    pub placement: PlacementConfig,
    pub sea: SeaConfig,
    pub stats: StatsConfig,
    /// FlexECC's regions and codec times; left out of the canonical form (and hash) while at its defaults.
    #[serde(skip_serializing_if = "crate::ecc::flex::FlexEccConfig::is_default")]
    pub flexecc: crate::ecc::flex::FlexEccConfig,
    /// The SSD cache over a disk that a cache workload runs (`crate::cache`); likewise.
    #[serde(skip_serializing_if = "crate::cache::CacheConfig::is_default")]
    pub cache: crate::cache::CacheConfig,
}

/// Values computed once from a validated [`Config`].
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    pub dies: u32,
    pub planes: u32,
    pub blocks: u32,
    pub physical_pages: u64,
    pub logical_pages: u64,
    pub logical_bytes: u64,
    /// What the FTL maps: `ftl.mapping_unit_bytes` resolved, and how many fill a page.
    pub mapping_unit_bytes: u32,
    pub units_per_page: u32,
    pub logical_units: u64,
    pub bits_per_cell: u32,
    /// tR by page type.
    pub read_ns: Vec<u64>,
    pub melded_read_ns: u64,
    /// tPROG by page type.
    pub program_ns: Vec<u64>,
    /// Bus time for one page including command overhead.
    pub page_transfer_ns: u64,
    /// Bus time for the first k codewords of a page (and their share of its spare area when
    /// the OOB crosses too), command overhead included, for k = 0..=codewords_per_page: a read
    /// moves only the codewords it wants (NAND's random data out). The last is a page's.
    pub codeword_transfer_ns: Vec<u64>,
    pub codewords_per_page: u32,
    /// The codewords a whole mapping unit takes (at least one).
    pub unit_codewords: u32,
    pub decode_ns: u64,
    pub encode_ns: u64,
    /// Suspend/resume latencies and the per-operation cap (zero when suspend is off).
    pub suspend_ns: u64,
    pub resume_ns: u64,
    pub max_suspends: u32,
    /// Memory the FTL's flat tables take whatever the workload (see [`MAPPING_BYTES_PER_BLOCK`]).
    pub mapping_bytes: u64,
}

/// The FTL's mapping unit when `ftl.mapping_unit_bytes` is unset (pages smaller than this map
/// whole pages): 4 KiB, the host's usual block and what controllers map.
pub const DEFAULT_MAPPING_UNIT_BYTES: u32 = 4096;

/// Memory per erase block besides the per-page tables: the page-mapping FTL's per-block arrays
/// (valid count, write pointer, state, close sequence, last write time, erase count, owner:
/// 30 B), a free-pool entry (8 B) and the geometry's die table (4 B), rounded up.
pub const MAPPING_BYTES_PER_BLOCK: u64 = 48;

/// Memory per page the data store of data-driven mode holds for each page with data: the page
/// itself plus its boxed slice and hash-map entry.
pub const STORED_PAGE_OVERHEAD_BYTES: u64 = 32;

/// How many standard deviations of live-data imbalance between planes the spare space must
/// absorb (see the spare-space check in [`Config::validate`]).
const PLANE_IMBALANCE_SIGMAS: f64 = 4.0;

/// Parse a `--set` value: TOML syntax first (numbers, booleans, arrays, quoted strings), and a
/// bare word as a string so that `ftl.gc_policy=fifo` needs no quotes.
fn parse_override_value(raw: &str) -> toml::Value {
    let wrapped = format!("v = {raw}");
    match wrapped.parse::<toml::Table>() {
        Ok(mut table) => table
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(raw.into())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

fn apply_override(root: &mut toml::Table, key: &str, raw: &str) -> Result<(), ConfigError> {
    let err = |message: String| ConfigError::Override {
        item: format!("{key}={raw}"),
        message,
    };
    // A value is one line of text: TOML would read a newline as the end of the value and take
    // what follows as more TOML (or drop it), so the override would not mean what was typed.
    if let Some(c) = key.chars().chain(raw.chars()).find(|c| c.is_control()) {
        return Err(ConfigError::Override {
            item: format!("{}={}", key.escape_debug(), raw.escape_debug()),
            message: format!(
                "control character {c:?} in the override: expected key=value on one line"
            ),
        });
    }
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(err("expected a dotted key such as geometry.channels".into()));
    }
    let mut table = root;
    for part in &parts[..parts.len() - 1] {
        let entry = table
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()));
        table = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(err(format!("'{part}' is a value, not a section"))),
        };
    }
    table.insert(
        parts[parts.len() - 1].to_string(),
        parse_override_value(raw),
    );
    Ok(())
}

/// serde reports an unknown key as "unknown field `x`, expected one of ... in `section`": name
/// it by its full dotted key, the way users write it in `--set`.
fn name_unknown_key(message: &str) -> String {
    let field = message
        .split("unknown field `")
        .nth(1)
        .and_then(|rest| rest.split('`').next());
    let section = message
        .rsplit(" in `")
        .next()
        .filter(|_| message.contains(" in `"))
        .and_then(|rest| rest.split('`').next());
    match (field, section) {
        (Some(field), Some(section)) => format!("unknown key '{section}.{field}': {message}"),
        (Some(field), None) => format!("unknown key '{field}': {message}"),
        _ => message.to_string(),
    }
}

impl Config {
    /// Parse TOML text, apply `key=value` overrides, fill defaults and validate.
    pub fn from_toml(
        text: &str,
        source_name: &str,
        overrides: &[(String, String)],
    ) -> Result<Config, ConfigError> {
        let parse_error = |e: toml::de::Error| ConfigError::Parse {
            source_name: source_name.to_string(),
            message: name_unknown_key(&e.to_string().trim().replace('\n', " ")),
        };
        // Typing the text itself first gives errors with the file's line and column.
        toml::from_str::<Config>(text).map_err(parse_error)?;
        let mut table: toml::Table = text.parse().map_err(parse_error)?;
        for (key, value) in overrides {
            apply_override(&mut table, key, value)?;
        }
        let config: Config = toml::Value::Table(table).try_into().map_err(parse_error)?;
        config.validate(source_name)?;
        Ok(config)
    }

    /// The placement handle DFTL adds for its translation pages (0 for other FTLs).
    fn dftl_extra_handle(&self) -> u64 {
        (self.ftl.kind == FtlKind::Dftl) as u64
    }

    /// Check every constraint and compute the derived values.
    pub fn validate(&self, source_name: &str) -> Result<Derived, ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            source_name: source_name.to_string(),
            key: key.to_string(),
            message,
        };
        let g = &self.geometry;
        for (key, value) in [
            ("geometry.channels", g.channels),
            ("geometry.chips_per_channel", g.chips_per_channel),
            ("geometry.dies_per_chip", g.dies_per_chip),
            ("geometry.planes_per_die", g.planes_per_die),
            ("geometry.blocks_per_plane", g.blocks_per_plane),
            ("geometry.pages_per_block", g.pages_per_block),
            ("channel.rate_mtps", self.channel.rate_mtps),
            ("channel.bus_width_bytes", self.channel.bus_width_bytes),
            ("placement.handles", self.placement.handles),
            ("ecc.codeword_bytes", self.ecc.codeword_bytes),
        ] {
            if value == 0 {
                return Err(invalid(key, "expected a positive integer, got 0".into()));
            }
        }
        if g.page_size_bytes < 512 || !g.page_size_bytes.is_power_of_two() {
            return Err(invalid(
                "geometry.page_size_bytes",
                format!(
                    "expected a power of two of at least 512, got {}",
                    g.page_size_bytes
                ),
            ));
        }
        // Real parts have a few thousand pages per block at most: a larger figure is a typo
        // (a byte count given as a page count, say), caught here rather than as a huge device.
        if g.pages_per_block > 65_535 {
            return Err(invalid(
                "geometry.pages_per_block",
                "expected at most 65535".into(),
            ));
        }
        if self.cell.endurance_cycles == Some(0) {
            return Err(invalid(
                "cell.endurance_cycles",
                "expected a positive integer, got 0".into(),
            ));
        }
        if let Some(f) = self.ftl.dftl_cached_fraction {
            if !(f > 0.0 && f <= 1.0) {
                return Err(invalid(
                    "ftl.dftl_cached_fraction",
                    format!("expected a fraction in (0, 1], got {f}"),
                ));
            }
        }
        let bits = self.cell.kind.bits_per_cell();
        // A wordline holds one page per bit, so a block holds whole wordlines.
        if !g.pages_per_block.is_multiple_of(bits) {
            return Err(invalid(
                "geometry.pages_per_block",
                format!(
                    "expected a multiple of {bits} (pages per wordline for {:?})",
                    self.cell.kind
                ),
            ));
        }
        if !(g.over_provisioning.is_finite()
            && g.over_provisioning > 0.0
            && g.over_provisioning < 10.0)
        {
            return Err(invalid(
                "geometry.over_provisioning",
                format!(
                    "expected a fraction of logical capacity in (0, 10), got {}",
                    g.over_provisioning
                ),
            ));
        }
        let dies = g.channels as u64 * g.chips_per_channel as u64 * g.dies_per_chip as u64;
        let planes = dies * g.planes_per_die as u64;
        let blocks = planes * g.blocks_per_plane as u64;
        let physical_pages = blocks * g.pages_per_block as u64;
        // Physical page numbers are u32 with u32::MAX reserved as "none" (≈16 TiB at 4 KiB).
        if physical_pages >= u32::MAX as u64 {
            return Err(invalid(
                "geometry",
                format!("{physical_pages} physical pages exceed the simulator's 2^32-1 page limit"),
            ));
        }
        let logical_pages = (physical_pages as f64 / (1.0 + g.over_provisioning)).floor() as u64;
        // Every plane needs room for its open blocks (host and GC frontier per handle) and the
        // foreground-GC reserve beyond its share of logical data, or GC cannot make progress.
        // DFTL's translation pages have a placement handle of their own.
        let handles = self.placement.handles as u64 + self.dftl_extra_handle();
        let reserve_blocks = 2 * handles + self.ftl.gc_fg_free_blocks as u64 + 1;
        let spare_blocks_per_plane =
            (physical_pages - logical_pages) / g.pages_per_block as u64 / planes;
        if spare_blocks_per_plane < reserve_blocks {
            return Err(invalid(
                "geometry.over_provisioning",
                format!(
                    "too little spare space: {spare_blocks_per_plane} spare blocks per plane, \
                     need at least {reserve_blocks} (2 open blocks per placement handle + \
                     ftl.gc_fg_free_blocks + 1)"
                ),
            ));
        }
        if let Some(needed) =
            self.overwrite_shortfall(g.pages_per_block, physical_pages, logical_pages, planes)
        {
            let minimum = self.minimum_pages_per_block(planes);
            let range = match minimum {
                Some(b) => format!(
                    "with the other settings, expected pages_per_block in {b}..=65535 (a \
                     multiple of {bits}), or raise geometry.over_provisioning or \
                     geometry.blocks_per_plane"
                ),
                None => "no pages_per_block works with the other settings: raise \
                         geometry.over_provisioning or geometry.blocks_per_plane"
                    .to_string(),
            };
            return Err(invalid(
                "geometry.pages_per_block",
                format!(
                    "{} pages per block leave too little spare space per plane to sustain \
                     overwrites: {needed}; {range}",
                    g.pages_per_block
                ),
            ));
        }
        if self.ftl.gc_fg_free_blocks < 1 {
            return Err(invalid(
                "ftl.gc_fg_free_blocks",
                "expected at least 1".into(),
            ));
        }
        if self.ftl.gc_fg_free_blocks >= self.ftl.gc_bg_free_blocks {
            return Err(invalid(
                "ftl.gc_fg_free_blocks",
                format!(
                    "expected fewer than ftl.gc_bg_free_blocks ({}): background GC must start \
                     before foreground GC throttles writes",
                    self.ftl.gc_bg_free_blocks
                ),
            ));
        }
        // A step larger than a block moves what the victim holds: only 0 makes no progress.
        if self.ftl.gc_step_pages == 0 {
            return Err(invalid(
                "ftl.gc_step_pages",
                "expected at least 1 page per GC step, got 0".into(),
            ));
        }
        let page_bytes = g.page_size_bytes;
        let mapping_unit_bytes = self
            .ftl
            .mapping_unit_bytes
            .unwrap_or(DEFAULT_MAPPING_UNIT_BYTES.min(page_bytes));
        if mapping_unit_bytes < 512
            || !mapping_unit_bytes.is_power_of_two()
            || mapping_unit_bytes > page_bytes
        {
            return Err(invalid(
                "ftl.mapping_unit_bytes",
                format!(
                    "expected a power of two from 512 to the page size ({page_bytes}) that \
                     divides the page, got {mapping_unit_bytes}"
                ),
            ));
        }
        let units_per_page = page_bytes / mapping_unit_bytes;
        // DFTL's translation pages are flash pages of 4-byte entries, one per mapped page.
        if self.ftl.kind == FtlKind::Dftl && units_per_page != 1 {
            return Err(invalid(
                "ftl.mapping_unit_bytes",
                format!(
                    "ftl.kind = \"dftl\" maps whole pages: expected the page size \
                     ({page_bytes}), got {mapping_unit_bytes}"
                ),
            ));
        }
        // Physical mapping units are u32 numbers too, with u32::MAX meaning none.
        if physical_pages * units_per_page as u64 >= u32::MAX as u64 {
            return Err(invalid(
                "ftl.mapping_unit_bytes",
                format!(
                    "{} physical mapping units of {mapping_unit_bytes} B exceed the simulator's \
                     2^32-1 limit: use a larger unit (up to the page size, {page_bytes})",
                    physical_pages * units_per_page as u64
                ),
            ));
        }
        let c = &self.cell;
        if !c.suspend {
            for (key, set) in [
                ("cell.suspend_ns", c.suspend_ns.is_some()),
                ("cell.resume_ns", c.resume_ns.is_some()),
                ("cell.max_suspends", c.max_suspends.is_some()),
            ] {
                if set {
                    return Err(invalid(
                        key,
                        "only meaningful with cell.suspend = true (set it, or drop this key)"
                            .into(),
                    ));
                }
            }
        }
        let (suspend_ns, resume_ns, max_suspends) = if c.suspend {
            (
                c.suspend_ns.unwrap_or(20_000),
                c.resume_ns.unwrap_or(20_000),
                c.max_suspends.unwrap_or(16),
            )
        } else {
            (0, 0, 0)
        };
        if c.suspend && max_suspends == 0 {
            return Err(invalid(
                "cell.max_suspends",
                "expected at least 1 with cell.suspend = true".into(),
            ));
        }
        if self.controller.aging_ns == 0 {
            return Err(invalid(
                "controller.aging_ns",
                "expected a positive time in ns".into(),
            ));
        }
        if self.placement.handles > 256 {
            return Err(invalid("placement.handles", "expected at most 256".into()));
        }
        let read_ns = if self.cell.read_ns.is_empty() {
            self.cell
                .kind
                .sensings_per_page_type()
                .iter()
                .map(|k| self.cell.read_x_ns + k * self.cell.read_y_ns)
                .collect::<Vec<_>>()
        } else if self.cell.read_ns.len() == bits as usize {
            self.cell.read_ns.clone()
        } else {
            return Err(invalid(
                "cell.read_ns",
                format!(
                    "expected {bits} values (one per page type), got {}",
                    self.cell.read_ns.len()
                ),
            ));
        };
        if read_ns.contains(&0) {
            return Err(invalid(
                "cell.read_ns",
                "read times must be positive".into(),
            ));
        }
        let melded_read_ns = if self.cell.melded_read_ns > 0 {
            self.cell.melded_read_ns
        } else {
            self.cell.read_x_ns + ((1u64 << bits) - 1) * self.cell.read_y_ns
        };
        let program_ns = match self.cell.program_ns.len() {
            1 => vec![self.cell.program_ns[0]; bits as usize],
            n if n == bits as usize => self.cell.program_ns.clone(),
            n => {
                return Err(invalid(
                    "cell.program_ns",
                    format!("expected 1 or {bits} values (one per page type), got {n}"),
                ))
            }
        };
        let bytes_per_us = self.channel.rate_mtps as u64 * self.channel.bus_width_bytes as u64;
        let transfer_bytes = g.page_size_bytes as u64
            + if self.channel.transfer_oob {
                g.oob_size_bytes as u64
            } else {
                0
            };
        let page_transfer_ns =
            (transfer_bytes * 1000).div_ceil(bytes_per_us) + self.channel.command_overhead_ns;
        if self.ecc.codeword_bytes > g.page_size_bytes
            || !g.page_size_bytes.is_multiple_of(self.ecc.codeword_bytes)
        {
            return Err(invalid(
                "ecc.codeword_bytes",
                format!("expected a divisor of the page size {}", g.page_size_bytes),
            ));
        }
        if !(self.ecc.rber_base >= 0.0 && self.ecc.rber_base < 0.5) {
            return Err(invalid(
                "ecc.rber_base",
                "expected a probability in [0, 0.5)".into(),
            ));
        }
        // Reports multiply counts by these figures: NaN or infinity would reach the JSON (which
        // cannot hold them) and a negative energy is meaningless.
        let e = &self.energy;
        for (key, value) in [
            ("energy.read_nj", e.read_nj),
            ("energy.program_nj", e.program_nj),
            ("energy.erase_nj", e.erase_nj),
            ("energy.transfer_pj_per_byte", e.transfer_pj_per_byte),
            ("energy.ecc_decode_nj", e.ecc_decode_nj),
            ("energy.idle_w", e.idle_w),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(invalid(
                    key,
                    format!("expected a finite number >= 0, got {value}"),
                ));
            }
        }
        for (key, value) in [
            ("ecc.rber_pe_scale", self.ecc.rber_pe_scale),
            ("ecc.rber_pe_exponent", self.ecc.rber_pe_exponent),
            ("ecc.retry_rber_factor", self.ecc.retry_rber_factor),
        ] {
            // The RBER model divides by the scale and raises to the exponent: both must give a
            // finite probability; a retry factor above 1 would make retries worse.
            let ok = value.is_finite()
                && match key {
                    "ecc.rber_pe_scale" => value > 0.0,
                    "ecc.retry_rber_factor" => (0.0..=1.0).contains(&value),
                    _ => value >= 0.0,
                };
            if !ok {
                let expected = match key {
                    "ecc.rber_pe_scale" => "a finite number > 0",
                    "ecc.retry_rber_factor" => "a number in [0, 1]",
                    _ => "a finite number >= 0",
                };
                return Err(invalid(key, format!("expected {expected}, got {value}")));
            }
        }
        self.validate_sea(&invalid)?;
        crate::ecc::flex::validate(self, &invalid)?;
        self.cache.validate(&invalid)?;
        let wl = &self.placement.write_life_handles;
        if wl.len() != 6 {
            return Err(invalid(
                "placement.write_life_handles",
                format!(
                    "expected 6 handles (NOT_SET, NONE, SHORT, MEDIUM, LONG, EXTREME), got {}",
                    wl.len()
                ),
            ));
        }
        let codewords_per_page = g.page_size_bytes / self.ecc.codeword_bytes;
        let codeword_transfer_ns = (0..=codewords_per_page as u64)
            .map(|k| {
                (transfer_bytes * k * 1000 / codewords_per_page as u64).div_ceil(bytes_per_us)
                    + self.channel.command_overhead_ns
            })
            .collect();
        let decode_ns = crate::ecc::decode_ns_per_codeword(&self.ecc);
        let encode_ns = if self.ecc.code == EccCode::None {
            0
        } else {
            self.ecc.encode_ns
        };
        Ok(Derived {
            dies: dies as u32,
            planes: planes as u32,
            blocks: blocks as u32,
            physical_pages,
            logical_pages,
            logical_bytes: logical_pages * g.page_size_bytes as u64,
            mapping_unit_bytes,
            units_per_page,
            logical_units: logical_pages * units_per_page as u64,
            bits_per_cell: bits,
            read_ns,
            melded_read_ns,
            program_ns,
            page_transfer_ns,
            codeword_transfer_ns,
            codewords_per_page,
            unit_codewords: (mapping_unit_bytes / self.ecc.codeword_bytes).max(1),
            decode_ns,
            encode_ns,
            suspend_ns,
            resume_ns,
            max_suspends,
            // L2P: a u32 per logical mapping unit; per physical one the OOB record (logical
            // unit and sequence number, u32 each) and a validity bit.
            mapping_bytes: 4 * logical_pages * units_per_page as u64
                + 8 * physical_pages * units_per_page as u64
                + (physical_pages * units_per_page as u64).div_ceil(8)
                + MAPPING_BYTES_PER_BLOCK * blocks,
        })
    }

    /// The `[sea]` table's ranges.
    fn validate_sea(
        &self,
        invalid: &dyn Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let sea = &self.sea;
        if !(sea.dirty_fraction.is_finite() && (0.0..=1.0).contains(&sea.dirty_fraction)) {
            return Err(invalid(
                "sea.dirty_fraction",
                format!(
                    "expected a fraction of the cache in [0, 1], got {}",
                    sea.dirty_fraction
                ),
            ));
        }
        let max_multiplier = SeaConfig::MAX_DYN_MULTIPLIER;
        if !(sea.dyn_multiplier.is_finite()
            && sea.dyn_multiplier > 0.0
            && sea.dyn_multiplier <= max_multiplier)
        {
            return Err(invalid(
                "sea.dyn_multiplier",
                format!(
                    "expected a number in (0, {max_multiplier}], got {}",
                    sea.dyn_multiplier
                ),
            ));
        }
        if !(sea.cross_segment_ratio.is_finite() && (0.0..=1.0).contains(&sea.cross_segment_ratio))
        {
            return Err(invalid(
                "sea.cross_segment_ratio",
                format!(
                    "expected a fraction of the valid units in [0, 1], got {}",
                    sea.cross_segment_ratio
                ),
            ));
        }
        let max_entries = SeaConfig::MAX_PREDICT_TABLE_ENTRIES;
        if !(1..=max_entries).contains(&sea.predict_table_entries) {
            return Err(invalid(
                "sea.predict_table_entries",
                format!(
                    "expected an entry count in 1..={max_entries}, got {}",
                    sea.predict_table_entries
                ),
            ));
        }
        Ok(())
    }

    /// Refuse a device whose tables do not fit in `available_bytes` of memory, before anything
    /// is allocated: a table too large for the machine would otherwise abort the process (Rust
    /// aborts on allocation failure) instead of giving an error. The core does not read the
    /// machine's memory itself; the caller (the Python glue, the NBD server) measures it.
    pub fn check_memory(
        &self,
        derived: &Derived,
        source_name: &str,
        available_bytes: u64,
    ) -> Result<(), ConfigError> {
        if derived.mapping_bytes <= available_bytes {
            return Ok(());
        }
        let g = &self.geometry;
        let mib = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
        Err(ConfigError::Invalid {
            source_name: source_name.to_string(),
            key: "geometry".to_string(),
            message: format!(
                "{} channels x {} chips x {} dies x {} planes x {} blocks x {} pages of {} B \
                 ({} blocks, {} physical pages) needs about {:.0} MiB for its mapping tables \
                 (4 B per logical page, 4 B per physical page, {} B per block), more than the \
                 {:.0} MiB of memory available; make geometry.blocks_per_plane or \
                 geometry.pages_per_block smaller or geometry.page_size_bytes larger",
                g.channels,
                g.chips_per_channel,
                g.dies_per_chip,
                g.planes_per_die,
                g.blocks_per_plane,
                g.pages_per_block,
                g.page_size_bytes,
                derived.blocks,
                derived.physical_pages,
                mib(derived.mapping_bytes),
                MAPPING_BYTES_PER_BLOCK,
                mib(available_bytes),
            ),
        })
    }

    /// Turn the time series on (at [`StatsConfig::DEFAULT_INTERVAL_NS`]) unless the
    /// configuration already asks for one: what `--time-series` and `Device(time_series=True)`
    /// mean. It is off by default because a long run would otherwise keep rows nobody reads.
    pub fn enable_time_series(&mut self) {
        if self.stats.interval_ns == 0 {
            self.stats.interval_ns = StatsConfig::DEFAULT_INTERVAL_NS;
        }
    }

    /// Why a plane cannot sustain overwrites with this geometry, or `None` if it can.
    ///
    /// Host pages stripe over the planes round-robin, but an overwrite invalidates the old copy
    /// wherever it lies, so the live data of a plane drifts around its share `m` of the logical
    /// pages. Under uniform random overwrites that drift is mean-reverting with a variance of
    /// about `m / 2` (each plane gains one page per round of the stripe and loses its share of
    /// the invalidations). A plane whose live data fills its usable pages (all but the
    /// foreground-GC reserve and, on average, half of each handle's two open blocks) has no
    /// victim with an invalid page left, and the device is full although other planes have
    /// room. The usable pages must therefore exceed `m` by [`PLANE_IMBALANCE_SIGMAS`] standard
    /// deviations. With large blocks the spare blocks dwarf the drift and this always holds;
    /// with one page per block the `slc` preset has 64 pages of headroom per plane (2.9
    /// deviations) and a plane filled within one pass of random overwrites. The margin was set
    /// by the test `sustained_overwrites` in `tests/validation.rs`: at 3.5 deviations the
    /// tightest accepted geometry with 4 pages per block filled a plane, at 4 none did.
    fn overwrite_shortfall(
        &self,
        pages_per_block: u32,
        physical_pages: u64,
        logical_pages: u64,
        planes: u64,
    ) -> Option<String> {
        let g = &self.geometry;
        // Blocks that hold no live data when GC looks for a victim: the foreground-GC reserve,
        // and on average half of each handle's two open blocks (host and GC frontier).
        let reserve_blocks = self.placement.handles as u64
            + self.dftl_extra_handle()
            + self.ftl.gc_fg_free_blocks as u64;
        let usable = (g.blocks_per_plane as u64).saturating_sub(reserve_blocks) as f64
            * pages_per_block as f64;
        let share = logical_pages as f64 / planes as f64;
        let margin = PLANE_IMBALANCE_SIGMAS * (share / 2.0).sqrt();
        let spare = (physical_pages - logical_pages) as f64 / planes as f64;
        (usable < share + margin).then(|| {
            format!(
                "{spare:.0} spare pages per plane, GC needs {:.0} ({reserve_blocks} reserved \
                 blocks of {} pages, plus {margin:.0} pages for the drift of live data between \
                 planes: {PLANE_IMBALANCE_SIGMAS} x sqrt({share:.0} logical pages per plane / 2))",
                reserve_blocks as f64 * pages_per_block as f64 + margin,
                pages_per_block,
            )
        })
    }

    /// The smallest pages per block (a multiple of the bits per cell) that passes
    /// [`Config::overwrite_shortfall`] with the other settings unchanged, for the error message.
    fn minimum_pages_per_block(&self, planes: u64) -> Option<u32> {
        let bits = self.cell.kind.bits_per_cell();
        let g = &self.geometry;
        (1..=65_535 / bits).map(|k| k * bits).find(|&b| {
            let physical = planes * g.blocks_per_plane as u64 * b as u64;
            let logical = (physical as f64 / (1.0 + g.over_provisioning)).floor() as u64;
            self.overwrite_shortfall(b, physical, logical, planes)
                .is_none()
        })
    }

    /// Derived values of a configuration already validated by [`Config::from_toml`].
    pub fn derived(&self) -> Derived {
        self.validate("config")
            .expect("configuration was validated when it was built")
    }

    /// Canonical JSON form (after defaults): what the hash is taken over.
    pub fn canonical_json(&self) -> String {
        serde_json::to_string(self).expect("a config always serialises")
    }

    /// First 16 hex digits of SHA-256 over the canonical form.
    pub fn hash_hex(&self) -> String {
        let digest = Sha256::digest(self.canonical_json().as_bytes());
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduling_keys_are_checked_with_the_key_and_the_valid_values() {
        let err = |pairs: &[(&str, &str)]| {
            let overrides: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Config::from_toml("", "dev.toml", &overrides)
                .unwrap_err()
                .to_string()
        };
        let msg = err(&[("controller.scheduler", "fifo")]);
        assert!(
            msg.contains("fifo") && msg.contains("fcfs") && msg.contains("out_of_order"),
            "{msg}"
        );
        let msg = err(&[("placement.allocation", "random")]);
        assert!(msg.contains("dynamic") && msg.contains("static"), "{msg}");
        let msg = err(&[("cell.suspend_ns", "5000")]);
        assert!(
            msg.contains("cell.suspend_ns") && msg.contains("cell.suspend = true"),
            "{msg}"
        );
        let msg = err(&[("cell.suspend", "true"), ("cell.max_suspends", "0")]);
        assert!(msg.contains("cell.max_suspends"), "{msg}");
        let msg = err(&[
            ("ftl.gc_fg_free_blocks", "4"),
            ("ftl.gc_bg_free_blocks", "4"),
        ]);
        assert!(
            msg.contains("ftl.gc_fg_free_blocks") && msg.contains("fewer than"),
            "{msg}"
        );
        let msg = err(&[("ftl.gc_step_pages", "0")]);
        assert!(msg.contains("ftl.gc_step_pages"), "{msg}");
        let msg = err(&[("controller.aging_ns", "0")]);
        assert!(msg.contains("controller.aging_ns"), "{msg}");
        // Suspend figures resolve to defaults when suspend is on, to zero when it is off.
        let on = Config::from_toml("[cell]\nsuspend = true\n", "x", &[]).unwrap();
        let d = on.derived();
        assert_eq!(
            (d.suspend_ns, d.resume_ns, d.max_suspends),
            (20_000, 20_000, 16)
        );
        let d = Config::from_toml("", "x", &[]).unwrap().derived();
        assert_eq!((d.suspend_ns, d.resume_ns, d.max_suspends), (0, 0, 0));
    }

    #[test]
    fn defaults_validate_and_hash_is_layout_independent() {
        let a = Config::from_toml("", "a", &[]).unwrap();
        let b = Config::from_toml("# comment\n[geometry]\nchannels = 8\n", "b", &[]).unwrap();
        assert_eq!(a.hash_hex(), b.hash_hex());
        let c = Config::from_toml("[geometry]\nchannels = 4\n", "c", &[]).unwrap();
        assert_ne!(a.hash_hex(), c.hash_hex());
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::from_toml("[geometry]\nchanels = 4\n", "dev.toml", &[]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("dev.toml") && msg.contains("chanels"), "{msg}");
    }

    #[test]
    fn wrong_type_is_named() {
        let err =
            Config::from_toml("[geometry]\nchannels = \"eight\"\n", "dev.toml", &[]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("channels") && msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn overrides_are_typed_like_file_entries() {
        let ov = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let c = Config::from_toml("", "x", &ov("geometry.channels", "2")).unwrap();
        assert_eq!(c.geometry.channels, 2);
        let c = Config::from_toml("", "x", &ov("ftl.gc_policy", "fifo")).unwrap();
        assert_eq!(c.ftl.gc_policy, GcPolicyKind::Fifo);
        let err = Config::from_toml("", "x", &ov("geometry.channels", "many")).unwrap_err();
        assert!(err.to_string().contains("channels"), "{err}");
        let err = Config::from_toml("", "x", &ov("geometry.bogus", "1")).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
        let err = Config::from_toml("", "x", &ov("geometry..x", "1")).unwrap_err();
        assert!(matches!(err, ConfigError::Override { .. }));
    }

    #[test]
    fn semantic_checks_name_the_key() {
        let ov = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        for (key, value) in [
            ("geometry.channels", "0"),
            ("geometry.page_size_bytes", "3000"),
            ("geometry.pages_per_block", "100"),
            ("geometry.over_provisioning", "0.0001"),
            ("cell.read_ns", "[1, 2]"),
            ("cell.program_ns", "[1, 2]"),
            ("ecc.codeword_bytes", "3000"),
        ] {
            let err = Config::from_toml("", "x", &ov(key, value)).unwrap_err();
            let msg = err.to_string();
            let leaf = key.split('.').next_back().unwrap();
            assert!(
                msg.contains(leaf) || msg.contains("over_provisioning"),
                "{key}: {msg}"
            );
        }
    }

    #[test]
    fn energy_figures_are_finite_and_not_negative() {
        let ov = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        for (key, value) in [
            ("energy.read_nj", "nan"),
            ("energy.read_nj", "-1"),
            ("energy.idle_w", "inf"),
            ("energy.transfer_pj_per_byte", "-0.5"),
            ("ecc.rber_pe_scale", "0"),
            ("ecc.retry_rber_factor", "2"),
        ] {
            let err = Config::from_toml("", "x", &ov(key, value)).unwrap_err();
            assert!(
                err.to_string().contains(&format!("key '{key}'")),
                "{key}={value}: {err}"
            );
        }
        Config::from_toml("", "x", &ov("energy.read_nj", "0")).unwrap();
    }

    #[test]
    fn control_characters_in_overrides_are_refused() {
        for (key, value) in [
            ("geometry.channels", "2\nchannels = 4"),
            ("name", "a\tb"),
            ("geometry.channels", "2\r"),
            ("geometry.chan\nnels", "2"),
        ] {
            let err = Config::from_toml("", "x", &[(key.into(), value.into())]).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, ConfigError::Override { .. }), "{msg}");
            // The message stays on one line and shows the character escaped.
            assert!(
                !msg.contains('\n') && msg.contains("control character"),
                "{msg}"
            );
        }
    }

    #[test]
    fn geometries_that_cannot_sustain_overwrites_are_refused_with_the_range() {
        let slc = crate::presets::get("slc").unwrap();
        let ov = |b: u32| vec![("geometry.pages_per_block".to_string(), b.to_string())];
        // One page per block leaves 64 pages of headroom per plane (2.9 deviations of the drift):
        // a plane filled within one pass of random overwrites (measured); two pages per block
        // (4.1 deviations) ran 20 passes.
        let err = Config::from_toml(slc, "preset slc", &ov(1)).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("key 'geometry.pages_per_block'") && msg.contains("in 2..=65535"),
            "{msg}"
        );
        Config::from_toml(slc, "preset slc", &ov(2)).unwrap();
        for (name, _) in crate::presets::list() {
            let text = crate::presets::get(name).unwrap();
            Config::from_toml(text, name, &[]).unwrap();
        }
    }

    #[test]
    fn memory_estimate_counts_the_flat_tables() {
        let slc = crate::presets::get("slc").unwrap();
        let c = Config::from_toml(slc, "preset slc", &[]).unwrap();
        let d = c.derived();
        let expected = 4 * d.logical_pages
            + 8 * d.physical_pages
            + d.physical_pages.div_ceil(8)
            + 48 * d.blocks as u64;
        assert_eq!(d.mapping_bytes, expected);
        c.check_memory(&d, "preset slc", u64::MAX).unwrap();
        let big = vec![(
            "geometry.blocks_per_plane".to_string(),
            "524288".to_string(),
        )];
        let c = Config::from_toml(slc, "preset slc", &big).unwrap();
        let d = c.derived();
        let err = c.check_memory(&d, "preset slc", 8 << 30).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("key 'geometry'") && msg.contains("524288 blocks") && msg.contains("MiB"),
            "{msg}"
        );
    }

    #[test]
    fn time_series_is_off_unless_asked_for() {
        let mut c = Config::from_toml("", "x", &[]).unwrap();
        assert_eq!(c.stats.interval_ns, 0);
        c.enable_time_series();
        assert_eq!(c.stats.interval_ns, StatsConfig::DEFAULT_INTERVAL_NS);
        let ov = vec![("stats.interval_ns".to_string(), "1000".to_string())];
        let mut c = Config::from_toml("", "x", &ov).unwrap();
        c.enable_time_series();
        assert_eq!(c.stats.interval_ns, 1000);
    }

    #[test]
    fn read_formula_and_transfer() {
        let c = Config::from_toml("", "x", &[]).unwrap();
        let d = c.derived();
        assert_eq!(d.read_ns, vec![58_000, 78_000, 118_000]);
        assert_eq!(d.melded_read_ns, 38_000 + 7 * 20_000);
        // 4 KiB at 800 MT/s on an 8-bit bus: 5.12 us (device-model.md).
        assert_eq!(d.page_transfer_ns, 5_120);
        // With the OOB bytes (128 by default): (4096 + 128) / 800 MB/s = 5.28 us.
        let ov = vec![("channel.transfer_oob".to_string(), "true".to_string())];
        let d = Config::from_toml("", "x", &ov).unwrap().derived();
        assert_eq!(d.page_transfer_ns, 5_280);
    }

    #[test]
    fn melded_reads_takes_its_names_and_the_old_switch() {
        let parse = |v: &str| {
            Config::from_toml("", "x", &[("host.melded_reads".into(), v.into())])
                .map(|c| c.host.melded_reads)
        };
        assert_eq!(parse("\"on\"").unwrap(), MeldedReads::On);
        assert_eq!(parse("auto").unwrap(), MeldedReads::Auto);
        assert_eq!(parse("true").unwrap(), MeldedReads::Auto);
        assert_eq!(parse("false").unwrap(), MeldedReads::Off);
        let msg = parse("sometimes").unwrap_err().to_string();
        assert!(
            msg.contains("melded_reads") && msg.contains("\"off\", \"on\", \"auto\""),
            "{msg}"
        );
    }

    /// Every choice's `name()` is the spelling serde writes and the configuration accepts.
    #[test]
    fn choice_names_are_the_config_spellings() {
        fn check<T>(all: &[T], name: fn(T) -> &'static str)
        where
            T: Copy + PartialEq + std::fmt::Debug + Serialize + serde::de::DeserializeOwned,
        {
            for &v in all {
                let spelled = serde_json::to_value(v).unwrap();
                assert_eq!(spelled, name(v), "{v:?}");
                let back: T = serde_json::from_value(name(v).into()).unwrap();
                assert_eq!(back, v);
            }
        }
        check(CellKind::ALL, CellKind::name);
        check(UnmappedRead::ALL, UnmappedRead::name);
        check(EccCode::ALL, EccCode::name);
        check(FtlKind::ALL, FtlKind::name);
        check(GcPolicyKind::ALL, GcPolicyKind::name);
        check(WearLevelingKind::ALL, WearLevelingKind::name);
        check(GcDestinationKind::ALL, GcDestinationKind::name);
        check(MeldedReads::ALL, MeldedReads::name);
        // The case that motivated it, through a configuration override.
        let c =
            Config::from_toml("", "x", &[("ftl.gc_policy".into(), "cost_benefit".into())]).unwrap();
        assert_eq!(c.ftl.gc_policy.name(), "cost_benefit");
    }
}
