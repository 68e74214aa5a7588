//! `ssdlab._core.NativeFlash`: the native flash interface of a device (NoFTL), glue only. It
//! holds its device and calls the core's `NativeFlash` under the device's lock with the GIL
//! released, one call per operation.

use crate::errors::{device_message, nand_error};
use crate::value;
use crate::PyDevice;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ssdlab_core::native::NandError;
use ssdlab_core::{Device, NativeFlash};

#[pyclass(name = "NativeFlash", module = "ssdlab._core")]
pub(crate) struct PyNativeFlash {
    device: Py<PyDevice>,
}

impl PyNativeFlash {
    pub(crate) fn new(device: Py<PyDevice>) -> Self {
        PyNativeFlash { device }
    }

    /// Run `f` on the device's native flash (claimed when the object was made).
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut NativeFlash<'_>) -> R + Send,
    ) -> PyResult<R> {
        let device = self.device.bind(py).borrow();
        device
            .with(py, |d: &mut Device| {
                d.native().map(|mut flash| f(&mut flash))
            })
            .map_err(crate::errors::device_error)
    }
}

#[pymethods]
impl PyNativeFlash {
    /// The geometry as a dict.
    #[getter]
    fn geometry(&self, py: Python<'_>) -> PyResult<PyObject> {
        let g = self.with(py, |f| f.geometry().clone())?;
        let json = serde_json::json!({
            "channels": g.channels,
            "dies_per_channel": g.dies_per_channel,
            "planes_per_die": g.planes_per_die,
            "blocks_per_plane": g.blocks_per_plane,
            "pages_per_block": g.pages_per_block,
            "page_bytes": g.page_bytes,
            "oob_bytes": g.oob_bytes,
            "endurance": g.endurance,
            "dies": g.dies,
            "total_blocks": g.total_blocks,
            "total_pages": g.total_pages,
        });
        value::to_py(py, &json)
    }

    #[getter]
    fn stores_data(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |f| f.stores_data())
    }

    /// (channel, die within the channel, plane within the die, block within the plane).
    fn locate(&self, py: Python<'_>, block: u32) -> PyResult<(u32, u32, u32, u32)> {
        let l = self.with(py, |f| f.locate(block))?.map_err(nand_error)?;
        Ok((l.channel, l.die, l.plane, l.block_in_plane))
    }

    #[pyo3(signature = (page, data, oob=None, at_ns=None))]
    fn program(
        &self,
        py: Python<'_>,
        page: u64,
        data: &[u8],
        oob: Option<&[u8]>,
        at_ns: Option<u64>,
    ) -> PyResult<u64> {
        let oob = oob.unwrap_or(&[]);
        self.with(py, |f| f.program(page, data, oob, at_ns))?
            .map_err(nand_error)
    }

    #[pyo3(signature = (page, at_ns=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        page: u64,
        at_ns: Option<u64>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, u64)> {
        let result = self.with(py, |f| {
            if !f.stores_data() {
                return Ok(None);
            }
            let g = f.geometry();
            let mut data = vec![0u8; g.page_bytes as usize];
            let mut oob = vec![0u8; g.oob_bytes as usize];
            let done = f.read(page, &mut data, &mut oob, at_ns)?;
            Ok::<_, NandError>(Some((data, oob, done)))
        })?;
        let Some((data, oob, done)) = result.map_err(nand_error)? else {
            return Err(device_message(
                "read: this device keeps no page data (create it with store_data=True, or use \
                 read_oob)"
                    .into(),
            ));
        };
        Ok((PyBytes::new(py, &data), PyBytes::new(py, &oob), done))
    }

    #[pyo3(signature = (page, at_ns=None))]
    fn read_oob<'py>(
        &self,
        py: Python<'py>,
        page: u64,
        at_ns: Option<u64>,
    ) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        let result = self.with(py, |f| {
            let mut oob = vec![0u8; f.geometry().oob_bytes as usize];
            let done = f.read_oob(page, &mut oob, at_ns)?;
            Ok::<_, NandError>((oob, done))
        })?;
        let (oob, done) = result.map_err(nand_error)?;
        Ok((PyBytes::new(py, &oob), done))
    }

    #[pyo3(signature = (block, at_ns=None))]
    fn erase(&self, py: Python<'_>, block: u32, at_ns: Option<u64>) -> PyResult<u64> {
        self.with(py, |f| f.erase(block, at_ns))?
            .map_err(nand_error)
    }

    fn erase_count(&self, py: Python<'_>, block: u32) -> PyResult<u32> {
        self.with(py, |f| f.erase_count(block))?.map_err(nand_error)
    }

    fn erase_counts(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        self.with(py, |f| f.erase_counts().to_vec())
    }

    fn bad_blocks(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        self.with(py, |f| f.bad_blocks())
    }

    fn is_erased(&self, py: Python<'_>, page: u64) -> PyResult<bool> {
        self.with(py, |f| f.is_erased(page))?.map_err(nand_error)
    }

    fn next_page(&self, py: Python<'_>, block: u32) -> PyResult<u32> {
        self.with(py, |f| f.next_page(block))?.map_err(nand_error)
    }

    /// Operation counts, array-busy time per die (device order: channel-major) and the clock.
    fn counters(&self, py: Python<'_>) -> PyResult<PyObject> {
        let json = self.with(py, |f| {
            let c = f.counters();
            serde_json::json!({
                "reads": c.reads,
                "programs": c.programs,
                "erases": c.erases,
                "oob_reads": c.oob_reads,
                "rule_violations": c.rule_violations,
                "worn_out_blocks": c.worn_out_blocks,
                "busy_ns_per_die": f.die_busy_ns(),
                "now_ns": f.now_ns(),
            })
        })?;
        value::to_py(py, &json)
    }
}
