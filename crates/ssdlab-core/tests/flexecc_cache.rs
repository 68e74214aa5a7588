//! The SSD cache over the disk model on a FlexECC SSD: no byte the application reads differs
//! from what it last wrote, across workloads and raw bit error rates (a shadow copy checks);
//! lost dirty data is an error, never data; the cache names the four request types.

use ssdlab_core::cache::workload::{generate, WorkloadSpec};
use ssdlab_core::cache::{CacheConfig, FlashCache};
use ssdlab_core::{presets, Device};
use std::collections::HashMap;

const SMALL: &[(&str, &str)] = &[
    ("geometry.channels", "2"),
    ("geometry.chips_per_channel", "1"),
    ("geometry.planes_per_die", "2"),
    ("geometry.blocks_per_plane", "64"),
    ("geometry.over_provisioning", "0.25"),
];

fn cache(mode: &str, rber: &str, seed: u64, store_data: bool, scrub: f64) -> FlashCache {
    cache_with(mode, rber, seed, store_data, scrub, &[])
}

fn cache_with(
    mode: &str,
    rber: &str,
    seed: u64,
    store_data: bool,
    scrub: f64,
    extra: &[(&str, &str)],
) -> FlashCache {
    let pairs: Vec<(String, String)> = SMALL
        .iter()
        .chain(&[("flexecc.mode", mode), ("ecc.rber_base", rber)])
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let text = presets::get("flexecc").unwrap();
    let dev = Device::from_toml(text, "flexecc", &pairs, seed, store_data).unwrap();
    let config = CacheConfig {
        cache_bytes: 8 << 20,
        associativity: 256,
        scrub_pages_per_s: scrub,
        disk: ssdlab_core::cache::disk::DiskConfig {
            capacity_bytes: 64 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    FlashCache::new(dev, config).unwrap()
}

/// The bytes of version `v` of disk block `b`.
fn pattern(b: u64, v: u64, out: &mut [u8]) {
    let mut x = b.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ v.wrapping_mul(0xD1B5_4A32_D192_ED03);
    for chunk in out.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

#[test]
fn every_byte_read_is_the_last_written_across_workloads_and_rbers() {
    for personality in ["fileserver", "varmail", "oltp", "r75"] {
        for (rber, mode) in [
            ("0", "flex"),
            ("1e-5", "flex"),
            ("1e-4", "flex"),
            ("4e-3", "flex"),
            ("4e-3", "all_bch"),
        ] {
            let mut c = cache(mode, rber, 7, true, 200.0);
            let spec = WorkloadSpec {
                personality: personality.into(),
                requests: 600,
                interarrival_ns: 20_000_000,
                working_set_bytes: 16 << 20,
                seed: 3,
            };
            let reqs = generate(&spec, c.cache_blocks(), c.disk_blocks()).unwrap();
            // Shadow copy: the version of each block the application last wrote.
            let mut shadow: HashMap<u64, u64> = HashMap::new();
            let mut version = 0u64;
            let (mut errors, mut checked) = (0u64, 0u64);
            for req in &reqs {
                let n = req.blocks as usize * 4096;
                let mut buf = vec![0u8; n];
                if req.write {
                    version += 1;
                    for i in 0..req.blocks as u64 {
                        let b = req.block + i;
                        pattern(
                            b,
                            version,
                            &mut buf[i as usize * 4096..(i as usize + 1) * 4096],
                        );
                        shadow.insert(b, version);
                    }
                    c.submit(req, Some(&buf), None).unwrap();
                } else {
                    let done = c.submit(req, None, Some(&mut buf)).unwrap();
                    if done.error {
                        errors += 1;
                        continue;
                    }
                    let mut want = vec![0u8; 4096];
                    for i in 0..req.blocks as u64 {
                        let b = req.block + i;
                        match shadow.get(&b) {
                            Some(&v) => pattern(b, v, &mut want),
                            None => want.fill(0),
                        }
                        let got = &buf[i as usize * 4096..(i as usize + 1) * 4096];
                        assert!(
                            got == &want[..],
                            "{personality} rber {rber}: block {b} differs"
                        );
                        checked += 1;
                    }
                }
            }
            let s = c.counters();
            assert!(checked > 0, "{personality}");
            // Errors only where BCH can fail, and each one counted as lost dirty data.
            if rber != "4e-3" {
                assert_eq!(errors, 0, "{personality} rber {rber}");
            }
            assert_eq!(errors, s.errors_returned);
            if rber == "1e-4" && mode == "flex" {
                assert!(
                    s.corruption_disk_reads + s.scrub_prefetched > 0,
                    "{personality}: {s:?}"
                );
            }
            // After a flush the disk holds the last version of every block still readable.
            c.flush_all().unwrap();
        }
    }
}

#[test]
fn cache_issues_the_four_request_types_and_counts_them() {
    let mut c = cache("flex", "0", 1, false, 0.0);
    let spec = WorkloadSpec {
        personality: "r75".into(),
        requests: 20_000,
        interarrival_ns: 100_000,
        ..Default::default()
    };
    let reqs = generate(&spec, c.cache_blocks(), c.disk_blocks()).unwrap();
    c.run(&reqs).unwrap();
    let s = c.counters();
    assert!(
        s.dirty_writes > 0 && s.clean_writes > 0 && s.host_reads > 0 && s.flush_reads > 0,
        "{s:?}"
    );
    assert_eq!(s.reads + s.writes, 20_000);
    assert_eq!(s.read_hits + s.read_misses, s.reads);
    let f = c.device().flexecc_json().unwrap();
    assert_eq!(f["clean_writes"].as_u64(), Some(s.clean_writes));
    assert_eq!(f["dirty_writes"].as_u64(), Some(s.dirty_writes));
    assert_eq!(f["flush_reads"].as_u64(), Some(s.flush_reads));
    // Every read decodes a page, but one whose program is not done (served from the
    // controller).
    assert_eq!(
        f["crc_reads"].as_u64().unwrap()
            + f["bch_reads"].as_u64().unwrap()
            + c.device().flash_counters().controller_reads,
        s.host_reads + s.flush_reads
    );
}

#[test]
fn the_scrubber_finds_corrupt_edc_pages_before_the_host() {
    let run = |scrub: f64| {
        // Planned corruptions stay in the page until it is rewritten, as retention errors do.
        let mut c = cache_with(
            "flex",
            "1e-5",
            2,
            false,
            scrub,
            &[("flexecc.injection", "points")],
        );
        let spec = WorkloadSpec {
            personality: "r90".into(),
            requests: 8000,
            interarrival_ns: 20_000_000,
            working_set_bytes: 4 << 20,
            seed: 5,
        };
        let reqs = generate(&spec, c.cache_blocks(), c.disk_blocks()).unwrap();
        c.run(&reqs).unwrap();
        c.counters()
    };
    let (off, on) = (run(0.0), run(500.0));
    assert_eq!((off.scrub_reads, off.scrub_prefetched), (0, 0));
    assert!(on.scrub_reads > 1000 && on.scrub_prefetched > 50, "{on:?}");
    // Corrupt pages found first by the scrubber are not found by the host.
    assert!(
        on.corruption_disk_reads * 4 < off.corruption_disk_reads,
        "{on:?} vs {off:?}"
    );
}

#[test]
fn planned_corruptions_are_the_same_count_for_every_workload() {
    let mut seen = Vec::new();
    for personality in ["r75", "r90", "varmail"] {
        let text = presets::get("flexecc").unwrap();
        let pairs: Vec<(String, String)> = SMALL
            .iter()
            .chain(&[
                ("flexecc.mode", "flex"),
                ("ecc.rber_base", "1e-7"),
                ("flexecc.injection", "points"),
            ])
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let dev = Device::from_toml(text, "flexecc", &pairs, 1, false).unwrap();
        let mut c = FlashCache::new(dev, CacheConfig::default()).unwrap();
        let spec = WorkloadSpec {
            personality: personality.into(),
            requests: 20_000,
            interarrival_ns: 4_000_000,
            working_set_bytes: 64 << 20,
            seed: 1,
        };
        let reqs = generate(&spec, c.cache_blocks(), c.disk_blocks()).unwrap();
        c.run(&reqs).unwrap();
        let s = c.counters();
        // N = RBER x the SSD's logical data bits.
        let n = (1e-7 * c.device().logical_bytes() as f64 * 8.0).round() as u64;
        assert_eq!(s.corruptions_planned, n);
        assert!(
            s.corruptions_injected > 0 && s.corruptions_injected <= n,
            "{s:?}"
        );
        let f = c.device().flexecc_json().unwrap();
        assert_eq!(
            f["injected_corruptions"].as_u64(),
            Some(s.corruptions_injected)
        );
        // Met by reads: BCH corrects a single flip; a CRC page becomes a disk read.
        assert_eq!(s.errors_returned, 0);
        assert!(
            f["bch_corrected_pages"].as_u64().unwrap() + s.corruption_disk_reads > 0,
            "{f}"
        );
        seen.push(s.corruptions_planned);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn cache_larger_than_the_ssd_is_refused() {
    let text = presets::get("flexecc").unwrap();
    let pairs: Vec<(String, String)> = SMALL
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let dev = Device::from_toml(text, "flexecc", &pairs, 1, false).unwrap();
    let config = CacheConfig {
        cache_bytes: 1 << 40,
        ..Default::default()
    };
    let err = FlashCache::new(dev, config).err().unwrap().to_string();
    assert!(err.contains("cache.cache_bytes"), "{err}");
}
