//! `ssdlab._core.HostFtl`: NoFTL's host FTL (`ssdlab_sqlite::hostftl`) over a device's native
//! flash, glue only. Calls keep the GIL and take the device's lock once: a request is a few
//! flash operations of a few microseconds of work, less than releasing the GIL costs.

use crate::errors::{device_error, nand_error, value_error};
use crate::PyDevice;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use ssdlab_core::{Device, NativeFlash, Op};
use ssdlab_sqlite::hostftl::{
    CatalogEntry, Counters, GcPolicy, HostFtl, HostFtlError, Options, Recovery, Stream,
};
use std::collections::HashMap;

fn host_ftl_error(e: HostFtlError) -> PyErr {
    match e {
        HostFtlError::Option(message) => value_error(message),
        e @ HostFtlError::OutOfRange { .. } => value_error(e.to_string()),
        e @ HostFtlError::Full(_) => PyRuntimeError::new_err(e.to_string()),
        HostFtlError::Nand(e) => nand_error(e),
    }
}

fn parse_stream(name: &str) -> PyResult<Stream> {
    Stream::parse(name).ok_or_else(|| {
        value_error(format!(
            "stream: expected one of db, log, temp, gc, got {name:?}"
        ))
    })
}

#[pyclass(name = "HostFtl", module = "ssdlab._core")]
pub(crate) struct PyHostFtl {
    device: Py<PyDevice>,
    ftl: HostFtl,
}

impl PyHostFtl {
    /// The device whose flash this FTL drives (its clock is the requests' clock).
    pub(crate) fn device(&self) -> &Py<PyDevice> {
        &self.device
    }

    /// Run `f` on the host FTL and the device's native flash at the device's clock, under the
    /// device's lock, and move the clock to the time `f` returns with its result (the store's
    /// requests are synchronous), under the same lock.
    fn with_flash_until<R>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut HostFtl, &mut NativeFlash<'_>, u64) -> Result<(R, u64), HostFtlError>,
    ) -> PyResult<R> {
        let device = self.device.bind(py).borrow();
        let mut guard = device.lock();
        let dev: &mut Device = &mut guard;
        let now = dev.now_ns();
        let (result, done) = {
            let mut flash = dev.native().map_err(device_error)?;
            f(&mut self.ftl, &mut flash, now).map_err(host_ftl_error)?
        };
        dev.advance_to(done);
        Ok(result)
    }

    /// Run `f` on the host FTL and the device's native flash at the device's clock, under the
    /// device's lock; the clock moves only as far as the flash calls issued it.
    fn with_flash<R>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut HostFtl, &mut NativeFlash<'_>, u64) -> Result<R, HostFtlError>,
    ) -> PyResult<R> {
        self.with_flash_until(py, |ftl, flash, now| Ok((f(ftl, flash, now)?, now)))
    }

    /// One request of the store at the device's clock, which moves to its completion. `out`
    /// receives a read's data.
    pub(crate) fn submit_io(
        &mut self,
        py: Python<'_>,
        op: Op,
        offset: u64,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
        length: u64,
    ) -> PyResult<()> {
        self.with_flash_until(py, |ftl, flash, now| {
            let done = match op {
                Op::Read => match out {
                    Some(out) => ftl.read(flash, offset, out, now)?,
                    None => now,
                },
                Op::Write => ftl.write(flash, offset, data.unwrap_or_default(), now)?,
                Op::Trim => {
                    ftl.trim(offset, length);
                    now
                }
                Op::Flush => now, // a program is on flash when it returns: nothing is volatile
            };
            Ok(((), done))
        })
    }
}

fn counters_dict<'py>(py: Python<'py>, c: &Counters) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("host_page_writes", c.host_page_writes)?;
    out.set_item("host_page_reads", c.host_page_reads)?;
    out.set_item("unmapped_reads", c.unmapped_reads)?;
    out.set_item("read_modify_writes", c.read_modify_writes)?;
    out.set_item("tail_hits", c.tail_hits)?;
    out.set_item("trimmed_pages", c.trimmed_pages)?;
    out.set_item("gc_runs", c.gc_runs)?;
    out.set_item("gc_page_copies", c.gc_page_copies)?;
    out.set_item("gc_ns", c.gc_ns)?;
    out.set_item("erases", c.erases)?;
    out.set_item("wear_moves", c.wear_moves)?;
    out.set_item("retired_blocks", c.retired_blocks)?;
    let recoveries = PyList::empty(py);
    for r in &c.recoveries {
        recoveries.append(recovery_dict(py, r)?)?;
    }
    out.set_item("recoveries", recoveries)?;
    Ok(out)
}

