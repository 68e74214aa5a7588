//! The device benchmark at a tiny size, so that it cannot rot: it must run every scenario and
//! show what the full size shows (priority keeps the dies busier than FCFS; an open-loop trace
//! below saturation is served as it arrives; priority serves fixed loads that FCFS cannot).
//! Its figures are of the simulated device, so they are the same on any machine.

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
    // Fixed loads: priority serves each offered load with nothing waiting at the host; fcfs
    // falls behind at the highest.
    let loads = table(&out, "## 4.");
    assert_eq!(loads.len(), 6, "{loads:?}");
    let cell = |row: &Vec<String>, i: usize| -> f64 { row[i].parse().expect("a number") };
    for row in loads.iter().filter(|r| r[1] == "priority") {
        assert!(
            cell(row, 4) > 0.97 * cell(row, 3),
            "served the load: {row:?}"
        );
        assert_eq!(cell(row, 10), 0.0, "no host wait below saturation: {row:?}");
    }
    let fcfs_top = loads.iter().rfind(|r| r[1] == "fcfs").unwrap();
    assert!(cell(fcfs_top, 4) < 0.8 * cell(fcfs_top, 3), "{fcfs_top:?}");
    for row in table(&out, "## 3.") {
        let late: f64 = row[2]
            .trim_end_matches(" %")
            .trim_start_matches('+')
            .parse()
            .unwrap();
        assert!(late < 1.0, "the trace is served as it arrives: {row:?}");
    }
}
