//! `ssdlab._core`: PyO3 bindings of the simulator. Glue only: convert arguments, call the core
//! with the GIL released, convert results. All policy lives in the Rust crates and all
//! orchestration in the Python package.

mod errors;
mod request_log;
mod server;

use errors::{config_error, device_error, hint_error, value_error, workload_error};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyString};
use ssdlab_core::hint::{HintBuilder, HintField, HintOut, HintValue, HINT_FIELDS};
use ssdlab_core::{Device, Hint, HostRequest, Loop, Op, PreconditionOptions, RunSpec, VecSource};
use ssdlab_workload::{read_job_file, TraceFormat, TraceOptions};
use std::path::Path;
use std::sync::Mutex;

fn parse_op(op: &str) -> PyResult<Op> {
    Ok(match op {
        "read" => Op::Read,
        "write" => Op::Write,
        "trim" => Op::Trim,
        "flush" => Op::Flush,
        other => {
            return Err(value_error(format!(
                "op: expected read, write, trim or flush, got {other:?}"
            )))
        }
    })
}

/// A Python dict of hint fields as the core's [`HintBuilder`] takes it: the core parses every
/// name (canonical or alias) and value, so Python accepts what a trace's hint column does and
/// gets the same messages. `None` values mean "not set".
fn parse_hint(hint: Option<&Bound<'_, PyDict>>) -> PyResult<Hint> {
    let mut builder = HintBuilder::new();
    let Some(dict) = hint else {
        return Ok(builder.finish());
    };
    for (key, value) in dict.iter() {
        let key: String = key
            .extract()
            .map_err(|_| value_error(format!("hint field names are strings, got {key}")))?;
        if value.is_none() {
            continue;
        }
        // bool before int: Python's bool is an int subclass, and True is not stream 1.
        let text: std::borrow::Cow<'_, str>;
        let value = if let Ok(b) = value.downcast::<PyBool>() {
            HintValue::Bool(b.is_true())
        } else if let Ok(n) = value.extract::<i128>() {
            HintValue::Int(n)
        } else if let Ok(s) = value.downcast::<PyString>() {
            text = s.to_cow()?;
            HintValue::Text(&text)
        } else {
            // Anything else (a float, a list) fails the field's parser with its own message,
            // quoting the value as Python shows it.
            text = value.repr()?.to_cow()?.into_owned().into();
            HintValue::Text(&text)
        };
        builder.set(&key, value).map_err(hint_error)?;
    }
    Ok(builder.finish())
}

/// A hint as a dict of canonical names and values (set fields only).
fn hint_dict<'py>(py: Python<'py>, hint: &Hint) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (name, value) in hint.items() {
        match value {
            HintOut::Name(v) => out.set_item(name, v)?,
            HintOut::Int(v) => out.set_item(name, v)?,
            HintOut::Flag => out.set_item(name, true)?,
        }
    }
    Ok(out)
}

/// The hint vocabulary: (name, aliases, values, expected, doc) per field, in the core's order.
#[pyfunction]
fn hint_fields() -> Vec<HintFieldRow> {
    HINT_FIELDS
        .iter()
        .map(|s| {
            let list = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
            (
                s.name.to_string(),
                list(s.aliases),
                list(s.values),
                s.expected.to_string(),
                s.doc.to_string(),
            )
        })
        .collect()
}

type HintFieldRow = (String, Vec<String>, Vec<String>, String, String);

/// Validate a dict of hint fields (any names the core accepts) and return it with canonical
/// names and values, set fields only.
#[pyfunction]
fn normalize_hint<'py>(
    py: Python<'py>,
    fields: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    hint_dict(py, &parse_hint(Some(fields))?)
}

/// Parse the text form (`life=short;fdp=2`) into a dict of canonical names and values.
#[pyfunction]
fn parse_hint_text<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    hint_dict(py, &text.parse().map_err(hint_error)?)
}

/// The text form of a dict of hint fields, with canonical names and values.
#[pyfunction]
fn format_hint(fields: &Bound<'_, PyDict>) -> PyResult<String> {
    Ok(parse_hint(Some(fields))?.to_string())
}

/// A simulated SSD.
#[pyclass(name = "Device", module = "ssdlab._core")]
struct PyDevice {
    // The core is Send but not Sync; the mutex makes the class shareable, and `&mut self`
    // methods reach the device through `get_mut` without locking.
    inner: Mutex<Device>,
}

