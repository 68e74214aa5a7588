//! SIGUSR1 as a power-loss trigger (`ssdlab serve`): `kill -USR1 PID` cuts the emulated
//! device's power at that instant. The handler only counts the signal (an atomic add is
//! async-signal-safe); each server compares the count with the signals it has acted on before
//! it serves its next request and on every turn of its accept loop (at most 50 ms apart), so no
//! request is served between the signal's delivery (when the kernel next runs one of the
//! process's threads, microseconds to milliseconds after `kill`) and the power loss. The device then drops its volatile
//! state (mapping, cached translation pages, staged units) and recovers from the OOB area; the
//! summary reports each loss and what its recovery cost.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

static RECEIVED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_power_signal(_signal: libc::c_int) {
    RECEIVED.fetch_add(1, Ordering::SeqCst);
}

/// Route SIGUSR1 to the power-loss counter for the rest of the process's life. SA_RESTART
/// keeps the connections' blocking reads and writes going through the signal.
pub fn install() -> io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; the handler only touches an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_power_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Power-loss signals received so far by the process.
pub fn received() -> u64 {
    RECEIVED.load(Ordering::SeqCst)
}
