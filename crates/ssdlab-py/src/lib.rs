//! `ssdlab._core`: PyO3 bindings of the simulator. Glue only: convert arguments, call the core
//! with the GIL released, convert results. All policy lives in the Rust crates and all
//! orchestration in the Python package.

mod cache;
mod errors;
mod hostftl;
mod memory;
mod native;
mod request_log;
mod server;
mod sqlite;
mod value;

use errors::{config_error, device_error, device_message, hint_error, value_error, workload_error};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyString};
use ssdlab_core::hint::{HintBuilder, HintField, HintOut, HintValue, HINT_FIELDS};
use ssdlab_core::{
    ArrivalClock, Device, DeviceError, Hint, HostRequest, Loop, Op, PreconditionOptions, RunSpec,
    VecSource,
};
use ssdlab_workload::{read_job_file, TraceFormat, TraceOptions};
use std::path::Path;
use std::sync::Mutex;

pub(crate) fn parse_op(op: &str) -> PyResult<Op> {
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
pub(crate) struct PyDevice {
    // The core is Send but not Sync. Every method takes the lock with the GIL released, so
    // threads sharing a device take turns: a call from a second thread during a long `step`
    // waits for that step (at most one chunk of the run) instead of failing with PyO3's
    // "already borrowed", and the thread holding the lock never waits for the GIL.
    inner: Mutex<Device>,
    /// Fixed when the device is built; kept here so that the quick path checks a request
    /// without taking the lock twice.
    logical_bytes: u64,
    stores_data: bool,
}

/// A hint parsed once ([`compile_hint`]), for requests sent many times with it.
#[pyclass(name = "CompiledHint", module = "ssdlab._core", frozen)]
pub(crate) struct CompiledHint(pub(crate) Hint);

#[pymethods]
impl CompiledHint {
    fn __repr__(&self) -> String {
        format!("CompiledHint({:?})", self.0.to_string())
    }

    /// The hint's fields, as `normalize_hint` gives them.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        hint_dict(py, &self.0)
    }
}

/// A dict of hint fields parsed once, for [`PyDevice::submit_quick`].
#[pyfunction]
fn compile_hint(fields: &Bound<'_, PyDict>) -> PyResult<CompiledHint> {
    Ok(CompiledHint(parse_hint(Some(fields))?))
}

/// The largest read `submit_quick` takes: its buffer is made without the memory check.
const QUICK_READ_MAX_BYTES: u64 = 64 << 20;

/// A zeroed buffer for `length` bytes of data that `what` returns, or an error when memory
/// cannot hold it.
fn read_buffer(what: &str, length: u64) -> PyResult<Vec<u8>> {
    // A reservation larger than memory can succeed (overcommit) and the zero fill then gets
    // the process killed: compare large reads with what is available first.
    const LARGE_READ_BYTES: u64 = 64 << 20;
    if length > LARGE_READ_BYTES {
        if let Some(available) = memory::available_bytes().filter(|&a| length > a / 2) {
            return Err(device_message(format!(
                "{what} of {length} bytes: more than half the {available} bytes of memory \
                 available ({what} less at a time)"
            )));
        }
    }
    let mut buffer = Vec::new();
    buffer.try_reserve_exact(length as usize).map_err(|_| {
        device_message(format!(
            "{what} of {length} bytes: not enough memory for the data ({what} less at a time)"
        ))
    })?;
    buffer.resize(length as usize, 0u8);
    Ok(buffer)
}

impl PyDevice {
    /// A request's range checked as the core would, before a read buffer is sized by it: a
    /// huge length is then an error rather than an allocation that aborts.
    pub(crate) fn check_range(&self, op: Op, offset: u64, length: u64) -> PyResult<()> {
        let capacity = self.logical_bytes;
        if op != Op::Flush && offset.checked_add(length).is_none_or(|end| end > capacity) {
            return Err(device_error(DeviceError::OutOfRange {
                offset,
                length,
                capacity,
            }));
        }
        Ok(())
    }

