//! Power loss at random instants of random workloads, then recovery from the OOB area: every
//! write that was acknowledged and then covered by a completed flush, and every completed FUA
//! write, reads back (its version or a later one that was written), for the page-mapping FTL (whole-page and packed units,
//! where a power loss drops the staged units of partly filled pages) and DFTL, with and
//! without a write buffer. A failure prints the seed that replays it.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::{Device, HostRequest, Op};

fn device(extra: &[(&str, &str)], seed: u64) -> Device {
    let base = [
        ("geometry.channels", "2"),
        ("geometry.chips_per_channel", "1"),
        ("geometry.dies_per_chip", "1"),
        ("geometry.planes_per_die", "2"),
        ("geometry.blocks_per_plane", "64"),
        ("geometry.pages_per_block", "32"),
        ("geometry.over_provisioning", "0.25"),
        ("cell.type", "slc"),
        ("cell.program_ns", "[250000]"),
    ];
    common::device(&[&base, extra], seed, true)
}

/// One unit's content: its logical unit and version in every byte pair.
fn content(unit: u64, version: u32, bytes: usize) -> Vec<u8> {
    let tag = ((unit as u32) << 12 | version).to_le_bytes();
    tag.iter().copied().cycle().take(bytes).collect()
}

/// Returns the units lost over all power losses.
fn swarm(extra: &[(&str, &str)], seed: u64) -> u64 {
    let ctx = format!("seed {seed}, {extra:?}");
    let mut dev = device(extra, seed);
    let protected = dev.config().controller.power_loss_protection;
    let cached = dev.config().controller.volatile_write_cache;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let unit = dev.derived().mapping_unit_bytes as u64;
    let units = dev.logical_bytes() / unit;
    // Per unit: versions written (acknowledged), and the version a completed flush covers.
    let mut written = vec![0u32; units as usize];
    let mut durable = vec![0u32; units as usize];
    // Flushes issued and not yet known complete: (completion, snapshot of `written`).
    let mut flushes: Vec<(u64, Vec<u32>)> = Vec::new();
    // FUA writes issued and not yet known complete: (completion, unit, version).
    let mut fua_writes: Vec<(u64, u64, u32)> = Vec::new();
    let mut t = 0u64;
    let mut lost = 0;
    for round in 0..4 {
        for _ in 0..rng.gen_range(200..2 * units) {
            t += rng.gen_range(0..200_000);
            match rng.gen_range(0..20) {
                0 => {
                    let c = dev
                        .submit_at(t, &HostRequest::new(Op::Flush, 0, 0), None, None)
                        .unwrap();
                    flushes.push((c.complete_ns, written.clone()));
                }
                1 => t += 20_000_000, // idle: programs and flushes complete
                _ => {
                    let u = rng.gen_range(0..units);
                    written[u as usize] += 1;
                    let data = content(u, written[u as usize], unit as usize);
                    let mut write = HostRequest::new(Op::Write, u * unit, unit);
                    write.fua = rng.gen_bool(0.25);
                    let c = dev
                        .submit_at(t, &write, Some(&data), None)
                        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    if write.fua || !cached {
                        // Done once its data is on flash: durable from its completion.
                        fua_writes.push((c.complete_ns, u, written[u as usize]));
                    }
                }
            }
        }
        let now = dev.now_ns();
        for (done, snapshot) in flushes.drain(..) {
            if done <= now {
                for (d, s) in durable.iter_mut().zip(snapshot) {
                    *d = (*d).max(s);
                }
            }
        }
        for (done, u, version) in fua_writes.drain(..) {
            if done <= now {
                durable[u as usize] = durable[u as usize].max(version);
            }
        }
        if protected {
            // Power-loss protection: every acknowledged write is durable, flushed or not.
            durable.clone_from(&written);
        }
        dev.power_loss().unwrap();
        let report = dev.recover().unwrap_or_else(|e| panic!("{ctx}: {e}"));
        lost += report.lost_units;
        assert!(
            report.oob_pages_read > 0 && report.duration_ns > 0,
            "{ctx}: {report:?}"
        );
        dev.ftl()
            .check_invariants()
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        t = dev.now_ns();
        let mut out = vec![0u8; unit as usize];
        for u in 0..units {
            dev.submit(
                &HostRequest::new(Op::Read, u * unit, unit),
                None,
                Some(&mut out),
            )
            .unwrap();
            let tag = u32::from_le_bytes(out[..4].try_into().unwrap());
            let version = if tag == 0 { 0 } else { tag & 0xFFF };
            assert!(
                tag == 0 || tag >> 12 == u as u32,
                "{ctx}: round {round} unit {u} holds unit {}'s data",
                tag >> 12
            );
            assert!(
                version >= durable[u as usize] && version <= written[u as usize],
                "{ctx}: round {round} unit {u} reads version {version}, flushed {} written {}",
                durable[u as usize],
                written[u as usize]
            );
            // What survived is the new truth: later versions build on it.
            written[u as usize] = version;
            durable[u as usize] = version;
        }
        t = t.max(dev.now_ns());
    }
    lost
}

