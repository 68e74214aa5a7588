//! FlexECC's device side: clean writes land in the EDC region, flushed pages are re-protected
//! with CRC when GC moves them, each page is decoded by its own code in exactly the configured
//! time, and the all-BCH baseline is one flag apart.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::request::Reliability;
use ssdlab_core::{presets, Device, Hint, HostRequest, Op};

/// The `flexecc` preset shrunk to 4 planes of 64 blocks.
const SMALL: &[(&str, &str)] = &[
    ("geometry.channels", "2"),
    ("geometry.chips_per_channel", "1"),
    ("geometry.planes_per_die", "2"),
    ("geometry.blocks_per_plane", "64"),
    ("geometry.over_provisioning", "0.25"),
];

fn device(mode: &str, extra: &[(&str, &str)], seed: u64, store_data: bool) -> Device {
    common::preset_device(
        "flexecc",
        &[SMALL, &[("flexecc.mode", mode)], extra],
        seed,
        store_data,
    )
}

fn request(op: Op, unit: u64, reliability: Option<Reliability>, flush_read: bool) -> HostRequest {
    let mut req = HostRequest::new(op, unit * 4096, 4096);
    req.hint = Hint {
        reliability,
        flush_read,
        ..Default::default()
    };
    req
}

fn owner(dev: &Device, unit: u64) -> u32 {
    let pu = dev.ftl().mapped(unit).expect("unit is mapped");
    dev.ftl().block_handle_of(pu)
}

/// Latency of a read of `unit` on an otherwise idle device.
fn idle_read_ns(dev: &mut Device, unit: u64) -> u64 {
    dev.advance_to(dev.now_ns() + 10_000_000);
    let c = dev
        .submit(&request(Op::Read, unit, None, false), None, None)
        .expect("read");
    c.latency_ns()
}

#[test]
fn each_page_is_decoded_by_its_code_in_the_configured_time() {
    let mut flex = device("flex", &[], 1, false);
    let mut base = device("all_bch", &[], 1, false);
    for dev in [&mut flex, &mut base] {
        dev.submit(
            &request(Op::Write, 0, Some(Reliability::Dirty), false),
            None,
            None,
        )
        .unwrap();
        dev.submit(
            &request(Op::Write, 1, Some(Reliability::Clean), false),
            None,
            None,
        )
        .unwrap();
    }
    assert_eq!((owner(&flex, 0), owner(&flex, 1)), (0, 1));
    assert_eq!((owner(&base, 0), owner(&base, 1)), (0, 0));
    // Everything but the decoder is the same: the page read, the transfer and the host link.
    let d = flex.derived().clone();
    let common = d.read_ns[0] + d.page_transfer_ns;
    let bch = idle_read_ns(&mut flex, 0);
    let crc = idle_read_ns(&mut flex, 1);
    assert_eq!(bch - crc, 5_000 - 800, "BCH {bch} ns, CRC {crc} ns");
    assert!(bch >= common + 5_000, "{bch} < {common} + 5 us");
    // The baseline decodes both with BCH.
    assert_eq!(idle_read_ns(&mut base, 0), bch);
    assert_eq!(idle_read_ns(&mut base, 1), bch);
    let c = flex.flexecc_json().expect("on");
    assert_eq!(
        (c["bch_reads"].as_u64(), c["crc_reads"].as_u64()),
        (Some(1), Some(1))
    );
    // The configured figures are read, not constants: a slower CRC shows up exactly.
    let mut slow = device("flex", &[("flexecc.crc_decode_ns", "2000")], 1, false);
    slow.submit(
        &request(Op::Write, 1, Some(Reliability::Clean), false),
        None,
        None,
    )
    .unwrap();
    assert_eq!(idle_read_ns(&mut slow, 1), crc + 1_200);
}

#[test]
fn a_bch_page_with_bit_errors_takes_the_slower_decode() {
    // RBER 1e-3: about 8 flips per 1 KiB codeword, far below t = 40: always corrected.
    let mut dev = device("flex", &[("ecc.rber_base", "0.001")], 3, false);
    let mut clean = device("flex", &[], 3, false);
    for d in [&mut dev, &mut clean] {
        d.submit(
            &request(Op::Write, 0, Some(Reliability::Dirty), false),
            None,
            None,
        )
        .unwrap();
    }
    assert_eq!(
        idle_read_ns(&mut dev, 0) - idle_read_ns(&mut clean, 0),
        5_000
    );
    let c = dev.flexecc_json().unwrap();
    assert_eq!(c["bch_corrected_pages"].as_u64(), Some(1));
    assert_eq!(c["bch_failures"].as_u64(), Some(0));
}

