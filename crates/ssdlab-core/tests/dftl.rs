//! DFTL against its closed form: uniform random page reads at QD 1 after a sequential fill
//! cost one flash read per cache hit and two per miss, and the miss rate is 1 − the cached
//! fraction. Also: data survives DFTL's translation work and GC, on both timing paths.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::{Device, HostRequest, Op};

fn device(extra: &[(&str, &str)], store: bool) -> Device {
    let base = [
        ("geometry.channels", "2"),
        ("geometry.chips_per_channel", "1"),
        ("geometry.dies_per_chip", "1"),
        ("geometry.planes_per_die", "1"),
        ("geometry.blocks_per_plane", "128"),
        ("geometry.pages_per_block", "64"),
        ("geometry.page_size_bytes", "4096"),
        ("geometry.over_provisioning", "0.15"),
        ("cell.type", "slc"),
        ("cell.program_ns", "[250000]"),
        ("ftl.kind", "dftl"),
    ];
    common::device(&[&base, extra], 7, store)
}

fn request(op: Op, page: u64) -> HostRequest {
    HostRequest::new(op, page * 4096, 4096)
}

fn run(dev: &mut Device, requests: Vec<HostRequest>) {
    common::closed_run(dev, requests, 1);
}

fn random_reads(pages: u64, n: usize, seed: u64) -> Vec<HostRequest> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| request(Op::Read, rng.gen_range(0..pages)))
        .collect()
}

/// `n` uniform random page requests, 30 % reads and 70 % writes.
fn random_mix(pages: u64, n: usize, seed: u64) -> Vec<HostRequest> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let op = if rng.gen_bool(0.3) {
                Op::Read
            } else {
                Op::Write
            };
            request(op, rng.gen_range(0..pages))
        })
        .collect()
}

/// Write every page once, then read at random until the fill's dirty entries have left the
/// mapping cache; measurements start after. Returns the logical pages.
fn fill_and_warm_up(dev: &mut Device) -> u64 {
    let pages = dev.logical_bytes() / 4096;
    run(dev, (0..pages).map(|p| request(Op::Write, p)).collect());
    run(dev, random_reads(pages, 4 * pages as usize, 1));
    dev.reset_measurements();
    pages
}

fn closed_form(fraction: f64, scheduler: &str) {
    let f = fraction.to_string();
    let mut dev = device(
        &[
            ("ftl.dftl_cached_fraction", &f),
            ("controller.scheduler", scheduler),
        ],
        false,
    );
    let pages = fill_and_warm_up(&mut dev);
    let n = 40_000;
    run(&mut dev, random_reads(pages, n, 2));
    let ssd = dev.ssd_json();
    let d = &ssd["dftl"];
    let (hits, misses) = (d["hits"].as_u64().unwrap(), d["misses"].as_u64().unwrap());
    assert_eq!(hits + misses, n as u64);
    assert_eq!(d["dirty_evictions"], 0, "{d}");
    assert_eq!(d["translation_writes"], 0, "{d}");
    // One flash read per hit, two per miss, exactly.
    assert_eq!(
        ssd["flash"]["array_reads"].as_u64().unwrap(),
        hits + 2 * misses
    );
    let miss_rate = misses as f64 / n as f64;
    assert!(
        (miss_rate - (1.0 - fraction)).abs() < 0.01,
        "miss rate {miss_rate} against {} ({scheduler})",
        1.0 - fraction
    );
}

#[test]
fn random_reads_miss_at_one_minus_the_cached_fraction_reservation_path() {
    closed_form(0.15, "fcfs");
    closed_form(0.35, "fcfs");
}

#[test]
fn random_reads_miss_at_one_minus_the_cached_fraction_event_engine() {
    closed_form(0.15, "priority");
}

