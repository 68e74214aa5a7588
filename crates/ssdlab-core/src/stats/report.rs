//! JSON reports: a job in fio 3.33's layout (`jobs[].read|write|trim`) and the `ssd` object.
//!
//! fio derives `bw_bytes = 1000·io_bytes/runtime_ms` and `iops = 1000·total_ios/runtime_ms` from
//! an integer millisecond runtime; simulated runs are often shorter than a millisecond, so we
//! compute both from the nanosecond runtime (also reported as `runtime_ns`) and round `runtime`
//! to whole milliseconds for compatibility.

use super::{JobStats, LatencyStats, OpStats, SplitStats, FIO_PERCENTILES};
use crate::ftl::segments::DynQuota;
use crate::ftl::{FtlCounters, SeaState};
use crate::placement::HandleCounters;
use crate::stats::FlashCounters;
use serde_json::{json, Map, Value};

fn latency_json(s: &LatencyStats) -> Value {
    let mut obj = Map::new();
    obj.insert("min".into(), json!(if s.n == 0 { 0 } else { s.min }));
    obj.insert("max".into(), json!(s.max));
    obj.insert("mean".into(), json!(s.mean()));
    obj.insert("stddev".into(), json!(s.stddev()));
    obj.insert("N".into(), json!(s.n));
    if s.has_histogram() && s.n > 0 {
        let values = FIO_PERCENTILES.map(|p| s.percentile(p));
        obj.insert("percentile".into(), percentile_json(values));
    }
    Value::Object(obj)
}

/// fio's percentile object: the values at [`FIO_PERCENTILES`], keyed as fio keys them.
fn percentile_json(values: [u64; FIO_PERCENTILES.len()]) -> Value {
    let pct: Map<String, Value> = FIO_PERCENTILES
        .iter()
        .zip(values)
        .map(|(p, v)| (format!("{p:.6}"), json!(v)))
        .collect();
    Value::Object(pct)
}

/// Flushes as fio reports its `sync` direction: a count and their latency, with percentiles
/// once there is one (the latency of a closing `end_fsync` flush, not counted, included).
fn sync_json(ios: u64, s: &SplitStats) -> Value {
    let mut lat = latency_json(&s.moments);
    if s.moments.n > 0 {
        lat["percentile"] = percentile_json(s.percentiles(FIO_PERCENTILES));
    }
    json!({ "total_ios": ios, "lat_ns": lat })
}

fn direction_json(s: &OpStats, runtime_ns: u64) -> Value {
    let seconds = runtime_ns as f64 / 1e9;
    let (bw_bytes, iops) = if runtime_ns == 0 {
        (0.0, 0.0)
    } else {
        (s.bytes as f64 / seconds, s.ios as f64 / seconds)
    };
    json!({
        "io_bytes": s.bytes,
        "io_kbytes": s.bytes / 1024,
        "bw_bytes": bw_bytes.round() as u64,
        "bw": (bw_bytes / 1024.0).round() as u64,
        "iops": iops,
        "runtime": (runtime_ns as f64 / 1e6).round() as u64,
        "runtime_ns": runtime_ns,
        "total_ios": s.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "error_ios": s.errors,
        "slat_ns": latency_json(&s.slat),
        "clat_ns": latency_json(&s.clat),
        "lat_ns": latency_json(&s.lat),
    })
}

/// One job in fio's layout; `ssd_job` holds the device counters accumulated during the job.
pub fn job_json(job: &JobStats, ssd_job: Value) -> Value {
    let runtime = job.runtime_ns();
    json!({
        "jobname": job.name,
        "groupid": 0,
        "error": 0,
        "job_runtime": (runtime as f64 / 1e6).round() as u64,
        "read": direction_json(&job.read, runtime),
        "write": direction_json(&job.write, runtime),
        "trim": direction_json(&job.trim, runtime),
        "sync": sync_json(job.sync_ios, &job.sync),
        "ssd_job": ssd_job,
    })
}