fn recovery_dict<'py>(py: Python<'py>, r: &Recovery) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("scanned_pages", r.scanned_pages)?;
    out.set_item("live_pages", r.live_pages)?;
    out.set_item("scan_ns", r.scan_ns)?;
    out.set_item("free_blocks", r.free_blocks)?;
    Ok(out)
}

#[pymethods]
impl PyHostFtl {
    /// Take over `device`'s native flash. `block_logical_bytes`: the logical space its block
    /// interface exports (the default spare space matches its over-provisioning).
    #[new]
    #[pyo3(signature = (device, block_logical_bytes, gc_policy, spare_fraction, gc_free_blocks, wear_gap))]
    fn new(
        py: Python<'_>,
        device: Py<PyDevice>,
        block_logical_bytes: u64,
        gc_policy: &str,
        spare_fraction: Option<f64>,
        gc_free_blocks: Option<u64>,
        wear_gap: u32,
    ) -> PyResult<Self> {
        let gc_policy = GcPolicy::parse(gc_policy).ok_or_else(|| {
            value_error(format!(
                "gc_policy: expected one of {}, got {gc_policy:?}",
                GcPolicy::NAMES.join(", ")
            ))
        })?;
        let options = Options {
            gc_policy,
            spare_fraction,
            gc_free_blocks,
            wear_gap,
        };
        let ftl = {
            let dev = device.bind(py).borrow();
            let mut guard = dev.lock();
            let flash = guard.native().map_err(device_error)?;
            HostFtl::new(&flash, block_logical_bytes, options).map_err(host_ftl_error)?
        };
        Ok(PyHostFtl { device, ftl })
    }