#[test]
fn a_miss_costs_a_translation_read_before_the_data_read() {
    // QD 1 on an idle device: a hit costs the lookup's CPU time and one read; a miss adds
    // one read of the translation page before it.
    let mut dev = device(
        &[
            ("ftl.dftl_cached_fraction", "0.001"),
            ("controller.scheduler", "fcfs"),
        ],
        false,
    );
    let pages = dev.logical_bytes() / 4096;
    for p in 0..pages {
        dev.submit(&request(Op::Write, p), None, None).unwrap();
    }
    let t_read =
        dev.derived().read_ns[0] + dev.derived().page_transfer_ns + dev.derived().decode_ns;
    let link = (4096u64 * 1000).div_ceil(dev.config().host.link_mbps);
    let lookup = 100;
    dev.advance_to(dev.now_ns() + 100_000_000);
    let hit = dev
        .submit(&request(Op::Read, pages - 1), None, None)
        .unwrap();
    assert_eq!(hit.latency_ns(), lookup + t_read + link);
    dev.advance_to(dev.now_ns() + 100_000_000);
    let miss = dev.submit(&request(Op::Read, 0), None, None).unwrap();
    let cached = ((0.001 * pages as f64).round()) as u64;
    let eviction = 500 + 2 * cached;
    assert_eq!(miss.latency_ns(), lookup + eviction + 2 * t_read + link);
}

#[test]
fn data_survives_translation_and_gc_on_both_paths() {
    for scheduler in ["fcfs", "priority"] {
        let mut dev = device(
            &[
                ("ftl.dftl_cached_fraction", "0.05"),
                ("controller.scheduler", scheduler),
            ],
            true,
        );
        let pages = dev.logical_bytes() / 4096;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut version = vec![0u8; pages as usize];
        for _ in 0..3 * pages {
            let p = rng.gen_range(0..pages);
            version[p as usize] = version[p as usize].wrapping_add(1);
            let data = vec![version[p as usize]; 4096];
            dev.submit(&request(Op::Write, p), Some(&data), None)
                .unwrap();
        }
        assert!(dev.ssd_json()["gc"]["invocations"].as_u64().unwrap_or(1) > 0);
        dev.ftl().check_invariants().unwrap();
        let mut out = vec![0u8; 4096];
        for p in 0..pages {
            dev.submit(&request(Op::Read, p), None, Some(&mut out))
                .unwrap();
            assert!(
                out.iter().all(|&b| b == version[p as usize]),
                "page {p} ({scheduler})"
            );
        }
        let d = &dev.ssd_json()["dftl"];
        assert!(d["translation_writes"].as_u64().unwrap() > 0, "{d}");
        assert!(d["gc_translation_updates"].as_u64().unwrap() > 0, "{d}");
    }
}

#[test]
fn dftl_runs_are_deterministic() {
    let once = || {
        let mut dev = device(&[("ftl.dftl_cached_fraction", "0.05")], false);
        let pages = dev.logical_bytes() / 4096;
        run(&mut dev, random_mix(pages, 3 * pages as usize, 9));
        dev.ssd_json()
    };
    assert_eq!(once(), once());
}

/// DFTL's counters (the `ssd.dftl` totals) over the requests from `from` on, and the same sums
/// from the request log's DFTL columns.
fn log_sums(dev: &Device, from: usize) -> [u64; 5] {
    let rows = &dev.request_log().expect("request log on")[from..];
    [
        rows.iter().map(|r| r.mapping_hits as u64).sum(),
        rows.iter().map(|r| r.mapping_misses as u64).sum(),
        rows.iter().map(|r| r.translation_reads as u64).sum(),
        rows.iter().map(|r| r.translation_writes as u64).sum(),
        rows.iter().map(|r| r.device_cpu_ns).sum(),
    ]
}

fn dftl_totals(dev: &Device) -> [u64; 5] {
    let d = &dev.ssd_json()["dftl"];
    [
        "hits",
        "misses",
        "translation_reads",
        "translation_writes",
        "cpu_ns",
    ]
    .map(|k| d[k].as_u64().unwrap_or_else(|| panic!("{k}: {d}")))
}

