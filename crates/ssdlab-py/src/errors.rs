//! The one place Rust errors become Python exceptions. The exception classes are declared here
//! and re-exported by `ssdlab.errors`.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::PyErr;
use ssdlab_core::hint::HintError;
use ssdlab_core::native::NandError;
use ssdlab_core::DeviceError as CoreDeviceError;
use ssdlab_workload::WorkloadError as CoreWorkloadError;

create_exception!(
    _core,
    SsdlabError,
    PyException,
    "Base class of every ssdlab error."
);
create_exception!(
    _core,
    ConfigError,
    SsdlabError,
    "A configuration key or value is wrong, or a preset is unknown."
);
create_exception!(
    _core,
    WorkloadError,
    SsdlabError,
    "A job file or trace cannot be used; the message names file and line."
);
create_exception!(
    _core,
    DeviceError,
    SsdlabError,
    "The device refused a request (out of range, device full, ...)."
);

create_exception!(
    _core,
    NandRuleError,
    DeviceError,
    "A native flash call broke a NAND rule (program of a page not erased, out of order, erase \
     past the endurance limit, a bad block); the message names the address and the rule."
);

/// A native flash call refused: a broken NAND rule is a `NandRuleError`, a bad argument (an
/// address out of range, a buffer of the wrong size) a `ValueError` naming the argument.
pub fn nand_error(e: NandError) -> PyErr {
    if e.is_rule() {
        NandRuleError::new_err(e.to_string())
    } else {
        value_error(e.to_string())
    }
}

pub fn config_error(e: ssdlab_core::ConfigError) -> PyErr {
    ConfigError::new_err(e.to_string())
}

pub fn workload_error(e: CoreWorkloadError) -> PyErr {
    WorkloadError::new_err(e.to_string())
}

pub fn device_error(e: CoreDeviceError) -> PyErr {
    let message = e.to_string();
    match e {
        CoreDeviceError::Config(_) => ConfigError::new_err(message),
        CoreDeviceError::Source(ref s) if s.downcast_ref::<CoreWorkloadError>().is_some() => {
            WorkloadError::new_err(message)
        }
        CoreDeviceError::InRun { ref source, .. }
            if matches!(**source, CoreDeviceError::Source(_)) =>
        {
            WorkloadError::new_err(message)
        }
        CoreDeviceError::Nand(e) => nand_error(e),
        _ => DeviceError::new_err(message),
    }
}

/// The SSD cache's errors: its SSD's as the device's, bad settings (a `cache.` key, a workload
/// option such as an unknown personality) as configuration errors.
pub fn cache_error(e: ssdlab_core::cache::CacheError) -> PyErr {
    use ssdlab_core::cache::CacheError;
    match e {
        CacheError::Device(d) => device_error(d),
        CacheError::Config(c) => config_error(c),
        other => ConfigError::new_err(other.to_string()),
    }
}

/// A request the glue refuses before the core sees it, in the core's own terms.
pub fn device_message(message: String) -> PyErr {
    DeviceError::new_err(message)
}

/// Bad arguments from Python that the core never sees (an unknown op name, a bad hint value).
pub fn value_error(message: String) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(message)
}

/// A hint the core's vocabulary refuses: a `ValueError`, like any other bad argument, with the
/// core's message so that Python and the trace parser say the same thing.
pub fn hint_error(e: HintError) -> PyErr {
    value_error(e.to_string())
}
