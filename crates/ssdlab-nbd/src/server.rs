//! The listener: accepts connections on a Unix socket or TCP, runs each on its own thread,
//! and on shutdown stops accepting, lets every connection deliver its held replies, flushes
//! the request log and returns the summary.
//!
//! TLS (`tls`) is offered to every connection when configured; a TCP address off the loopback
//! interface is refused unless TLS is required or `insecure` is set, because anyone who reaches
//! a plain export can read and overwrite it. With an image (`image`) the device is rebuilt from
//! it at bind time and the image is synced at shutdown.

use crate::clock::{self, Clock};
use crate::connection::Session;
use crate::emulator::{Emulator, EmulatorCounters};
use crate::handshake::{negotiate_tls, ExportInfo, Negotiated};
use crate::image::{Image, ImageError};
use crate::protocol::MAX_PAYLOAD;
use crate::tls::{Stream, TlsConfig, TlsError, TlsMode, TlsOptions};
use crate::transport::Transport;
use serde_json::{json, Value};
use ssdlab_core::stats::{job_json, RequestLogRow};
use ssdlab_core::Device;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub endpoint: Endpoint,
    /// `realtime` or `virtual`.
    pub clock: String,
    pub read_only: bool,
    pub export_name: String,
    /// Per-request statistics log (CSV).
    pub stats_log: Option<PathBuf>,
    /// A reply later than its deadline by more than this is a deadline miss.
    pub miss_threshold_ns: u64,
    /// Real-time clock: send replies this much before their modelled completion to make up
    /// for the time they take to reach the client; `None` measures it at start.
    pub compensation_ns: Option<u64>,
    /// TLS credentials and policy (`--tls`, `--tls-cert`, `--tls-key`, `--tls-psk`).
    pub tls: TlsOptions,
    /// Allow plain text (or optional TLS) on a TCP address other than loopback.
    pub insecure: bool,
    /// Persistent image of the export's contents (`--image`).
    pub image: Option<PathBuf>,
}

impl ServerOptions {
    pub fn new(endpoint: Endpoint) -> Self {
        ServerOptions {
            endpoint,
            clock: "realtime".into(),
            read_only: false,
            export_name: "ssdlab".into(),
            stats_log: None,
            miss_threshold_ns: 10_000,
            compensation_ns: None,
            tls: TlsOptions::default(),
            insecure: false,
            image: None,
        }
    }
}

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("unknown clock {0:?} (expected realtime or virtual)")]
    UnknownClock(String),
    #[error("export name {0:?} is longer than 4096 bytes")]
    ExportName(String),
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{0} is in use by a running server")]
    SocketInUse(String),
    #[error("{0} exists and is not a socket")]
    NotASocket(String),
    #[error("the device must store data to be exported (data-driven mode)")]
    NoDataStore,
    #[error("writing the request log: {0}")]
    Log(io::Error),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("refusing to serve {0} without TLS: it is not a loopback address, so anyone who can reach it could read and overwrite the export; give --tls-cert/--tls-key or --tls-psk (with --tls=require), or --insecure to serve it anyway")]
    Insecure(SocketAddr),
    #[error(transparent)]
    Image(#[from] ImageError),
}

