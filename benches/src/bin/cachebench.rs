//! `cachebench [--tiny]`: the cost of the SSD cache layer (ssdlab_core::cache) per application
//! request, in metadata-only mode: a random 90 %-read workload over twice the cache runs
//! through the cache on the `flexecc` preset (8 ms apart: the disk keeps up), then the SSD requests the cache issued are
//! replayed alone on an identical device at the same times; the difference is what the cache
//! (lookup, LRU, cleaning, disk model) costs. The target is at most 200 ns per request.

use ssdlab_core::cache::workload::{generate, WorkloadSpec};
use ssdlab_core::cache::{CacheConfig, FlashCache};
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

fn main() {
    let tiny = std::env::args().any(|a| a == "--tiny");
    let requests = if tiny { 20_000 } else { 1_000_000 };
    println!(
        "| mode | requests | SSD requests | cache + SSD (ms) | SSD alone (ms) | cache layer (ns/request) |"
    );
    println!("|---|---|---|---|---|---|");
    for mode in ["all_bch", "flex"] {
        let config = CacheConfig {
            record_trace: true,
            ..Default::default()
        };
        let mut cache = FlashCache::new(device(mode, tiny), config).expect("cache");
        let spec = WorkloadSpec {
            personality: "r90".into(),
            requests,
            interarrival_ns: 8_000_000,
            ..Default::default()
        };
        let reqs = generate(&spec, cache.cache_blocks(), cache.disk_blocks()).expect("workload");
        let started = Instant::now();
        cache.run(&reqs).expect("run");
        let total = started.elapsed();
        let trace = cache.trace().expect("trace").to_vec();
        let ssd_requests: Vec<_> = trace
            .iter()
            .map(|r| (r.time_ns, r.kind.request(r.offset, r.length)))
            .collect();
        let mut alone = device(mode, tiny);
        let started = Instant::now();
        for (t, req) in &ssd_requests {
            alone.submit_at(*t, req, None, None).expect("replay");
        }
        let ssd = started.elapsed();
        let per_request = (total.as_nanos() as f64 - ssd.as_nanos() as f64) / requests as f64;
        println!(
            "| {mode} | {requests} | {} | {:.1} | {:.1} | {:.0} |",
            ssd_requests.len(),
            total.as_secs_f64() * 1e3,
            ssd.as_secs_f64() * 1e3,
            per_request
        );
    }
}
