//! SEA-SSD's device side: the settings hint sizes the `dyn` segment, victims are chosen per
//! segment, predicted units migrate from `stat` to `dyn` at GC, and a device that ignores hints
//! behaves exactly like one never sent them.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::request::SeaClass;
use ssdlab_core::{Device, DeviceError, Hint, HostRequest, Op};
use std::collections::VecDeque;

/// A small SLC device with two placement handles (stat 0, dyn 1): 4 planes of 64 blocks of 64
/// 4 KiB pages.
const SMALL: &[(&str, &str)] = &[
    ("geometry.channels", "2"),
    ("geometry.chips_per_channel", "1"),
    ("geometry.dies_per_chip", "1"),
    ("geometry.planes_per_die", "2"),
    ("geometry.blocks_per_plane", "64"),
    ("geometry.pages_per_block", "64"),
    ("geometry.page_size_bytes", "4096"),
    ("geometry.over_provisioning", "0.25"),
    ("cell.type", "slc"),
    ("placement.handles", "2"),
];

fn device_with(extra: &[(&str, &str)], seed: u64, store_data: bool) -> Device {
    common::device(&[SMALL, extra], seed, store_data)
}

fn write(dev: &mut Device, unit: u64, class: Option<SeaClass>) {
    let mut req = HostRequest::new(Op::Write, unit * 4096, 4096);
    req.hint = Hint {
        sea_class: class,
        ..Default::default()
    };
    dev.submit(&req, None, None)
        .unwrap_or_else(|e| panic!("write of unit {unit}: {e}"));
}

fn logical_units(dev: &Device) -> u64 {
    dev.logical_bytes() / 4096
}

/// A pseudo-random eighth of the logical units (a multiplicative hash): a set defined by the
/// unit number modulo the plane count would sit in one plane after a sequential fill, and its
/// plane would take more than its share of the data.
fn one_in_eight(unit: u64) -> bool {
    unit.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 61 == 0
}

/// The placement handle owning the block that holds logical unit `unit`.
fn owner(dev: &Device, unit: u64) -> u32 {
    let pu = dev.ftl().mapped(unit).expect("unit is mapped");
    dev.ftl().block_handle_of(pu)
}