#[test]
fn the_request_log_has_each_requests_translation_work() {
    let mut dev = device(
        &[
            ("ftl.dftl_cached_fraction", "0.001"),
            ("controller.scheduler", "fcfs"),
            ("stats.request_log", "true"),
        ],
        false,
    );
    let pages = dev.logical_bytes() / 4096;
    for p in 0..pages {
        dev.submit(&request(Op::Write, p), None, None).unwrap();
    }
    // Every lookup, translation page and CPU nanosecond is in exactly one row.
    assert_eq!(log_sums(&dev, 0), dftl_totals(&dev));
    let cached = ((0.001 * pages as f64).round()) as u64;
    let before = dev.request_log().unwrap().len();
    dev.advance_to(dev.now_ns() + 100_000_000);
    dev.submit(&request(Op::Read, pages - 1), None, None)
        .unwrap();
    dev.advance_to(dev.now_ns() + 100_000_000);
    dev.submit(&request(Op::Read, 0), None, None).unwrap();
    let rows = &dev.request_log().unwrap()[before..];
    // A hit: the lookup's CPU time, no translation page.
    let hit = rows[0];
    assert_eq!(
        (
            hit.mapping_hits,
            hit.mapping_misses,
            hit.translation_reads,
            hit.translation_writes
        ),
        (1, 0, 0, 0)
    );
    assert_eq!((hit.device_cpu_ns, hit.flash_reads), (100, 1));
    // A miss: the lookup and a clean eviction's scan, and the translation page read.
    let miss = rows[1];
    assert_eq!(
        (
            miss.mapping_hits,
            miss.mapping_misses,
            miss.translation_reads,
            miss.translation_writes
        ),
        (0, 1, 1, 0)
    );
    assert_eq!(
        (miss.device_cpu_ns, miss.flash_reads),
        (100 + 500 + 2 * cached, 2)
    );
    let line = miss.csv_line();
    assert!(
        line.ends_with(&format!(",1,0,0,1,{}", 600 + 2 * cached)),
        "{line}"
    );
}

#[test]
fn the_request_log_has_each_requests_translation_work_event_engine() {
    let mut dev = device(
        &[
            ("ftl.dftl_cached_fraction", "0.05"),
            ("controller.scheduler", "priority"),
            ("stats.request_log", "true"),
        ],
        false,
    );
    let pages = dev.logical_bytes() / 4096;
    run(
        &mut dev,
        (0..pages).map(|p| request(Op::Write, p)).collect(),
    );
    run(&mut dev, random_reads(pages, 4000, 3));
    let totals = dftl_totals(&dev);
    assert_eq!(log_sums(&dev, 0), totals);
    assert!(
        totals[1] > 0 && totals[2] > 0 && totals[3] > 0,
        "{totals:?}"
    );
}

/// Where little space is spare, a translation page's program sets off a foreground GC step
/// whose moves stale several more translation pages, each of whose programs does the same:
/// the cascade of GC updates must end (written back once per staling, it grew without end and
/// overflowed the stack), with every page's data intact and the FTL's invariants kept.
#[test]
fn gc_translation_updates_end_where_little_space_is_spare() {
    let mut dev = device(
        &[
            ("geometry.channels", "4"),
            ("geometry.chips_per_channel", "2"),
            ("geometry.planes_per_die", "2"),
            ("geometry.blocks_per_plane", "64"),
        ],
        false,
    );
    common::precondition(&mut dev);
    let pages = dev.logical_bytes() / 4096;
    common::closed_run(&mut dev, random_mix(pages, 60_000, 7), 32);
    dev.ftl().check_invariants().unwrap();
    let d = &dev.ssd_json()["dftl"];
    assert!(d["gc_translation_updates"].as_u64().unwrap() > 0, "{d}");
}

/// The translation pages a GC step leaves stale are part of that GC's work: written back
/// where a plane has room, they start no GC of their own. Here (1 % of the mapping cached,
/// whole victims per GC step, sequential 128 KiB writes after a random fill) each of their
/// programs once started a foreground GC step that staled as many pages as it wrote: the
/// cascade never ended and the first requests after the fill never completed.
#[test]
fn gc_translation_updates_start_no_gc_of_their_own() {
    let json = common::within(120, || {
        let mut dev = device(
            &[
                ("geometry.chips_per_channel", "2"),
                ("geometry.channels", "1"),
                ("geometry.planes_per_die", "2"),
                ("geometry.blocks_per_plane", "96"),
                ("geometry.over_provisioning", "0.25"),
                ("ftl.dftl_cached_fraction", "0.01"),
                ("ftl.gc_step_pages", "1000"),
                ("controller.write_buffer_pages", "64"),
                ("controller.scheduler", "fcfs"),
            ],
            false,
        );
        common::precondition(&mut dev);
        let chunk = 128 * 1024;
        let chunks = dev.logical_bytes() / chunk;
        let requests = (0..2 * chunks)
            .map(|i| HostRequest::new(Op::Write, i % chunks * chunk, chunk))
            .collect();
        common::closed_run(&mut dev, requests, 4);
        dev.ftl().check_invariants().unwrap();
        dev.ssd_json()
    });
    let updates = json["dftl"]["gc_translation_updates"].as_u64().unwrap();
    assert!(updates > 0, "{}", json["dftl"]);
}