impl PyDevice {
    fn dev(&mut self) -> &mut Device {
        self.inner
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
    fn read(&self) -> std::sync::MutexGuard<'_, Device> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl PyDevice {
    #[new]
    #[pyo3(signature = (toml_text, source_name, overrides, seed, store_data))]
    fn new(
        toml_text: &str,
        source_name: &str,
        overrides: Vec<(String, String)>,
        seed: u64,
        store_data: bool,
    ) -> PyResult<Self> {
        let inner = Device::from_toml(toml_text, source_name, &overrides, seed, store_data)
            .map_err(device_error)?;
        Ok(PyDevice {
            inner: Mutex::new(inner),
        })
    }

    #[getter]
    fn now(&self) -> u64 {
        self.read().now_ns()
    }
    #[getter]
    fn logical_bytes(&self) -> u64 {
        self.read().logical_bytes()
    }
    #[getter]
    fn page_size(&self) -> u32 {
        self.read().page_size()
    }
    #[getter]
    fn config_hash(&self) -> String {
        self.read().config_hash().to_string()
    }
    #[getter]
    fn config_json(&self) -> String {
        self.read().config().canonical_json()
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.read().seed()
    }

    /// Run one request to completion at the current simulated time.
    #[pyo3(signature = (op, offset, length, data=None, hint=None))]
    fn submit<'py>(
        &mut self,
        py: Python<'py>,
        op: &str,
        offset: u64,
        length: u64,
        data: Option<&[u8]>,
        hint: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let op = parse_op(op)?;
        let request = HostRequest {
            arrival_ns: None,
            op,
            offset,
            length,
            hint: parse_hint(hint)?,
        };
        let mut out =
            (op == Op::Read && self.dev().stores_data()).then(|| vec![0u8; length as usize]);
        let completion = self
            .dev()
            .submit(&request, data, out.as_deref_mut())
            .map_err(device_error)?;
        let result = PyDict::new(py);
        result.set_item("latency_ns", completion.latency_ns())?;
        result.set_item("submit_ns", completion.issue_ns)?;
        result.set_item("complete_ns", completion.complete_ns)?;
        result.set_item("uncorrectable", completion.uncorrectable)?;
        match out {
            Some(bytes) => result.set_item("data", PyBytes::new(py, &bytes))?,
            None => result.set_item("data", py.None())?,
        }
        Ok(result)
    }

