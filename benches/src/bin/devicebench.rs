//! `devicebench [--tiny] [--set key=value ...]`: the simulated device under load, per scheduling policy (the device
//! figures of BENCHMARKS.md, beside the simulator-speed ones of `simspeed`).
//!
//! 1. Sustained 4 KiB random writes on `tlc` at 7 % OP in GC steady state, QD 32: write IOPS,
//!    WAF, die utilisation, and the array bound the measured work implies (IOPS / utilisation).
//! 2. The same device, 70 % writes / 30 % reads at QD 32: read p50 and p99 against the idle
//!    device's read latency, for priority with and without suspend and for fcfs.
//! 3. An open-loop 70 %-read Poisson trace at 50 k IOPS on MQSim's 8 GiB geometry
//!    (8 × 4 × 2 × 2, MLC 75/750 us): when the simulation ends against the last arrival, and the
//!    mean read latency.
//! 4. The device of 1 and 2 at fixed offered loads: a fio job of 70 % writes / 30 % reads whose
//!    Poisson arrivals come from `rate_iops` and `rate_process=poisson`, for priority with
//!    suspend and for fcfs: the IOPS served, read and write latency, and the wait at the host.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::{Device, HostRequest, Loop, Op, PreconditionOptions, RunSpec, VecSource};

