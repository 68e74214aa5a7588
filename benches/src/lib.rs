//! The simulator-speed benchmark: how many simulated requests per wall-clock second the core
//! replays, and how much memory a device's state costs per physical flash page.
//!
//! Requests are generated up front by the fio generator and replayed from memory, so the figure
//! is the simulator's own speed (host interface, FTL, GC, timing, statistics), not the
//! generator's. Random writes are measured in GC steady state after preconditioning.

use ssdlab_core::ftl::{build_ftl, Ftl, UnitWrite};
use ssdlab_core::gc::uniform_random_waf_of;
use ssdlab_core::host::run::{DEPENDENT_STAGE, LOOKAHEAD};
use ssdlab_core::nand::Geometry;
use ssdlab_core::{
    Config, Device, HostRequest, Loop, PreconditionOptions, RequestSource, RunSpec, VecSource,
};
use std::time::Instant;

/// How far beyond the analytic model's range the measured steady-state WAF of the random writes
/// may be (the core's validation holds a device kept at its foreground watermark to 10 %).
pub const MODEL_WAF_TOLERANCE: f64 = 0.10;

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    /// Blocks per plane (sets the capacity; 368 at 7% OP gives a 64 GiB logical device).
    pub blocks_per_plane: u32,
    pub requests: u64,
    pub queue_depth: u32,
    pub seed: u64,
    /// Over-provisioning as a fraction of logical capacity (sets the steady-state WAF).
    pub over_provisioning: f64,
    /// Die scheduling policy: `fcfs` takes the reservation path, the others the event engine.
    pub scheduler: String,
}

