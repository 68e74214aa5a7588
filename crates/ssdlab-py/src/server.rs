//! `ssdlab._core.Server`: the NBD emulator. The server runs on a thread of its own; Python
//! starts it, waits for it with signals checked (so Ctrl-C and SIGTERM stop it cleanly),
//! passes on its warnings as they happen and gets the summary as JSON text when it stops. A
//! server serves once: its listener is consumed by the run, so `start()` after `stop()` is an
//! error rather than a silent no-op.

use crate::errors::{value_error, ConfigError, SsdlabError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ssdlab_core::Device;
use ssdlab_nbd::connection::ConnectionLimits;
use ssdlab_nbd::image::ImageError;
use ssdlab_nbd::server::{Limits, Warnings};
use ssdlab_nbd::{
    Endpoint, ServeError, Server, ServerOptions, ShutdownHandle, TlsMode, TlsOptions,
};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

enum State {
    Bound(Box<Server>),
    Running(JoinHandle<Result<serde_json::Value, ServeError>>),
    Stopped(serde_json::Value),
}

/// Once stopped, a server cannot serve again: its listening socket is closed.
const STOPPED: &str =
    "this server was stopped and its socket closed; create a new Server to serve again";

#[pyclass(name = "Server", module = "ssdlab._core")]
pub struct PyServer {
    state: Mutex<Option<State>>,
    uri: String,
    stop: ShutdownHandle,
    warnings: Warnings,
}

fn serve_error(e: ServeError) -> PyErr {
    let message = e.to_string();
    match e {
        // A limit out of range, credentials, a plain export off loopback and an image that
        // does not fit are what the user asked for, like a bad configuration value
        // (`ssdlab serve` exits 2 for them).
        ServeError::Limit(_)
        | ServeError::UnknownClock(_)
        | ServeError::ExportName(_)
        | ServeError::Tls(_)
        | ServeError::Insecure(_)
        | ServeError::Image(
            ImageError::SizeMismatch { .. }
            | ImageError::NotAFile { .. }
            | ImageError::MissingReadOnly { .. },
        ) => ConfigError::new_err(message),
        _ => SsdlabError::new_err(message),
    }
}

/// The TCP address of `host` (an IP address or a name that resolves): IPv4 first, since
/// `localhost` often resolves to `::1` too and IPv6 may be off.
fn resolve(host: &str, port: u16) -> PyResult<SocketAddr> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| ConfigError::new_err(format!("host {host:?} does not resolve: {e}")))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| ConfigError::new_err(format!("host {host:?} resolves to no address")))
}

/// A duration in seconds from Python: finite and positive.
fn seconds(what: &str, value: f64) -> PyResult<std::time::Duration> {
    if !(value.is_finite() && value > 0.0) {
        return Err(ConfigError::new_err(format!(
            "{what}: expected a positive number of seconds, got {value}"
        )));
    }
    std::time::Duration::try_from_secs_f64(value)
        .map_err(|e| ConfigError::new_err(format!("{what}: {e}")))
}

/// The server's limits from the keyword arguments; `None` keeps a default.
struct LimitArgs {
    max_connections: Option<usize>,
    max_handshakes: Option<usize>,
    handshake_timeout_s: Option<f64>,
    idle_timeout_s: Option<f64>,
    stall_timeout_s: Option<f64>,
    max_requests_in_flight: Option<usize>,
    max_buffered_bytes: Option<usize>,
}

impl LimitArgs {
    fn limits(&self) -> PyResult<Limits> {
        let d = Limits::default();
        Ok(Limits {
            connection: ConnectionLimits {
                max_requests_in_flight: self
                    .max_requests_in_flight
                    .unwrap_or(d.connection.max_requests_in_flight),
                max_buffered_bytes: self
                    .max_buffered_bytes
                    .unwrap_or(d.connection.max_buffered_bytes),
            },
            max_connections: self.max_connections.unwrap_or(d.max_connections),
            max_handshakes: self.max_handshakes.unwrap_or(d.max_handshakes),
            handshake_timeout: match self.handshake_timeout_s {
                Some(s) => seconds("handshake_timeout_s", s)?,
                None => d.handshake_timeout,
            },
            // 0 (or None) means no idle timeout.
            idle_timeout: match self.idle_timeout_s {
                Some(0.0) => None,
                Some(s) => Some(seconds("idle_timeout_s", s)?),
                None => d.idle_timeout,
            },
            stall_timeout: match self.stall_timeout_s {
                Some(s) => seconds("stall_timeout_s", s)?,
                None => d.stall_timeout,
            },
        })
    }
}

