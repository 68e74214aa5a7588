//! The native-call benchmark at a tiny size, so that it cannot rot: every row is printed with
//! a finite cost per call.

use std::process::Command;

#[test]
fn tiny_nativebench_prints_every_row() {
    let output = Command::new(env!("CARGO_BIN_EXE_nativebench"))
        .arg("--tiny")
        .output()
        .expect("nativebench runs");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("| yes") || l.starts_with("| no"))
        .collect();
    assert_eq!(rows.len(), 7, "{out}");
    for row in rows {
        for cell in row.split('|').skip(4).filter(|c| !c.trim().is_empty()) {
            let ns: f64 = cell.trim().parse().unwrap_or_else(|_| panic!("{row}"));
            assert!(ns.is_finite() && ns > 0.0, "{row}");
        }
    }
}