    /// Sequential fill, then random overwrites until GC is steady; statistics are reset.
    #[pyo3(signature = (random_overwrite_passes=2.0))]
    fn precondition<'py>(
        &mut self,
        py: Python<'py>,
        random_overwrite_passes: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        if !(random_overwrite_passes.is_finite() && random_overwrite_passes >= 0.0) {
            return Err(value_error(
                "random_overwrite_passes: expected a non-negative number".into(),
            ));
        }
        let options = PreconditionOptions {
            max_random_passes: random_overwrite_passes,
            ..Default::default()
        };
        let inner = self.dev();
        let report = py
            .allow_threads(|| inner.precondition(options))
            .map_err(device_error)?;
        let result = PyDict::new(py);
        result.set_item("pages_written", report.pages_written)?;
        result.set_item("waf_last_window", report.waf_last_window)?;
        result.set_item("steady", report.steady)?;
        Ok(result)
    }

    /// Start job `job_index` of a fio job file.
    fn start_job(&mut self, job_path: &str, job_index: usize) -> PyResult<()> {
        let file = read_job_file(Path::new(job_path)).map_err(workload_error)?;
        let Some(job) = file.jobs.get(job_index) else {
            return Err(value_error(format!(
                "{job_path}: has {} job(s), no job #{job_index}",
                file.jobs.len()
            )));
        };
        let (device_bytes, seed) = (self.dev().logical_bytes(), self.dev().seed());
        let source = job.source(device_bytes, seed).map_err(workload_error)?;
        self.dev()
            .start_run(RunSpec {
                name: job.name.clone(),
                source,
                queue_depth: job.iodepth,
                pacing: Loop::Closed,
                runtime_ns: job.runtime_ns,
                ramp_ns: job.ramp_time_ns,
            })
            .map_err(device_error)
    }

    /// Start replaying a trace: open loop at its timestamps (scaled), or closed loop.
    fn start_trace(
        &mut self,
        path: &str,
        fmt: &str,
        time_scale: f64,
        queue_depth: u32,
        closed_loop: bool,
    ) -> PyResult<()> {
        let format: TraceFormat = fmt.parse().map_err(workload_error)?;
        let source = ssdlab_workload::open_trace(Path::new(path), format, TraceOptions::default())
            .map_err(workload_error)?;
        let name = Path::new(path)
            .file_name()
            .map_or(path.to_string(), |n| n.to_string_lossy().into_owned());
        self.dev()
            .start_run(RunSpec {
                name,
                source,
                queue_depth,
                pacing: if closed_loop {
                    Loop::Closed
                } else {
                    Loop::Open { time_scale }
                },
                runtime_ns: None,
                ramp_ns: None,
            })
            .map_err(device_error)
    }

    /// Start a closed-loop run over requests given as columns (ops: 0 read, 1 write, 2 trim;
    /// placement: -1 for none, else an FDP placement id).
    #[pyo3(signature = (ops, offsets, lengths, placement, queue_depth, name))]
    fn start_arrays(
        &mut self,
        ops: Vec<u8>,
        offsets: Vec<u64>,
        lengths: Vec<u64>,
        placement: Option<Vec<i64>>,
        queue_depth: u32,
        name: &str,
    ) -> PyResult<()> {
        let n = ops.len();
        if offsets.len() != n
            || lengths.len() != n
            || placement.as_ref().is_some_and(|p| p.len() != n)
        {
            return Err(value_error(
                "ops, offsets, lengths and placement must have the same length".into(),
            ));
        }
        let mut requests = Vec::with_capacity(n);
        for i in 0..n {
            let op = match ops[i] {
                0 => Op::Read,
                1 => Op::Write,
                2 => Op::Trim,
                other => {
                    return Err(value_error(format!(
                        "ops[{i}]: expected 0 (read), 1 (write) or 2 (trim), got {other}"
                    )))
                }
            };
            let mut hint = Hint::default();
            if let Some(p) = &placement {
                // -1 marks "no placement id"; anything else is checked by the vocabulary.
                if p[i] >= 0 {
                    HintField::PlacementId
                        .set(&mut hint, HintValue::Int(p[i].into()))
                        .map_err(|e| value_error(format!("placement[{i}]: {e}")))?;
                }
            }
            requests.push(HostRequest {
                arrival_ns: None,
                op,
                offset: offsets[i],
                length: lengths[i],
                hint,
            });
        }
        self.dev()
            .start_run(RunSpec {
                name: name.to_string(),
                source: Box::new(VecSource::new(requests)),
                queue_depth,
                pacing: Loop::Closed,
                runtime_ns: None,
                ramp_ns: None,
            })
            .map_err(device_error)
    }

    /// Advance the run by at most `max_requests` completions, without the GIL.
    /// Returns (done, completed so far in this run, total requests if known).
    fn step(&mut self, py: Python<'_>, max_requests: u64) -> PyResult<(bool, u64, Option<u64>)> {
        let inner = self.dev();
        let progress = py
            .allow_threads(|| inner.step(max_requests))
            .map_err(device_error)?;
        Ok((progress.done, progress.completed, progress.total))
    }

    /// End the run; JSON text of its job object in fio's layout.
    fn finish_job(&mut self) -> PyResult<String> {
        let job = self.dev().finish_run().map_err(device_error)?;
        Ok(job.to_string())
    }

    /// JSON text of the cumulative `ssd` object.
    fn ssd_stats(&self) -> String {
        self.read().ssd_json().to_string()
    }

    /// JSON text of the per-interval time series.
    fn time_series(&mut self) -> String {
        serde_json::to_string(self.dev().time_series_rows()).unwrap_or_else(|_| "[]".into())
    }

    /// The per-request log as CSV (empty unless `stats.request_log = true`).
    fn request_log_csv(&self) -> String {
        let mut out = String::from(ssdlab_core::stats::RequestLogRow::CSV_HEADER);
        out.push('\n');
        for row in self.read().request_log().unwrap_or(&[]) {
            out.push_str(&row.csv_line());
            out.push('\n');
        }
        out
    }
}

/// (name, description) of every built-in preset.
#[pyfunction]
fn presets() -> Vec<(String, String)> {
    ssdlab_core::presets::list()
        .into_iter()
        .map(|(n, d)| (n.to_string(), d))
        .collect()
}

/// TOML text of a built-in preset.
#[pyfunction]
fn preset_toml(name: &str) -> PyResult<String> {
    ssdlab_core::presets::get(name)
        .map(str::to_string)
        .map_err(config_error)
}

/// Names of the jobs of a fio job file, in order.
#[pyfunction]
fn job_names(path: &str) -> PyResult<Vec<String>> {
    let file = read_job_file(Path::new(path)).map_err(workload_error)?;
    Ok(file.jobs.into_iter().map(|j| j.name).collect())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", ssdlab_core::VERSION)?;
    m.add("SsdlabError", py.get_type::<errors::SsdlabError>())?;
    m.add("ConfigError", py.get_type::<errors::ConfigError>())?;
    m.add("WorkloadError", py.get_type::<errors::WorkloadError>())?;
    m.add("DeviceError", py.get_type::<errors::DeviceError>())?;
    m.add_class::<PyDevice>()?;
    m.add_class::<server::PyServer>()?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(preset_toml, m)?)?;
    m.add_function(wrap_pyfunction!(job_names, m)?)?;
    m.add_function(wrap_pyfunction!(hint_fields, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_hint, m)?)?;
    m.add_function(wrap_pyfunction!(parse_hint_text, m)?)?;
    m.add_function(wrap_pyfunction!(format_hint, m)?)?;
    m.add_function(wrap_pyfunction!(request_log::summarize_request_log, m)?)?;
    Ok(())
}