/// Everything the `ssd` object is made of.
pub struct SsdReportInputs<'a> {
    pub ftl: FtlCounters,
    pub flash: FlashCounters,
    pub handles: &'a [HandleCounters],
    pub erase_counts: &'a [u32],
    pub energy_j: Value,
    pub sim_time_ns: u64,
    pub seed: u64,
    pub config_hash: &'a str,
    pub ftl_name: &'a str,
    pub gc_policy: &'a str,
    pub scheduler: &'a str,
    pub allocation: &'a str,
    /// Array-busy time of each die.
    pub die_busy_ns: &'a [u64],
    /// Transfer time on all channels together, and how many channels there are.
    pub channel_busy_ns: u64,
    pub channels: u32,
    pub page_bytes: u32,
    pub mapping_unit_bytes: u32,
    pub sea: SeaReportInputs,
}

/// The SEA-SSD hints a device received and what they did (`ssd.sea`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SeaReportInputs {
    pub honor_hints: bool,
    pub planes: u32,
    /// Settings hints received, and the sizes of the last one.
    pub settings_received: u64,
    pub wal_bytes: u64,
    pub cache_bytes: u64,
    /// The dyn quota of the last settings hint the device honoured.
    pub quota: Option<DynQuota>,
    /// Logical units named by prediction hints received (honoured or not).
    pub predicted_units_received: u64,
    pub state: SeaState,
}

fn sea_json(sea: &SeaReportInputs) -> Value {
    let c = &sea.state.counters;
    let quota = sea.quota;
    json!({
        "honor_hints": sea.honor_hints,
        "settings": {
            "received": sea.settings_received,
            "wal_bytes": sea.wal_bytes,
            "cache_bytes": sea.cache_bytes,
            "requested_blocks": quota.map(|q| q.requested_blocks),
            "dyn_quota_blocks": quota.map(|q| q.blocks_per_plane as u64 * sea.planes as u64),
            "dyn_quota_blocks_per_plane": quota.map(|q| q.blocks_per_plane),
            "clamped": quota.map(|q| q.clamped),
        },
        "dyn_blocks": sea.state.dyn_blocks,
        "stat_blocks": sea.state.stat_blocks,
        "predictions": {
            "received_units": sea.predicted_units_received,
            "came_true_units": c.came_true_units,
            "expired_units": c.expired_units,
            "migrated_units": c.migrated_units,
            "in_table_units": sea.state.predicted_in_table,
        },
    })
}

/// Write amplification: media bytes over host bytes (0 before any write).
fn waf(media_bytes: u64, host_bytes: u64) -> f64 {
    if host_bytes == 0 {
        0.0
    } else {
        media_bytes as f64 / host_bytes as f64
    }
}

fn erase_json(counts: &[u32]) -> Value {
    let n = counts.len().max(1) as f64;
    let min = counts.iter().copied().min().unwrap_or(0);
    let max = counts.iter().copied().max().unwrap_or(0);
    let mean = counts.iter().map(|&c| c as f64).sum::<f64>() / n;
    let var = counts
        .iter()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    // Histogram in up to 16 equal-width bins from min to max.
    let bins = ((max - min) as usize + 1).min(16);
    let width = ((max - min) as usize + 1).div_ceil(bins);
    let mut histogram = vec![0u64; bins];
    for &c in counts {
        histogram[((c - min) as usize / width).min(bins - 1)] += 1;
    }
    json!({
        "min": min, "mean": mean, "max": max, "stddev": var.sqrt(),
        "histogram": {"first": min, "bin_width": width, "counts": histogram},
    })
}

/// Mean and max over dies of busy time / simulated time.
fn utilisation(busy_ns: &[u64], sim_time_ns: u64) -> (f64, f64) {
    if sim_time_ns == 0 || busy_ns.is_empty() {
        return (0.0, 0.0);
    }
    let t = sim_time_ns as f64;
    let mean = busy_ns.iter().map(|&b| b as f64).sum::<f64>() / busy_ns.len() as f64 / t;
    let max = busy_ns.iter().copied().max().unwrap_or(0) as f64 / t;
    (mean, max)
}