enum Listener {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

/// A connection's socket, kept so that shutdown can end its blocking reads.
enum Peer {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Peer {
    fn shutdown(&self, how: Shutdown) {
        // Errors mean the peer is gone already.
        let _ = match self {
            Peer::Unix(s) => s.shutdown(how),
            Peer::Tcp(s) => s.shutdown(how),
        };
    }
}

/// Stops a running server from another thread (or a signal handler's thread).
#[derive(Clone)]
pub struct ShutdownHandle(Arc<AtomicBool>);

impl ShutdownHandle {
    pub fn shutdown(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

pub struct Server {
    listener: Listener,
    emulator: Arc<Emulator>,
    export: Arc<ExportInfo>,
    stop: Arc<AtomicBool>,
    uri: String,
    tls: Option<Arc<TlsConfig>>,
}

/// How long shutdown waits for clients that neither disconnect nor read their replies.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Connections served at once; more are closed as they arrive.
pub const MAX_CONNECTIONS: usize = 256;
/// The handshake must finish within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

impl Server {
    /// Bind the endpoint and prepare the export of `device` (which must store data).
    pub fn bind(mut device: Device, options: &ServerOptions) -> Result<Server, ServeError> {
        let clock: Box<dyn Clock> = clock::by_name(&options.clock, options.compensation_ns)
            .ok_or_else(|| ServeError::UnknownClock(options.clock.clone()))?;
        if !device.stores_data() {
            return Err(ServeError::NoDataStore);
        }
        if options.export_name.len() > 4096 {
            return Err(ServeError::ExportName(options.export_name.clone()));
        }
        let tls = TlsConfig::load(&options.tls)?;
        if let Endpoint::Tcp(addr) = &options.endpoint {
            let tls_required = tls.as_ref().is_some_and(|t| t.mode == TlsMode::Require);
            if !addr.ip().is_loopback() && !tls_required && !options.insecure {
                return Err(ServeError::Insecure(*addr));
            }
        }
        let page = device.page_size();
        let export = ExportInfo {
            name: options.export_name.clone(),
            description: format!(
                "ssdlab emulated SSD (config {}, {} clock)",
                &device.config_hash()[..12.min(device.config_hash().len())],
                clock.name()
            ),
            size: device.logical_bytes(),
            read_only: options.read_only,
            block_sizes: (512, page, MAX_PAYLOAD),
        };
        let log = match &options.stats_log {
            None => None,
            Some(path) => {
                let mut file = File::create(path).map_err(|source| ServeError::Io {
                    path: path.display().to_string(),
                    source,
                })?;
                writeln!(file, "{}", RequestLogRow::CSV_HEADER).map_err(ServeError::Log)?;
                Some(file)
            }
        };
        // Last of the checks, as it may take a while: rebuild the device from the image.
        let image = match &options.image {
            Some(path) => Some(Image::open(path, &mut device, options.read_only)?),
            None => None,
        };
        let scheme = if tls.is_some() { "nbds" } else { "nbd" };
        let (listener, uri) = match &options.endpoint {
            Endpoint::Unix(path) => {
                remove_stale_socket(path)?;
                let l = UnixListener::bind(path).map_err(|source| ServeError::Io {
                    path: path.display().to_string(),
                    source,
                })?;
                let uri = format!("{scheme}+unix:///{}?socket={}", export.name, path.display());
                (Listener::Unix(l, path.clone()), uri)
            }
            Endpoint::Tcp(addr) => {
                let l = TcpListener::bind(addr).map_err(|source| ServeError::Io {
                    path: addr.to_string(),
                    source,
                })?;
                let local = l.local_addr().map_err(|source| ServeError::Io {
                    path: addr.to_string(),
                    source,
                })?;
                (
                    Listener::Tcp(l),
                    format!("{scheme}://{local}/{}", export.name),
                )
            }
        };
        let mut emulator = Emulator::new(device, clock, log, options.miss_threshold_ns);
        if let Some(image) = image {
            emulator = emulator.with_image(image);
        }
        Ok(Server {
            listener,
            emulator: Arc::new(emulator),
            export: Arc::new(export),
            stop: Arc::new(AtomicBool::new(false)),
            uri,
            tls: tls.map(Arc::new),
        })
    }

    /// The export's NBD URI (`nbd+unix:///NAME?socket=PATH` or `nbd://HOST:PORT/NAME`;
    /// `nbds` instead of `nbd` with TLS).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.stop.clone())
    }

    /// Serve until [`ShutdownHandle::shutdown`]; returns the summary of everything served.
    pub fn run(self) -> Result<Value, ServeError> {
        let peers: Arc<Mutex<HashMap<u64, Peer>>> = Arc::default();
        let next_id = AtomicU64::new(0);
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let listen_fd = match &self.listener {
            Listener::Unix(l, _) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        };
        while !self.stop.load(Ordering::SeqCst) {
            // Poll with a timeout so that a shutdown request is noticed promptly.
            if !poll_fd(listen_fd, Duration::from_millis(50)) {
                threads.retain(|t| !t.is_finished());
                continue;
            }
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            let accepted = match &self.listener {
                Listener::Unix(l, _) => l.accept().map(|(s, _)| {
                    let peer = s.try_clone().map(Peer::Unix);
                    (Connection::Unix(s), peer)
                }),
                Listener::Tcp(l) => l.accept().map(|(s, _)| {
                    let _ = s.set_nodelay(true);
                    let peer = s.try_clone().map(Peer::Tcp);
                    (Connection::Tcp(s), peer)
                }),
            };
            let Ok((conn, Ok(peer))) = accepted else {
                // A client that vanished between poll and accept, or no descriptors left:
                // keep serving the others.
                continue;
            };
            {
                let mut live = peers.lock().unwrap_or_else(|e| e.into_inner());
                if live.len() >= MAX_CONNECTIONS {
                    // One thread per connection: refuse rather than exhaust the machine.
                    peer.shutdown(Shutdown::Both);
                    continue;
                }
                live.insert(id, peer);
            }
            let emu = self.emulator.clone();
            let export = self.export.clone();
            let tls = self.tls.clone();
            let peers_for_thread = peers.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("nbd-conn-{id}"))
                .spawn(move || {
                    let counters = conn.serve(&emu, &export, tls.as_deref());
                    emu.counters
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .merge(&counters);
                    peers_for_thread
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id);
                });
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(_) => {
                    if let Some(p) = peers.lock().unwrap_or_else(|e| e.into_inner()).remove(&id) {
                        p.shutdown(Shutdown::Both);
                    }
                }
            }
        }
        // Stop reading from every client: each connection delivers its held replies and ends.
        for peer in peers.lock().unwrap_or_else(|e| e.into_inner()).values() {
            peer.shutdown(Shutdown::Read);
        }
        let grace_ends = Instant::now() + SHUTDOWN_GRACE;
        while threads.iter().any(|t| !t.is_finished()) && Instant::now() < grace_ends {
            std::thread::sleep(Duration::from_millis(5));
        }
        for peer in peers.lock().unwrap_or_else(|e| e.into_inner()).values() {
            peer.shutdown(Shutdown::Both);
        }
        for t in threads {
            let _ = t.join();
        }
        if let Listener::Unix(_, path) = &self.listener {
            let _ = std::fs::remove_file(path);
        }
        if let Some(image) = &self.emulator.image {
            // A clean shutdown leaves the image durable, whether or not clients flushed.
            image.sync().map_err(|source| ServeError::Io {
                path: image.path().display().to_string(),
                source,
            })?;
        }
        self.summary()
    }

