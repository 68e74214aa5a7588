//! The cache-layer benchmark at a tiny size, so that it cannot rot.

#[test]
fn tiny_cachebench_runs_both_modes() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cachebench"))
        .arg("--tiny")
        .output()
        .expect("cachebench runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("| all_bch |") && text.contains("| flex |"),
        "{text}"
    );
}
