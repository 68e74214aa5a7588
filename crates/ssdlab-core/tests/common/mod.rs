//! What the integration tests share: devices built from layers of settings, and runs.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use ssdlab_core::{Device, HostRequest, Loop, RunSpec, VecSource};

/// One TLC die on one channel with round-number timings, for closed-form checks: 58/78/107 us
/// reads and 500/700/900 us programs by page type, 4 KiB pages over an 800 MT/s bus (5.12 us +
/// 300 ns command overhead), BCH over 1 KiB codewords, a 4 GB/s host link.
pub const TLC_ONE_DIE: &[(&str, &str)] = &[
    ("geometry.channels", "1"),
    ("geometry.chips_per_channel", "1"),
    ("geometry.dies_per_chip", "1"),
    ("geometry.planes_per_die", "1"),
    ("geometry.blocks_per_plane", "128"),
    ("geometry.pages_per_block", "192"),
    ("geometry.page_size_bytes", "4096"),
    ("cell.type", "tlc"),
    ("cell.read_ns", "[58000, 78000, 107000]"),
    ("cell.program_ns", "[500000, 700000, 900000]"),
    ("channel.rate_mtps", "800"),
    ("channel.command_overhead_ns", "300"),
    ("host.link_mbps", "4000"),
    ("ecc.code", "bch"),
    ("ecc.codeword_bytes", "1024"),
    ("ecc.correctable_bits", "12"),
    ("ecc.encode_ns", "800"),
];

/// Settings as `(key, value)` strings; a later layer's value of a key wins.
pub fn settings(layers: &[&[(&str, &str)]]) -> Vec<(String, String)> {
    layers
        .iter()
        .flat_map(|layer| layer.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A device from the built-in defaults with `layers` of settings on top.
pub fn device(layers: &[&[(&str, &str)]], seed: u64, store_data: bool) -> Device {
    Device::from_toml("", "test", &settings(layers), seed, store_data)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A device from preset `name` with `layers` of settings on top.
pub fn preset_device(
    name: &str,
    layers: &[&[(&str, &str)]],
    seed: u64,
    store_data: bool,
) -> Device {
    let text = ssdlab_core::presets::get(name).expect("a built-in preset");
    Device::from_toml(text, name, &settings(layers), seed, store_data)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Run `requests` to the end, closed loop at queue depth `qd`; the job object.
pub fn closed_run(dev: &mut Device, requests: Vec<HostRequest>, qd: u32) -> serde_json::Value {
    try_closed_run(dev, requests, qd).unwrap_or_else(|e| panic!("{e}"))
}

/// `closed_run`, its error returned.
pub fn try_closed_run(
    dev: &mut Device,
    requests: Vec<HostRequest>,
    qd: u32,
) -> Result<serde_json::Value, ssdlab_core::DeviceError> {
    dev.run_to_end(RunSpec {
        name: "job".into(),
        source: Box::new(VecSource::new(requests)),
        queue_depth: qd,
        pacing: Loop::Closed,
        runtime_ns: None,
        ramp_ns: None,
    })
}

/// `f`'s result, or a failed test if it has not returned within `seconds`: for runs that
/// once never ended (the thread left running ends with the test process).
pub fn within<T: Send + 'static>(seconds: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    match result.recv_timeout(std::time::Duration::from_secs(seconds)) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("not done within {seconds} s: the run does not end")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the run panicked"),
    }
}

/// Fill the device, then overwrite at random until GC is in steady state (one pass at most).
pub fn precondition(dev: &mut Device) {
    dev.precondition(ssdlab_core::PreconditionOptions {
        max_random_passes: 1.0,
        steady_tolerance: 0.05,
    })
    .unwrap_or_else(|e| panic!("precondition: {e}"));
}