#[test]
fn a_crc_page_with_an_error_fails_and_a_bch_page_beyond_t_fails() {
    let mut dev = device("flex", &[("ecc.rber_base", "0.01")], 5, true);
    let data = vec![0x5Au8; 4096];
    dev.submit(
        &request(Op::Write, 0, Some(Reliability::Clean), false),
        Some(&data),
        None,
    )
    .unwrap();
    dev.submit(
        &request(Op::Write, 1, Some(Reliability::Dirty), false),
        Some(&data),
        None,
    )
    .unwrap();
    let mut out = vec![0u8; 4096];
    // RBER 1e-2: ~82 flips per codeword: CRC detects, BCH (t = 40) fails; both are errors.
    for unit in [0, 1] {
        let c = dev
            .submit(&request(Op::Read, unit, None, false), None, Some(&mut out))
            .unwrap();
        assert!(c.uncorrectable, "unit {unit}");
        // The bytes come back as read, flipped bits and all: only the error says so.
        assert_ne!(out, data, "unit {unit}");
    }
    let c = dev.flexecc_json().unwrap();
    assert_eq!(
        (c["crc_failures"].as_u64(), c["bch_failures"].as_u64()),
        (Some(1), Some(1))
    );
}

/// Fill the device with dirty data, flush-read a third of it, then overwrite the rest until GC
/// has collected every block several times.
fn churn(dev: &mut Device) -> Vec<u64> {
    let n = dev.logical_bytes() / 4096;
    for unit in 0..n {
        dev.submit(
            &request(Op::Write, unit, Some(Reliability::Dirty), false),
            None,
            None,
        )
        .unwrap();
    }
    let flushed: Vec<u64> = (0..n).filter(|u| u % 3 == 0).collect();
    for &unit in &flushed {
        dev.submit(&request(Op::Read, unit, None, true), None, None)
            .unwrap();
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    for _ in 0..3 * n {
        let unit = rng.gen_range(0..n);
        if unit % 3 != 0 {
            dev.submit(
                &request(Op::Write, unit, Some(Reliability::Dirty), false),
                None,
                None,
            )
            .unwrap();
        }
    }
    flushed
}

#[test]
fn gc_reprotects_flushed_pages_with_crc() {
    let mut dev = device("flex", &[], 1, false);
    let flushed = churn(&mut dev);
    let moved_to_edc = flushed.iter().filter(|&&u| owner(&dev, u) == 1).count();
    let c = dev.flexecc_json().unwrap();
    let conversions = c["bch_to_crc"].as_u64().unwrap();
    assert_eq!(moved_to_edc as u64, conversions, "{c}");
    assert!(
        moved_to_edc * 2 > flushed.len(),
        "{moved_to_edc} of {}",
        flushed.len()
    );
    // Dirty data never leaves the ECC region.
    let n = dev.logical_bytes() / 4096;
    assert!((0..n).filter(|u| u % 3 != 0).all(|u| owner(&dev, u) == 0));
    assert_eq!(c["ecc_dirty_to_clean"].as_u64(), Some(flushed.len() as u64));
    dev.ftl().check_invariants().unwrap();
    // The baseline keeps all of it under BCH.
    let mut base = device("all_bch", &[], 1, false);
    churn(&mut base);
    assert!(flushed.iter().all(|&u| owner(&base, u) == 0));
    assert_eq!(base.flexecc_json().unwrap()["bch_to_crc"].as_u64(), Some(0));
}

#[test]
fn same_seed_same_statistics() {
    let run = || {
        let mut dev = device("flex", &[("ecc.rber_base", "0.0001")], 11, false);
        churn(&mut dev);
        dev.ssd_json().to_string()
    };
    assert_eq!(run(), run());
}

#[test]
fn bad_input_names_the_option() {
    let text = presets::get("flexecc").unwrap();
    let err = |k: &str, v: &str| {
        Device::from_toml(text, "flexecc", &[(k.into(), v.into())], 1, false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    for (k, v, named) in [
        ("ecc.rber_base", "0.5", "ecc.rber_base"),
        ("ecc.rber_base", "-1e-9", "ecc.rber_base"),
        ("ecc.correctable_bits", "0", "ecc.correctable_bits"),
        ("ftl.gc_copyback", "true", "ftl.gc_copyback"),
        ("placement.handles", "1", "flexecc.edc_handle"),
        ("flexecc.mode", "bch", "flexecc.mode"),
    ] {
        let msg = if k == "placement.handles" {
            Device::from_toml(
                text,
                "flexecc",
                &[(k.into(), v.into()), ("flexecc.mode".into(), "flex".into())],
                1,
                false,
            )
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
        } else {
            err(k, v)
        };
        assert!(msg.contains(named), "{k}={v}: {msg:?}");
    }
}