    fn summary(&self) -> Result<Value, ServeError> {
        let emu = &self.emulator;
        let mut state = emu.lock();
        if let Some(log) = &mut state.log {
            log.flush().map_err(ServeError::Log)?;
        }
        if let Some(err) = state.log_error.take() {
            return Err(ServeError::Log(err));
        }
        let counters = emu
            .counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let sim_ns = state.device.now_ns();
        let job = job_json(&state.job, json!({ "sim_time_ns": sim_ns }));
        Ok(json!({
            "ssdlab_version": env!("CARGO_PKG_VERSION"),
            "config_hash": state.device.config_hash(),
            "seed": state.device.seed(),
            "jobs": [job],
            "ssd": state.device.ssd_json(),
            "emulator": emulator_json(emu, &counters, sim_ns, state.job.flushes, &self.export, self.tls.as_deref()),
        }))
    }
}

fn emulator_json(
    emu: &Emulator,
    c: &EmulatorCounters,
    sim_ns: u64,
    flushes: u64,
    export: &ExportInfo,
    tls: Option<&TlsConfig>,
) -> Value {
    let timing = |s: &ssdlab_core::stats::LatencyStats| {
        json!({
            "N": s.n,
            "mean": s.mean(),
            "max": s.max,
            "p50": s.percentile(50.0),
            "p99": s.percentile(99.0),
            "p99.9": s.percentile(99.9),
        })
    };
    json!({
        "clock": emu.clock.name(),
        "compensation": {
            "mode": if emu.clock.fixed_compensation_ns().is_some() { "fixed" } else { "auto" },
            "mean_ns": if c.compensated_replies == 0 { 0.0 } else {
                c.compensation_sum_ns as f64 / c.compensated_replies as f64
            },
        },
        "export": { "name": export.name, "size": export.size, "read_only": export.read_only,
                    "block_sizes": [export.block_sizes.0, export.block_sizes.1, export.block_sizes.2] },
        "connections": c.connections,
        "requests": c.requests,
        "flushes": flushes,
        "error_replies": c.error_replies,
        "protocol_errors": c.protocol_errors,
        "wall_time_ns": emu.started.elapsed().as_nanos() as u64,
        "sim_time_ns": sim_ns,
        "deadline_misses": {
            "count": c.deadline_misses,
            "threshold_ns": emu.miss_threshold_ns,
            "lateness_ns": timing(&c.lateness),
        },
        "served_latency_ns": timing(&c.served),
        "tls": {
            "mode": tls.map_or("off", |t| t.mode.name()),
            "credentials": tls.map(|t| t.credentials),
        },
        "image": emu.image.as_ref().map(|i| json!({
            "path": i.path().display().to_string(),
            "loaded_bytes": i.loaded_bytes,
            "syncs": i.syncs(),
        })),
    })
}

