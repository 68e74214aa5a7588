//! Stress: random device configurations under random fio jobs. Every preset on small
//! geometries, over-provisioning from 10 % to 40 %, each scheduler, suspend, allocation, DFTL
//! with little or much of its mapping cached, a write buffer, the host link, GC step sizes, raw
//! bit errors and copyback; every access pattern, 512 B to 128 KiB, QD 1 to 128, closed loop
//! (with or without think time) or paced by a rate, with and without preconditioning. Each
//! configuration is either refused by validation, naming a key, or its run completes within a
//! deadline with the FTL's invariants intact: no panic, no hang, no "device full" on a device
//! with spare space. A failure prints the seed and its settings; `STRESS_SEED=N` runs that seed
//! alone.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::{Device, PreconditionOptions, RunSpec};
use ssdlab_workload::parse_job_file;
use std::sync::mpsc;
use std::time::Duration;

const SEEDS: u64 = 48;
const DEADLINE: Duration = Duration::from_secs(120);

fn pick<'a>(rng: &mut Xoshiro256PlusPlus, choices: &[&'a str]) -> &'a str {
    choices[rng.gen_range(0..choices.len())]
}

/// Seed `seed`'s preset, settings and fio job.
fn scenario(seed: u64) -> (&'static str, Vec<(String, String)>, String, u32, bool) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let r = &mut rng;
    let preset = pick(
        r,
        &[
            "tlc",
            "mlc",
            "slc",
            "qlc",
            "seassd",
            "flexecc",
            "melded-8x8",
            "melded-16x4",
        ],
    );
    let mut sets: Vec<(&str, &str)> = vec![
        ("geometry.channels", pick(r, &["1", "2", "4"])),
        ("geometry.chips_per_channel", pick(r, &["1", "2"])),
        (
            "geometry.blocks_per_plane",
            pick(r, &["32", "48", "64", "96"]),
        ),
        (
            "geometry.over_provisioning",
            pick(r, &["0.1", "0.15", "0.25", "0.4"]),
        ),
        (
            "controller.scheduler",
            pick(r, &["fcfs", "priority", "out_of_order"]),
        ),
        ("cell.suspend", pick(r, &["true", "false"])),
        ("placement.allocation", pick(r, &["dynamic", "static"])),
    ];
    if r.gen_bool(0.25) {
        sets.extend([
            ("ftl.kind", "dftl"),
            ("geometry.page_size_bytes", "4096"),
            ("ftl.mapping_unit_bytes", "4096"),
            ("ftl.dftl_cached_fraction", pick(r, &["0.01", "0.1", "0.5"])),
        ]);
    }
    let optional: [(&str, &[&str], f64); 5] = [
        ("controller.write_buffer_pages", &["4", "64"], 0.33),
        ("host.link_mbps", &["500", "3500"], 0.33),
        ("ftl.gc_step_pages", &["1", "8", "1000"], 0.25),
        ("ecc.rber_base", &["0.0001", "0.002"], 0.25),
        ("ftl.gc_copyback", &["true", "false"], 0.25),
    ];
    for (key, values, p) in optional {
        if r.gen_bool(p) {
            sets.push((key, pick(r, values)));
        }
    }
    let rw = pick(
        r,
        &[
            "randwrite",
            "randrw",
            "write",
            "rw",
            "randread",
            "trim",
            "randtrim",
        ],
    );
    let bs = pick(
        r,
        &["bs=4k", "bs=16k", "bsrange=512-64k", "bs=128k", "bs=1k"],
    );
    let qd = [1, 4, 32, 128][r.gen_range(0..4)];
    let precondition = r.gen_bool(0.5);
    let ios = r.gen_range(2_000..8_000);
    let mut job = format!("[j]\nrw={rw}\n{bs}\nnumber_ios={ios}\n");
    // Drawn last, so that the draws above (each seed's device and job) stay as they were.
    if r.gen_bool(0.3) {
        job += pick(
            r,
            &[
                "rate_iops=5000\n",
                "rate=200m\nrate_process=poisson\n",
                "rate_iops=200000,20000\nrate_process=poisson\n",
                "thinktime=300\nthinktime_blocks=4\n",
            ],
        );
    }
    if r.gen_bool(0.25) {
        job += pick(r, &["fsync=1\n", "fdatasync=8\n", "fsync=4\nfdatasync=6\n"]);
    }
    // A closing flush needs a closed loop (the job would otherwise end at its last arrival).
    if !job.contains("rate") && r.gen_bool(0.25) {
        job += "end_fsync=1\n";
    }
    let sets = sets
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (preset, sets, job, qd, precondition)
}