    /// A request of the store at logical byte `offset`, as a device's `submit_quick`:
    /// `(data read or None, False)`; the device's clock moves to its completion.
    #[pyo3(signature = (op, offset, length, data=None, hint=None))]
    fn submit<'py>(
        &mut self,
        py: Python<'py>,
        op: &str,
        offset: u64,
        length: u64,
        data: Option<&[u8]>,
        hint: Option<PyObject>,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, bool)> {
        let _ = hint; // the host FTL places by stream, not by hint
        let op = crate::parse_op(op)?;
        if op == Op::Read {
            let mut out = vec![0u8; length as usize];
            self.submit_io(py, op, offset, None, Some(&mut out), length)?;
            return Ok((Some(PyBytes::new(py, &out)), false));
        }
        self.submit_io(py, op, offset, data, None, length)?;
        Ok((None, false))
    }

    /// Read `length` bytes at logical byte `offset` issued at `at_ns`: `(data, done_ns)`.
    fn read<'py>(
        &mut self,
        py: Python<'py>,
        offset: u64,
        length: u64,
        at_ns: u64,
    ) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        let mut out = vec![0u8; length as usize];
        let done = self.with_flash(py, |ftl, flash, _| ftl.read(flash, offset, &mut out, at_ns))?;
        Ok((PyBytes::new(py, &out), done))
    }

    /// Write `data` at logical byte `offset` issued at `at_ns`; returns when it is on flash.
    fn write(&mut self, py: Python<'_>, offset: u64, data: &[u8], at_ns: u64) -> PyResult<u64> {
        self.with_flash(py, |ftl, flash, _| ftl.write(flash, offset, data, at_ns))
    }

    /// Deallocate the whole pages of `length` bytes at logical byte `offset`.
    fn trim(&mut self, offset: u64, length: u64) {
        self.ftl.trim(offset, length);
    }

    /// Logical pages per extent of the store's layout.
    fn set_extent_pages(&mut self, extent_pages: u64) {
        self.ftl.set_extent_pages(extent_pages);
    }

    /// Extent `extent` is the `index`-th extent of file `file_id`, written to `stream`.
    fn set_owner(&mut self, extent: u64, file_id: u32, index: u32, stream: &str) -> PyResult<()> {
        self.ftl
            .set_owner(extent, file_id, index, parse_stream(stream)?);
        Ok(())
    }

    fn clear_owner(&mut self, extent: u64) {
        self.ftl.clear_owner(extent);
    }

    /// Every page outside the store's extents belongs to file `file_id` as its own page
    /// number, written to `stream` (the FTL used bare, without a store).
    fn own_all(&mut self, file_id: u32, stream: &str) -> PyResult<()> {
        self.ftl
            .set_default_owner(Some((file_id, parse_stream(stream)?)));
        Ok(())
    }

    /// (file id, page within the file, stream) of logical page `lpage`.
    fn owner(&self, lpage: u64) -> (u32, u32, &'static str) {
        let o = self.ftl.owner(lpage);
        (o.file_id, o.file_page, o.stream.name())
    }

    /// Drop everything held in host RAM: the page map, valid counts, open blocks, pools.
    fn power_loss(&mut self, py: Python<'_>) -> PyResult<()> {
        self.with_flash(py, |ftl, flash, _| {
            ftl.power_loss(flash);
            Ok(())
        })
    }

    /// Rebuild the page map from OOB with the store's catalog: file id -> (extents, pages per
    /// extent, size in pages). The device's clock moves to the scan's end; returns the report.
    fn recover<'py>(
        &mut self,
        py: Python<'py>,
        catalog: HashMap<u32, (Vec<u64>, u64, u64)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let catalog: HashMap<u32, CatalogEntry> = catalog
            .into_iter()
            .map(|(id, (extents, extent_pages, size_pages))| {
                (
                    id,
                    CatalogEntry {
                        extents,
                        extent_pages: extent_pages.max(1),
                        size_pages,
                    },
                )
            })
            .collect();
        let report =
            self.with_flash_until(py, |ftl, flash, now| ftl.recover(flash, &catalog, now))?;
        recovery_dict(py, &report)
    }

    /// Counters and settings, as the store's statistics report them.
    fn stats<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = counters_dict(py, &self.ftl.counters)?;
        let c = &self.ftl.counters;
        let copies = c.host_page_writes + c.gc_page_copies;
        let waf = if c.host_page_writes > 0 {
            copies as f64 / c.host_page_writes as f64
        } else {
            0.0
        };
        out.set_item("waf", waf)?;
        out.set_item("gc_policy", self.ftl.gc_policy.name())?;
        out.set_item("logical_pages", self.ftl.logical_pages)?;
        out.set_item("spare_blocks", self.ftl.spare_blocks)?;
        out.set_item("mapped_pages", self.ftl.mapped)?;
        out.set_item("free_blocks", self.ftl.free_blocks())?;
        out.set_item("dies", self.ftl.dies)?;
        let counts = self.with_flash(py, |_, flash, _| Ok(flash.erase_counts().to_vec()))?;
        if let Some(&max) = counts.iter().max() {
            let sum: u64 = counts.iter().map(|&c| u64::from(c)).sum();
            out.set_item("erase_count_max", max)?;
            out.set_item("erase_count_mean", sum as f64 / counts.len() as f64)?;
        }
        Ok(out)
    }

    /// The counters as attributes (`ftl.counters.gc_runs`).
    #[getter]
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let fields = counters_dict(py, &self.ftl.counters)?;
        py.import("types")?
            .getattr("SimpleNamespace")?
            .call((), Some(&fields))
    }

    #[getter]
    fn page_bytes(&self) -> u64 {
        self.ftl.page_bytes
    }
    #[getter]
    fn pages_per_block(&self) -> u64 {
        self.ftl.pages_per_block
    }
    #[getter]
    fn total_blocks(&self) -> u64 {
        self.ftl.total_blocks
    }
    #[getter]
    fn logical_pages(&self) -> u64 {
        self.ftl.logical_pages
    }
    #[getter]
    fn spare_blocks(&self) -> u64 {
        self.ftl.spare_blocks
    }
    #[getter]
    fn gc_policy(&self) -> &'static str {
        self.ftl.gc_policy.name()
    }
    #[getter]
    fn mapped(&self) -> u64 {
        self.ftl.mapped
    }
    #[getter]
    fn seq(&self) -> u64 {
        self.ftl.seq
    }
    #[getter]
    fn dies(&self) -> usize {
        self.ftl.dies
    }
    /// The physical page of each logical page (-1: unmapped).
    #[getter]
    fn l2p(&self) -> Vec<i64> {
        self.ftl.l2p().to_vec()
    }
    /// Block -> the stream whose open block it last was.
    #[getter]
    fn block_stream(&self) -> HashMap<u64, &'static str> {
        (0..self.ftl.total_blocks)
            .filter_map(|b| self.ftl.block_stream(b).map(|s| (b, s.name())))
            .collect()
    }
}