    /// One request under the device's lock, with the GIL kept (a quick path: see
    /// `submit_quick`).
    pub(crate) fn submit_locked(
        &self,
        request: &HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<ssdlab_core::Completion, DeviceError> {
        self.lock().submit(request, data, out)
    }

    /// The device under its lock, with the GIL kept (see `with` for why the lock is taken
    /// without it elsewhere).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Device> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Run `f` on the device under its lock, without the GIL.
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Device) -> R + Send) -> R {
        py.allow_threads(|| {
            // A panic in the core while the lock was held poisons it; the device is then
            // still the one the panic left, which the caller may inspect or drop.
            let mut device = self
                .inner
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            f(&mut device)
        })
    }
}

#[pymethods]
impl PyDevice {
    #[new]
    #[pyo3(signature = (toml_text, source_name, overrides, seed, store_data, time_series=false))]
    fn new(
        py: Python<'_>,
        toml_text: &str,
        source_name: &str,
        overrides: Vec<(String, String)>,
        seed: u64,
        store_data: bool,
        time_series: bool,
    ) -> PyResult<Self> {
        let mut config = memory::checked_config(toml_text, source_name, &overrides)?;
        if time_series {
            config.enable_time_series();
        }
        let inner = py.allow_threads(|| Device::new(config, seed, store_data));
        Ok(PyDevice {
            logical_bytes: inner.logical_bytes(),
            stores_data: inner.stores_data(),
            inner: Mutex::new(inner),
        })
    }

    #[getter]
    fn now(&self, py: Python<'_>) -> u64 {
        self.with(py, |d| d.now_ns())
    }
    /// Move the simulated clock forward to `time_ns` (host think time; background GC may use
    /// the idle window). An earlier time leaves the clock where it is.
    fn advance_to(&self, py: Python<'_>, time_ns: u64) {
        self.with(py, |d| d.advance_to(time_ns))
    }
    #[getter]
    fn logical_bytes(&self, py: Python<'_>) -> u64 {
        self.with(py, |d| d.logical_bytes())
    }
    #[getter]
    fn page_size(&self, py: Python<'_>) -> u32 {
        self.with(py, |d| d.page_size())
    }
    #[getter]
    fn config_hash(&self, py: Python<'_>) -> String {
        self.with(py, |d| d.config_hash().to_string())
    }
    /// The canonical resolved configuration (defaults filled in).
    #[getter]
    fn config(&self, py: Python<'_>) -> PyResult<PyObject> {
        let json = self.with(py, |d| serde_json::to_value(d.config()));
        let json = json.map_err(|e| value_error(format!("configuration: {e}")))?;
        value::to_py(py, &json)
    }
    #[getter]
    fn seed(&self, py: Python<'_>) -> u64 {
        self.with(py, |d| d.seed())
    }

    /// Run one request to completion at the current simulated time; `fua` (a write only)
    /// makes it done once its data is on flash.
    #[pyo3(signature = (op, offset, length, data=None, hint=None, fua=false))]
    #[allow(clippy::too_many_arguments)]
    fn submit<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        offset: u64,
        length: u64,
        data: Option<&[u8]>,
        hint: Option<&Bound<'py, PyDict>>,
        fua: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let op = parse_op(op)?;
        if fua && op != Op::Write {
            return Err(value_error(format!(
                "fua: only a write has Force Unit Access, not a {}",
                op.as_str()
            )));
        }
        let request = HostRequest {
            arrival_ns: None,
            op,
            offset,
            length,
            hint: parse_hint(hint)?,
            fua,
        };
        self.check_range(op, offset, length)?;
        let mut out = None;
        if op == Op::Read && self.stores_data {
            out = Some(read_buffer("read", length)?);
        }
        let completion = self
            .with(py, |d| d.submit(&request, data, out.as_deref_mut()))
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

