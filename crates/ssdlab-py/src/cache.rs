//! The SSD cache over a disk model (`ssdlab_core::cache`): one call runs a cache workload on a
//! device built from a configuration and returns the report (and the cache's SSD trace).

use crate::errors::{cache_error, value_error};
use crate::{memory, value};
use pyo3::prelude::*;
use ssdlab_core::cache::workload::WorkloadSpec;
use ssdlab_core::cache::{CacheError, FlashCache};
use ssdlab_core::Device;

/// Run the cache workload `workload` (a JSON object: personality, requests, interarrival_ns,
/// working_set_bytes, seed) on a device with the configuration's `[cache]` table; returns
/// `(report, trace_csv or None)`.
#[pyfunction]
#[pyo3(signature = (toml_text, source_name, overrides, seed, workload_json, record_trace=false))]
pub fn cache_run(
    py: Python<'_>,
    toml_text: &str,
    source_name: &str,
    overrides: Vec<(String, String)>,
    seed: u64,
    workload_json: &str,
    record_trace: bool,
) -> PyResult<(PyObject, Option<String>)> {
    let mut config = memory::checked_config(toml_text, source_name, &overrides)?;
    config.cache.record_trace |= record_trace;
    let spec: WorkloadSpec =
        serde_json::from_str(workload_json).map_err(|e| value_error(format!("workload: {e}")))?;
    let result = py.allow_threads(|| -> Result<_, CacheError> {
        let device = Device::new(config, seed, false);
        let mut cache = FlashCache::from_device(device)?;
        let report = cache.run_workload(&spec)?;
        Ok((report, cache.trace_csv()))
    });
    let (report, trace) = result.map_err(cache_error)?;
    Ok((value::to_py(py, &report)?, trace))
}
