//! What the integration tests share: devices built from layers of settings, and runs.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use ssdlab_core::{Device, HostRequest, Loop, RunSpec, VecSource};

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
    dev.run_to_end(RunSpec {
        name: "job".into(),
        source: Box::new(VecSource::new(requests)),
        queue_depth: qd,
        pacing: Loop::Closed,
        runtime_ns: None,
        ramp_ns: None,
    })
    .unwrap_or_else(|e| panic!("{e}"))
}
