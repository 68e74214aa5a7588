//! `ssdlab._core.Server`: the NBD emulator. The server runs on a thread of its own; Python
//! starts it, waits for it with signals checked (so Ctrl-C and SIGTERM stop it cleanly) and
//! gets the summary as JSON text when it stops.

use crate::errors::{device_error, value_error, ConfigError, SsdlabError};
use pyo3::prelude::*;
use ssdlab_core::Device;
use ssdlab_nbd::image::ImageError;
use ssdlab_nbd::{
    Endpoint, ServeError, Server, ServerOptions, ShutdownHandle, TlsMode, TlsOptions,
};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

enum State {
    Bound(Box<Server>),
    Running(JoinHandle<Result<serde_json::Value, ServeError>>),
    Stopped(String),
}

#[pyclass(name = "Server", module = "ssdlab._core")]
pub struct PyServer {
    state: Mutex<Option<State>>,
    uri: String,
    stop: ShutdownHandle,
}

fn serve_error(e: ServeError) -> PyErr {
    let message = e.to_string();
    match e {
        // Credentials, a plain export off loopback and an image that does not fit are what the
        // user asked for, like a bad configuration value (`ssdlab serve` exits 2 for them).
        ServeError::Tls(_)
        | ServeError::Insecure(_)
        | ServeError::Image(
            ImageError::SizeMismatch { .. }
            | ImageError::NotAFile { .. }
            | ImageError::MissingReadOnly { .. },
        ) => ConfigError::new_err(message),
        _ => SsdlabError::new_err(message),
    }
}

#[pymethods]
impl PyServer {
    #[new]
    #[pyo3(signature = (toml_text, source_name, overrides, seed, *, socket=None, port=None,
                        host="127.0.0.1", clock="realtime", stats_log=None, read_only=false,
                        export_name="ssdlab", miss_threshold_ns=10_000,
                        compensation_ns=None, tls=None, tls_cert=None, tls_key=None,
                        tls_psk=None, insecure=false, image=None))]
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
        tls: Option<&str>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        tls_psk: Option<PathBuf>,
        insecure: bool,
        image: Option<PathBuf>,
    ) -> PyResult<Self> {
        let tls_mode = match tls {
            None => None,
            Some(name) => Some(TlsMode::parse(name).ok_or_else(|| {
                value_error(format!("tls: expected off, on or require, got {name:?}"))
            })?),
        };
        let endpoint = match (socket, port) {
            (Some(path), None) => Endpoint::Unix(path),
            (None, Some(port)) => {
                let ip: IpAddr = host.parse().map_err(|_| {
                    value_error(format!("host: expected an IP address, got {host:?}"))
                })?;
                Endpoint::Tcp(SocketAddr::new(ip, port))
            }
            _ => return Err(value_error("give exactly one of socket and port".into())),
        };
        let device = Device::from_toml(toml_text, source_name, &overrides, seed, true)
            .map_err(device_error)?;
        let mut options = ServerOptions::new(endpoint);
        options.clock = clock.to_string();
        options.read_only = read_only;
        options.export_name = export_name.to_string();
        options.stats_log = stats_log;
        options.miss_threshold_ns = miss_threshold_ns;
        options.compensation_ns = compensation_ns;
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
            state: Mutex::new(Some(State::Bound(Box::new(server)))),
        })
    }

    /// The export's NBD URI.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// Start serving on a background thread (no-op when already started).
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
            running_or_stopped => {
                *state = running_or_stopped;
                Ok(())
            }
        }
    }

    /// Stop serving (held replies are delivered first) and return the summary as JSON text.
    fn stop(&self, py: Python<'_>) -> PyResult<String> {
        self.start()?;
        self.stop.shutdown();
        let mut state = self
            .state
            .lock()
            .map_err(|_| value_error("server state poisoned".into()))?;
        match state.take() {
            Some(State::Running(handle)) => {
                let result = py.allow_threads(|| handle.join());
                let summary = match result {
                    Ok(Ok(value)) => value.to_string(),
                    Ok(Err(e)) => {
                        *state = Some(State::Stopped(String::new()));
                        return Err(serve_error(e));
                    }
                    Err(_) => {
                        *state = Some(State::Stopped(String::new()));
                        return Err(SsdlabError::new_err("the server thread panicked"));
                    }
                };
                *state = Some(State::Stopped(summary.clone()));
                Ok(summary)
            }
            Some(State::Stopped(summary)) => {
                *state = Some(State::Stopped(summary.clone()));
                Ok(summary)
            }
            _ => Err(SsdlabError::new_err("server state lost")),
        }
    }

    /// Serve until a signal handler raises (Ctrl-C, or SIGTERM mapped to an exception by the
    /// caller) or `stop()` is called from another thread. On a signal the server is stopped
    /// cleanly before the exception propagates; `stop()` then returns the summary.
    fn serve_forever(&self, py: Python<'_>) -> PyResult<()> {
        self.start()?;
        loop {
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
                return Ok(());
            }
            py.allow_threads(|| std::thread::sleep(Duration::from_millis(50)));
            if let Err(signal) = py.check_signals() {
                self.stop(py)?;
                return Err(signal);
            }
        }
    }
}
