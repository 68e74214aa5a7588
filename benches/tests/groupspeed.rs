//! The many-jobs benchmark at a tiny size, so that it cannot rot: one row per job count, the
//! same simulated work in each, and its JSON line.

use std::process::Command;

#[test]
fn tiny_groupspeed_runs_each_job_count_on_the_same_device_work() {
    let output = Command::new(env!("CARGO_BIN_EXE_groupspeed"))
        .arg("--tiny")
        .output()
        .expect("groupspeed runs");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{out}");
    let json: serde_json::Value = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("a JSON line: {out}"));
    let rows = json["groupspeed"].as_array().expect("rows");
    let jobs: Vec<u64> = rows.iter().map(|r| r["jobs"].as_u64().unwrap()).collect();
    assert_eq!(jobs, [1, 64, 1024]);
    let first_reads = rows[0]["reads"].as_f64().unwrap();
    for r in rows {
        let reads = r["reads"].as_f64().unwrap();
        // The same total depth on the same device: the same reads within a few per cent.
        assert!(
            reads > 1000.0 && (reads - first_reads).abs() < 0.05 * first_reads,
            "{r}"
        );
        assert!(r["ns_per_read"].as_f64().unwrap() > 0.0, "{r}");
        let (dies, channels) = (
            r["die_utilisation"].as_f64().unwrap(),
            r["channel_utilisation"].as_f64().unwrap(),
        );
        // 4 KiB of a 16 KiB page crosses the bus: the dies, not the channels, bound it.
        assert!(channels > 0.0 && channels < dies && dies <= 1.0, "{r}");
    }
    assert!(json["ratio_1024_to_1"].as_f64().unwrap() > 0.0);
}
