//! `summarize_request_log`: the summary of a per-request log (`ssdlab stats`) for Python.
//!
//! Glue only: the file is streamed and summarised by `ssdlab_workload::request_log` with the
//! GIL released, and the summary crosses once, as a dict.

use std::path::PathBuf;

use pyo3::prelude::*;
use ssdlab_workload::request_log::{
    summarize_request_log_file, RequestLogOptions, RequestLogSummarizer,
};

use crate::errors::{value_error, workload_error, SsdlabError};

/// The summary of the request-log CSV at `path`. `page_size_bytes` (a positive
/// multiple of 512, `ValueError` otherwise) only serves to count the host's pages written.
/// A file that cannot be read or a row that does not parse raises `WorkloadError` naming the
/// file and line.
#[pyfunction]
#[pyo3(signature = (path, page_size_bytes = 4096))]
pub fn summarize_request_log(
    py: Python<'_>,
    path: PathBuf,
    page_size_bytes: u64,
) -> PyResult<PyObject> {
    let opts = RequestLogOptions { page_size_bytes };
    // The option is the caller's mistake, not the file's: check it before reading.
    RequestLogSummarizer::new(&opts).map_err(value_error)?;
    let summary = py
        .allow_threads(|| summarize_request_log_file(&path, &opts))
        .map_err(workload_error)?;
    let summary =
        serde_json::to_value(&summary).map_err(|e| SsdlabError::new_err(e.to_string()))?;
    crate::value::to_py(py, &summary)
}
