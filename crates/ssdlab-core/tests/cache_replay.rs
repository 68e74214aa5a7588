//! The cache-layer benchmark's method: a cache run on a replay of the completions a device
//! returned takes exactly the decisions of the run on the device (same counters, same disk
//! work, every recorded completion used), so its time is the cache layer's alone.

use ssdlab_core::cache::workload::{generate, WorkloadSpec};
use ssdlab_core::cache::{CacheConfig, FlashCache, RecordingSsd};
use ssdlab_core::{presets, Device};

#[test]
fn a_replayed_run_takes_the_recorded_runs_decisions() {
    let overrides: Vec<(String, String)> = [
        ("geometry.channels", "2"),
        ("geometry.chips_per_channel", "1"),
        ("geometry.blocks_per_plane", "64"),
        ("flexecc.mode", "flex"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let text = presets::get("flexecc").unwrap();
    let device = Device::from_toml(text, "flexecc", &overrides, 3, false).unwrap();
    let config = CacheConfig {
        cache_bytes: 8 << 20,
        associativity: 64,
        // Idle time between requests cleans: the replay must follow that too.
        idle_clean_ns: 500_000,
        disk: ssdlab_core::cache::disk::DiskConfig {
            capacity_bytes: 48 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut recorded = FlashCache::new(RecordingSsd::new(device), config.clone()).unwrap();
    for personality in ["r75", "varmail"] {
        let spec = WorkloadSpec {
            personality: personality.into(),
            requests: 3_000,
            interarrival_ns: 700_000,
            ..Default::default()
        };
        let reqs = generate(&spec, recorded.cache_blocks(), recorded.disk_blocks()).unwrap();
        recorded.run(&reqs).unwrap();
    }
    let counters = recorded.counters();
    assert!(counters.read_misses > 0 && counters.read_hits > 0 && counters.evictions > 0);
    assert!(counters.cleaned_idle + counters.cleaned_threshold > 0);
    let disk = recorded.disk_counters();
    let recorder = recorded.into_ssd();
    assert_eq!(
        recorder.log.len() as u64,
        counters.dirty_writes + counters.clean_writes + counters.host_reads + counters.flush_reads
    );

    let mut replayed = FlashCache::new(recorder.replay(), config).unwrap();
    for personality in ["r75", "varmail"] {
        let spec = WorkloadSpec {
            personality: personality.into(),
            requests: 3_000,
            interarrival_ns: 700_000,
            ..Default::default()
        };
        let reqs = generate(&spec, replayed.cache_blocks(), replayed.disk_blocks()).unwrap();
        replayed.run(&reqs).unwrap();
    }
    assert_eq!(replayed.counters(), counters);
    assert_eq!(replayed.disk_counters(), disk);
    assert_eq!(replayed.device().remaining(), 0);
    // One request more than was recorded is an error, not a made-up answer.
    let extra = ssdlab_core::cache::AppRequest {
        arrival_ns: u64::MAX / 2,
        write: true,
        block: 0,
        blocks: 1,
    };
    let err = replayed
        .submit(&extra, None, None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("more SSD requests than were recorded"),
        "{err}"
    );
}