    /// The quick path for a caller that sends many small requests (the SQLite coupling): the
    /// lock taken once and the GIL kept (releasing it costs more than a request of a few
    /// units takes), a hint compiled once, and a read's data written straight into the
    /// returned bytes. Returns `(data, uncorrectable)`: `data` is the bytes read (a read on a
    /// device that stores data) or `None`.
    #[pyo3(signature = (op, offset, length, data=None, hint=None))]
    fn submit_quick<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        offset: u64,
        length: u64,
        data: Option<&[u8]>,
        hint: Option<&CompiledHint>,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, bool)> {
        let op = parse_op(op)?;
        self.check_range(op, offset, length)?;
        let request = HostRequest {
            hint: hint.map(|h| h.0).unwrap_or_default(),
            ..HostRequest::new(op, offset, length)
        };
        let lock = || {
            self.inner
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        };
        if op == Op::Read && self.stores_data {
            if length > QUICK_READ_MAX_BYTES {
                return Err(value_error(format!(
                    "length: submit_quick reads at most {QUICK_READ_MAX_BYTES} bytes, got \
                     {length} (use submit)"
                )));
            }
            let mut uncorrectable = false;
            let bytes = PyBytes::new_with(py, length as usize, |buffer| {
                let completion = lock()
                    .submit(&request, None, Some(buffer))
                    .map_err(device_error)?;
                uncorrectable = completion.uncorrectable;
                Ok(())
            })?;
            return Ok((Some(bytes), uncorrectable));
        }
        let completion = lock().submit(&request, data, None).map_err(device_error)?;
        Ok((None, completion.uncorrectable))
    }

    /// SEA-SSD prediction hints for many `(offset, length)` ranges at once (a log's frames as
    /// it is written), in order; stops at the first the device refuses.
    fn sea_predict_many(&self, py: Python<'_>, ranges: Vec<(u64, u64)>) -> PyResult<()> {
        self.with(py, |d| {
            ranges
                .iter()
                .try_for_each(|&(offset, length)| d.sea_predict(offset, length))
        })
        .map_err(device_error)
    }

    /// SEA-SSD settings hint: the storage engine's WAL and cache sizes size the dyn segment.
    fn sea_settings(&self, py: Python<'_>, wal_bytes: u64, cache_bytes: u64) -> PyResult<()> {
        self.with(py, |d| d.sea_settings(wal_bytes, cache_bytes))
            .map_err(device_error)
    }

    /// SEA-SSD prediction hint: the logical units of the byte range will be written soon.
    fn sea_predict(&self, py: Python<'_>, offset: u64, length: u64) -> PyResult<()> {
        self.with(py, |d| d.sea_predict(offset, length))
            .map_err(device_error)
    }

    /// The data a read of the byte range would return, untimed (no statistics, no clock).
    fn peek<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        // Checked before the buffer is sized by `length`, as for reads.
        self.with(py, |d| {
            d.check_extent("peek", offset, length)?;
            match d.stores_data() {
                true => Ok(()),
                false => Err(DeviceError::NoDataStore),
            }
        })
        .map_err(device_error)?;
        let mut out = read_buffer("peek", length)?;
        self.with(py, |d| d.peek_into(offset, &mut out))
            .map_err(device_error)?;
        Ok(PyBytes::new(py, &out))
    }

    /// Sequential fill, then random overwrites until GC is steady; statistics are reset.
    #[pyo3(signature = (random_overwrite_passes=2.0))]
    fn precondition<'py>(
        &self,
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
        let report = self
            .with(py, |d| d.precondition(options))
            .map_err(device_error)?;
        let result = PyDict::new(py);
        result.set_item("units_written", report.units_written)?;
        result.set_item("waf_last_window", report.waf_last_window)?;
        result.set_item("steady", report.steady)?;
        Ok(result)
    }

    /// Zero the clock and the statistics; data, mapping and wear stay.
    fn reset_measurements(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |d| {
            if d.run_in_progress() {
                return Err(DeviceError::Run(
                    "a run is in progress: finish it before resetting measurements",
                ));
            }
            d.reset_measurements();
            Ok(())
        })
        .map_err(device_error)
    }

    /// Start job `job_index` of a fio job file.
    fn start_job(&self, py: Python<'_>, job_path: &str, job_index: usize) -> PyResult<()> {
        self.start_jobs(py, job_path, vec![job_index])
    }

    /// Start jobs of a fio job file side by side (a run group of [`job_groups`]).
    fn start_jobs(&self, py: Python<'_>, job_path: &str, job_indices: Vec<usize>) -> PyResult<()> {
        let file = read_job_file(Path::new(job_path)).map_err(workload_error)?;
        let (device_bytes, seed) = self.with(py, |d| (d.logical_bytes(), d.seed()));
        let mut specs = Vec::with_capacity(job_indices.len());
        for index in job_indices {
            let Some(job) = file.jobs.get(index) else {
                return Err(value_error(format!(
                    "{job_path}: has {} job(s), no job #{index}",
                    file.jobs.len()
                )));
            };
            specs.push(RunSpec {
                name: job.name.clone(),
                source: job.source(device_bytes, seed).map_err(workload_error)?,
                queue_depth: job.iodepth,
                pacing: job.pacing(),
                runtime_ns: job.runtime_ns,
                ramp_ns: job.ramp_time_ns,
            });
        }
        self.with(py, |d| d.start_group(specs))
            .map_err(device_error)
    }

    /// Start replaying a trace: open loop at its timestamps (scaled), or closed loop.
    fn start_trace(
        &self,
        py: Python<'_>,
        path: &str,
        fmt: &str,
        time_scale: f64,
        queue_depth: u32,
        closed_loop: bool,
    ) -> PyResult<()> {
        let paths = vec![path.to_string()];
        self.start_traces(py, paths, fmt, time_scale, queue_depth, closed_loop, false)
    }

    /// Start replaying traces side by side, each a job of its own with its own queue (an I/O
    /// flow, as MQSim's flows): open loop at its timestamps (scaled, each from its own first
    /// one, or with `shared_clock` all from the earliest first one), or closed loop.
    #[pyo3(signature = (paths, fmt, time_scale, queue_depth, closed_loop, shared_clock=false))]
    #[allow(clippy::too_many_arguments)]
    fn start_traces(
        &self,
        py: Python<'_>,
        paths: Vec<String>,
        fmt: &str,
        time_scale: f64,
        queue_depth: u32,
        closed_loop: bool,
        shared_clock: bool,
    ) -> PyResult<()> {
        let format: TraceFormat = fmt.parse().map_err(workload_error)?;
        let mut specs = Vec::with_capacity(paths.len());
        // On a shared clock the traces keep their own times, and the run counts them all from
        // the earliest first request.
        let options = TraceOptions {
            rebase_time: !shared_clock,
            ..TraceOptions::default()
        };
        for path in &paths {
            let source = ssdlab_workload::open_trace(Path::new(path), format, options.clone())
                .map_err(workload_error)?;
            let name = Path::new(path)
                .file_name()
                .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
            specs.push(RunSpec {
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
            });
        }
        let clock = if shared_clock {
            ArrivalClock::Shared
        } else {
            ArrivalClock::PerJob
        };
        self.with(py, |d| d.start_group_clocked(specs, clock))
            .map_err(device_error)
    }

    /// Start a closed-loop run over requests given as columns (ops: 0 read, 1 write, 2 trim;
    /// placement: -1 for none, else an FDP placement id; read_group: -1 for none, else the
    /// melded-pages read group).
    #[pyo3(signature = (ops, offsets, lengths, placement, queue_depth, name, read_group=None))]
    // The arguments are the Python signature's (plus the GIL token): an options struct would
    // only move them into a dict on the Python side.
    #[allow(clippy::too_many_arguments)]
    fn start_arrays(
        &self,
        py: Python<'_>,
        ops: Vec<u8>,
        offsets: Vec<u64>,
        lengths: Vec<u64>,
        placement: Option<Vec<i64>>,
        queue_depth: u32,
        name: &str,
        read_group: Option<Vec<i64>>,
    ) -> PyResult<()> {
        let n = ops.len();
        if offsets.len() != n
            || lengths.len() != n
            || placement.as_ref().is_some_and(|p| p.len() != n)
            || read_group.as_ref().is_some_and(|g| g.len() != n)
        {
            return Err(value_error(
                "ops, offsets, lengths, placement and read_group must have the same length".into(),
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
            if let Some(g) = &read_group {
                if g[i] >= 0 {
                    HintField::ReadGroup
                        .set(&mut hint, HintValue::Int(g[i].into()))
                        .map_err(|e| value_error(format!("read_group[{i}]: {e}")))?;
                }
            }
            requests.push(HostRequest {
                hint,
                ..HostRequest::new(op, offsets[i], lengths[i])
            });
        }
        let spec = RunSpec {
            name: name.to_string(),
            source: Box::new(VecSource::new(requests)),
            queue_depth,
            pacing: Loop::Closed,
            runtime_ns: None,
            ramp_ns: None,
        };
        self.with(py, |d| d.start_run(spec)).map_err(device_error)
    }

    /// Advance the run by at most `max_requests` completions, without the GIL.
    /// Returns (done, completed so far in this run, total requests if known).
    fn step(&self, py: Python<'_>, max_requests: u64) -> PyResult<(bool, u64, Option<u64>)> {
        let progress = self
            .with(py, |d| d.step(max_requests))
            .map_err(device_error)?;
        Ok((progress.done, progress.completed, progress.total))
    }

    /// End the run; its job object in fio's layout, as a dict.
    fn finish_job(&self, py: Python<'_>) -> PyResult<PyObject> {
        let job = self.with(py, |d| d.finish_run()).map_err(device_error)?;
        value::to_py(py, &job)
    }

    /// End the run or the jobs side by side; their job objects in fio's layout, in order.
    /// `reports` (one per job, numbered from 0 in order) merges jobs of one number into one
    /// object, as fio's `group_reporting` does; empty, each job has its own.
    #[pyo3(signature = (reports=Vec::new()))]
    fn finish_jobs(&self, py: Python<'_>, reports: Vec<usize>) -> PyResult<Vec<PyObject>> {
        let jobs = self
            .with(py, |d| d.finish_group_reported(&reports))
            .map_err(device_error)?;
        jobs.iter().map(|job| value::to_py(py, job)).collect()
    }

    /// The native flash interface: the first call hands the flash to the caller (all blocks
    /// erased) and the block interface refuses requests from then on.
    fn native(slf: Py<Self>, py: Python<'_>) -> PyResult<native::PyNativeFlash> {
        slf.bind(py)
            .borrow()
            .with(py, |d| d.native().map(|_| ()))
            .map_err(device_error)?;
        Ok(native::PyNativeFlash::new(slf))
    }

    /// Simulate a power loss now: the mapping in RAM, DFTL's cached table and staged units are
    /// lost; requests are refused until `recover`.
    fn power_loss(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |d| d.power_loss()).map_err(device_error)
    }

    /// Rebuild the mapping from the flash's OOB areas; what it read and how long it took.
    fn recover(&self, py: Python<'_>) -> PyResult<PyObject> {
        let r = self.with(py, |d| d.recover()).map_err(device_error)?;
        let json = serde_json::json!({
            "oob_pages_read": r.oob_pages_read,
            "full_pages_read": r.full_pages_read,
            "lost_units": r.lost_units,
            "mapped_units": r.mapped_units,
            "duration_ns": r.duration_ns,
            "ready_ns": r.ready_ns,
        });
        value::to_py(py, &json)
    }

    /// The cumulative `ssd` object, as a dict.
    fn ssd_stats(&self, py: Python<'_>) -> PyResult<PyObject> {
        let stats = self.with(py, |d| d.ssd_json());
        value::to_py(py, &stats)
    }

    /// The per-interval time series, as a list of dicts.
    fn time_series(&self, py: Python<'_>) -> PyResult<PyObject> {
        let rows = self.with(py, |d| serde_json::to_value(d.time_series_rows()));
        let rows = rows.map_err(|e| value_error(format!("time series: {e}")))?;
        value::to_py(py, &rows)
    }

    /// The per-request log held by the device as CSV with its header (empty unless
    /// `stats.request_log = true`; rows already drained are not in it).
    fn request_log_csv(&self, py: Python<'_>) -> String {
        self.with(py, |d| {
            let mut out = String::from(ssdlab_core::stats::RequestLogRow::CSV_HEADER);
            out.push('\n');
            for row in d.request_log().unwrap_or(&[]) {
                out.push_str(&row.csv_line());
                out.push('\n');
            }
            out
        })
    }

    /// The CSV header line of the per-request log, with its newline.
    #[staticmethod]
    fn request_log_header() -> String {
        format!("{}\n", ssdlab_core::stats::RequestLogRow::CSV_HEADER)
    }

    /// The request-log rows since the last drain as CSV lines without a header; the device
    /// keeps none of them, so a log streamed to a file this way costs constant memory.
    fn drain_request_log_csv(&self, py: Python<'_>) -> String {
        self.with(py, |d| {
            let mut out = String::new();
            d.drain_request_log_csv(&mut out);
            out
        })
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

/// Parse and validate a configuration with overrides, as a device would, without building one:
/// `{"hash": ..., "config": {...}}` with the canonical form after defaults. Errors are the
/// `ConfigError`s a device would raise (the key, and the valid keys for an unknown one). The
/// memory check is left out: a sweep may validate here what a larger machine will run.
#[pyfunction]
fn check_config<'py>(
    py: Python<'py>,
    toml_text: &str,
    source_name: &str,
    overrides: Vec<(String, String)>,
) -> PyResult<Bound<'py, PyDict>> {
    let config =
        ssdlab_core::Config::from_toml(toml_text, source_name, &overrides).map_err(config_error)?;
    let json = serde_json::to_value(&config)
        .map_err(|e| value_error(format!("{source_name}: configuration: {e}")))?;
    let out = PyDict::new(py);
    out.set_item("hash", config.hash_hex())?;
    out.set_item("config", value::to_py(py, &json)?)?;
    Ok(out)
}