/// Run seed `seed`: `Ok(false)` if validation refused its configuration, `Ok(true)` if it ran.
fn run(seed: u64) -> Result<bool, String> {
    let (preset, sets, job, qd, precondition) = scenario(seed);
    let text = ssdlab_core::presets::get(preset).expect("a built-in preset");
    let mut dev = match Device::from_toml(text, preset, &sets, seed, seed % 3 == 0) {
        Ok(dev) => dev,
        Err(e) if e.to_string().contains("key '") => return Ok(false),
        Err(e) => return Err(format!("a configuration error that names no key: {e}")),
    };
    if precondition {
        dev.precondition(PreconditionOptions {
            max_random_passes: 1.0,
            steady_tolerance: 0.05,
        })
        .map_err(|e| format!("precondition: {e}"))?;
    }
    let mut file = parse_job_file(&job, "stress.fio").map_err(|e| e.to_string())?;
    let job = file.jobs.remove(0);
    let source = job
        .source(dev.logical_bytes(), seed)
        .map_err(|e| e.to_string())?;
    // The flushes the job asks for (fsync, fdatasync) must all complete, as its I/Os do; a
    // closing one (end_fsync) too, reported as fio reports it: in the latency, not the count.
    let closing = source.ends_with_flush() as u64;
    let flushes = {
        let mut again = job
            .source(dev.logical_bytes(), seed)
            .map_err(|e| e.to_string())?;
        std::iter::from_fn(|| again.next_request())
            .filter(|r| r.as_ref().is_ok_and(|r| r.op == ssdlab_core::Op::Flush))
            .count() as u64
    };
    let report = dev
        .run_to_end(RunSpec {
            name: "stress".into(),
            source,
            queue_depth: qd,
            pacing: job.pacing(),
            runtime_ns: None,
            ramp_ns: None,
        })
        .map_err(|e| format!("run: {e}"))?;
    let synced = report["sync"]["total_ios"].as_u64();
    let timed = report["sync"]["lat_ns"]["N"].as_u64();
    if synced != Some(flushes) || timed != Some(flushes + closing) {
        return Err(format!(
            "{flushes} flushes issued and {closing} closing, {synced:?} reported, {timed:?} timed"
        ));
    }
    dev.ftl()
        .check_invariants()
        .map_err(|e| format!("invariants: {e}"))?;
    Ok(true)
}

#[test]
fn random_configurations_complete_or_are_refused_by_name() {
    let only: Option<u64> = std::env::var("STRESS_SEED")
        .ok()
        .map(|s| s.parse().unwrap());
    let mut ran = 0;
    let seeds: Vec<u64> = match only {
        Some(seed) => vec![seed],
        None => (0..SEEDS).collect(),
    };
    for &seed in &seeds {
        let (done, outcome) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(run(seed));
        });
        let described = || {
            let (preset, sets, job, qd, precondition) = scenario(seed);
            format!("{preset} {sets:?} qd {qd} precondition {precondition}\n{job}")
        };
        match outcome.recv_timeout(DEADLINE) {
            Ok(Ok(true)) => ran += 1,
            Ok(Ok(false)) => {}
            Ok(Err(e)) => panic!("seed {seed}: {e}\n{}", described()),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("seed {seed}: not done within {DEADLINE:?}\n{}", described())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("seed {seed}: the run panicked\n{}", described())
            }
        }
    }
    eprintln!("{ran} of {} configurations ran", seeds.len());
    // Validation refuses some random configurations (too little spare space for the policies
    // chosen); most must run, or the test checks little.
    assert!(
        2 * ran >= seeds.len(),
        "only {ran} of {} configurations ran",
        seeds.len()
    );
}
