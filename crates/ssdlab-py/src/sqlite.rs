//! The SQLite coupling's hot path, compiled (`ssdlab.sqlite`'s VFS is in Python, on APSW).
//!
//! APSW calls a file's methods by name on whatever object the VFS's `xOpen` returned. For
//! main database and WAL files the VFS returns a [`CompiledFile`]: it serves the common page
//! reads and writes here, without a Python frame, sending them to the device's block interface
//! or to the host FTL over its native flash (`hostftl.rs`), paced to the wall clock by a
//! [`RealtimePacer`] for a realtime host; every other call goes to the Python `DeviceFile` it
//! wraps (the reference implementation, which the tests compare it with one flag apart). The
//! state both sides read lives in Rust objects Python uses too: [`FileState`] (the base class
//! of the store's `StoredFile`), [`IoCounters`], [`HintCounters`], [`FreelistTracker`] and
//! [`PageEpochs`]; the rules themselves are in the `ssdlab-sqlite` crate.

use crate::errors::device_error;
use crate::hostftl::PyHostFtl;
use crate::{CompiledHint, PyDevice};
use pyo3::exceptions::PyAttributeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString, PyTuple};
use ssdlab_core::{Hint, HostRequest, Op};
use ssdlab_sqlite::{freelist, realtime, sea, wal};
use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Counters of plain integer fields, readable and writable from Python, with `add` and
/// `as_dict`; built with keyword arguments.
macro_rules! counters {
    ($(#[$doc:meta])* $rust:ident, $py:literal, [$($field:ident => $name:literal),+],
     |$me:ident, $out:ident| $extra:block) => {
        $(#[$doc])*
        #[pyclass(name = $py, module = "ssdlab._core", eq)]
        #[derive(Clone, Default, PartialEq, Debug)]
        pub struct $rust {
            $(#[pyo3(get, set, name = $name)] pub $field: i64,)+
        }

        #[pymethods]
        impl $rust {
            #[new]
            #[pyo3(signature = (**fields))]
            fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
                let mut out = Self::default();
                for (key, value) in fields.into_iter().flatten() {
                    let key: String = key.extract()?;
                    let value: i64 = value.extract()?;
                    match key.as_str() {
                        $($name => out.$field = value,)+
                        other => {
                            return Err(PyAttributeError::new_err(format!(
                                "{}: no counter {other:?}", $py
                            )))
                        }
                    }
                }
                Ok(out)
            }

            /// Add another's counts to these.
            fn add(&mut self, other: &Self) {
                $(self.$field += other.$field;)+
            }

            /// Every counter by name.
            fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let $out = PyDict::new(py);
                $($out.set_item($name, self.$field)?;)+
                let $me = self;
                #[allow(clippy::unused_unit)]
                $extra;
                Ok($out)
            }

            fn __repr__(&self) -> String {
                let fields: Vec<String> = vec![$(format!("{}={}", $name, self.$field)),+];
                format!("{}({})", $py, fields.join(", "))
            }
        }
    };
}

counters!(
    /// I/O as the VFS saw it: requests by kind, bytes, and the VFS's own wall time.
    /// `vfs_ns` is the wall time spent in the VFS's I/O methods outside the device simulation
    /// (`device_ns`): the coupling's cost per I/O is `vfs_ns / io_calls` (`vfs_ns_per_io`).
    IoCounters,
    "IoCounters",
    [reads => "reads", read_bytes => "read_bytes", writes => "writes",
     write_bytes => "write_bytes", trims => "trims", trim_bytes => "trim_bytes",
     syncs => "syncs", short_reads => "short_reads", read_errors => "read_errors",
     full_errors => "full_errors", io_calls => "io_calls", vfs_ns => "vfs_ns",
     device_ns => "device_ns"],
    |me, out| {
        let per_io = if me.io_calls > 0 { me.vfs_ns as f64 / me.io_calls as f64 } else { 0.0 };
        out.set_item("vfs_ns_per_io", per_io)?;
    }
);

counters!(
    /// SEA-SSD hints sent: write classifications by class, predictions, settings messages.
    HintCounters,
    "HintCounters",
    [dyn_ => "dyn", stat => "stat", predictions => "predictions", settings => "settings"],
    |_me, _out| {}
);

/// The free leaf pages of one main database file (see `ssdlab_sqlite::freelist`).
#[pyclass(name = "FreelistTracker", module = "ssdlab._core")]
#[derive(Default)]
pub struct FreelistTracker(freelist::FreelistTracker<PyBackedBytes>);

#[pymethods]
impl FreelistTracker {
    #[new]
    fn new() -> Self {
        Self::default()
    }
    #[getter]
    fn page_size(&self) -> u32 {
        self.0.page_size
    }
    #[getter]
    fn wal_mode(&self) -> bool {
        self.0.wal_mode
    }
    #[getter]
    fn first_trunk(&self) -> u32 {
        self.0.first_trunk
    }
    #[getter]
    fn free_count(&self) -> u32 {
        self.0.free_count
    }
    /// Leaf pages free at the last walk.
    #[getter]
    fn free_leaves(&self) -> HashSet<u32> {
        self.0.free_leaves().clone()
    }
    /// Page 1 (or at least its first 100 bytes) was written or read.
    fn observe_header(&mut self, data: &[u8]) {
        self.0.observe_header(data);
    }
    /// A whole page was written (or read); pages read are kept only when a walk needs them.
    #[pyo3(signature = (page_number, data, *, written))]
    fn observe_page(&mut self, page_number: u32, data: PyBackedBytes, written: bool) {
        self.0.observe_page(page_number, data, written);
    }
    /// Walk the chain; the leaves newly free since the last walk, sorted.
    fn resolve(&mut self) -> Vec<u32> {
        self.0.resolve()
    }
    /// The file was truncated: pages from `first_page` on no longer exist.
    fn forget_pages_from(&mut self, first_page: u64) {
        self.0
            .forget_pages_from(u32::try_from(first_page).unwrap_or(u32::MAX));
    }
}

/// SEA-SSD's page history of one main database (see `ssdlab_sqlite::sea`).
#[pyclass(name = "PageEpochs", module = "ssdlab._core")]
#[derive(Default)]
pub struct PageEpochs(sea::PageEpochs);

#[pymethods]
impl PageEpochs {
    #[new]
    fn new() -> Self {
        Self::default()
    }
    /// Record a write of `page_number`: True when it is `dyn`, False when `stat`.
    fn write(&mut self, page_number: u32, recent_checkpoints: u64) -> bool {
        self.0.write(page_number, recent_checkpoints)
    }
    /// One checkpoint of the database ended.
    fn checkpoint(&mut self, recent_checkpoints: u64) {
        self.0.checkpoint(recent_checkpoints);
    }
    #[getter]
    fn checkpoints(&self) -> u64 {
        self.0.checkpoints()
    }
}

/// Monotonic wall time in ns since the first call (the pacer's clock).
fn wall_ns() -> u64 {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    ANCHOR.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The last part of a realtime wait is spun, not slept: a sleep overshoots by about 100 us at
/// the median here (longer than a flash read) and by milliseconds at the tail, and the
/// overshoot would count as host time.
const SPIN_NS: u64 = 3_000_000;

/// Ties a device's clock to the wall clock (`cpu="realtime"`; the arithmetic is
/// `ssdlab_sqlite::realtime`): called around every request of a paced host, by the Python
/// store's `_send` and by the compiled handles.
#[pyclass(name = "RealtimePacer", module = "ssdlab._core")]
#[derive(Default)]
pub struct RealtimePacer(realtime::Pacer);

impl RealtimePacer {
    /// Move the device's clock to now (in wall terms) before a request.
    pub(crate) fn issue_on(&mut self, device: &PyDevice) {
        let mut d = device.lock();
        if let Some(target) = self.0.issue(d.now_ns(), wall_ns()) {
            d.advance_to(target);
        }
    }

    /// Wait until the wall clock reaches the device's clock (the request's completion).
    pub(crate) fn complete_on(&mut self, py: Python<'_>, device: &PyDevice) {
        let done = device.lock().now_ns();
        let now = wall_ns();
        let Some(wake) = self.0.complete(done, now) else {
            return;
        };
        if wake - now > SPIN_NS {
            let sleep = Duration::from_nanos(wake - now - SPIN_NS);
            py.allow_threads(|| std::thread::sleep(sleep));
        }
        while wall_ns() < wake {
            std::hint::spin_loop();
        }
    }
}

#[pymethods]
impl RealtimePacer {
    #[new]
    fn new() -> Self {
        Self::default()
    }
    /// Before a request on `device`: its clock moves to the wall time since the origin.
    fn issue(&mut self, device: PyRef<'_, PyDevice>) {
        self.issue_on(&device);
    }
    /// After a request on `device`: returns when the wall clock reaches its completion.
    fn complete(&mut self, py: Python<'_>, device: PyRef<'_, PyDevice>) {
        self.complete_on(py, &device);
    }
    /// Requests paced.
    #[getter]
    fn requests(&self) -> u64 {
        self.0.requests
    }
    /// Wall time spent waiting for completions.
    #[getter]
    fn waited_ns(&self) -> u64 {
        self.0.waited_ns
    }
}

/// What both the Python store and [`CompiledFile`] read of one file: the base class of
/// `ssdlab.sqlite.store.StoredFile` (which adds the rest: locks, crash bookkeeping).
#[pyclass(name = "FileState", module = "ssdlab._core", subclass)]
pub struct FileState {
    #[pyo3(get, set)]
    name: String,
    /// "main", "wal", "journal" or "other".
    #[pyo3(get, set)]
    role: String,
    #[pyo3(get, set)]
    size: u64,
    /// File extent i is device extent `extents[i]` (a list Python grows and shrinks in place).
    #[pyo3(get, set)]
    extents: Py<PyList>,
    /// Main database files: what the freelist is.
    #[pyo3(get, set)]
    freelist: Option<Py<FreelistTracker>>,
    /// WAL files: the page size the WAL header names (0 until seen).
    #[pyo3(get, set)]
    wal_page_size: u32,
    /// Logs: contiguous writes not yet submitted, the first `log_length` bytes of the buffer.
    #[pyo3(get, set)]
    log_buffer: Py<PyByteArray>,
    #[pyo3(get, set)]
    log_length: u64,
    #[pyo3(get, set)]
    log_offset: u64,
    /// WAL bytes written since the connection last checkpointed.
    #[pyo3(get, set)]
    written_since_checkpoint: u64,
}

#[pymethods]
impl FileState {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(
        py: Python<'_>,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> Self {
        FileState {
            name: String::new(),
            role: String::new(),
            size: 0,
            extents: PyList::empty(py).unbind(),
            freelist: None,
            wal_page_size: 0,
            log_buffer: PyByteArray::new(py, &[]).unbind(),
            log_length: 0,
            log_offset: 0,
            written_since_checkpoint: 0,
        }
    }
}

impl FileState {
    /// The device offset of file byte `offset`, when an extent holds it.
    fn device_offset(&self, py: Python<'_>, offset: u64, extent_bytes: u64) -> Option<u64> {
        let extents = self.extents.bind(py);
        let item = extents.get_item((offset / extent_bytes) as usize).ok()?;
        Some(item.extract::<u64>().ok()? * extent_bytes + offset % extent_bytes)
    }

    fn mapped_bytes(&self, py: Python<'_>, extent_bytes: u64) -> u64 {
        self.extents.bind(py).len() as u64 * extent_bytes
    }
}

/// A bytes object of `length` bytes whose content is not yet set (the device writes every
/// byte of a read's buffer: its data, or zeros where nothing was written).
fn uninit_bytes(py: Python<'_>, length: usize) -> PyResult<Bound<'_, PyBytes>> {
    // SAFETY: a null source asks CPython for an uninitialised object of that size.
    unsafe {
        let raw = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), length as isize);
        Bound::from_owned_ptr_or_err(py, raw).map(|any| any.downcast_into_unchecked())
    }
}

/// Where a compiled file's requests go: the device's block interface, or the host FTL over
/// its native flash (NoFTL).
enum Backend {
    Block(Py<PyDevice>),
    Native(Py<PyHostFtl>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Main,
    Wal,
}

/// A main database or WAL file's handle for APSW: page reads and writes served here, every
/// other call (and every case off the common path: a file growing, a log to flush first, a
/// host-time model, a dead handle) passed to the Python `DeviceFile` it wraps.
#[pyclass(name = "CompiledFile", module = "ssdlab._core")]
pub struct CompiledFile {
    /// The Python `DeviceFile`: the reference path and everything else.
    fallback: PyObject,
    store: PyObject,
    state: Py<FileState>,
    backend: Backend,
    hinter: PyObject,
    hint_counters: Py<HintCounters>,
    /// Main files: SEA-SSD's history of the file's pages.
    epochs: Option<Py<PageEpochs>>,
    /// WAL files: the name of their main database (whose pages their frames predict).
    main_name: Option<Py<PyString>>,
    /// `ssdlab.sqlite.store.device_error_as_sqlite`.
    as_sqlite_error: PyObject,
    dyn_hint: Hint,
    stat_hint: Hint,
    recent_checkpoints: u64,
    extent_bytes: u64,
    log_buffer_bytes: u64,
    generation: i64,
    role: Role,
    closed: bool,
}

/// What one host (connection) asks of an I/O: whether it may take the compiled path (no
/// host-time model), and where its counts go.
struct HostView<'py> {
    counters: Bound<'py, IoCounters>,
    /// A realtime host's pacer: every request is paced.
    pacer: Option<Bound<'py, RealtimePacer>>,
    hints: bool,
    predict: bool,
}

impl CompiledFile {
    /// The handle is live (not closed, not from before a simulated crash) and its host has
    /// no host-time model: the compiled path applies. None otherwise.
    fn host<'py>(&self, py: Python<'py>) -> PyResult<Option<HostView<'py>>> {
        if self.closed {
            return Ok(None);
        }
        let store = self.store.bind(py);
        let generation: i64 = store.getattr(intern!(py, "generation"))?.extract()?;
        if generation != self.generation {
            return Ok(None);
        }
        let mut host = store.getattr(intern!(py, "active"))?;
        if host.is_none() {
            host = store.getattr(intern!(py, "idle_host"))?;
        }
        let pacer = host.getattr(intern!(py, "pacer"))?;
        let pacer = if pacer.is_none() {
            None
        } else {
            Some(pacer.downcast_into::<RealtimePacer>()?)
        };
        // The host-time model of cpu="wall" stays in Python; a paced host's time passes on its
        // own (see RealtimePacer).
        if pacer.is_none() && host.getattr(intern!(py, "cpu_wall"))?.is_truthy()? {
            return Ok(None);
        }
        Ok(Some(HostView {
            pacer,
            counters: host
                .getattr(intern!(py, "counters"))?
                .downcast_into::<IoCounters>()?,
            hints: host.getattr(intern!(py, "hints"))?.is_truthy()?,
            predict: host.getattr(intern!(py, "predict"))?.is_truthy()?,
        }))
    }

    /// Queued SEA predictions go to the device before any request, as the store's `_send`.
    fn send_predictions(&self, py: Python<'_>) -> PyResult<()> {
        let hinter = self.hinter.bind(py);
        let pending = hinter.getattr(intern!(py, "pending_predictions"))?;
        if pending.len()? > 0 {
            hinter.call_method0(intern!(py, "send_predictions"))?;
        }
        Ok(())
    }

    /// One request to the device; a refusal becomes SQLite's I/O error naming the file.
    fn submit(
        &self,
        py: Python<'_>,
        host: &HostView<'_>,
        request: HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> PyResult<bool> {
        let Some(pacer) = &host.pacer else {
            return self.submit_now(py, request, data, out);
        };
        let device = match &self.backend {
            Backend::Block(device) => device.clone_ref(py),
            Backend::Native(ftl) => ftl.borrow(py).device().clone_ref(py),
        };
        pacer.borrow_mut().issue_on(&device.borrow(py));
        let result = self.submit_now(py, request, data, out);
        pacer.borrow_mut().complete_on(py, &device.borrow(py));
        result
    }

    fn submit_now(
        &self,
        py: Python<'_>,
        request: HostRequest,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> PyResult<bool> {
        let result = match &self.backend {
            Backend::Block(device) => {
                let device = device.bind(py).borrow();
                device
                    .check_range(request.op, request.offset, request.length)
                    .and_then(|()| {
                        device
                            .submit_locked(&request, data, out)
                            .map(|completion| completion.uncorrectable)
                            .map_err(device_error)
                    })
            }
            Backend::Native(ftl) => ftl
                .bind(py)
                .borrow_mut()
                .submit_io(py, request.op, request.offset, data, out, request.length)
                .map(|()| false),
        };
        result.map_err(|error| self.as_sqlite(py, error))
    }

    fn as_sqlite(&self, py: Python<'_>, error: PyErr) -> PyErr {
        let name = self.state.bind(py).borrow().name.clone();
        let cause = error.value(py).clone();
        match self.as_sqlite_error.call1(py, (cause.clone(), name)) {
            Ok(converted) => {
                let converted = PyErr::from_value(converted.into_bound(py));
                converted.set_cause(py, Some(PyErr::from_value(cause.into_any())));
                converted
            }
            Err(failed) => failed,
        }
    }

    fn read(&self, py: Python<'_>, amount: u64, offset: u64) -> PyResult<Option<PyObject>> {
        let Some(host) = self.host(py)? else {
            return Ok(None);
        };
        let extent = self.extent_bytes;
        let (device_offset, freelist) = {
            let state = self.state.bind(py).borrow();
            let fits = state.log_length == 0
                && amount > 0
                && offset
                    .checked_add(amount)
                    .is_some_and(|end| end <= state.size)
                && offset % extent + amount <= extent;
            if !fits {
                return Ok(None);
            }
            let Some(device_offset) = state.device_offset(py, offset, extent) else {
                return Ok(None);
            };
            (
                device_offset,
                state.freelist.as_ref().map(|f| f.clone_ref(py)),
            )
        };
        let start = Instant::now();
        self.send_predictions(py)?;
        let request = HostRequest::new(Op::Read, device_offset, amount);
        let data = uninit_bytes(py, amount as usize)?;
        // SAFETY: `data` is a new bytes object nobody else has seen yet; filling it in place
        // is how CPython builds bytes (PyBytes_FromStringAndSize(NULL, n) leaves it unset).
        let buffer = unsafe {
            std::slice::from_raw_parts_mut(
                pyo3::ffi::PyBytes_AsString(data.as_ptr()) as *mut u8,
                amount as usize,
            )
        };
        let uncorrectable = self.submit(py, &host, request, None, Some(buffer))?;
        let after = Instant::now();
        {
            let mut counters = host.counters.borrow_mut();
            counters.device_ns += (after - start).as_nanos() as i64;
            counters.reads += 1;
            counters.read_bytes += amount as i64;
        }
        if let Some(freelist) = freelist {
            let mut tracker = freelist.bind(py).borrow_mut();
            let bytes = data.as_bytes();
            if offset == 0 {
                tracker.0.observe_header(bytes);
            }
            let page_size = u64::from(tracker.0.page_size);
            if page_size != 0 && amount == page_size && offset.is_multiple_of(page_size) {
                let page_number = (offset / page_size + 1) as u32;
                if tracker.0.wants(page_number) {
                    tracker
                        .0
                        .observe_page(page_number, PyBackedBytes::from(data.clone()), false);
                }
            }
        }
        {
            let mut counters = host.counters.borrow_mut();
            counters.io_calls += 1;
            counters.vfs_ns += after.elapsed().as_nanos() as i64;
        }
        if uncorrectable {
            let error =
                self.fallback
                    .call_method1(py, intern!(py, "_read_error"), (amount, offset))?;
            return Err(PyErr::from_value(error.into_bound(py)));
        }
        Ok(Some(data.into_any().unbind()))
    }

    /// A WAL write gathered in the log buffer: a frame's page, or a frame header (which names
    /// the database page the next checkpoint will write: a SEA prediction).
    fn write_log(
        &self,
        py: Python<'_>,
        host: &HostView<'_>,
        data: &[u8],
        offset: u64,
    ) -> PyResult<bool> {
        let start = Instant::now();
        let length = data.len() as u64;
        let state = self.state.bind(py);
        let (gathered, page_size) = {
            let s = state.borrow();
            let gathered = s.log_length;
            let buffer_len = s.log_buffer.bind(py).len() as u64;
            let fits = gathered > 0
                && offset == s.log_offset + gathered
                && gathered + length <= self.log_buffer_bytes.min(buffer_len)
                && offset + length <= s.mapped_bytes(py, self.extent_bytes);
            let is_frame_header = length == wal::FRAME_HEADER_BYTES;
            if !fits || (length != u64::from(s.wal_page_size) && !is_frame_header) {
                return Ok(false);
            }
            (gathered, s.wal_page_size)
        };
        if length != u64::from(page_size) {
            self.predict_frame(py, host, data, offset, page_size)?;
        }
        if host.hints {
            self.hint_counters.bind(py).borrow_mut().dyn_ += 1;
        }
        let mut s = state.borrow_mut();
        {
            let buffer = s.log_buffer.bind(py);
            // SAFETY: the GIL is held and nothing else borrows the buffer's bytes during the
            // copy (the store only exports them briefly while flushing, under the GIL too).
            let bytes = unsafe { buffer.as_bytes_mut() };
            bytes[gathered as usize..(gathered + length) as usize].copy_from_slice(data);
        }
        s.log_length = gathered + length;
        s.written_since_checkpoint += length;
        s.size = s.size.max(offset + length);
        let mut counters = host.counters.borrow_mut();
        counters.io_calls += 1;
        counters.vfs_ns += start.elapsed().as_nanos() as i64;
        Ok(true)
    }

    /// A WAL's sync (the store's `sync`): its gathered frames go to the device as one write
    /// per extent they span (`dyn` under hints), then a flush.
    fn sync_log(&self, py: Python<'_>, host: &HostView<'_>) -> PyResult<()> {
        let start = Instant::now();
        let state = self.state.bind(py);
        let extent = self.extent_bytes;
        let hint = if host.hints {
            self.dyn_hint
        } else {
            Hint::default()
        };
        let mut device_ns = 0;
        let mut writes = 0;
        let (length, offset) = {
            let s = state.borrow();
            (s.log_length, s.log_offset)
        };
        if length > 0 {
            state.borrow_mut().log_length = 0;
            let buffer = state.borrow().log_buffer.clone_ref(py);
            let buffer = buffer.bind(py);
            let mut done = 0;
            while done < length {
                let at = offset + done;
                let piece = (extent - at % extent).min(length - done);
                let device_offset = state.borrow().device_offset(py, at, extent);
                let Some(device_offset) = device_offset else {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                        "{}: a gathered log write past the file's extents",
                        state.borrow().name
                    )));
                };
                let before = Instant::now();
                self.send_predictions(py)?;
                let request = HostRequest {
                    hint,
                    ..HostRequest::new(Op::Write, device_offset, piece)
                };
                // SAFETY: the GIL is held; the buffer is not resized while the device copies
                // from it (nothing else runs).
                let bytes = unsafe { buffer.as_bytes() };
                self.submit(
                    py,
                    host,
                    request,
                    Some(&bytes[done as usize..(done + piece) as usize]),
                    None,
                )?;
                device_ns += before.elapsed().as_nanos() as i64;
                writes += 1;
                done += piece;
            }
        }
        let before = Instant::now();
        self.send_predictions(py)?;
        let flush = HostRequest::new(Op::Flush, 0, 0);
        self.submit(py, host, flush, None, None)?;
        device_ns += before.elapsed().as_nanos() as i64;
        let size = state.borrow().size;
        state.setattr(intern!(py, "synced_size"), size)?;
        let mut counters = host.counters.borrow_mut();
        counters.writes += writes;
        counters.write_bytes += length as i64;
        counters.device_ns += device_ns;
        counters.syncs += 1;
        counters.io_calls += 1;
        counters.vfs_ns += start.elapsed().as_nanos() as i64 - device_ns;
        Ok(())
    }

    /// The prediction a frame header makes (the store's `_observe_wal_write`).
    fn predict_frame(
        &self,
        py: Python<'_>,
        host: &HostView<'_>,
        data: &[u8],
        offset: u64,
        page_size: u32,
    ) -> PyResult<()> {
        if !host.predict || page_size == 0 {
            return Ok(());
        }
        // SeaHinter.predict, inline: queue the range when the device takes predictions.
        let hinter = self.hinter.bind(py);
        if !hinter.getattr(intern!(py, "_has_predict"))?.is_truthy()? {
            return Ok(());
        }
        let Some(page_number) = wal::frame_page(data, offset, page_size) else {
            return Ok(());
        };
        let Some(main_name) = &self.main_name else {
            return Ok(());
        };
        let files = self.store.bind(py).getattr(intern!(py, "files"))?;
        let Ok(main) = files.get_item(main_name.bind(py)) else {
            return Ok(());
        };
        let main = main.downcast_into::<FileState>()?;
        let main = main.borrow();
        let file_offset = u64::from(page_number - 1) * u64::from(page_size);
        if file_offset + u64::from(page_size) > main.mapped_bytes(py, self.extent_bytes) {
            return Ok(());
        }
        if let Some(device_offset) = main.device_offset(py, file_offset, self.extent_bytes) {
            hinter
                .getattr(intern!(py, "pending_predictions"))?
                .downcast_into::<PyList>()?
                .append((device_offset, page_size))?;
        }
        Ok(())
    }

    /// A main database write inside the file's extents, classified and submitted at once.
    fn write_main(
        &self,
        py: Python<'_>,
        host: &HostView<'_>,
        data: &Bound<'_, PyBytes>,
        offset: u64,
    ) -> PyResult<bool> {
        let start = Instant::now();
        let bytes = data.as_bytes();
        let length = bytes.len() as u64;
        let extent = self.extent_bytes;
        let (device_offset, freelist) = {
            let s = self.state.bind(py).borrow();
            if length == 0
                || offset + length > s.mapped_bytes(py, extent)
                || offset % extent + length > extent
            {
                return Ok(false);
            }
            let Some(device_offset) = s.device_offset(py, offset, extent) else {
                return Ok(false);
            };
            let Some(freelist) = s.freelist.as_ref().map(|f| f.clone_ref(py)) else {
                return Ok(false);
            };
            (device_offset, freelist)
        };
        // The store's _classify for a main database file.
        let page = {
            let mut tracker = freelist.bind(py).borrow_mut();
            if offset == 0 {
                tracker.0.observe_header(bytes);
            }
            let page_size = u64::from(tracker.0.page_size);
            if page_size != 0 && length == page_size && offset.is_multiple_of(page_size) {
                let page_number = (offset / page_size + 1) as u32;
                tracker
                    .0
                    .observe_page(page_number, PyBackedBytes::from(data.clone()), true);
                Some(page_number)
            } else {
                None
            }
        };
        let hint = if host.hints {
            let dynamic = match (page, &self.epochs) {
                (Some(page), Some(epochs)) => epochs
                    .bind(py)
                    .borrow_mut()
                    .0
                    .write(page, self.recent_checkpoints),
                _ => false,
            };
            let mut counters = self.hint_counters.bind(py).borrow_mut();
            if dynamic {
                counters.dyn_ += 1;
                self.dyn_hint
            } else {
                counters.stat += 1;
                self.stat_hint
            }
        } else {
            Hint::default()
        };
        let before = Instant::now();
        self.send_predictions(py)?;
        let request = HostRequest {
            hint,
            ..HostRequest::new(Op::Write, device_offset, length)
        };
        self.submit(py, host, request, Some(bytes), None)?;
        let after = Instant::now();
        {
            let mut s = self.state.bind(py).borrow_mut();
            s.size = s.size.max(offset + length);
        }
        let mut counters = host.counters.borrow_mut();
        counters.device_ns += (after - before).as_nanos() as i64;
        counters.writes += 1;
        counters.write_bytes += length as i64;
        counters.io_calls += 1;
        counters.vfs_ns += ((before - start) + after.elapsed()).as_nanos() as i64;
        Ok(true)
    }
}

