//! How much memory a new device may take: what the kernel says is available, bounded by the
//! process's cgroup limit and its address-space limit (`ulimit -v`) when there are ones. The core does not read files, so the glue
//! measures and passes the figure to `Config::check_memory`.

use crate::errors::config_error;
use pyo3::PyResult;
use ssdlab_core::Config;
use std::fs;

/// Parse and validate a configuration, then check its tables against the machine's memory
/// before anything is allocated: an allocation failure aborts the interpreter, an error here
/// does not. Every device the glue builds (`Device`, `Server`) goes through this.
pub fn checked_config(
    toml_text: &str,
    source_name: &str,
    overrides: &[(String, String)],
) -> PyResult<Config> {
    let config = Config::from_toml(toml_text, source_name, overrides).map_err(config_error)?;
    if let Some(available) = available_bytes() {
        config
            .check_memory(&config.derived(), source_name, available)
            .map_err(config_error)?;
    }
    Ok(config)
}

/// Bytes available to this process now, or `None` when the system does not say (then no check
/// is made: a wrong refusal would be worse than the abort it prevents).
pub fn available_bytes() -> Option<u64> {
    let meminfo = fs::read_to_string("/proc/meminfo").ok();
    let available = meminfo.as_deref().and_then(mem_available);
    [available, cgroup_headroom(), address_space_headroom()]
        .into_iter()
        .flatten()
        .min()
}

/// `MemAvailable` of /proc/meminfo (in kB there), in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    kb_field(meminfo, "MemAvailable:")
}

/// The cgroup v2 limit minus what the group uses, when a limit is set.
fn cgroup_headroom() -> Option<u64> {
    let max = fs::read_to_string("/sys/fs/cgroup/memory.max").ok()?;
    let max: u64 = max.trim().parse().ok()?; // "max" means no limit
    let current: u64 = fs::read_to_string("/sys/fs/cgroup/memory.current")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(max.saturating_sub(current))
}

/// The soft address-space limit minus the address space in use, when a limit is set: an
/// allocation past it fails (and aborts) even with free memory.
fn address_space_headroom() -> Option<u64> {
    let limits = fs::read_to_string("/proc/self/limits").ok()?;
    let limit = soft_address_space_limit(&limits)?;
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let in_use = kb_field(&status, "VmSize:")?;
    Some(limit.saturating_sub(in_use))
}

/// "Max address space  <soft> <hard> bytes" of /proc/self/limits; `None` when unlimited.
fn soft_address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// A "Name:   <n> kB" field of /proc files, in bytes.
fn kb_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       16318480 kB\nMemFree:  1 kB\nMemAvailable:    8000000 kB\n";
        assert_eq!(mem_available(text), Some(8_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn address_space_limit_is_the_soft_one() {
        let limited = "Max cpu time   unlimited unlimited seconds\n\
                       Max address space         4294967296           unlimited            bytes\n";
        assert_eq!(soft_address_space_limit(limited), Some(4_294_967_296));
        let unlimited =
            "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(soft_address_space_limit(unlimited), None);
    }
}
