//! `groupspeed [--tiny]`: the simulator's speed with many fio jobs side by side (BENCHMARKS.md,
//! "Many jobs side by side").
//!
//! On the `tlc` preset, after a sequential fill of the first GiB, 4 KiB random reads of that GiB
//! at a total queue depth of 1,024 for 2 simulated seconds: one job of `iodepth=1024`, 64 jobs
//! of 16, 1,024 jobs of 1 (fio's `numjobs`). The device does the same work in each (the same
//! reads per simulated second, the same die utilisation); the row is the simulator's wall time
//! per completed read while the run steps, and apart from it the time to start the jobs and
//! report them. Target: 1,024 jobs cost at most 5 times per read what one job does (the loop
//! that looked at every job on every event: 12 times). The loop's own work per event does not
//! grow with the number of jobs; what does is memory traffic, as each completion touches its
//! own job's state, statistics and lookahead (about 100 KB a job). The device is bound by its
//! dies (about 0.89 busy, channels 0.46): each 4 KiB read moves only its two codewords over
//! the bus.

use ssdlab_core::{Device, HostRequest, Loop, Op, RunSpec, VecSource};
use std::time::Instant;

const TOTAL_DEPTH: u32 = 1024;

fn job_text(jobs: u32, runtime: &str) -> String {
    format!(
        "[global]\nbs=4k\nrw=randread\nsize=1g\nruntime={runtime}\ntime_based\n\
         [r]\nnumjobs={jobs}\niodepth={}\n",
        TOTAL_DEPTH / jobs
    )
}

/// A `tlc` device whose first GiB is written in order.
fn filled_device() -> Device {
    let text = ssdlab_core::presets::get("tlc").expect("tlc preset");
    let mut dev = Device::from_toml(text, "tlc", &[], 1, false).unwrap_or_else(|e| panic!("{e}"));
    let chunk = 128 * 1024;
    let writes = (0..(1u64 << 30) / chunk)
        .map(|i| HostRequest::new(Op::Write, i * chunk, chunk))
        .collect();
    dev.run_to_end(RunSpec {
        name: "fill".into(),
        source: Box::new(VecSource::new(writes)),
        queue_depth: 32,
        pacing: Loop::Closed,
        runtime_ns: None,
        ramp_ns: None,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    dev
}

struct Row {
    jobs: u32,
    reads: u64,
    /// Stepping the run, and starting it plus reporting its jobs.
    wall_s: f64,
    ends_s: f64,
    sim_iops: f64,
    die_utilisation: f64,
    die_utilisation_max: f64,
    channel_utilisation: f64,
}

fn run(jobs: u32, runtime: &str) -> Row {
    let mut dev = filled_device();
    dev.reset_measurements();
    let file = ssdlab_workload::parse_job_file(&job_text(jobs, runtime), "groupspeed.fio")
        .unwrap_or_else(|e| panic!("{e}"));
    let specs = file
        .jobs
        .iter()
        .map(|j| RunSpec {
            name: j.name.clone(),
            source: j
                .source(dev.logical_bytes(), 1)
                .unwrap_or_else(|e| panic!("{e}")),
            queue_depth: j.iodepth,
            pacing: j.pacing(),
            runtime_ns: j.runtime_ns,
            ramp_ns: j.ramp_time_ns,
        })
        .collect();
    let start_ns = dev.now_ns();
    let t = Instant::now();
    dev.start_group(specs).unwrap_or_else(|e| panic!("{e}"));
    let started = t.elapsed().as_secs_f64();
    while !dev.step(100_000).unwrap_or_else(|e| panic!("{e}")).done {}
    let stepped = t.elapsed().as_secs_f64();
    let reports = dev.finish_group().unwrap_or_else(|e| panic!("{e}"));
    let ends_s = started + t.elapsed().as_secs_f64() - stepped;
    let wall_s = stepped - started;
    let reads: u64 = reports
        .iter()
        .map(|j| j["read"]["total_ios"].as_u64().unwrap_or(0))
        .sum();
    let ssd = dev.ssd_json();
    Row {
        jobs,
        reads,
        wall_s,
        ends_s,
        sim_iops: reads as f64 / ((dev.now_ns() - start_ns) as f64 / 1e9),
        die_utilisation: ssd["die_utilisation"].as_f64().unwrap_or(f64::NAN),
        die_utilisation_max: ssd["die_utilisation_max"].as_f64().unwrap_or(f64::NAN),
        channel_utilisation: ssd["channel_utilisation"].as_f64().unwrap_or(f64::NAN),
    }
}

fn main() {
    let tiny = std::env::args().any(|a| a == "--tiny");
    let runtime = if tiny { "20ms" } else { "2s" };
    eprintln!(
        "groupspeed: tlc, 4 KiB random reads of a written GiB, total QD {TOTAL_DEPTH}, {runtime}"
    );
    let rows: Vec<Row> = [1, 64, 1024].map(|jobs| run(jobs, runtime)).into();
    println!(
        "{:>6} {:>8} {:>10} {:>8} {:>12} {:>14} {:>10} {:>14} {:>13}",
        "jobs",
        "iodepth",
        "reads",
        "run s",
        "ns per read",
        "start+report s",
        "sim IOPS",
        "die util / max",
        "channel util"
    );
    let per_read = |r: &Row| r.wall_s * 1e9 / r.reads.max(1) as f64;
    for r in &rows {
        println!(
            "{:>6} {:>8} {:>10} {:>8.3} {:>12.0} {:>14.3} {:>10.0} {:>6.3} / {:.3} {:>13.3}",
            r.jobs,
            TOTAL_DEPTH / r.jobs,
            r.reads,
            r.wall_s,
            per_read(r),
            r.ends_s,
            r.sim_iops,
            r.die_utilisation,
            r.die_utilisation_max,
            r.channel_utilisation
        );
    }
    let ratio = per_read(&rows[2]) / per_read(&rows[0]);
    println!(
        "1,024 jobs against one: {ratio:.2} times the time per read (target <= 5); \
         against 64 jobs: {:.2}",
        per_read(&rows[2]) / per_read(&rows[1])
    );
    let json: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "jobs": r.jobs,
                "reads": r.reads,
                "run_s": r.wall_s,
                "start_and_report_s": r.ends_s,
                "ns_per_read": per_read(r),
                "sim_iops": r.sim_iops,
                "die_utilisation": r.die_utilisation,
                "die_utilisation_max": r.die_utilisation_max,
                "channel_utilisation": r.channel_utilisation,
            })
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({ "groupspeed": json, "ratio_1024_to_1": ratio })
    );
}
