//! Swarm test: random device shapes, policies, hints and request mixes, each run in data-driven
//! mode against a shadow copy of the logical space, with the accounting invariants checked at
//! the end. A failure prints the seed that replays it.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::request::{SeaClass, WriteLife};
use ssdlab_core::{Device, Hint, HostRequest, Op};

fn random_device(rng: &mut Xoshiro256PlusPlus, seed: u64) -> Device {
    let overrides = random_overrides(rng);
    Device::from_toml("", "swarm", &overrides, seed, true)
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"))
}

fn random_overrides(rng: &mut Xoshiro256PlusPlus) -> Vec<(String, String)> {
    let cell = ["slc", "mlc", "tlc", "qlc"][rng.gen_range(0..4)];
    let bits = match cell {
        "slc" => 1,
        "mlc" => 2,
        "tlc" => 3,
        _ => 4,
    };
    let handles = rng.gen_range(1..=4u32);
    let pages_per_block = bits * 12;
    let page_size = [2048u32, 4096, 8192][rng.gen_range(0..3)];
    // Whole pages, or several mapping units packed into each page.
    let mapping_unit = [512, 1024, 2048, page_size][rng.gen_range(0..4)].min(page_size);
    let overrides: Vec<(String, String)> = [
        ("cell.type", format!("\"{cell}\"")),
        ("cell.program_ns", "[200000]".to_string()),
        ("geometry.channels", rng.gen_range(1..=2u32).to_string()),
        (
            "geometry.chips_per_channel",
            rng.gen_range(1..=2u32).to_string(),
        ),
        ("geometry.dies_per_chip", "1".to_string()),
        (
            "geometry.planes_per_die",
            rng.gen_range(1..=2u32).to_string(),
        ),
        (
            "geometry.blocks_per_plane",
            rng.gen_range(48..=72u32).to_string(),
        ),
        ("geometry.pages_per_block", pages_per_block.to_string()),
        ("geometry.page_size_bytes", page_size.to_string()),
        ("ftl.mapping_unit_bytes", mapping_unit.to_string()),
        ("geometry.over_provisioning", "0.4".to_string()),
        (
            "ftl.gc_policy",
            ["greedy", "cost_benefit", "fifo"][rng.gen_range(0..3)].to_string(),
        ),
        (
            "ftl.wear_leveling",
            ["dynamic", "none"][rng.gen_range(0..2)].to_string(),
        ),
        ("ftl.gc_copyback", rng.gen_bool(0.5).to_string()),
        (
            "ftl.gc_destination",
            ["victim_plane", "most_free"][rng.gen_range(0..2)].to_string(),
        ),
        ("ftl.gc_bg_idle_ns", "100000".to_string()),
        ("placement.handles", handles.to_string()),
        ("placement.honor_hints", rng.gen_bool(0.8).to_string()),
        (
            "controller.write_buffer_pages",
            ["0", "8"][rng.gen_range(0..2)].to_string(),
        ),
        ("channel.cache_read", rng.gen_bool(0.5).to_string()),
        ("channel.cache_program", rng.gen_bool(0.5).to_string()),
        (
            "controller.volatile_write_cache",
            rng.gen_bool(0.8).to_string(),
        ),
        (
            "host.melded_reads",
            ["off", "on", "auto"][rng.gen_range(0..3)].to_string(),
        ),
        ("placement.learn_read_groups", rng.gen_bool(0.5).to_string()),
        ("ecc.codeword_bytes", "512".to_string()),
        ("stats.request_log", "true".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    overrides
}

fn random_hint(rng: &mut Xoshiro256PlusPlus, handles: u16) -> Hint {
    let mut hint = Hint::default();
    match rng.gen_range(0..6) {
        0 => hint.placement_id = Some(rng.gen_range(0..handles)),
        1 => hint.stream = Some(rng.gen_range(0..handles)),
        2 => {
            hint.sea_class = Some(if rng.gen_bool(0.5) {
                SeaClass::Dyn
            } else {
                SeaClass::Stat
            })
        }
        3 => hint.write_life = WriteLife::from_index(rng.gen_range(0..6)),
        4 => hint.read_group = Some(rng.gen_range(0..100)),
        _ => {}
    }
    hint
}

#[test]
fn random_devices_keep_data_and_accounting() {
    let mut seeds_with_gc = 0;
    for seed in 0..24u64 {
        if std::env::var("SWARM_SEED").is_ok_and(|s| s != seed.to_string()) {
            continue;
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut dev = random_device(&mut rng, seed);
        if std::env::var("SWARM_SEED").is_ok() {
            eprintln!("{}", dev.config().canonical_json());
        }
        let handles = dev.config().placement.handles as u16;
        let page = dev.page_size() as u64;
        let capacity = dev.logical_bytes();
        let mut shadow = vec![0u8; capacity as usize];
        let mut host_bytes = 0u64;
        // Enough requests to overwrite the device a few times, so that GC runs.
        let requests = (3 * capacity / page).clamp(3_000, 20_000) as usize;
        for i in 0..requests {
            if rng.gen_bool(0.05) {
                dev.advance_to(dev.now_ns() + rng.gen_range(0..2_000_000));
            }
            let len = if rng.gen_bool(0.7) {
                page * rng.gen_range(1..=4)
            } else {
                rng.gen_range(1..3 * page)
            };
            let offset = if rng.gen_bool(0.7) {
                rng.gen_range(0..(capacity - len) / page) * page
            } else {
                rng.gen_range(0..capacity - len)
            };
            let mut req = HostRequest::new(Op::Write, offset, len);
            match rng.gen_range(0..10) {
                0..=4 => {
                    req.hint = random_hint(&mut rng, handles);
                    // A pattern unique to this request, cheap to make.
                    let tag = (seed << 32 | i as u64).to_le_bytes();
                    let data: Vec<u8> = (0..len as usize)
                        .map(|k| tag[k % 8] ^ (k / 8) as u8)
                        .collect();
                    dev.submit(&req, Some(&data), None)
                        .unwrap_or_else(|e| panic!("seed {seed} #{i}: {e}"));
                    shadow[offset as usize..(offset + len) as usize].copy_from_slice(&data);
                    host_bytes += len;
                }
                5..=7 => {
                    req.op = Op::Read;
                    let mut out = vec![0u8; len as usize];
                    dev.submit(&req, None, Some(&mut out))
                        .unwrap_or_else(|e| panic!("seed {seed} #{i}: {e}"));
                    assert!(
                        out == shadow[offset as usize..(offset + len) as usize],
                        "seed {seed} #{i}: read {offset}+{len} returned other data"
                    );
                }
                8 => {
                    req.op = Op::Trim;
                    dev.submit(&req, None, None)
                        .unwrap_or_else(|e| panic!("seed {seed} #{i}: {e}"));
                    // Whole mapping units inside the range are deallocated and read back as
                    // zeros.
                    let unit = dev.config().derived().mapping_unit_bytes as u64;
                    let first = offset.div_ceil(unit) * unit;
                    let end = (offset + len) / unit * unit;
                    if end > first {
                        shadow[first as usize..end as usize].fill(0);
                    }
                }
                _ => {
                    req.op = Op::Flush;
                    req.length = 0;
                    req.offset = 0;
                    dev.submit(&req, None, None)
                        .unwrap_or_else(|e| panic!("seed {seed} #{i}: {e}"));
                }
            }
        }
        dev.ftl()
            .check_invariants()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let ftl = dev.ftl().counters();
        let flash = dev.flash_counters();
        assert_eq!(
            flash.programs,
            ftl.flash_pages_programmed(),
            "seed {seed}: every program is a host page or a GC move"
        );
        assert_eq!(flash.erases, ftl.erases, "seed {seed}");
        let erase_sum: u64 = dev.ftl().erase_counts().iter().map(|&c| c as u64).sum();
        assert_eq!(
            erase_sum, ftl.erases,
            "seed {seed}: per-block erase counts add up"
        );
        let handle_host: u64 = dev
            .ftl()
            .handle_counters()
            .iter()
            .map(|h| h.host_bytes_written)
            .sum();
        assert_eq!(
            handle_host, host_bytes,
            "seed {seed}: FDP host bytes are the bytes the host wrote"
        );
        let handle_media: u64 = dev
            .ftl()
            .handle_counters()
            .iter()
            .map(|h| h.media_bytes_written)
            .sum();
        assert_eq!(
            handle_media,
            ftl.flash_pages_programmed() * page,
            "seed {seed}: FDP media bytes add up"
        );
        let log = dev.request_log().expect("request log enabled");
        assert_eq!(log.len(), requests, "seed {seed}");
        let logged_programs: u64 = log.iter().map(|r| r.flash_writes as u64).sum();
        assert_eq!(
            logged_programs, flash.programs,
            "seed {seed}: the request log accounts for every program"
        );
        seeds_with_gc += (ftl.gc_invocations > 0) as u32;
    }
    assert!(
        seeds_with_gc >= 8,
        "only {seeds_with_gc} of 24 devices ran GC: the swarm must exercise it"
    );
}

/// Runs through the event engine and the reservation path alike: every scheduler × FTL (page
/// map, DFTL) × allocation × suspend × GC step size on random devices and random open- and
/// closed-loop mixes of reads, writes and trims (closed loops with think-time pauses too), as
/// one job or two or three side by side. Every request completes (none waits forever),
/// the accounting closes (every page an FTL programs, translation pages included, is a program
/// on a die), the host never takes the GC reserve, and the same seed gives the same JSON.
#[test]
fn every_scheduling_combination_completes_every_request_and_keeps_the_accounting() {
    let runs = every_combination(Mix::Spread);
    if std::env::var("SWARM_COMBINATION").is_ok() {
        return; // one combination replayed: the counts below are over all of them
    }
    assert!(
        runs.with_gc >= 24,
        "only {} of 48 runs collected garbage",
        runs.with_gc
    );
    assert!(
        runs.side_by_side >= 10,
        "only {} of 48 runs had jobs side by side",
        runs.side_by_side
    );
}

/// The same combinations on hot data behind a write-back buffer: sub-page and page writes over
/// a sixteenth of the device (a tenth of them FUA writes), reads, trims and flushes, so that
/// rewrites merge into pages that wait in the buffer (their programs leave their die queues and
/// join again), flushes and FUA writes wait for buffered pages, and GC collects blocks whose
/// programs are still queued. Every request and every flush completes, with the accounting as
/// above.
#[test]
fn hot_rewrites_behind_a_write_back_buffer_complete_with_every_flush_in_every_combination() {
    let runs = every_combination(Mix::HotBuffered);
    if std::env::var("SWARM_COMBINATION").is_ok() {
        return;
    }
    assert!(
        runs.with_merges >= 40,
        "only {} of 48 runs merged writes",
        runs.with_merges
    );
    assert!(
        runs.with_gc >= 24,
        "only {} of 48 runs collected garbage",
        runs.with_gc
    );
}

/// The requests of a combination run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// Whole-page reads, writes and trims anywhere on the device.
    Spread,
    /// Hot sub-page rewrites with flushes, through a write-back buffer of 1 to 32 pages.
    HotBuffered,
}

/// How many of the combination runs did what the test wants exercised.
struct Runs {
    with_gc: u32,
    side_by_side: u32,
    with_merges: u32,
}

fn every_combination(mix: Mix) -> Runs {
    use ssdlab_core::ftl::GC_RESERVE_BLOCKS;
    use ssdlab_core::{Loop, RunSpec, VecSource};
    let mut combinations = 0;
    let mut with_gc = 0;
    let mut side_by_side = 0;
    let mut with_merges = 0;
    for (scheduler, ftl_kind) in ["fcfs", "priority", "out_of_order"]
        .into_iter()
        .flat_map(|s| [(s, "page_map"), (s, "dftl")])
    {
        for allocation in ["dynamic", "static"] {
            for suspend in [false, true] {
                for step in ["1", "8"] {
                    let seed = combinations as u64 + if mix == Mix::Spread { 0 } else { 1000 };
                    combinations += 1;
                    if std::env::var("SWARM_COMBINATION").is_ok_and(|s| s != seed.to_string()) {
                        continue;
                    }
                    let run_once = || {
                        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                        let mut overrides = random_overrides(&mut rng);
                        overrides.extend::<Vec<(String, String)>>(vec![
                            ("controller.scheduler".into(), scheduler.into()),
                            ("placement.allocation".into(), allocation.into()),
                            ("cell.suspend".into(), suspend.to_string()),
                            ("ftl.gc_step_pages".into(), step.into()),
                            ("stats.request_log".into(), "false".into()),
                        ]);
                        if suspend {
                            overrides.push(("cell.max_suspends".into(), "2".into()));
                        }
                        if mix == Mix::HotBuffered {
                            let pages = ["1", "2", "8", "32"][rng.gen_range(0..4)];
                            overrides.push(("controller.write_buffer_pages".into(), pages.into()));
                        }
                        if ftl_kind == "dftl" {
                            // DFTL maps whole pages; its translation reads and write-backs
                            // (host accesses, trims and background GC) are flash work too.
                            let page = overrides
                                .iter()
                                .find(|(k, _)| k == "geometry.page_size_bytes")
                                .map(|(_, v)| v.clone())
                                .expect("a page size");
                            overrides.extend::<Vec<(String, String)>>(vec![
                                ("ftl.kind".into(), "dftl".into()),
                                ("ftl.mapping_unit_bytes".into(), page),
                                ("ftl.dftl_cached_fraction".into(), "0.05".into()),
                            ]);
                        }
                        let mut dev = Device::from_toml("", "swarm", &overrides, seed, false)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        let page = dev.page_size() as u64;
                        let capacity = dev.logical_bytes();
                        let handles = dev.config().placement.handles as u16;
                        let n = (3 * capacity / page).clamp(3_000, 12_000) as usize;
                        let mut t = 0;
                        let requests: Vec<HostRequest> = (0..n)
                            .map(|_| {
                                let (op, offset, len) = match mix {
                                    Mix::Spread => {
                                        let len = page * rng.gen_range(1..=3);
                                        let offset =
                                            rng.gen_range(0..(capacity - len) / page) * page;
                                        let op = match rng.gen_range(0..10) {
                                            0..=5 => Op::Write,
                                            6..=8 => Op::Read,
                                            _ => Op::Trim,
                                        };
                                        (op, offset, len)
                                    }
                                    Mix::HotBuffered => {
                                        let len = if rng.gen_bool(0.5) {
                                            page * rng.gen_range(1..=2)
                                        } else {
                                            512 * rng.gen_range(1..=4)
                                        };
                                        let hot = (capacity / 16).max(8 * page);
                                        let offset = rng.gen_range(0..(hot - len) / 512) * 512;
                                        match rng.gen_range(0..20) {
                                            0..=12 => (Op::Write, offset, len),
                                            13..=16 => (Op::Read, offset, len),
                                            17 => (Op::Flush, 0, 0),
                                            _ => (Op::Trim, offset, len),
                                        }
                                    }
                                };
                                let mut r = HostRequest::new(op, offset, len);
                                if op == Op::Write {
                                    r.hint = random_hint(&mut rng, handles);
                                    // Now and then a FUA write: it waits for its page
                                    // (and those staged before it) to be on flash.
                                    r.fua = mix == Mix::HotBuffered && rng.gen_bool(0.1);
                                }
                                t += match mix {
                                    Mix::Spread => rng.gen_range(0..400_000),
                                    Mix::HotBuffered => rng.gen_range(0..40_000),
                                };
                                r.arrival_ns = Some(t);
                                r
                            })
                            .collect();
                        let flushes = requests.iter().filter(|r| r.op == Op::Flush).count();
                        // One job, or two or three side by side (fio's run groups), each
                        // paced its own way; the requests are dealt out in turn, so each
                        // job's arrivals still ascend.
                        let jobs = if rng.gen_bool(0.4) {
                            rng.gen_range(2..=3)
                        } else {
                            1
                        };
                        let mut lists = vec![Vec::new(); jobs];
                        for (i, r) in requests.into_iter().enumerate() {
                            lists[i % jobs].push(r);
                        }
                        let specs: Vec<RunSpec> = lists
                            .into_iter()
                            .map(|list| RunSpec {
                                name: "swarm".into(),
                                source: Box::new(VecSource::new(list)),
                                queue_depth: match mix {
                                    Mix::Spread => rng.gen_range(1..=64),
                                    Mix::HotBuffered => rng.gen_range(1..=256),
                                },
                                pacing: if rng.gen_bool(0.5) {
                                    Loop::Open { time_scale: 1.0 }
                                } else if rng.gen_bool(0.3) {
                                    // Pauses for fio's think time: idle windows between bursts.
                                    Loop::Think {
                                        think_ns: rng.gen_range(1_000..3_000_000),
                                        blocks: rng.gen_range(1..=16),
                                        count_completions: rng.gen_bool(0.5),
                                    }
                                } else {
                                    Loop::Closed
                                },
                                runtime_ns: None,
                                ramp_ns: None,
                            })
                            .collect();
                        dev.start_group(specs)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        while !dev
                            .step(1 << 16)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"))
                            .done
                        {}
                        let reports = dev
                            .finish_group()
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        let done: u64 = reports
                            .iter()
                            .flat_map(|job| {
                                ["read", "write", "trim"]
                                    .map(|d| job[d]["total_ios"].as_u64().unwrap())
                            })
                            .sum();
                        assert_eq!(
                            done + flushes as u64,
                            n as u64,
                            "seed {seed}: every request completes"
                        );
                        let synced: u64 = reports
                            .iter()
                            .map(|job| job["sync"]["total_ios"].as_u64().unwrap())
                            .sum();
                        assert_eq!(synced, flushes as u64, "seed {seed}: every flush completes");
                        dev.ftl()
                            .check_invariants()
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        let ftl = dev.ftl().counters();
                        let flash = dev.flash_counters();
                        assert_eq!(flash.programs, ftl.flash_pages_programmed(), "seed {seed}");
                        assert_eq!(flash.erases, ftl.erases, "seed {seed}");
                        assert!(
                            dev.ftl().min_free_blocks() >= GC_RESERVE_BLOCKS,
                            "seed {seed}: host writes took the GC reserve"
                        );
                        if !suspend {
                            assert_eq!(flash.suspensions, 0, "seed {seed}");
                        }
                        let mut out = serde_json::json!({ "jobs": reports });
                        out["ssd"] = dev.ssd_json();
                        let merged = out["ssd"]["buffer_merged_units"].as_u64().unwrap();
                        (out.to_string(), (ftl.gc_invocations, merged), jobs)
                    };
                    let (a, (gc, merged), jobs) = run_once();
                    let (b, _, _) = run_once();
                    side_by_side += (jobs > 1) as u32;
                    assert!(a == b, "seed {seed}: the same seed gave different results");
                    with_gc += (gc > 0) as u32;
                    with_merges += (merged > 0) as u32;
                }
            }
        }
    }
    if std::env::var("SWARM_COMBINATION").is_err() {
        assert_eq!(combinations, 48);
    }
    Runs {
        with_gc,
        side_by_side,
        with_merges,
    }
}

/// Found by a random run: a static stripe sends each 1 KiB write of a 4 KiB unit to the next
/// plane, so a sequential pass leaves every unit's live copy on the same few planes, which
/// fill with valid data while the device keeps a quarter spare. Such a plane at its hard
/// reserve, every block valid, gains a block only by collecting into another plane; before,
/// the write failed with "device full".
#[test]
fn a_plane_that_a_static_stripe_overfills_is_collected_into_another() {
    let mut dev = common::device(
        &[&[
            ("cell.type", "\"slc\""),
            ("geometry.channels", "2"),
            ("geometry.chips_per_channel", "2"),
            ("geometry.dies_per_chip", "1"),
            ("geometry.planes_per_die", "2"),
            ("geometry.blocks_per_plane", "96"),
            ("geometry.pages_per_block", "64"),
            ("geometry.page_size_bytes", "4096"),
            ("geometry.over_provisioning", "0.25"),
            ("placement.allocation", "static"),
        ]],
        98,
        true,
    );
    let bytes = dev.logical_bytes();
    let mut shadow = vec![0u8; bytes as usize];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(98);
    let mut write = |dev: &mut Device, offset: u64, length: u64, shadow: &mut Vec<u8>| {
        let data: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
        shadow[offset as usize..(offset + length) as usize].copy_from_slice(&data);
        dev.submit(
            &HostRequest::new(Op::Write, offset, length),
            Some(&data),
            None,
        )
        .unwrap_or_else(|e| panic!("write of {length} B at {offset}: {e}"));
    };
    // Fill, then two sequential passes of 1 KiB writes.
    for offset in (0..bytes).step_by(4096) {
        write(&mut dev, offset, 4096, &mut shadow);
    }
    for offset in (0..2 * bytes).step_by(1024) {
        write(&mut dev, offset % bytes, 1024, &mut shadow);
    }
    dev.ftl().check_invariants().unwrap();
    let mut out = vec![0u8; 4096];
    for offset in (0..bytes).step_by(4096) {
        dev.submit(
            &HostRequest::new(Op::Read, offset, 4096),
            None,
            Some(&mut out),
        )
        .unwrap();
        assert!(
            out == shadow[offset as usize..offset as usize + 4096],
            "offset {offset}"
        );
    }
}

/// Random 128 KiB writes at QD 128 bring every plane to its hard reserve at once, one of them
/// holding only valid data (other planes' GC sent it theirs). Its GC first collects in the
/// plane with the most to reclaim until that plane can take a victim, then sends its own
/// victim's data there. Before, the run stopped with "device full" and a quarter of the
/// device spare.
#[test]
fn a_plane_of_valid_data_among_planes_at_their_reserve_gets_room_made_elsewhere() {
    let mut dev = common::preset_device(
        "melded-16x4",
        &[&[
            ("geometry.channels", "1"),
            ("geometry.chips_per_channel", "2"),
            ("geometry.blocks_per_plane", "48"),
            ("geometry.over_provisioning", "0.25"),
            ("controller.scheduler", "fcfs"),
            ("cell.suspend", "true"),
            ("placement.allocation", "dynamic"),
        ]],
        888,
        false,
    );
    common::precondition(&mut dev);
    let chunk = 128 * 1024;
    let chunks = dev.logical_bytes() / chunk;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(888);
    let requests = (0..10 * chunks)
        .map(|_| HostRequest::new(Op::Write, rng.gen_range(0..chunks) * chunk, chunk))
        .collect();
    common::closed_run(&mut dev, requests, 128);
    dev.ftl().check_invariants().unwrap();
}

/// Sequential 1 KiB writes at QD 1 through a write buffer, on one die of two small planes:
/// one plane ends with nearly all of the live data, no block holding a page's worth of invalid
/// units. Collected in place, each victim's last page is padded and the plane gains nothing,
/// round after round; its GC sends the victim's data to the other plane instead. Before, the
/// run stopped with "device full" at 40 % over-provisioning.
#[test]
fn a_plane_whose_victims_free_less_than_a_page_collects_into_another() {
    let mut dev = common::preset_device(
        "seassd",
        &[&[
            ("geometry.channels", "1"),
            ("geometry.chips_per_channel", "1"),
            ("geometry.blocks_per_plane", "32"),
            ("geometry.over_provisioning", "0.4"),
            ("controller.write_buffer_pages", "64"),
            ("host.link_mbps", "3500"),
        ]],
        1393,
        false,
    );
    common::precondition(&mut dev);
    let bytes = dev.logical_bytes();
    let requests = (0..2 * bytes / 1024)
        .map(|i| HostRequest::new(Op::Write, i * 1024 % bytes, 1024))
        .collect();
    common::closed_run(&mut dev, requests, 1);
    dev.ftl().check_invariants().unwrap();
}
