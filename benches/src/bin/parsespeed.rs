//! Speed of the workload side: fio request generation (ns per request) and request-log
//! summarising (rows per second), with their targets. Run by `make bench`.
//!
//! Targets: uniform and sequential generation < 50 ns per request (the simulator replays
//! > 4 M requests/s), Zipf/Pareto < 100 ns; request logs >= 2 M rows/s.

use ssdlab_core::stats::RequestLogRow;
use ssdlab_workload::request_log::{summarize_request_log, RequestLogOptions};
use ssdlab_workload::{parse_job_file, FioSource};
use std::time::Instant;

const GIB: u64 = 1 << 30;

fn generation(text: &str) -> f64 {
    let file = parse_job_file(text, "bench.fio").expect("job");
    let job = &file.jobs[0];
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut source = FioSource::new(job, 64 * GIB, 1).expect("source");
        let start = Instant::now();
        let (mut n, mut checksum) = (0u64, 0u64);
        while let Some(r) = source.next_host_request() {
            checksum = checksum.wrapping_add(r.offset);
            n += 1;
        }
        assert!(n > 0 && checksum != 0);
        best = best.min(start.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

fn request_log_rows_per_second(rows: u64) -> f64 {
    let mut text = format!("{}\n", RequestLogRow::CSV_HEADER);
    for i in 0..rows {
        let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
        let op = ["read", "write", "read", "write", "trim", "flush"][(i % 6) as usize];
        let erases = u32::from(x % 97 == 0);
        let mut row = RequestLogRow {
            request: i + 1,
            op,
            logical_sector: (x % (1 << 27)) * 8,
            size_bytes: 4096 << (x % 4),
            duration_ns: 20_000 + x % 3_000_000,
            flash_reads: (x % 5) as u32,
            flash_writes: (x % 7) as u32 + 64 * erases,
            oob_reads: 0,
            oob_writes: (x % 7) as u32,
            erases,
            physical_sector: if op == "trim" {
                -1
            } else {
                (x % (1 << 30)) as i64 * 8
            },
            flash_duration_ns: 50_000 + x % 100_000,
            queue_ns: 0,
            service_ns: 0,
            translation_reads: 0,
            translation_writes: 0,
            mapping_hits: 0,
            mapping_misses: 0,
            device_cpu_ns: 0,
        };
        row.set_duration(row.duration_ns, x % 10_000);
        text.push_str(&row.csv_line());
        text.push('\n');
    }
    let mut best = 0.0f64;
    for _ in 0..3 {
        let start = Instant::now();
        let s = summarize_request_log(text.as_bytes(), "mem", &RequestLogOptions::default())
            .expect("summary");
        assert_eq!(s.rows, rows);
        best = best.max(rows as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    for (name, text, target) in [
        (
            "uniform randrw",
            "[u]\nrw=randrw\nbs=4k\nsize=4g\nnumber_ios=2000000\n",
            50.0,
        ),
        (
            "sequential bssplit",
            "[s]\nrw=write\nbssplit=4k/50:16k/50\nsize=4g\nnumber_ios=2000000\n",
            50.0,
        ),
        (
            "zipf:1.1 randread",
            "[z]\nrw=randread\nbs=4k\nsize=4g\nrandom_distribution=zipf:1.1\nnumber_ios=2000000\n",
            100.0,
        ),
    ] {
        let ns = generation(text);
        let verdict = if ns < target { "met" } else { "NOT met" };
        println!("fio generation, {name}: {ns:.1} ns/request (target < {target} ns: {verdict})");
    }
    let rate = request_log_rows_per_second(2_000_000);
    let verdict = if rate >= 2e6 { "met" } else { "NOT met" };
    println!(
        "request log summary: {:.2} M rows/s (target >= 2 M rows/s: {verdict})",
        rate / 1e6
    );
}