pub fn ssd_json(r: &SsdReportInputs<'_>) -> Value {
    let (die_utilisation, die_utilisation_max) = utilisation(r.die_busy_ns, r.sim_time_ns);
    let flash = r.ftl.flash_pages_programmed();
    let die_busy_ns: u64 = r.die_busy_ns.iter().sum();
    let mut totals = HandleCounters::default();
    let handles: Vec<Value> = r
        .handles
        .iter()
        .enumerate()
        .map(|(i, h)| {
            totals.host_bytes_written += h.host_bytes_written;
            totals.media_bytes_written += h.media_bytes_written;
            totals.media_bytes_erased += h.media_bytes_erased;
            json!({
                "handle": i,
                "host_bytes_written": h.host_bytes_written,
                "media_bytes_written": h.media_bytes_written,
                "media_bytes_erased": h.media_bytes_erased,
                "waf": waf(h.media_bytes_written, h.host_bytes_written),
            })
        })
        .collect();
    json!({
        // One write amplification everywhere: media bytes programmed over host bytes written
        // (per handle below, per interval in the time series).
        "waf": r.ftl.waf(r.page_bytes),
        "host_bytes_written": r.ftl.host_bytes_written,
        "host_units_written": r.ftl.host_units_written,
        "host_pages_programmed": r.ftl.host_pages_programmed,
        "flash_pages_programmed": flash,
        "media_bytes_written": flash * r.page_bytes as u64,
        "mapping_unit_bytes": r.mapping_unit_bytes,
        "padded_units": r.ftl.padded_units,
        "buffer_merged_units": r.ftl.buffer_merged_units,
        "gc": {
            "invocations": r.ftl.gc_invocations,
            "background_invocations": r.ftl.gc_background_invocations,
            "pages_programmed": r.ftl.gc_pages_programmed,
            "units_moved": r.ftl.gc_units_moved,
            "time_ns": r.flash.gc_busy_ns,
            "foreground_time_ns": r.flash.gc_busy_ns - r.flash.gc_background_ns,
            "background_time_ns": r.flash.gc_background_ns,
            // GC time is array time: its part of the dies' busy time (0 when none was busy).
            "share_of_die_busy": if die_busy_ns == 0 {
                0.0
            } else {
                r.flash.gc_busy_ns as f64 / die_busy_ns as f64
            },
            "policy": r.gc_policy,
        },
        // Array-busy time over simulated time: a saturated device keeps its dies busy.
        "die_utilisation": die_utilisation,
        "die_utilisation_max": die_utilisation_max,
        // Transfer time over simulated time, mean over channels: with dies idle and requests
        // waiting, a busy bus is what bounds the device.
        "channel_utilisation": if r.sim_time_ns == 0 || r.channels == 0 {
            0.0
        } else {
            r.channel_busy_ns as f64 / r.channels as f64 / r.sim_time_ns as f64
        },
        "suspensions": r.flash.suspensions,
        "scheduler": r.scheduler,
        "allocation": r.allocation,
        "erases": erase_json(r.erase_counts),
        "energy_j": r.energy_j["total"],
        "energy": r.energy_j,
        "ecc": {
            "codewords_decoded": r.flash.codewords_decoded,
            "codewords_encoded": r.flash.codewords_encoded,
            "corrected_codewords": r.flash.corrected_codewords,
            "uncorrectable_pages": r.flash.uncorrectable_pages,
            "read_retries": r.flash.read_retries,
        },
        "placement": {"handles": handles, "total": {
            "host_bytes_written": totals.host_bytes_written,
            "media_bytes_written": totals.media_bytes_written,
            "media_bytes_erased": totals.media_bytes_erased,
            "waf": waf(totals.media_bytes_written, totals.host_bytes_written),
        }},
        "flash": r.flash,
        "sea": sea_json(&r.sea),
        "trimmed_units": r.ftl.trimmed_units,
        "ftl": r.ftl_name,
        "sim_time_ns": r.sim_time_ns,
        "seed": r.seed,
        "config_hash": r.config_hash,
    })
}