/// `--set key=value` arguments, applied to every device after the scenario's own settings.
fn extra_overrides() -> Vec<(String, String)> {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .filter(|w| w[0] == "--set")
        .filter_map(|w| w[1].split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn device(preset_overrides: &[(&str, &str)], seed: u64) -> Device {
    let mut overrides: Vec<(String, String)> = preset_overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    overrides.extend(extra_overrides());
    let text = ssdlab_core::presets::get("tlc").expect("tlc preset");
    Device::from_toml(text, "tlc", &overrides, seed, false).unwrap_or_else(|e| panic!("{e}"))
}

fn run(dev: &mut Device, requests: Vec<HostRequest>, qd: u32, pacing: Loop) -> serde_json::Value {
    run_source(dev, Box::new(VecSource::new(requests)), qd, pacing)
}

fn run_source(
    dev: &mut Device,
    source: Box<dyn ssdlab_core::RequestSource>,
    qd: u32,
    pacing: Loop,
) -> serde_json::Value {
    let mut job = dev
        .run_to_end(RunSpec {
            name: "bench".into(),
            source,
            queue_depth: qd,
            pacing,
            runtime_ns: None,
            ramp_ns: None,
        })
        .unwrap_or_else(|e| panic!("{e}"));
    job["ssd"] = dev.ssd_json();
    job
}

fn random_requests(n: usize, read_fraction: f64, logical: u64, seed: u64) -> Vec<HostRequest> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let units = logical / 4096;
    (0..n)
        .map(|_| {
            let op = if rng.gen_bool(read_fraction) {
                Op::Read
            } else {
                Op::Write
            };
            HostRequest::new(op, rng.gen_range(0..units) * 4096, 4096)
        })
        .collect()
}

/// `n` random 4 KiB requests (`read_fraction` of them reads, from `seed`) at QD 32, closed
/// loop, on the `base` device preconditioned to GC steady state, scheduled by `scheduler`.
fn steady_state_qd32(
    base: &[(&str, &str)],
    scheduler: &str,
    suspend: &str,
    n: usize,
    read_fraction: f64,
    seed: u64,
) -> serde_json::Value {
    let mut cfg = base.to_vec();
    cfg.push(("controller.scheduler", scheduler));
    cfg.push(("cell.suspend", suspend));
    let mut dev = device(&cfg, 1);
    dev.precondition(PreconditionOptions::default()).unwrap();
    let reqs = random_requests(n, read_fraction, dev.logical_bytes(), seed);
    run(&mut dev, reqs, 32, Loop::Closed)
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn main() {
    let tiny = std::env::args().any(|a| a == "--tiny");
    // The tlc preset as it is (64 dies, 16 KiB pages, 384 pages per block); the tiny version
    // keeps 2 of its 8 channels.
    let channels = if tiny { "2" } else { "8" };
    let n = if tiny { 80_000 } else { 1_200_000 };
    let base = [("geometry.channels", channels)];

    println!("## 1. Sustained 4 KiB random writes, tlc, 7 % OP, QD 32, GC steady state");
    println!("| scheduler | suspend | write IOPS | WAF | die util | array bound IOPS | mean lat ms | p99 ms |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (sched, suspend) in [
        ("priority", "true"),
        ("out_of_order", "true"),
        ("fcfs", "false"),
    ] {
        let job = steady_state_qd32(&base, sched, suspend, n, 0.0, 2);
        let w = &job["write"];
        let util = f(&job["ssd"]["die_utilisation"]);
        let iops = f(&w["iops"]);
        println!(
            "| {sched} | {suspend} | {iops:.0} | {:.2} | {util:.3} | {:.0} | {:.2} | {:.2} |",
            f(&job["ssd"]["waf"]),
            iops / util.max(1e-9),
            f(&w["clat_ns"]["mean"]) / 1e6,
            f(&w["clat_ns"]["percentile"]["99.000000"]) / 1e6,
        );
    }

    println!();
    println!("## 2. 70 % writes / 30 % reads, tlc, 7 % OP, QD 32, GC steady state");
    let idle = {
        let mut dev = device(&base, 1);
        dev.precondition(PreconditionOptions {
            max_random_passes: 0.0,
            steady_tolerance: 0.02,
        })
        .unwrap();
        let reqs = random_requests(2_000, 1.0, dev.logical_bytes(), 3);
        let job = run(&mut dev, reqs, 1, Loop::Closed);
        f(&job["read"]["clat_ns"]["mean"])
    };
    println!("idle-device 4 KiB read latency: {:.1} us", idle / 1e3);
    println!("| scheduler | suspend | read p50 (x idle) | read p99 (x idle) | read IOPS | write IOPS | die util | suspensions |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (sched, suspend) in [
        ("priority", "true"),
        ("priority", "false"),
        ("out_of_order", "true"),
        ("fcfs", "false"),
    ] {
        let job = steady_state_qd32(&base, sched, suspend, n, 0.3, 4);
        let r = &job["read"]["clat_ns"]["percentile"];
        let p50 = f(&r["50.000000"]);
        let p99 = f(&r["99.000000"]);
        println!(
            "| {sched} | {suspend} | {:.0} us ({:.1}x) | {:.0} us ({:.1}x) | {:.0} | {:.0} | {:.3} | {} |",
            p50 / 1e3,
            p50 / idle,
            p99 / 1e3,
            p99 / idle,
            f(&job["read"]["iops"]),
            f(&job["write"]["iops"]),
            f(&job["ssd"]["die_utilisation"]),
            job["ssd"]["suspensions"],
        );
    }

    println!();
    println!("## 3. 50 k IOPS, 70 % reads, Poisson, MQSim's 8 GiB geometry (MLC 75/750 us)");
    println!("| scheduler | end - last arrival | read mean us | write mean us | die util |");
    println!("|---|---:|---:|---:|---:|");
    let trace_n = if tiny { 20_000 } else { 200_000 };
    for sched in ["priority", "fcfs"] {
        let cfg = [
            ("geometry.channels", "8"),
            ("geometry.chips_per_channel", "4"),
            ("geometry.dies_per_chip", "2"),
            ("geometry.planes_per_die", "2"),
            ("geometry.blocks_per_plane", "128"),
            ("geometry.pages_per_block", "256"),
            ("geometry.page_size_bytes", "4096"),
            ("cell.type", "mlc"),
            ("cell.read_ns", "[75000, 75000]"),
            ("cell.program_ns", "[750000]"),
            ("cell.erase_ns", "3800000"),
            ("channel.rate_mtps", "333"),
            ("controller.scheduler", sched),
        ];
        let mut dev = device(&cfg, 1);
        dev.precondition(PreconditionOptions {
            max_random_passes: 0.0,
            steady_tolerance: 0.02,
        })
        .unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let units = dev.logical_bytes() / 4096;
        let mut t = 0u64;
        let reqs: Vec<HostRequest> = (0..trace_n)
            .map(|_| {
                // Exponential gaps with a 20 us mean: 50 k IOPS.
                t += (-(1.0 - rng.gen::<f64>()).ln() * 20_000.0) as u64;
                let op = if rng.gen_bool(0.7) {
                    Op::Read
                } else {
                    Op::Write
                };
                let mut r = HostRequest::new(op, rng.gen_range(0..units) * 4096, 4096);
                r.arrival_ns = Some(t);
                r
            })
            .collect();
        let last = t;
        let job = run(&mut dev, reqs, 1024, Loop::Open { time_scale: 1.0 });
        let end = f(&job["ssd_job"]["sim_time_ns"]);
        println!(
            "| {sched} | {:+.2} % | {:.0} | {:.0} | {:.3} |",
            (end - last as f64) / last as f64 * 100.0,
            f(&job["read"]["clat_ns"]["mean"]) / 1e3,
            f(&job["write"]["clat_ns"]["mean"]) / 1e3,
            f(&job["ssd"]["die_utilisation"]),
        );
    }

    println!();
    println!("## 4. Fixed offered loads: fio rate_iops, Poisson, 30 % reads, tlc, GC steady state");
    println!("| scheduler | suspend | offered IOPS | served IOPS | WAF | read p50 us | read p99 us | write p50 us | write p99 us | host wait mean us | die util |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // Loads below and around the mixed workload's closed-loop throughput (about 27 k IOPS
    // with priority on 64 dies, 2.8 k with fcfs); the tiny device has a quarter of the dies.
    // Each run writes several blocks per plane, so that GC reaches its equilibrium at the load.
    let loads: [u64; 3] = if tiny {
        [500, 2_500, 5_000]
    } else {
        [2_000, 10_000, 20_000]
    };
    let load_n = if tiny { 30_000 } else { 2_000_000 };
    for (sched, suspend) in [("priority", "true"), ("fcfs", "false")] {
        for load in loads {
            let mut cfg = base.to_vec();
            cfg.push(("controller.scheduler", sched));
            cfg.push(("cell.suspend", suspend));
            let mut dev = device(&cfg, 1);
            dev.precondition(PreconditionOptions::default()).unwrap();
            let text = |seed: u64| {
                format!(
                    "[load]\nrw=randrw\nrwmixread=30\nbs=4k\nnorandommap\nnumber_ios={load_n}\n\
                 iodepth=256\nrate_iops={},{}\nrate_process=poisson\nrandseed={seed}\n",
                    load * 3 / 10,
                    load * 7 / 10
                )
            };
            let paced = |dev: &mut Device, seed: u64| {
                let file = ssdlab_workload::parse_job_file(&text(seed), "load.fio").expect("job");
                let fio = &file.jobs[0];
                let source = fio.source(dev.logical_bytes(), seed).expect("its source");
                run_source(dev, source, fio.iodepth, fio.pacing())
            };
            // A first run at the load settles the GC that follows preconditioning (background
            // GC tops the free blocks up to its watermark in the first idle time; a scheduler
            // that never idles lives off the spare blocks for a while): the second is measured.
            let warm = paced(&mut dev, 6);
            let job = paced(&mut dev, 7);
            let bytes = |j: &serde_json::Value, key: &str| f(&j["ssd"][key]);
            let waf = (bytes(&job, "media_bytes_written") - bytes(&warm, "media_bytes_written"))
                / (bytes(&job, "host_bytes_written") - bytes(&warm, "host_bytes_written"));
            let (r, w) = (&job["read"], &job["write"]);
            let us = |v: &serde_json::Value| f(v) / 1e3;
            let ios = f(&r["total_ios"]) + f(&w["total_ios"]);
            let wait = (f(&r["slat_ns"]["mean"]) * f(&r["total_ios"])
                + f(&w["slat_ns"]["mean"]) * f(&w["total_ios"]))
                / ios.max(1.0);
            println!(
                "| {sched} | {suspend} | {load} | {:.0} | {waf:.2} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.3} |",
                f(&r["iops"]) + f(&w["iops"]),
                us(&r["clat_ns"]["percentile"]["50.000000"]),
                us(&r["clat_ns"]["percentile"]["99.000000"]),
                us(&w["clat_ns"]["percentile"]["50.000000"]),
                us(&w["clat_ns"]["percentile"]["99.000000"]),
                wait / 1e3,
                f(&job["ssd"]["die_utilisation"]),
            );
        }
    }
}