#[test]
fn flushed_writes_survive_power_loss_page_map() {
    for seed in 1..=3 {
        swarm(&[], seed);
        swarm(&[("controller.write_buffer_pages", "64")], seed);
        swarm(
            &[
                ("geometry.page_size_bytes", "16384"),
                ("controller.write_buffer_pages", "16"),
            ],
            seed,
        );
    }
}

/// Without a volatile write cache every completed write is durable, flushed or not: nothing
/// acknowledged is lost.
#[test]
fn completed_writes_survive_power_loss_without_a_volatile_cache() {
    for seed in 1..=3 {
        for extra in [
            &[
                ("controller.volatile_write_cache", "false"),
                ("geometry.page_size_bytes", "16384"),
            ][..],
            &[
                ("controller.volatile_write_cache", "false"),
                ("geometry.page_size_bytes", "16384"),
                ("controller.write_buffer_pages", "16"),
            ],
        ] {
            swarm(extra, seed);
        }
    }
}

/// With power-loss protection every acknowledged write survives, the units of partly filled
/// pages included: the hold-up energy programs them.
#[test]
fn acknowledged_writes_survive_power_loss_with_protection() {
    for seed in 1..=3 {
        for extra in [
            &[("controller.power_loss_protection", "true")][..],
            &[
                ("controller.power_loss_protection", "true"),
                ("geometry.page_size_bytes", "16384"),
                ("controller.write_buffer_pages", "16"),
            ],
        ] {
            assert_eq!(swarm(extra, seed), 0, "seed {seed}: {extra:?}");
        }
    }
}

/// Runs on the event engine leave the pages still filling staged, as `submit` does: a power
/// loss loses their units unless a flush programmed them first; a page begun outside a run and
/// filled in one is on flash. With power-loss protection nothing staged is lost, and a flush
/// is done at once, padding nothing.
#[test]
fn pages_filling_when_a_run_ends_stay_staged() {
    use ssdlab_core::{Loop, RunSpec, VecSource};
    let packed = [("geometry.page_size_bytes", "16384")];
    let run = |dev: &mut Device, requests: Vec<HostRequest>| {
        dev.run_to_end(RunSpec {
            name: "job".into(),
            source: Box::new(VecSource::new(requests)),
            queue_depth: 4,
            pacing: Loop::Closed,
            runtime_ns: None,
            ramp_ns: None,
        })
        .unwrap()
    };
    let write = |unit: u64| HostRequest::new(Op::Write, unit * 4096, 4096);
    let outcome = |dev: &mut Device| {
        dev.power_loss().unwrap();
        let r = dev.recover().unwrap();
        (r.lost_units, r.mapped_units)
    };
    // One unit staged when the run ends: lost (its page's three empty slots lose nothing).
    let mut dev = device(&packed, 1);
    run(&mut dev, vec![write(0)]);
    assert_eq!(outcome(&mut dev), (1, 0));
    // Rewritten in the same page: one unit's data lost, not two.
    let mut dev = device(&packed, 1);
    run(&mut dev, vec![write(0), write(0)]);
    assert_eq!(outcome(&mut dev), (1, 0));
    // Flushed after the run (outside it, or in the next one): on flash.
    let mut dev = device(&packed, 1);
    run(&mut dev, vec![write(0)]);
    dev.submit(&HostRequest::new(Op::Flush, 0, 0), None, None)
        .unwrap();
    assert_eq!(outcome(&mut dev), (0, 1));
    let mut dev = device(&packed, 1);
    run(&mut dev, vec![write(0)]);
    run(&mut dev, vec![HostRequest::new(Op::Flush, 0, 0)]);
    assert_eq!(outcome(&mut dev), (0, 1));
    // Begun by `submit`, filled in a run: programmed, nothing lost.
    let mut dev = device(&packed, 1);
    dev.submit(&write(0), None, None).unwrap();
    run(&mut dev, vec![write(1), write(2), write(3)]);
    assert_eq!(outcome(&mut dev), (0, 4));
    // Protected: the staged unit survives; flushes, in a run and outside, pad nothing and
    // take no time.
    let protected = [
        ("geometry.page_size_bytes", "16384"),
        ("controller.power_loss_protection", "true"),
    ];
    let mut dev = device(&protected, 1);
    let job = run(&mut dev, vec![write(0), HostRequest::new(Op::Flush, 0, 0)]);
    assert_eq!(job["sync"]["total_ios"], 1);
    assert_eq!(job["sync"]["lat_ns"]["max"], 0);
    let before = dev.now_ns();
    let c = dev
        .submit(&HostRequest::new(Op::Flush, 0, 0), None, None)
        .unwrap();
    assert_eq!(c.complete_ns, before);
    assert_eq!(dev.ftl().counters().padded_units, 0);
    assert_eq!(outcome(&mut dev), (0, 1));
    // The power loss programmed the page, padded: three empty slots.
    assert_eq!(dev.ftl().counters().padded_units, 3);
}

#[test]
fn flushed_writes_survive_power_loss_dftl() {
    for seed in 1..=3 {
        swarm(
            &[("ftl.kind", "dftl"), ("ftl.dftl_cached_fraction", "0.05")],
            seed,
        );
        swarm(
            &[
                ("ftl.kind", "dftl"),
                ("ftl.dftl_cached_fraction", "0.3"),
                ("controller.write_buffer_pages", "64"),
            ],
            seed,
        );
    }
}