impl Params {
    /// The figure: 64 GiB logical, 4 KiB pages, QD 32.
    pub fn full() -> Params {
        Params {
            blocks_per_plane: 368,
            requests: 8_000_000,
            queue_depth: 32,
            seed: 1,
            over_provisioning: 0.07,
            scheduler: "priority".into(),
        }
    }
    /// A seconds-long version for the test suite.
    pub fn tiny() -> Params {
        Params {
            blocks_per_plane: 32,
            requests: 50_000,
            queue_depth: 32,
            seed: 1,
            over_provisioning: 0.25,
            scheduler: "priority".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Results {
    pub logical_bytes: u64,
    pub physical_pages: u64,
    pub precondition_s: f64,
    pub precondition_units: u64,
    pub random_write_req_per_s: f64,
    pub random_write_waf: f64,
    /// Xiang & Kurkoski's closed form for greedy GC under these writes on this device, with its
    /// GC keeping the foreground or the background watermark's free blocks (low, high): the
    /// measured WAF must be near this range, or the simulated device is wrong and its speed
    /// means nothing.
    pub random_write_model_waf: (f64, f64),
    /// Busy time over simulated time, mean over the dies, of each phase (the device's own
    /// figure: a saturated device keeps its dies busy).
    pub random_write_die_utilisation: f64,
    pub random_read_req_per_s: f64,
    pub random_read_die_utilisation: f64,
    /// Peak RSS growth while building and preconditioning the device, per physical page.
    pub bytes_per_physical_page: Option<f64>,
}

/// The FTL alone on the same device and writes: no timing, no host interface, no statistics.
/// What the mapping and GC cost by themselves bounds the whole simulator's speed from above.
#[derive(Debug, Clone, PartialEq)]
pub struct FtlAlone {
    pub random_write_per_s: f64,
    /// Valid units GC copied per host write in the timed writes (the FTL's own WAF, less one).
    pub moves_per_write: f64,
}

/// Peak resident set size of this process (VmHWM), in bytes; `None` off Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn overrides(p: &Params) -> Vec<(String, String)> {
    [
        ("geometry.channels", "8".to_string()),
        ("geometry.chips_per_channel", "4".to_string()),
        ("geometry.dies_per_chip", "2".to_string()),
        ("geometry.planes_per_die", "2".to_string()),
        ("geometry.blocks_per_plane", p.blocks_per_plane.to_string()),
        ("geometry.pages_per_block", "384".to_string()),
        ("geometry.page_size_bytes", "4096".to_string()),
        (
            "geometry.over_provisioning",
            p.over_provisioning.to_string(),
        ),
        ("stats.interval_ns", "100000000".to_string()),
        ("controller.scheduler", p.scheduler.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The bench's fio job: `count` 4 KiB requests of `rw` over `device_bytes`, streamed.
fn job_source(
    rw: &str,
    device_bytes: u64,
    count: u64,
    seed: u64,
) -> Result<Box<dyn RequestSource>, String> {
    let text = format!("[bench]\nrw={rw}\nbs=4k\nnorandommap\nnumber_ios={count}\n");
    let file =
        ssdlab_workload::parse_job_file(&text, "simspeed.fio").expect("the bench job parses");
    file.jobs[0]
        .source(device_bytes, seed)
        .map_err(|e| e.to_string())
}

fn job_requests(rw: &str, device_bytes: u64, count: u64, seed: u64) -> Vec<HostRequest> {
    let mut source =
        job_source(rw, device_bytes, count, seed).expect("the bench job fits the device");
    // Read once, in order, between simulated requests that evict the caches and the TLB: on
    // huge pages, as the device's own tables are, so that the replay does not pay a page walk
    // every 57 requests.
    let mut out = ssdlab_core::nand::table::huge_vec_with_capacity(count as usize);
    while let Some(r) = source.next_request() {
        out.push(r.expect("generated requests are valid"));
    }
    out
}

fn replay(dev: &mut Device, requests: Vec<HostRequest>, qd: u32) -> f64 {
    let n = requests.len() as f64;
    let started = Instant::now();
    dev.run_to_end(RunSpec {
        name: "bench".into(),
        source: Box::new(VecSource::new(requests)),
        queue_depth: qd,
        pacing: Loop::Closed,
        runtime_ns: None,
        ramp_ns: None,
    })
    .expect("the bench run completes");
    n / started.elapsed().as_secs_f64()
}

/// Time the FTL alone over the random writes of [`run`] (same geometry, seed and request
/// generator): filled in order, overwritten at random for two capacities (GC steady state, as
/// [`Device::precondition`] reaches it), then `p.requests` random writes timed. Planes are taken
/// in stripe order, as the untimed preconditioning does, and each write's mapping entries are
/// prefetched the distances ahead that the run loop uses, so the figure is the FTL's own cost,
/// the floor under any timing model on top of it. Every GC step is in the foreground (no idle
/// time without a clock), so it moves a little less than the timed run, whose background GC
/// collects earlier.
pub fn ftl_alone(p: &Params) -> Result<FtlAlone, String> {
    let preset = ssdlab_core::presets::get("tlc").expect("tlc preset");
    let config =
        Config::from_toml(preset, "preset tlc", &overrides(p)).map_err(|e| e.to_string())?;
    let derived = config.derived();
    let geo = Geometry::new(&config, &derived);
    let mut ftl = build_ftl(&config, &geo, &derived);
    let logical = derived.logical_units;
    let unit_bytes = derived.mapping_unit_bytes as u64;
    let mut ops = Vec::with_capacity(4096);
    let mut next_plane = geo.stripe_order.iter().copied().cycle();
    let mut write = |ftl: &mut Box<dyn Ftl>, unit: u64| -> Result<(), String> {
        let plane = next_plane.next().expect("a device has planes");
        let w = UnitWrite {
            unit,
            handle: 0,
            plane,
            now_ns: 0,
            host_bytes: unit_bytes as u32,
        };
        ftl.write(w, &mut ops).map_err(|e| e.to_string())?;
        ops.clear();
        Ok(())
    };
    for unit in 0..logical {
        write(&mut ftl, unit)?;
    }
    // Warm-up: two capacities of other random writes of the same generator, streamed.
    let mut warm = job_source("randwrite", logical * unit_bytes, 2 * logical, p.seed + 2)?;
    while let Some(r) = warm.next_request() {
        write(&mut ftl, r.map_err(|e| e.to_string())?.offset / unit_bytes)?;
    }
    let timed: Vec<u64> = job_requests("randwrite", logical * unit_bytes, p.requests, p.seed)
        .iter()
        .map(|r| r.offset / unit_bytes)
        .collect();
    let before = ftl.counters().gc_units_moved;
    let started = Instant::now();
    for (i, &unit) in timed.iter().enumerate() {
        if let Some(&ahead) = timed.get(i + LOOKAHEAD) {
            ftl.prefetch(ahead);
        }
        if let Some(&ahead) = timed.get(i + DEPENDENT_STAGE) {
            ftl.prefetch_dependent(ahead);
        }
        write(&mut ftl, unit)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let n = timed.len() as f64;
    Ok(FtlAlone {
        random_write_per_s: n / seconds,
        moves_per_write: (ftl.counters().gc_units_moved - before) as f64 / n,
    })
}

/// Run the benchmark; a geometry the core refuses (say `--blocks 64 --op 0.07`: too few spare
/// blocks) is the core's message.
pub fn run(p: &Params) -> Result<Results, String> {
    let baseline = peak_rss_bytes();
    let preset = ssdlab_core::presets::get("tlc").expect("tlc preset");
    let mut dev = Device::from_toml(preset, "preset tlc", &overrides(p), p.seed, false)
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let pre = dev
        .precondition(PreconditionOptions {
            max_random_passes: 2.0,
            steady_tolerance: 0.02,
        })
        .expect("preconditioning succeeds");
    let precondition_s = started.elapsed().as_secs_f64();
    let physical_pages = dev.derived().physical_pages;
    let bytes_per_physical_page = match (baseline, peak_rss_bytes()) {
        (Some(before), Some(after)) => {
            Some(after.saturating_sub(before) as f64 / physical_pages as f64)
        }
        _ => None,
    };
    let logical_bytes = dev.logical_bytes();
    let writes = job_requests("randwrite", logical_bytes, p.requests, p.seed);
    let random_write_req_per_s = replay(&mut dev, writes, p.queue_depth);
    let written = dev.ssd_json();
    let random_write_waf = written["waf"].as_f64().unwrap_or(0.0);
    // Free blocks in GC steady state lie between the two watermarks; an open block is half
    // full on average.
    let ftl = &dev.config().ftl;
    let model = |free_blocks: u32| {
        uniform_random_waf_of(dev.config(), dev.derived(), free_blocks as f64 + 1.0)
    };
    let (low, high) = (model(ftl.gc_fg_free_blocks), model(ftl.gc_bg_free_blocks));
    let tolerance = MODEL_WAF_TOLERANCE;
    if !(low * (1.0 - tolerance)..=high * (1.0 + tolerance)).contains(&random_write_waf) {
        return Err(format!(
            "random writes: measured WAF {random_write_waf:.3}, outside the analytic model's \
             {low:.3}-{high:.3} widened by {:.0} %: the simulated device is wrong, and its \
             speed is no figure",
            tolerance * 100.0
        ));
    }
    let random_write_model_waf = (low, high);
    let random_write_die_utilisation = written["die_utilisation"].as_f64().unwrap_or(0.0);
    let reads = job_requests("randread", logical_bytes, p.requests, p.seed + 1);
    let random_read_req_per_s = replay(&mut dev, reads, p.queue_depth);
    let random_read_die_utilisation = dev.ssd_json()["die_utilisation"].as_f64().unwrap_or(0.0);
    Ok(Results {
        logical_bytes,
        physical_pages,
        precondition_s,
        precondition_units: pre.units_written,
        random_write_req_per_s,
        random_write_waf,
        random_write_model_waf,
        random_write_die_utilisation,
        random_read_req_per_s,
        random_read_die_utilisation,
        bytes_per_physical_page,
    })
}
