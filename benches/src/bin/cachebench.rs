//! `cachebench [--tiny] [--repeat N]`: the cost of the SSD cache layer (ssdlab_core::cache) per
//! application request, in metadata-only mode. A random 90 %-read workload over twice the cache
//! (Poisson arrivals 8 ms apart: the disk keeps up) runs through the cache on the `flexecc`
//! preset, recording every completion the SSD returns. Then:
//!
//! - **cache layer alone**: the same requests run through a fresh cache whose SSD replays the
//!   recorded completions ([`ReplaySsd`]): the same lookups, LRU moves, evictions, dirty
//!   tracking, cleaning, fills and disk-model accesses, and no flash simulation. The target is
//!   at most 200 ns per request. Workload generation is outside every timed span. Reported as
//!   this thread's time on a CPU (what other jobs on a shared machine do not inflate) and as
//!   wall time.
//! - **with the SSD**: the cache on the device, less the SSD requests it issued replayed alone
//!   on an identical device at the same times; this adds what the two cost each other in CPU
//!   caches and is noisier.

use ssdlab_core::cache::workload::{generate, WorkloadSpec};
use ssdlab_core::cache::{AppRequest, CacheConfig, FlashCache, RecordingSsd};
use ssdlab_core::Device;
use std::time::Instant;

fn device(mode: &str, tiny: bool) -> Device {
    let mut overrides = vec![("flexecc.mode".to_string(), mode.to_string())];
    if tiny {
        overrides.push(("geometry.blocks_per_plane".into(), "64".into()));
    }
    let text = ssdlab_core::presets::get("flexecc").expect("flexecc preset");
    Device::from_toml(text, "flexecc", &overrides, 1, false).unwrap_or_else(|e| panic!("{e}"))
}

/// The cache on the device, recording the SSD's completions and the SSD request trace
/// (untimed: the logs grow as it runs).
fn record(
    mode: &str,
    tiny: bool,
    reqs: &[AppRequest],
) -> (RecordingSsd, Vec<(u64, ssdlab_core::request::HostRequest)>) {
    let config = CacheConfig {
        record_trace: true,
        ..Default::default()
    };
    let mut cache = FlashCache::new(RecordingSsd::new(device(mode, tiny)), config).expect("cache");
    cache.run(reqs).expect("run");
    let trace = cache
        .trace()
        .expect("trace")
        .iter()
        .map(|r| (r.time_ns, r.kind.request(r.offset, r.length)))
        .collect();
    let counters = cache.counters();
    let recorder = cache.into_ssd();
    assert_eq!(
        recorder.log.len() as u64,
        counters.dirty_writes + counters.clean_writes + counters.host_reads + counters.flush_reads
    );
    (recorder, trace)
}

/// This thread's time on a CPU (ns, from the scheduler's statistics): on a shared machine,
/// unlike wall time, it leaves out the time other jobs held the core. None where unavailable.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tiny = args.iter().any(|a| a == "--tiny");
    let repeat: usize = args
        .iter()
        .position(|a| a == "--repeat")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("--repeat N: a positive integer"))
        .unwrap_or(3);
    let requests = if tiny { 20_000 } else { 1_000_000 };
    println!(
        "| mode | requests | SSD requests | cache layer alone, on-CPU (ns/request, best of \
         {repeat}) | cache layer alone, wall | cache + SSD (ms) | SSD alone (ms) | cache with the \
         SSD (ns/request) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for mode in ["all_bch", "flex"] {
        let spec = WorkloadSpec {
            personality: "r90".into(),
            requests,
            interarrival_ns: 8_000_000,
            ..Default::default()
        };
        let cache = FlashCache::new(device(mode, tiny), CacheConfig::default()).expect("cache");
        let reqs = generate(&spec, cache.cache_blocks(), cache.disk_blocks()).expect("workload");
        drop(cache);
        let (recorder, trace) = record(mode, tiny, &reqs);
        let mut best = f64::INFINITY;
        let mut best_cpu = f64::INFINITY;
        for _ in 0..repeat.max(1) {
            let mut alone =
                FlashCache::new(recorder.replay(), CacheConfig::default()).expect("cache");
            let cpu = thread_cpu_ns();
            let started = Instant::now();
            alone.run(&reqs).expect("replay run");
            best = best.min(started.elapsed().as_secs_f64());
            if let (Some(from), Some(to)) = (cpu, thread_cpu_ns()) {
                best_cpu = best_cpu.min((to - from) as f64 * 1e-9);
            }
            assert_eq!(alone.device().remaining(), 0, "the replay diverged");
        }
        drop(recorder);
        let mut cache = FlashCache::new(device(mode, tiny), CacheConfig::default()).expect("cache");
        let started = Instant::now();
        cache.run(&reqs).expect("run");
        let total = started.elapsed().as_secs_f64();
        drop(cache);
        let mut alone = device(mode, tiny);
        let started = Instant::now();
        for (t, req) in &trace {
            alone.submit_at(*t, req, None, None).expect("replay");
        }
        let ssd = started.elapsed().as_secs_f64();
        println!(
            "| {mode} | {requests} | {} | **{:.0}** | {:.0} | {:.1} | {:.1} | {:.0} |",
            trace.len(),
            best_cpu * 1e9 / requests as f64,
            best * 1e9 / requests as f64,
            total * 1e3,
            ssd * 1e3,
            (total - ssd) * 1e9 / requests as f64
        );
    }
}