/// Names of the jobs of a fio job file, in order (each `numjobs` clone on its own).
#[pyfunction]
fn job_names(path: &str) -> PyResult<Vec<String>> {
    let file = read_job_file(Path::new(path)).map_err(workload_error)?;
    Ok(file.jobs.into_iter().map(|j| j.name).collect())
}

/// The run groups of a fio job file: lists of job indices that run side by side, in order.
#[pyfunction]
fn job_groups(path: &str) -> PyResult<Vec<Vec<usize>>> {
    let file = read_job_file(Path::new(path)).map_err(workload_error)?;
    file.groups().map_err(workload_error)
}

/// Each job's report in a fio job file (jobs of one number are reported together, as fio's
/// `group_reporting` does), numbered from 0 in order.
#[pyfunction]
fn job_reports(path: &str) -> PyResult<Vec<usize>> {
    let file = read_job_file(Path::new(path)).map_err(workload_error)?;
    Ok(file.reports())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", ssdlab_core::VERSION)?;
    m.add("SsdlabError", py.get_type::<errors::SsdlabError>())?;
    m.add("ConfigError", py.get_type::<errors::ConfigError>())?;
    m.add("WorkloadError", py.get_type::<errors::WorkloadError>())?;
    m.add("DeviceError", py.get_type::<errors::DeviceError>())?;
    m.add("NandRuleError", py.get_type::<errors::NandRuleError>())?;
    m.add_class::<PyDevice>()?;
    m.add_class::<server::PyServer>()?;
    m.add_class::<CompiledHint>()?;
    m.add_class::<sqlite::IoCounters>()?;
    m.add_class::<sqlite::HintCounters>()?;
    m.add_class::<sqlite::FreelistTracker>()?;
    m.add_class::<sqlite::PageEpochs>()?;
    m.add_class::<sqlite::FileState>()?;
    m.add_class::<sqlite::CompiledFile>()?;
    m.add_class::<sqlite::RealtimePacer>()?;
    m.add_class::<hostftl::PyHostFtl>()?;
    m.add_function(wrap_pyfunction!(compile_hint, m)?)?;
    m.add_class::<native::PyNativeFlash>()?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(cache::cache_run, m)?)?;
    m.add_function(wrap_pyfunction!(preset_toml, m)?)?;
    m.add_function(wrap_pyfunction!(job_names, m)?)?;
    m.add_function(wrap_pyfunction!(job_groups, m)?)?;
    m.add_function(wrap_pyfunction!(job_reports, m)?)?;
    m.add_function(wrap_pyfunction!(check_config, m)?)?;
    m.add_function(wrap_pyfunction!(hint_fields, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_hint, m)?)?;
    m.add_function(wrap_pyfunction!(parse_hint_text, m)?)?;
    m.add_function(wrap_pyfunction!(format_hint, m)?)?;
    m.add_function(wrap_pyfunction!(request_log::summarize_request_log, m)?)?;
    Ok(())
}