/// Background GC's translation work is flash work like any other: the translation pages its
/// moves leave stale are read and programmed on the dies, in time, and counted. Here (QD 1,
/// so most dies are idle and collect in the background) the engine once dropped them: the
/// FTL counted 790,287 pages programmed where the dies programmed 480,449.
#[test]
fn background_gc_translation_updates_are_programmed_on_the_dies() {
    let mut dev = device(&[("geometry.blocks_per_plane", "64")], false);
    common::precondition(&mut dev);
    let pages = dev.logical_bytes() / 4096;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let writes = (0..20_000)
        .map(|_| request(Op::Write, rng.gen_range(0..pages)))
        .collect();
    common::closed_run(&mut dev, writes, 1);
    dev.ftl().check_invariants().unwrap();
    let ssd = dev.ssd_json();
    assert!(
        ssd["gc"]["background_invocations"].as_u64().unwrap() > 0,
        "{}",
        ssd["gc"]
    );
    let updates = ssd["dftl"]["gc_translation_updates"].as_u64().unwrap();
    assert!(updates > 1_000, "{}", ssd["dftl"]);
    // Every page the FTL wrote (host, GC and translation pages) is a program on a die.
    assert_eq!(
        ssd["flash"]["programs"].as_u64().unwrap(),
        ssd["flash_pages_programmed"].as_u64().unwrap(),
        "{}",
        ssd["flash"]
    );
}

/// A trim of a unit whose mapping is not cached loads its translation page like any access:
/// in the event engine that read is a transaction on its die, and the trim completes after
/// it. (The engine once reserved a trim's translation work on the idle reservation timeline:
/// counted, but no die was busy and trims completed at once.)
#[test]
fn a_trim_that_misses_waits_for_its_translation_read_on_the_die() {
    let mut dev = device(
        &[
            ("ftl.dftl_cached_fraction", "0.001"),
            ("ftl.dftl_victim_search", "lru"),
        ],
        false,
    );
    let pages = fill_and_warm_up(&mut dev);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let n = 2_000;
    let trims = (0..n)
        .map(|_| request(Op::Trim, rng.gen_range(0..pages)))
        .collect();
    let job = common::closed_run(&mut dev, trims, 1);
    let ssd = dev.ssd_json();
    let d = &ssd["dftl"];
    let misses = d["misses"].as_u64().unwrap();
    assert!(misses > n * 9 / 10, "{d}");
    // Each miss read its translation page on a die (and nothing else was read).
    assert_eq!(
        ssd["flash"]["array_reads"].as_u64().unwrap(),
        d["translation_reads"].as_u64().unwrap()
    );
    assert!(ssd["die_utilisation"].as_f64().unwrap() > 0.0, "{ssd}");
    // At QD 1 a trim's chain runs alone: it takes at least the sensing and transfer of each
    // translation page it reads and the program of each it writes back (a dirty eviction).
    let xfer = dev.derived().page_transfer_ns;
    let (t_read, t_prog) = (dev.derived().read_ns[0], dev.derived().program_ns[0]);
    let reads = d["translation_reads"].as_u64().unwrap();
    let writes = d["translation_writes"].as_u64().unwrap();
    assert!(writes > 0, "{d}");
    let floor = (reads * (t_read + xfer) + writes * (t_prog + xfer)) as f64 / n as f64;
    let mean = job["trim"]["clat_ns"]["mean"].as_f64().unwrap();
    assert!(
        mean >= floor,
        "trim mean {mean} ns against at least {floor} ns"
    );
}