/// An accepted connection before the handshake.
enum Connection {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Connection {
    fn serve(
        self,
        emu: &Emulator,
        export: &ExportInfo,
        tls: Option<&TlsConfig>,
    ) -> EmulatorCounters {
        match self {
            Connection::Unix(s) => {
                let _ = s.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
                serve_stream_tls(s, emu, export, tls, |s| {
                    let _ = s.set_read_timeout(None);
                })
            }
            Connection::Tcp(s) => {
                let _ = s.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
                serve_stream_tls(s, emu, export, tls, |s| {
                    let _ = s.set_read_timeout(None);
                })
            }
        }
    }
}

/// Negotiate, then serve the transmission phase; returns what the connection measured.
pub fn serve_stream<T: Transport>(
    io: T,
    emu: &Emulator,
    export: &ExportInfo,
    after_handshake: impl FnOnce(&mut T),
) -> EmulatorCounters {
    serve_stream_tls(io, emu, export, None, after_handshake)
}

/// [`serve_stream`] offering TLS: the connection may switch to TLS during negotiation, and the
/// transmission phase then runs inside it. `after_handshake` gets the socket underneath.
pub fn serve_stream_tls<T: Transport>(
    io: T,
    emu: &Emulator,
    export: &ExportInfo,
    tls: Option<&TlsConfig>,
    after_handshake: impl FnOnce(&mut T),
) -> EmulatorCounters {
    let mut io = Stream::Plain(io);
    let negotiated = negotiate_tls(&mut io, export, tls);
    let strict = match negotiated {
        Ok(Negotiated::Transmission { block_sizes_agreed }) => block_sizes_agreed,
        Ok(Negotiated::Closed) => return EmulatorCounters::default(),
        Err(_) => {
            return EmulatorCounters {
                protocol_errors: 1,
                ..EmulatorCounters::default()
            }
        }
    };
    if let Some(socket) = io.socket_mut() {
        after_handshake(socket);
    }
    let mut session = Session::new(&mut io, emu, export, strict);
    // Errors here are the client's socket failing; the device state is intact either way.
    let _ = session.run();
    let counters = std::mem::take(&mut session.counters);
    drop(session);
    io.close();
    counters
}

fn poll_fd(fd: i32, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) };
    n > 0
}

/// A socket file left by a server that died may be replaced; a live one may not.
fn remove_stale_socket(path: &Path) -> Result<(), ServeError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let shown = path.display().to_string();
    if !meta.file_type().is_socket() {
        return Err(ServeError::NotASocket(shown));
    }
    if UnixStream::connect(path).is_ok() {
        return Err(ServeError::SocketInUse(shown));
    }
    std::fs::remove_file(path).map_err(|source| ServeError::Io {
        path: shown,
        source,
    })
}
