//! FlexECC's read latency in closed form on the `flexecc` preset: on an idle device a 4 KiB
//! host read is the array read (25 µs), the page's transfer over the channel (4096 B at
//! 800 MT/s × 1 B = 5.12 µs), its decode by its own code (CRC 0.8 µs, BCH 5 µs when clean)
//! and the host link (4096 B at 3938 MB/s, rounded up: 1.041 µs), exactly, on every
//! scheduler (the reservation path and the event engine), with or without suspend.

mod common;

use ssdlab_core::request::Reliability;
use ssdlab_core::{Device, Hint, HostRequest, Op};

const ARRAY_READ_NS: u64 = 25_000;
const CHANNEL_NS: u64 = 5_120;
const LINK_NS: u64 = 1_041;
const CRC_DECODE_NS: u64 = 800;
const BCH_CLEAN_DECODE_NS: u64 = 5_000;

fn device(mode: &str) -> Device {
    device_on(mode, "fcfs", "false")
}

fn device_on(mode: &str, scheduler: &str, suspend: &str) -> Device {
    let small = [
        ("geometry.channels", "2"),
        ("geometry.chips_per_channel", "1"),
        ("geometry.blocks_per_plane", "64"),
        ("flexecc.mode", mode),
        ("controller.scheduler", scheduler),
        ("cell.suspend", suspend),
    ];
    common::preset_device("flexecc", &[&small], 1, false)
}

fn request(op: Op, unit: u64, reliability: Option<Reliability>) -> HostRequest {
    let mut req = HostRequest::new(op, unit * 4096, 4096);
    req.hint = Hint {
        reliability,
        ..Default::default()
    };
    req
}

/// Write unit 0 dirty and unit 1 clean (a cache fill), then read each alone on the idle
/// device: their latencies. Requests go through runs, which the event engine serves on every
/// scheduler but `fcfs` (and with suspend on).
fn clean_and_dirty_read_ns(dev: &mut Device) -> (u64, u64) {
    run(
        dev,
        vec![
            request(Op::Write, 0, Some(Reliability::Dirty)),
            request(Op::Write, 1, Some(Reliability::Clean)),
        ],
    );
    let mut read = |unit| {
        dev.advance_to(dev.now_ns() + 10_000_000);
        let job = run(dev, vec![request(Op::Read, unit, None)]);
        let clat = &job["read"]["clat_ns"];
        assert_eq!(clat["min"], clat["max"]);
        clat["max"].as_u64().unwrap()
    };
    let dirty = read(0);
    let clean = read(1);
    (clean, dirty)
}

fn run(dev: &mut Device, requests: Vec<HostRequest>) -> serde_json::Value {
    common::closed_run(dev, requests, 1)
}

#[test]
fn a_clean_page_read_costs_the_crc_decode_and_a_dirty_one_the_bch_decode() {
    let mut flex = device("flex");
    let d = flex.derived();
    assert_eq!(
        (d.read_ns[0], d.page_transfer_ns),
        (ARRAY_READ_NS, CHANNEL_NS)
    );
    let (clean, dirty) = clean_and_dirty_read_ns(&mut flex);
    assert_eq!(clean, ARRAY_READ_NS + CHANNEL_NS + CRC_DECODE_NS + LINK_NS);
    assert_eq!(
        dirty,
        ARRAY_READ_NS + CHANNEL_NS + BCH_CLEAN_DECODE_NS + LINK_NS
    );
    let c = flex.flexecc_json().unwrap();
    assert_eq!(
        (c["crc_reads"].as_u64(), c["bch_reads"].as_u64()),
        (Some(1), Some(1))
    );

    // All-BCH: both pages decode with BCH.
    let mut base = device("all_bch");
    let (clean, dirty) = clean_and_dirty_read_ns(&mut base);
    let bch = ARRAY_READ_NS + CHANNEL_NS + BCH_CLEAN_DECODE_NS + LINK_NS;
    assert_eq!((clean, dirty), (bch, bch));
}

#[test]
fn every_scheduler_times_the_codecs_as_fcfs_does() {
    let fcfs = clean_and_dirty_read_ns(&mut device("flex"));
    let base = clean_and_dirty_read_ns(&mut device("all_bch"));
    for (scheduler, suspend) in [
        ("priority", "false"),
        ("priority", "true"),
        ("out_of_order", "false"),
    ] {
        let mut flex = device_on("flex", scheduler, suspend);
        assert_eq!(
            clean_and_dirty_read_ns(&mut flex),
            fcfs,
            "{scheduler}, suspend {suspend}"
        );
        let c = flex.flexecc_json().unwrap();
        assert_eq!(
            (c["crc_reads"].as_u64(), c["bch_reads"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!((owner(&flex, 0), owner(&flex, 1)), (0, 1), "{scheduler}");
        let mut all_bch = device_on("all_bch", scheduler, suspend);
        assert_eq!(clean_and_dirty_read_ns(&mut all_bch), base, "{scheduler}");
    }
}

fn owner(dev: &Device, unit: u64) -> u32 {
    let pu = dev.ftl().mapped(unit).expect("unit is mapped");
    dev.ftl().block_handle_of(pu)
}

/// Flushed pages (ECC-clean under BCH) are re-protected with CRC when GC moves them, on the
/// event engine as on the reservation path: fill with dirty data, flush-read a third, rewrite
/// the rest dirty at random until GC has collected every block several times.
#[test]
fn gc_reprotects_flushed_pages_on_every_scheduler() {
    let mut seen = Vec::new();
    for scheduler in ["fcfs", "priority"] {
        let mut dev = device_on("flex", scheduler, "false");
        let n = dev.logical_bytes() / 4096;
        run(
            &mut dev,
            (0..n)
                .map(|u| request(Op::Write, u, Some(Reliability::Dirty)))
                .collect(),
        );
        let flushed: Vec<u64> = (0..n).filter(|u| u.is_multiple_of(3)).collect();
        run(
            &mut dev,
            flushed
                .iter()
                .map(|&u| {
                    let mut r = request(Op::Read, u, None);
                    r.hint.flush_read = true;
                    r
                })
                .collect(),
        );
        let mut x = 9u64;
        let rewrites: Vec<_> = (0..3 * n)
            .filter_map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let unit = (x >> 33) % n;
                (!unit.is_multiple_of(3))
                    .then(|| request(Op::Write, unit, Some(Reliability::Dirty)))
            })
            .collect();
        run(&mut dev, rewrites);
        let moved_to_edc = flushed.iter().filter(|&&u| owner(&dev, u) == 1).count() as u64;
        let c = dev.flexecc_json().unwrap();
        assert_eq!(
            c["bch_to_crc"].as_u64(),
            Some(moved_to_edc),
            "{scheduler}: {c}"
        );
        assert!(moved_to_edc * 2 > flushed.len() as u64, "{scheduler}: {c}");
        assert!((0..n)
            .filter(|u| !u.is_multiple_of(3))
            .all(|u| owner(&dev, u) == 0));
        dev.ftl().check_invariants().unwrap();
        seen.push(moved_to_edc);
    }
    // The same requests in the same order: GC makes the same choices on either path.
    assert_eq!(seen[0], seen[1], "{seen:?}");
}
