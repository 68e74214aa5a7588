//! `simspeed [--tiny] [--op FRACTION] [--blocks N] [--requests N] [--scheduler fcfs|priority|out_of_order] [--ftl-alone]`:
//! the simulator-speed benchmark of BENCHMARKS.md. Prints a table and a JSON line; targets: at
//! least 2 M random writes/s in GC steady state and 4 M random reads/s, at most 16 bytes of
//! device state per physical page. `--op` sets over-provisioning (default 0.07); the logical capacity is
//! kept at 64 GiB by scaling the blocks per plane. `--ftl-alone` also times the same random
//! writes through the FTL alone, without timing (the floor under the random-write figure), in
//! the same process.

use ssdlab_benches::{run, Params};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tiny = args.iter().any(|a| a == "--tiny");
    let with_ftl_alone = args.iter().any(|a| a == "--ftl-alone");
    let mut params = if tiny { Params::tiny() } else { Params::full() };
    if let Some(i) = args.iter().position(|a| a == "--op") {
        let op: f64 = match args.get(i + 1).and_then(|v| v.parse().ok()) {
            Some(op) if op > 0.0 && op < 10.0 => op,
            _ => {
                eprintln!("simspeed: --op: expected a fraction of logical capacity such as 0.28");
                std::process::exit(2);
            }
        };
        if !tiny {
            // Keep 64 GiB logical: physical blocks grow with (1 + op).
            params.blocks_per_plane = (368.0 * (1.0 + op) / 1.07).ceil() as u32;
        }
        params.over_provisioning = op;
    }
    // For profiling at other sizes (e.g. under callgrind): capacity and requests per phase.
    for (flag, field) in [("--blocks", 0), ("--requests", 1)] {
        if let Some(i) = args.iter().position(|a| a == flag) {
            let Some(n) = args
                .get(i + 1)
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&n| n > 0)
            else {
                eprintln!("simspeed: {flag}: expected a positive integer");
                std::process::exit(2);
            };
            match field {
                0 => params.blocks_per_plane = n.min(u32::MAX as u64) as u32,
                _ => params.requests = n,
            }
        }
    }
    if let Some(i) = args.iter().position(|a| a == "--scheduler") {
        match args.get(i + 1).map(String::as_str) {
            Some(s @ ("fcfs" | "priority" | "out_of_order")) => params.scheduler = s.into(),
            _ => {
                eprintln!("simspeed: --scheduler: expected fcfs, priority or out_of_order");
                std::process::exit(2);
            }
        }
    }
    eprintln!(
        "simspeed: {} requests per phase, QD {}, {} blocks per plane, OP {}, {}{}",
        params.requests,
        params.queue_depth,
        params.blocks_per_plane,
        params.over_provisioning,
        params.scheduler,
        if tiny { " (tiny)" } else { "" }
    );
    let r = match run(&params) {
        Ok(r) => r,
        Err(message) => {
            eprintln!("simspeed: {message}");
            std::process::exit(2);
        }
    };
    let alone = if with_ftl_alone {
        match ssdlab_benches::ftl_alone(&params) {
            Ok(a) => Some(a),
            Err(message) => {
                eprintln!("simspeed: FTL alone: {message}");
                std::process::exit(2);
            }
        }
    } else {
        None
    };
    let gib = r.logical_bytes as f64 / (1u64 << 30) as f64;
    println!(
        "device            {gib:.1} GiB logical, {} physical pages (4 KiB)",
        r.physical_pages
    );
    println!(
        "precondition      {} mapping-unit writes in {:.2} s",
        r.precondition_units, r.precondition_s
    );
    println!(
        "random writes     {:.3} M req/s  (WAF {:.2}, model {:.2}-{:.2}, die utilisation {:.3}; target >= 2 M/s)",
        r.random_write_req_per_s / 1e6,
        r.random_write_waf,
        r.random_write_model_waf.0,
        r.random_write_model_waf.1,
        r.random_write_die_utilisation
    );
    println!(
        "random reads      {:.3} M req/s  (die utilisation {:.3}; target >= 4 M/s)",
        r.random_read_req_per_s / 1e6,
        r.random_read_die_utilisation
    );
    if let Some(a) = &alone {
        println!(
            "FTL alone         {:.3} M writes/s  ({:.2} GC moves per write, no timing; the timed run is {:.2}x of it)",
            a.random_write_per_s / 1e6,
            a.moves_per_write,
            r.random_write_req_per_s / a.random_write_per_s
        );
    }
    match r.bytes_per_physical_page {
        Some(b) => println!("memory            {b:.2} bytes per physical page (target <= 16)"),
        None => println!("memory            not measured (no /proc/self/status)"),
    }
    println!(
        "{}",
        serde_json::json!({
            "logical_bytes": r.logical_bytes,
            "physical_pages": r.physical_pages,
            "precondition_s": r.precondition_s,
            "random_write_req_per_s": r.random_write_req_per_s,
            "random_write_waf": r.random_write_waf,
            "random_write_model_waf": [r.random_write_model_waf.0, r.random_write_model_waf.1],
            "random_write_die_utilisation": r.random_write_die_utilisation,
            "random_read_req_per_s": r.random_read_req_per_s,
            "random_read_die_utilisation": r.random_read_die_utilisation,
            "bytes_per_physical_page": r.bytes_per_physical_page,
            "ftl_alone_write_per_s": alone.as_ref().map(|a| a.random_write_per_s),
            "ftl_alone_moves_per_write": alone.as_ref().map(|a| a.moves_per_write),
        })
    );
}
