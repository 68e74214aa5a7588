//! The one error type of the workload crate.
//!
//! Every variant names where the problem is (file and line, or file and option key) and what
//! was expected, so that a user holding a multi-gigabyte trace or a long job file can go
//! straight to the offending line. Errors from a streaming source reach the core boxed as
//! [`ssdlab_core::SourceError`] and keep this text.

use thiserror::Error;

/// Operating errors: bad trace lines, bad job files, unreadable files.
#[derive(Debug, Error)]
pub enum WorkloadError {
    /// A trace or job-file line that does not parse.
    #[error("{path}:{line}: {message}")]
    Parse {
        path: String,
        /// 1-based line number.
        line: usize,
        message: String,
    },
    /// A fio option that is unknown, unsupported or has a value that does not parse.
    #[error("{path}:{line}: option '{key}': {message}")]
    JobOption {
        path: String,
        /// 1-based line where the option was set (0 when it was never set and a default is
        /// at fault, which the message then says).
        line: usize,
        key: String,
        message: String,
    },
    /// A file that cannot be opened or read.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A trace format name that is not one of ours.
    #[error("unknown trace format '{name}' (valid: {valid})")]
    UnknownFormat { name: String, valid: &'static str },
}

impl WorkloadError {
    /// The 1-based line the error points at, when it points at one.
    pub fn line(&self) -> Option<usize> {
        match self {
            WorkloadError::Parse { line, .. } | WorkloadError::JobOption { line, .. } => {
                Some(*line)
            }
            _ => None,
        }
    }
}
