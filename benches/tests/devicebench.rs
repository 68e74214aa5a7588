//! The device benchmark at a tiny size, so that it cannot rot: it must run every scenario and
//! show what the full size shows (priority keeps the dies busier than FCFS; an open-loop trace
//! below saturation is served as it arrives). Its figures are of the simulated device, so they
//! are the same on any machine.

use std::process::Command;

/// The rows of the markdown table that follows `heading`, as cells.
fn table(out: &str, heading: &str) -> Vec<Vec<String>> {
    out.split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("no section {heading:?} in:\n{out}"))
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

#[test]
fn tiny_devicebench_runs_every_scenario_and_shows_the_scheduling_effect() {
    let output = Command::new(env!("CARGO_BIN_EXE_devicebench"))
        .arg("--tiny")
        .output()
        .expect("devicebench runs");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let writes = table(&out, "## 1.");
    let util = |scheduler: &str| -> f64 {
        let row = writes
            .iter()
            .find(|r| r[1] == scheduler)
            .unwrap_or_else(|| panic!("no {scheduler} row"));
        row[5].parse().expect("a utilisation")
    };
    assert!(
        util("priority") > 0.85 && util("priority") > util("fcfs"),
        "priority keeps the dies busy: {writes:?}"
    );
    assert_eq!(table(&out, "## 2.").len(), 4);
    for row in table(&out, "## 3.") {
        let late: f64 = row[2]
            .trim_end_matches(" %")
            .trim_start_matches('+')
            .parse()
            .unwrap();
        assert!(late < 1.0, "the trace is served as it arrives: {row:?}");
    }
}