#[test]
fn predicted_units_collected_in_stat_move_to_dyn_blocks() {
    let mut dev = device_with(&[], 1, false);
    let n = logical_units(&dev);
    for unit in 0..n {
        write(&mut dev, unit, Some(SeaClass::Stat));
    }
    // An eighth of the units will be written soon; the rest is overwritten until GC has run
    // through the stat blocks several times.
    let predicted: Vec<u64> = (0..n).filter(|&u| one_in_eight(u)).collect();
    for &unit in &predicted {
        dev.sea_predict(unit * 4096, 4096).unwrap();
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for _ in 0..3 * n {
        let unit = rng.gen_range(0..n);
        if !one_in_eight(unit) {
            write(&mut dev, unit, Some(SeaClass::Stat));
        }
    }
    let ssd = dev.ssd_json();
    let migrated = ssd["sea"]["predictions"]["migrated_units"]
        .as_u64()
        .unwrap();
    let in_dyn = predicted.iter().filter(|&&u| owner(&dev, u) == 1).count() as u64;
    // Nothing else goes to dyn, nothing leaves it, and a unit migrates once.
    assert!(migrated > predicted.len() as u64 / 2, "{migrated} migrated");
    assert_eq!(in_dyn, migrated);
    let unpredicted_in_dyn = (0..n)
        .filter(|&u| !one_in_eight(u) && owner(&dev, u) == 1)
        .count();
    assert_eq!(unpredicted_in_dyn, 0);
    assert_eq!(ssd["sea"]["predictions"]["came_true_units"], 0);
    assert!(ssd["sea"]["dyn_blocks"].as_u64().unwrap() > 0);
    dev.ftl().check_invariants().unwrap();
}

/// 16 KiB pages of four 4 KiB units (GC packs migrated units into the dyn frontier's pages),
/// every unit written `stat` with a byte pattern of its own, an eighth of them predicted.
fn packed_device_with_predictions() -> (Device, u64) {
    let mut dev = device_with(
        &[
            ("geometry.page_size_bytes", "16384"),
            ("geometry.pages_per_block", "16"),
        ],
        1,
        true,
    );
    let n = logical_units(&dev);
    for unit in 0..n {
        dev.submit(&stat_write(unit), Some(&pattern(unit)), None)
            .unwrap();
    }
    for unit in (0..n).filter(|&u| one_in_eight(u)) {
        dev.sea_predict(unit * 4096, 4096).unwrap();
    }
    (dev, n)
}

fn stat_write(unit: u64) -> HostRequest {
    let mut req = HostRequest::new(Op::Write, unit * 4096, 4096);
    req.hint.sea_class = Some(SeaClass::Stat);
    req
}

fn pattern(unit: u64) -> Vec<u8> {
    vec![(unit % 251) as u8; 4096]
}

/// Some units migrated, each is in a dyn block, and nothing else is.
fn assert_migrated_units_are_in_dyn(dev: &Device, n: u64) {
    let migrated = dev.ssd_json()["sea"]["predictions"]["migrated_units"]
        .as_u64()
        .unwrap();
    assert!(migrated > 0);
    assert_eq!(
        (0..n).filter(|&u| owner(dev, u) == 1).count() as u64,
        migrated
    );
    dev.ftl().check_invariants().unwrap();
}

#[test]
fn migration_with_packed_units_programs_whole_dyn_pages() {
    let (mut dev, n) = packed_device_with_predictions();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for _ in 0..3 * n {
        let unit = rng.gen_range(0..n);
        if !one_in_eight(unit) {
            dev.submit(&stat_write(unit), Some(&pattern(unit)), None)
                .unwrap();
        }
    }
    assert_migrated_units_are_in_dyn(&dev, n);
    // The data followed every move.
    for unit in 0..n {
        assert_eq!(
            dev.peek(unit * 4096, 4096).unwrap(),
            pattern(unit),
            "unit {unit}"
        );
    }
}

#[test]
fn a_prediction_that_comes_true_leaves_the_table() {
    let mut dev = device_with(&[], 1, false);
    dev.sea_predict(0, 10 * 4096).unwrap();
    for unit in 0..4 {
        write(&mut dev, unit, Some(SeaClass::Dyn));
    }
    // Written twice: it came true once.
    write(&mut dev, 0, Some(SeaClass::Dyn));
    let p = &dev.ssd_json()["sea"]["predictions"];
    assert_eq!(p["received_units"], 10);
    assert_eq!(p["came_true_units"], 4);
    assert_eq!(p["in_table_units"], 6);
    assert_eq!(p["expired_units"], 0);
}

#[test]
fn the_table_holds_the_latest_predictions_only() {
    let mut dev = device_with(&[("sea.predict_table_entries", "100")], 1, false);
    dev.sea_predict(0, 250 * 4096).unwrap();
    let p = &dev.ssd_json()["sea"]["predictions"];
    assert_eq!(p["in_table_units"], 100);
    assert_eq!(p["expired_units"], 150);
    // The oldest expired: writing them proves nothing.
    for unit in 0..150 {
        write(&mut dev, unit, None);
    }
    assert_eq!(dev.ssd_json()["sea"]["predictions"]["came_true_units"], 0);
    write(&mut dev, 249, None);
    assert_eq!(dev.ssd_json()["sea"]["predictions"]["came_true_units"], 1);
}

#[test]
fn victims_come_from_dyn_while_it_is_over_its_quota() {
    // Half the units are dyn, half stat, written uniformly: not_sized, both segments hold about
    // as many blocks as their data needs plus a share of the spare space.
    let run = |settings: Option<(u64, u64)>| {
        let mut dev = device_with(&[], 1, false);
        let n = logical_units(&dev);
        if let Some((wal, cache)) = settings {
            dev.sea_settings(wal, cache).unwrap();
        }
        let class = |u: u64| {
            Some(if u.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63 == 0 {
                SeaClass::Dyn
            } else {
                SeaClass::Stat
            })
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for unit in 0..n {
            write(&mut dev, unit, class(unit));
        }
        for _ in 0..3 * n {
            let unit = rng.gen_range(0..n);
            write(&mut dev, unit, class(unit));
        }
        dev.ssd_json()["sea"].clone()
    };
    let not_sized = run(None);
    let block = 64 * 4096;
    let n_bytes = device_with(&[], 1, false).logical_bytes();
    // A quota of a third of the dyn data's blocks: dyn is always over it, so GC collects dyn
    // and squeezes it to little more than its data.
    let small = run(Some((n_bytes / 2 / 3, 0)));
    let quota = small["settings"]["dyn_quota_blocks"].as_u64().unwrap();
    let data_blocks = n_bytes / 2 / block;
    assert!(quota < data_blocks, "{small}");
    let (dyn_unsized, dyn_small) = (
        not_sized["dyn_blocks"].as_u64().unwrap(),
        small["dyn_blocks"].as_u64().unwrap(),
    );
    assert!(
        dyn_small < dyn_unsized,
        "{dyn_small} vs {dyn_unsized} blocks"
    );
    // A settings hint that calls all data dyn: stat keeps only the reserve, dyn's quota is
    // the rest of the plane, dyn stays under it and GC collects stat, squeezing it.
    let large = run(Some((n_bytes, 0)));
    let quota = large["settings"]["dyn_quota_blocks"].as_u64().unwrap();
    let dyn_large = large["dyn_blocks"].as_u64().unwrap();
    assert!(
        dyn_large > dyn_unsized,
        "{dyn_large} vs {dyn_unsized} blocks"
    );
    assert!(dyn_large <= quota + 4 * 2, "{large}");
}

#[test]
fn hints_off_is_the_plain_ssd() {
    let run = |honor: &str, send_sea: bool| {
        let mut dev = device_with(&[("placement.honor_hints", honor)], 9, false);
        let n = logical_units(&dev);
        if send_sea {
            dev.sea_settings(1 << 20, 8 << 20).unwrap();
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut hint_rng = Xoshiro256PlusPlus::seed_from_u64(12);
        for i in 0..3 * n {
            let unit = rng.gen_range(0..n);
            if send_sea && i % 7 == 0 {
                dev.sea_predict(hint_rng.gen_range(0..n - 1) * 4096, 8192)
                    .unwrap();
            }
            let class = if unit < n / 5 {
                SeaClass::Dyn
            } else {
                SeaClass::Stat
            };
            write(&mut dev, unit, Some(class));
        }
        let mut ssd = dev.ssd_json();
        let sea = ssd.as_object_mut().unwrap().remove("sea").unwrap();
        (ssd, sea)
    };
    let (never_sent, quiet) = run("false", false);
    let (ignored, received) = run("false", true);
    assert_eq!(never_sent, ignored);
    assert_eq!(received["settings"]["received"], 1);
    assert!(received["predictions"]["received_units"].as_u64().unwrap() > 0);
    for key in [
        "came_true_units",
        "expired_units",
        "migrated_units",
        "in_table_units",
    ] {
        assert_eq!(received["predictions"][key], 0, "{key}");
        assert_eq!(received["predictions"][key], quiet["predictions"][key]);
    }
    assert_eq!(
        received["settings"]["dyn_quota_blocks"],
        serde_json::Value::Null
    );
    // Honoured, the same hints change the device.
    let (honoured, _) = run("true", true);
    assert_ne!(honoured["waf"], ignored["waf"]);
}

/// An OLTP-like workload on a database with a write-ahead log, as SEA-SSD's storage engine
/// sees it: 2 % of the units are the WAL (written in a circle, `dyn`), 8 % hot pages (`dyn`),
/// the rest cold pages (`stat`). A cold page enters the flush list (and is predicted) a while
/// before the engine writes it. Returns the device's WAF and its `sea` report.
fn oltp(honor: bool, predict: bool, settings: bool, seed: u64) -> (f64, serde_json::Value) {
    // A cache whose dirty quarter is twice the hot set: dyn is sized with room for GC.
    let cache_per_hot = if settings { Some(8) } else { None };
    oltp_on(&[], honor, predict, cache_per_hot, seed)
}

/// The OLTP-like workload: a WAL and a hot set written dyn, cold pages predicted before they
/// are written stat; `cache_per_hot` sends a settings hint of that many hot sets of cache.
fn oltp_on(
    extra: &[(&str, &str)],
    honor: bool,
    predict: bool,
    cache_per_hot: Option<u64>,
    seed: u64,
) -> (f64, serde_json::Value) {
    let honor = if honor { "true" } else { "false" };
    let mut pairs = vec![("placement.honor_hints", honor)];
    pairs.extend_from_slice(extra);
    let mut dev = device_with(&pairs, seed, false);
    let n = logical_units(&dev);
    let wal = n / 50;
    let hot = n * 8 / 100;
    if let Some(factor) = cache_per_hot {
        dev.sea_settings(wal * 4096, factor * hot * 4096).unwrap();
    }
    for unit in wal..n {
        let class = if unit < wal + hot {
            SeaClass::Dyn
        } else {
            SeaClass::Stat
        };
        write(&mut dev, unit, Some(class));
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut flush_list = VecDeque::new();
    let mut wal_head = 0;
    for _ in 0..4 * n {
        match rng.gen_range(0..10) {
            0..=3 => {
                write(&mut dev, wal_head, Some(SeaClass::Dyn));
                wal_head = (wal_head + 1) % wal;
            }
            4..=6 => write(&mut dev, rng.gen_range(wal..wal + hot), Some(SeaClass::Dyn)),
            _ => {
                let page = rng.gen_range(wal + hot..n);
                if predict {
                    dev.sea_predict(page * 4096, 4096).unwrap();
                }
                flush_list.push_back(page);
                if flush_list.len() > 2000 {
                    let page = flush_list.pop_front().unwrap();
                    write(&mut dev, page, Some(SeaClass::Stat));
                }
            }
        }
    }
    dev.ftl().check_invariants().unwrap();
    let ssd = dev.ssd_json();
    (ssd["waf"].as_f64().unwrap(), ssd["sea"].clone())
}

#[test]
fn classification_and_prediction_lower_write_amplification() {
    let (plain, _) = oltp(false, true, true, 42);
    let (classified, _) = oltp(true, false, false, 42);
    let (predicted, sea) = oltp(true, true, false, 42);
    let (sized, sized_sea) = oltp(true, true, true, 42);
    // The same configuration, workload and seed give the same figures, bit for bit.
    assert_eq!(oltp(true, true, true, 42), (sized, sized_sea));
    eprintln!(
        "WAF: hints off {plain:.3}, classification {classified:.3}, + prediction \
         {predicted:.3}, + settings {sized:.3}"
    );
    assert!(sea["predictions"]["migrated_units"].as_u64().unwrap() > 0);
    assert!(sea["predictions"]["came_true_units"].as_u64().unwrap() > 0);
    // Seed 42: 2.501, 2.405, 2.131, 1.848.
    assert!(classified < plain, "{classified} vs {plain}");
    assert!(predicted < classified * 0.95, "{predicted} vs {classified}");
    assert!(sized < predicted * 0.9, "{sized} vs {predicted}");
    assert!(sized < plain * 0.75, "{sized} vs {plain}");
}

#[test]
fn a_quota_below_dyn_data_bends_instead_of_copying_it_over_and_over() {
    // A settings hint that sizes dyn at a fraction of its live data (no cache): strictly
    // kept, dyn is collected while it is full of live data; with the default
    // sea.cross_segment_ratio the cheaper stat victims are taken instead.
    let strict = oltp_on(&[("sea.cross_segment_ratio", "0")], true, true, Some(0), 42).0;
    let bent = oltp_on(&[], true, true, Some(0), 42).0;
    let (unsized_, _) = oltp(true, true, false, 42);
    eprintln!("WAF: quota kept strictly {strict:.3}, bent {bent:.3}, unsized {unsized_:.3}");
    // Seed 42: 20.5 strictly, 2.62 bent, 2.13 unsized (the quota is still wrong, but costs
    // a quarter more copies rather than ten times as many).
    assert!(bent < strict * 0.3, "{bent} vs {strict}");
    assert!(bent < unsized_ * 1.3, "{bent} vs {unsized_}");
}

#[test]
fn sea_errors_name_what_is_wrong() {
    let mut dev = device_with(&[], 1, false);
    let capacity = dev.logical_bytes();
    assert!(matches!(
        dev.sea_predict(capacity, 4096),
        Err(DeviceError::OutOfRange { .. })
    ));
    assert!(matches!(
        dev.sea_predict(0, 0),
        Err(DeviceError::ZeroLength { .. })
    ));
    assert!(matches!(dev.peek(0, 4096), Err(DeviceError::NoDataStore)));
    // One handle: dyn and stat are the same blocks.
    let mut one = device_with(&[("placement.handles", "1")], 1, false);
    let err = one.sea_settings(1 << 20, 1 << 20).unwrap_err().to_string();
    assert!(err.contains("placement.handles"), "{err}");
    assert!(one.sea_predict(0, 4096).is_err());
    // Ignored hints are accepted whatever the handles.
    let mut off = device_with(
        &[
            ("placement.handles", "1"),
            ("placement.honor_hints", "false"),
        ],
        1,
        false,
    );
    off.sea_settings(1 << 20, 1 << 20).unwrap();
    off.sea_predict(0, 4096).unwrap();
    for (key, value, words) in [
        ("sea.dirty_fraction", "1.5", "[0, 1]"),
        ("sea.dyn_multiplier", "0", "(0, 1000]"),
        ("sea.predict_table_entries", "0", "1..=16777216"),
        ("sea.unknown", "1", "unknown key 'sea.unknown'"),
    ] {
        let pairs = vec![(key.to_string(), value.to_string())];
        let err = Device::from_toml("", "t", &pairs, 1, false)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(key) && err.contains(words), "{err}");
    }
}

#[test]
fn peek_reads_without_timing_or_statistics() {
    let mut dev = device_with(&[], 1, true);
    let data: Vec<u8> = (0..8192u32).map(|i| (i % 253) as u8).collect();
    dev.submit(&HostRequest::new(Op::Write, 4096, 8192), Some(&data), None)
        .unwrap();
    let (now, before) = (dev.now_ns(), dev.ssd_json());
    let bytes = dev.peek(4000, 8192 + 200).unwrap();
    assert_eq!(&bytes[..96], &[0u8; 96][..]);
    assert_eq!(&bytes[96..96 + 8192], &data[..]);
    assert_eq!(&bytes[96 + 8192..], &[0u8; 104][..]);
    assert_eq!(dev.now_ns(), now);
    assert_eq!(dev.ssd_json(), before);
}

#[test]
fn migration_runs_on_the_event_engine_too() {
    // A run with the default (priority) scheduler goes through the event engine, which turns
    // GC's list of moves (some of them to the dyn frontier) into queued die work.
    let (mut dev, n) = packed_device_with_predictions();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let requests: Vec<HostRequest> = (0..3 * n)
        .map(|_| rng.gen_range(0..n))
        .filter(|&u| !one_in_eight(u))
        .map(stat_write)
        .collect();
    common::closed_run(&mut dev, requests, 8);
    assert_migrated_units_are_in_dyn(&dev, n);
}