#[pymethods]
impl PyServer {
    #[new]
    #[pyo3(signature = (toml_text, source_name, overrides, seed, *, socket=None, port=None,
                        host="127.0.0.1", clock="realtime", stats_log=None, read_only=false,
                        export_name="ssdlab", miss_threshold_ns=10_000,
                        compensation_ns=None, max_connections=None, max_handshakes=None,
                        handshake_timeout_s=None, idle_timeout_s=None, stall_timeout_s=None,
                        max_requests_in_flight=None, max_buffered_bytes=None, tls=None,
                        tls_cert=None, tls_key=None, tls_psk=None, insecure=false,
                        image=None, power_loss_at_ns=None,
                        power_loss_on_signal=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        toml_text: &str,
        source_name: &str,
        overrides: Vec<(String, String)>,
        seed: u64,
        socket: Option<PathBuf>,
        port: Option<u16>,
        host: &str,
        clock: &str,
        stats_log: Option<PathBuf>,
        read_only: bool,
        export_name: &str,
        miss_threshold_ns: u64,
        compensation_ns: Option<u64>,
        max_connections: Option<usize>,
        max_handshakes: Option<usize>,
        handshake_timeout_s: Option<f64>,
        idle_timeout_s: Option<f64>,
        stall_timeout_s: Option<f64>,
        max_requests_in_flight: Option<usize>,
        max_buffered_bytes: Option<usize>,
        tls: Option<&str>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        tls_psk: Option<PathBuf>,
        insecure: bool,
        image: Option<PathBuf>,
        power_loss_at_ns: Option<u64>,
        power_loss_on_signal: bool,
    ) -> PyResult<Self> {
        let limits = LimitArgs {
            max_connections,
            max_handshakes,
            handshake_timeout_s,
            idle_timeout_s,
            stall_timeout_s,
            max_requests_in_flight,
            max_buffered_bytes,
        }
        .limits()?;
        let tls_mode = match tls {
            None => None,
            Some(name) => Some(TlsMode::parse(name).ok_or_else(|| {
                value_error(format!("tls: expected off, on or require, got {name:?}"))
            })?),
        };
        let endpoint = match (socket, port) {
            (Some(path), None) => Endpoint::Unix(path),
            (None, Some(port)) => Endpoint::Tcp(py.allow_threads(|| resolve(host, port))?),
            _ => return Err(value_error("give exactly one of socket and port".into())),
        };
        let config = crate::memory::checked_config(toml_text, source_name, &overrides)?;
        let device = py.allow_threads(|| Device::new(config, seed, true));
        let mut options = ServerOptions::new(endpoint);
        options.clock = clock.to_string();
        options.read_only = read_only;
        options.export_name = export_name.to_string();
        options.stats_log = stats_log;
        options.miss_threshold_ns = miss_threshold_ns;
        options.compensation_ns = compensation_ns;
        options.power_loss_at_ns = power_loss_at_ns;
        options.power_loss_on_signal = power_loss_on_signal;
        options.limits = limits;
        options.tls = TlsOptions {
            mode: tls_mode,
            cert: tls_cert,
            key: tls_key,
            psk: tls_psk,
        };
        options.insecure = insecure;
        options.image = image;
        let server = py
            .allow_threads(|| Server::bind(device, &options))
            .map_err(serve_error)?;
        Ok(PyServer {
            uri: server.uri().to_string(),
            stop: server.shutdown_handle(),
            warnings: server.warnings(),
            state: Mutex::new(Some(State::Bound(Box::new(server)))),
        })
    }

    /// The export's NBD URI.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The default limits, as keyword arguments of the constructor (`idle_timeout_s` 0: none).
    #[staticmethod]
    fn default_limits(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = Limits::default();
        let dict = PyDict::new(py);
        dict.set_item("max_connections", d.max_connections)?;
        dict.set_item("max_handshakes", d.max_handshakes)?;
        dict.set_item("handshake_timeout_s", d.handshake_timeout.as_secs_f64())?;
        dict.set_item(
            "idle_timeout_s",
            d.idle_timeout.map_or(0.0, |t| t.as_secs_f64()),
        )?;
        dict.set_item("stall_timeout_s", d.stall_timeout.as_secs_f64())?;
        dict.set_item(
            "max_requests_in_flight",
            d.connection.max_requests_in_flight,
        )?;
        dict.set_item("max_buffered_bytes", d.connection.max_buffered_bytes)?;
        Ok(dict)
    }

    /// Warnings raised while serving since the last call (a request log that cannot be
    /// written, ...).
    fn take_warnings(&self) -> Vec<String> {
        self.warnings.take()
    }

    /// Start serving on a background thread (no-op when already running; an error once
    /// stopped).
    fn start(&self) -> PyResult<()> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| value_error("server state poisoned".into()))?;
        match state.take() {
            Some(State::Bound(server)) => {
                let handle = std::thread::Builder::new()
                    .name("nbd-listener".into())
                    .spawn(move || server.run())
                    .map_err(|e| {
                        SsdlabError::new_err(format!("starting the server thread: {e}"))
                    })?;
                *state = Some(State::Running(handle));
                Ok(())
            }
            None => Err(SsdlabError::new_err("server state lost")),
            Some(State::Stopped(summary)) => {
                *state = Some(State::Stopped(summary));
                Err(SsdlabError::new_err(STOPPED))
            }
            running => {
                *state = running;
                Ok(())
            }
        }
    }

    /// Stop serving (held replies are delivered first) and return the summary as a dict.
    fn stop(&self, py: Python<'_>) -> PyResult<PyObject> {
        let never_started = matches!(
            &*self
                .state
                .lock()
                .map_err(|_| value_error("server state poisoned".into()))?,
            Some(State::Bound(_))
        );
        if never_started {
            // Run it so that it cleans up (socket file) and reports an empty summary.
            self.start()?;
        }
        self.stop.shutdown();
        let mut state = self
            .state
            .lock()
            .map_err(|_| value_error("server state poisoned".into()))?;
        match state.take() {
            Some(State::Running(handle)) => {
                let result = py.allow_threads(|| handle.join());
                let summary = match result {
                    Ok(Ok(value)) => value,
                    Ok(Err(e)) => {
                        *state = Some(State::Stopped(serde_json::Value::Null));
                        return Err(serve_error(e));
                    }
                    Err(_) => {
                        *state = Some(State::Stopped(serde_json::Value::Null));
                        return Err(SsdlabError::new_err("the server thread panicked"));
                    }
                };
                let out = crate::value::to_py(py, &summary);
                *state = Some(State::Stopped(summary));
                out
            }
            Some(State::Stopped(summary)) => {
                let out = crate::value::to_py(py, &summary);
                *state = Some(State::Stopped(summary));
                out
            }
            _ => Err(SsdlabError::new_err("server state lost")),
        }
    }

    /// Serve until a signal handler raises (Ctrl-C, or SIGTERM mapped to an exception by the
    /// caller) or `stop()` is called from another thread. On a signal the server is stopped
    /// cleanly before the exception propagates; `stop()` then returns the summary. Warnings
    /// are passed to `on_warning` as they happen.
    #[pyo3(signature = (on_warning=None))]
    fn serve_forever(&self, py: Python<'_>, on_warning: Option<PyObject>) -> PyResult<()> {
        self.start()?;
        let pass_on = |py: Python<'_>| -> PyResult<()> {
            if let Some(callback) = &on_warning {
                for message in self.warnings.take() {
                    callback.call1(py, (message,))?;
                }
            }
            Ok(())
        };
        loop {
            pass_on(py)?;
            let finished = {
                let state = self
                    .state
                    .lock()
                    .map_err(|_| value_error("server state poisoned".into()))?;
                match &*state {
                    Some(State::Running(h)) => h.is_finished(),
                    _ => true,
                }
            };
            if finished {
                return pass_on(py);
            }
            py.allow_threads(|| std::thread::sleep(Duration::from_millis(50)));
            if let Err(signal) = py.check_signals() {
                self.stop(py)?;
                return Err(signal);
            }
        }
    }
}