#[pymethods]
impl CompiledFile {
    /// Wrap `fallback` (a `DeviceFile` of `store` for a main database or WAL file) whose
    /// requests go to `device`: a `Device`'s block interface or a `HostFtl`.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        fallback: PyObject,
        store: PyObject,
        device: &Bound<'_, PyAny>,
        dyn_hint: &CompiledHint,
        stat_hint: &CompiledHint,
        as_sqlite_error: PyObject,
        log_buffer_bytes: u64,
    ) -> PyResult<Self> {
        let file = fallback.bind(py);
        let state = file
            .getattr("stored")?
            .downcast_into::<FileState>()?
            .unbind();
        let generation: i64 = file.getattr("generation")?.extract()?;
        let (name, role) = {
            let s = state.bind(py).borrow();
            (s.name.clone(), s.role.clone())
        };
        let role = match role.as_str() {
            "main" => Role::Main,
            "wal" => Role::Wal,
            other => {
                return Err(PyAttributeError::new_err(format!(
                    "CompiledFile: {name} is a {other} file; only main and wal files compile"
                )))
            }
        };
        let backend = match device.downcast::<PyDevice>() {
            Ok(block) => Backend::Block(block.clone().unbind()),
            Err(_) => Backend::Native(device.downcast::<PyHostFtl>()?.clone().unbind()),
        };
        let store_ref = store.bind(py);
        let hinter = store_ref.getattr("hinter")?;
        let epochs = match role {
            Role::Main => Some(
                hinter
                    .call_method1("epochs", (name.as_str(),))?
                    .downcast_into::<PageEpochs>()?
                    .unbind(),
            ),
            Role::Wal => None,
        };
        Ok(CompiledFile {
            hint_counters: hinter
                .getattr("counters")?
                .downcast_into::<HintCounters>()?
                .unbind(),
            recent_checkpoints: hinter.getattr("recent_checkpoints")?.extract()?,
            extent_bytes: store_ref.getattr("extent_bytes")?.extract()?,
            hinter: hinter.unbind(),
            epochs,
            main_name: name
                .strip_suffix("-wal")
                .filter(|_| role == Role::Wal)
                .map(|main| PyString::intern(py, main).unbind()),
            fallback,
            store,
            state,
            backend,
            as_sqlite_error,
            dyn_hint: dyn_hint.0,
            stat_hint: stat_hint.0,
            log_buffer_bytes,
            generation,
            role,
            closed: false,
        })
    }

    /// The Python handle this one wraps.
    #[getter]
    fn fallback(&self, py: Python<'_>) -> PyObject {
        self.fallback.clone_ref(py)
    }

    #[allow(non_snake_case)]
    fn xRead(&self, py: Python<'_>, amount: u64, offset: u64) -> PyResult<PyObject> {
        if let Some(data) = self.read(py, amount, offset)? {
            return Ok(data);
        }
        self.fallback
            .call_method1(py, intern!(py, "xRead"), (amount, offset))
    }

    #[allow(non_snake_case)]
    fn xWrite(&self, py: Python<'_>, data: &Bound<'_, PyBytes>, offset: u64) -> PyResult<()> {
        if let Some(host) = self.host(py)? {
            let done = match self.role {
                Role::Wal => self.write_log(py, &host, data.as_bytes(), offset)?,
                Role::Main => self.write_main(py, &host, data, offset)?,
            };
            if done {
                return Ok(());
            }
        }
        self.fallback
            .call_method1(py, intern!(py, "xWrite"), (data, offset))?;
        Ok(())
    }

    #[allow(non_snake_case)]
    fn xSync(&self, py: Python<'_>, flags: PyObject) -> PyResult<()> {
        if self.role == Role::Wal {
            if let Some(host) = self.host(py)? {
                return self.sync_log(py, &host);
            }
        }
        self.fallback
            .call_method1(py, intern!(py, "xSync"), (flags,))?;
        Ok(())
    }

    /// No file controls are implemented (SQLite asks several per transaction).
    #[allow(non_snake_case)]
    fn xFileControl(&self, _op: PyObject, _ptr: PyObject) -> bool {
        false
    }

    #[allow(non_snake_case)]
    fn xClose(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        self.closed = true;
        self.fallback.call_method0(py, intern!(py, "xClose"))
    }

    /// Every other method (locks, sync, truncate, sizes) is the Python handle's.
    fn __getattr__(&self, py: Python<'_>, name: &str) -> PyResult<PyObject> {
        self.fallback.getattr(py, name)
    }
}
