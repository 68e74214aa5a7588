//! The listener: accepts connections on a Unix socket or TCP, runs each on its own thread,
//! and on shutdown stops accepting, lets every connection deliver its held replies, flushes
//! the request log and returns the summary.
//!
//! It also keeps the server available to well-behaved clients when others are hostile:
//! connections still negotiating and connections in transmission have separate caps, so that
//! clients that never finish a handshake cannot take the places of served ones; at the
//! transmission cap a newly negotiated connection evicts the one that has been quiet longest;
//! and a watchdog closes handshakes that take too long, connections stalled on their client
//! (a partial request, replies left unread) and, when asked, idle ones. See [`Limits`].
//! TLS (`tls`) is offered to every connection when configured; a TCP address off the loopback
//! interface is refused unless TLS is required or `insecure` is set, because anyone who reaches
//! a plain export can read and overwrite it. With an image (`image`) the device is rebuilt from
//! it at bind time and the image is synced at shutdown.

use crate::clock::{self, Clock};
use crate::connection::{Activity, ConnectionLimits, Session, MIN_BUFFERED_BYTES};
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
    /// Simulate a power loss, then recovery from the OOB area, when the first request issued
    /// at or after this simulated time arrives.
    pub power_loss_at_ns: Option<u64>,
    /// SIGUSR1 cuts the power (then recovery from the OOB area) when it arrives; installs a
    /// process-wide handler ([`crate::power_signal`]).
    pub power_loss_on_signal: bool,
    /// TLS credentials and policy (`--tls`, `--tls-cert`, `--tls-key`, `--tls-psk`).
    pub tls: TlsOptions,
    /// Allow plain text (or optional TLS) on a TCP address other than loopback.
    pub insecure: bool,
    /// Persistent image of the export's contents (`--image`).
    pub image: Option<PathBuf>,
    /// Caps and timeouts that bound what clients can make the server hold.
    pub limits: Limits,
}

/// What clients can make the server hold, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Per connection: requests in flight and bytes buffered (back-pressure beyond).
    pub connection: ConnectionLimits,
    /// Connections in the transmission phase. A connection that finishes its handshake at
    /// the cap evicts the one quiet longest, so idle clients cannot lock others out.
    pub max_connections: usize,
    /// Connections still negotiating, counted apart; at the cap the oldest is closed.
    pub max_handshakes: usize,
    /// The whole handshake must finish within this (real clients take milliseconds).
    pub handshake_timeout: Duration,
    /// Close a connection with nothing outstanding after this long without a request;
    /// `None`: never (an NBD client with a mounted file system is legitimately idle for hours,
    /// and eviction at the cap already keeps idle clients from exhausting it).
    pub idle_timeout: Option<Duration>,
    /// Close a connection that waits on its client (the rest of a request, or room to send
    /// replies the client does not read) this long without a byte moving.
    pub stall_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connection: ConnectionLimits::default(),
            max_connections: MAX_CONNECTIONS,
            max_handshakes: 64,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: None,
            stall_timeout: Duration::from_secs(60),
        }
    }
}

/// More threads than this (one per connection) is a configuration mistake, not a server.
const MAX_CONNECTIONS_LIMIT: usize = 16_384;

impl Limits {
    /// Check every limit; the error names the limit and the accepted range.
    pub fn validate(&self) -> Result<(), ServeError> {
        let bad = |what: &str, why: &str| Err(ServeError::Limit(format!("{what}: {why}")));
        for (what, n) in [
            ("max_connections", self.max_connections),
            ("max_handshakes", self.max_handshakes),
        ] {
            if !(1..=MAX_CONNECTIONS_LIMIT).contains(&n) {
                return bad(
                    what,
                    &format!("expected 1..={MAX_CONNECTIONS_LIMIT} (one thread each), got {n}"),
                );
            }
        }
        if self.connection.max_requests_in_flight == 0 {
            return bad("max_requests_in_flight", "expected at least 1, got 0");
        }
        if self.connection.max_buffered_bytes < MIN_BUFFERED_BYTES {
            return bad(
                "max_buffered_bytes",
                &format!(
                    "expected at least {MIN_BUFFERED_BYTES} (1 MiB), got {}",
                    self.connection.max_buffered_bytes
                ),
            );
        }
        for (what, t) in [
            ("handshake_timeout", Some(self.handshake_timeout)),
            ("idle_timeout", self.idle_timeout),
            ("stall_timeout", Some(self.stall_timeout)),
        ] {
            if t.is_some_and(|t| t.is_zero()) {
                return bad(what, "expected a positive duration");
            }
        }
        Ok(())
    }
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
            power_loss_at_ns: None,
            power_loss_on_signal: false,
            limits: Limits::default(),
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
    #[error("{0}")]
    Limit(String),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("refusing to serve {0} without TLS: it is not a loopback address, so anyone who can reach it could read and overwrite the export; give --tls-cert/--tls-key or --tls-psk (with --tls=require), or --insecure to serve it anyway")]
    Insecure(SocketAddr),
    #[error(transparent)]
    Image(#[from] ImageError),
}

enum Listener {
    Unix {
        listener: UnixListener,
        /// Kept for its removal when the server goes.
        _file: SocketFile,
    },
    Tcp(TcpListener),
}

/// The file of a bound Unix socket: removed when the server goes, whether it served or was
/// dropped unstarted, unless the path now names another file (a successor's socket).
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    /// Device and inode of the file this server created.
    id: Option<(u64, u64)>,
}

impl SocketFile {
    fn new(path: &Path) -> SocketFile {
        SocketFile {
            path: path.to_path_buf(),
            id: file_id(path),
        }
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if self.id.is_some() && file_id(&self.path) == self.id {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
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
    limits: Limits,
    warnings: Warnings,
}

/// Problems met while serving that do not stop the server (a request log that cannot be
/// written), for the front end to show as they happen.
#[derive(Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// The warnings since the last call.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn push(&self, message: String) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message);
    }
}

/// How long shutdown waits for clients that neither disconnect nor read their replies.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Default cap on connections in transmission (one thread each).
pub const MAX_CONNECTIONS: usize = 256;
/// How often the watchdog looks at connections, and the request log is flushed (so that it
/// can be read while serving and a full disk shows at once).
const WATCHDOG_PERIOD: Duration = Duration::from_millis(100);
const LOG_FLUSH_PERIOD: Duration = Duration::from_secs(1);
/// A handshake chosen for eviction may still be a client that has just received its last
/// handshake reply, in the instant before its thread moves it to transmission: it is closed
/// only if it is still negotiating this much later.
const EVICTION_GRACE: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Handshake,
    Transmission,
}

/// A live connection as the listener and the watchdog see it.
struct PeerEntry {
    peer: Peer,
    phase: Phase,
    accepted: Instant,
    activity: Arc<Activity>,
    /// Shut down by the server (evicted or timed out); its thread is ending.
    closed: bool,
    /// Chosen for eviction at the handshake cap; closed after [`EVICTION_GRACE`] unless it
    /// has entered transmission by then.
    doomed_at: Option<Instant>,
}

impl PeerEntry {
    fn close(&mut self) {
        self.peer.shutdown(Shutdown::Both);
        self.closed = true;
    }
}

type Peers = Arc<Mutex<HashMap<u64, PeerEntry>>>;

fn lock_peers(peers: &Peers) -> std::sync::MutexGuard<'_, HashMap<u64, PeerEntry>> {
    peers.lock().unwrap_or_else(|e| e.into_inner())
}

/// Connections the server closed to stay available, by reason.
#[derive(Debug, Default)]
struct Closures {
    evicted: AtomicU64,
    handshakes_evicted: AtomicU64,
    handshake_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
    stall_timeouts: AtomicU64,
}

impl Closures {
    fn json(&self) -> Value {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        json!({
            "evicted": n(&self.evicted),
            "handshakes_evicted": n(&self.handshakes_evicted),
            "handshake_timeouts": n(&self.handshake_timeouts),
            "idle_timeouts": n(&self.idle_timeouts),
            "stall_timeouts": n(&self.stall_timeouts),
        })
    }
}

impl Server {
    /// Bind the endpoint and prepare the export of `device` (which must store data).
    pub fn bind(mut device: Device, options: &ServerOptions) -> Result<Server, ServeError> {
        options.limits.validate()?;
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
        // Preferred block size: the FTL's mapping unit, the smallest write that reads nothing.
        let preferred = device.derived().mapping_unit_bytes;
        let export = ExportInfo {
            name: options.export_name.clone(),
            description: format!(
                "ssdlab emulated SSD (config {}, {} clock)",
                &device.config_hash()[..12.min(device.config_hash().len())],
                clock.name()
            ),
            size: device.logical_bytes(),
            read_only: options.read_only,
            block_sizes: (512, preferred, MAX_PAYLOAD),
        };
        let warnings = Warnings::default();
        let mut log_error = None;
        let log = match &options.stats_log {
            None => None,
            Some(path) => {
                let mut file = File::create(path).map_err(|source| ServeError::Io {
                    path: path.display().to_string(),
                    source,
                })?;
                // A file that cannot be written (a full disk) does not stop the server: it
                // serves without the log and says so at once and in the summary.
                match writeln!(file, "{}", RequestLogRow::CSV_HEADER) {
                    Ok(()) => Some(file),
                    Err(e) => {
                        warnings.push(format!(
                            "writing the request log {}: {e}; serving without it",
                            path.display()
                        ));
                        log_error = Some(e);
                        None
                    }
                }
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
                let (l, file) = bind_unix_listening(path).map_err(|source| ServeError::Io {
                    path: path.display().to_string(),
                    source,
                })?;
                let uri = format!("{scheme}+unix:///{}?socket={}", export.name, path.display());
                (
                    Listener::Unix {
                        listener: l,
                        _file: file,
                    },
                    uri,
                )
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
        {
            let mut state = emulator.lock();
            state.log_error_reported = log_error.is_some();
            state.power_loss_at_ns = options.power_loss_at_ns;
            if options.power_loss_on_signal {
                crate::power_signal::install().map_err(|source| ServeError::Io {
                    path: "SIGUSR1 handler".to_string(),
                    source,
                })?;
                state.power_loss_on_signal = true;
                state.power_signals_seen = crate::power_signal::received();
            }
            state.log_error = log_error;
        }
        Ok(Server {
            listener,
            emulator: Arc::new(emulator),
            export: Arc::new(export),
            stop: Arc::new(AtomicBool::new(false)),
            uri,
            limits: options.limits,
            warnings,
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

    /// Warnings raised while serving (read them from another thread).
    pub fn warnings(&self) -> Warnings {
        self.warnings.clone()
    }

    /// The emulator the connections share (its buffered-bytes counters, for tests).
    pub fn emulator(&self) -> Arc<Emulator> {
        self.emulator.clone()
    }

    /// Serve until [`ShutdownHandle::shutdown`]; returns the summary of everything served.
    pub fn run(self) -> Result<Value, ServeError> {
        let peers: Peers = Arc::default();
        let closures = Arc::new(Closures::default());
        let mut next_id = 0u64;
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let listen_fd = match &self.listener {
            Listener::Unix { listener: l, .. } => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        };
        let mut last_watch = Instant::now();
        let mut last_flush = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            if last_watch.elapsed() >= WATCHDOG_PERIOD {
                last_watch = Instant::now();
                self.watch(&peers, &closures);
                threads.retain(|t| !t.is_finished());
            }
            if last_flush.elapsed() >= LOG_FLUSH_PERIOD {
                last_flush = Instant::now();
                self.flush_log();
            }
            close_doomed(&peers, &closures);
            self.emulator.lock().check_power_signal();
            // Poll with a timeout so that a shutdown request is noticed promptly.
            let wait = if any_doomed(&peers) {
                EVICTION_GRACE
            } else {
                Duration::from_millis(50)
            };
            if !poll_fd(listen_fd, wait) {
                continue;
            }
            let id = next_id;
            next_id += 1;
            let accepted = match &self.listener {
                Listener::Unix { listener: l, .. } => l.accept().map(|(s, _)| {
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
            let activity = Arc::new(Activity::new());
            {
                let mut live = lock_peers(&peers);
                let negotiating = |p: &PeerEntry| {
                    p.phase == Phase::Handshake && !p.closed && p.doomed_at.is_none()
                };
                if live.values().filter(|p| negotiating(p)).count() >= self.limits.max_handshakes {
                    // The oldest handshake goes: a real client negotiates in milliseconds,
                    // so the oldest is the likeliest to be one that never will.
                    if let Some(oldest) = live
                        .values_mut()
                        .filter(|p| negotiating(p))
                        .min_by_key(|p| p.accepted)
                    {
                        oldest.doomed_at = Some(Instant::now());
                    }
                }
                live.insert(
                    id,
                    PeerEntry {
                        peer,
                        phase: Phase::Handshake,
                        accepted: Instant::now(),
                        activity: activity.clone(),
                        closed: false,
                        doomed_at: None,
                    },
                );
            }
            let emu = self.emulator.clone();
            let export = self.export.clone();
            let tls = self.tls.clone();
            let peers_for_thread = peers.clone();
            let closures_for_thread = closures.clone();
            let limits = self.limits;
            let spawned = std::thread::Builder::new()
                .name(format!("nbd-conn-{id}"))
                .spawn(move || {
                    let entered =
                        || enter_transmission(&peers_for_thread, id, &limits, &closures_for_thread);
                    let counters =
                        conn.serve(&emu, &export, tls.as_deref(), &limits, activity, entered);
                    emu.counters
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .merge(&counters);
                    lock_peers(&peers_for_thread).remove(&id);
                });
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(_) => {
                    if let Some(mut p) = lock_peers(&peers).remove(&id) {
                        p.close();
                    }
                }
            }
        }
        // Stop reading from every client: each connection delivers its held replies and ends.
        for entry in lock_peers(&peers).values() {
            entry.peer.shutdown(Shutdown::Read);
        }
        let grace_ends = Instant::now() + SHUTDOWN_GRACE;
        while threads.iter().any(|t| !t.is_finished()) && Instant::now() < grace_ends {
            std::thread::sleep(Duration::from_millis(5));
        }
        for entry in lock_peers(&peers).values() {
            entry.peer.shutdown(Shutdown::Both);
        }
        for t in threads {
            let _ = t.join();
        }
        if let Some(image) = &self.emulator.image {
            // A clean shutdown leaves the image durable, whether or not clients flushed.
            image.sync().map_err(|source| ServeError::Io {
                path: image.path().display().to_string(),
                source,
            })?;
        }
        Ok(self.summary(&closures))
    }

    /// Close handshakes past their timeout, and connections stalled (or idle, when asked)
    /// for too long.
    fn watch(&self, peers: &Peers, closures: &Closures) {
        let limits = &self.limits;
        for entry in lock_peers(peers).values_mut().filter(|p| !p.closed) {
            let counter = match entry.phase {
                Phase::Handshake if entry.accepted.elapsed() > limits.handshake_timeout => {
                    &closures.handshake_timeouts
                }
                Phase::Handshake => continue,
                Phase::Transmission => {
                    let quiet = entry.activity.quiet_for();
                    if entry.activity.busy() {
                        if quiet <= limits.stall_timeout {
                            continue;
                        }
                        &closures.stall_timeouts
                    } else if limits.idle_timeout.is_some_and(|t| quiet > t) {
                        &closures.idle_timeouts
                    } else {
                        continue;
                    }
                }
            };
            entry.close();
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Write the request log's buffer out, reporting the first error at once.
    fn flush_log(&self) {
        let mut guard = self.emulator.lock();
        let state = &mut *guard;
        if let Some(log) = &mut state.log {
            if let Err(e) = log.flush() {
                state.log = None;
                state.log_error.get_or_insert(e);
            }
        }
        if let Some(e) = &state.log_error {
            if !state.log_error_reported {
                state.log_error_reported = true;
                self.warnings
                    .push(format!("writing the request log: {e}; serving without it"));
            }
        }
    }

    fn summary(&self, closures: &Closures) -> Value {
        self.flush_log();
        let emu = &self.emulator;
        let state = emu.lock();
        let counters = emu
            .counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let sim_ns = state.device.now_ns();
        let job = job_json(&state.job, json!({ "sim_time_ns": sim_ns }));
        let mut emulator = emulator_json(
            emu,
            &counters,
            sim_ns,
            state.job.sync_ios,
            &self.export,
            self.tls.as_deref(),
        );
        emulator["limits"] = limits_json(&self.limits);
        emulator["closed_by_server"] = closures.json();
        emulator["power_loss"] = match &state.recovery {
            Some(r) => json!({
                "oob_pages_read": r.oob_pages_read,
                "full_pages_read": r.full_pages_read,
                "lost_units": r.lost_units,
                "mapped_units": r.mapped_units,
                "recovery_ns": r.duration_ns,
                "ready_ns": r.ready_ns,
            }),
            None => Value::Null,
        };
        emulator["power_losses"] = state
            .power_losses
            .iter()
            .map(|p| {
                json!({
                    "trigger": p.trigger,
                    "at_ns": p.at_ns,
                    "recovered": p.recovery.is_some(),
                    "oob_pages_read": p.recovery.as_ref().map(|r| r.oob_pages_read),
                    "lost_units": p.recovery.as_ref().map(|r| r.lost_units),
                    "mapped_units": p.recovery.as_ref().map(|r| r.mapped_units),
                    "recovery_ns": p.recovery.as_ref().map(|r| r.duration_ns),
                })
            })
            .collect::<Vec<_>>()
            .into();
        emulator["stats_log_error"] = match &state.log_error {
            Some(e) => json!(e.to_string()),
            None => Value::Null,
        };
        json!({
            "ssdlab_version": env!("CARGO_PKG_VERSION"),
            "config_hash": state.device.config_hash(),
            "seed": state.device.seed(),
            "jobs": [job],
            "ssd": state.device.ssd_json(),
            "emulator": emulator,
        })
    }
}

/// Connection `id` finished its handshake: count it in transmission, evicting the connection
/// quiet longest when the cap is reached.
fn enter_transmission(peers: &Peers, id: u64, limits: &Limits, closures: &Closures) {
    let mut live = lock_peers(peers);
    let serving = live
        .iter()
        .filter(|(other, p)| **other != id && p.phase == Phase::Transmission && !p.closed)
        .count();
    if serving >= limits.max_connections {
        let victim = live
            .iter_mut()
            .filter(|(other, p)| **other != id && p.phase == Phase::Transmission && !p.closed)
            .max_by_key(|(_, p)| p.activity.quiet_for())
            .map(|(_, p)| p);
        if let Some(victim) = victim {
            victim.close();
            closures.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Some(me) = live.get_mut(&id) {
        me.phase = Phase::Transmission;
        me.doomed_at = None;
    }
}

/// Close the handshakes chosen for eviction whose grace has passed.
fn close_doomed(peers: &Peers, closures: &Closures) {
    for entry in lock_peers(peers).values_mut() {
        let due = entry
            .doomed_at
            .is_some_and(|at| at.elapsed() >= EVICTION_GRACE);
        if due && entry.phase == Phase::Handshake && !entry.closed {
            entry.close();
            closures.handshakes_evicted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn any_doomed(peers: &Peers) -> bool {
    lock_peers(peers)
        .values()
        .any(|p| p.doomed_at.is_some() && p.phase == Phase::Handshake && !p.closed)
}

fn limits_json(l: &Limits) -> Value {
    json!({
        "max_connections": l.max_connections,
        "max_handshakes": l.max_handshakes,
        "handshake_timeout_s": l.handshake_timeout.as_secs_f64(),
        "idle_timeout_s": l.idle_timeout.map(|t| t.as_secs_f64()),
        "stall_timeout_s": l.stall_timeout.as_secs_f64(),
        "max_requests_in_flight": l.connection.max_requests_in_flight,
        "max_buffered_bytes": l.connection.max_buffered_bytes,
    })
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
    // The compensation is the gaps' running lower quartile: p50 - p25 is how far a client's
    // median transport exceeds it.
    let mut client_gaps = timing(&c.client_gaps);
    client_gaps["p25"] = json!(c.client_gaps.percentile(25.0));
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
        "client_gaps_ns": client_gaps,
        "backpressure_waits": c.backpressure_waits,
        "peak_connection_buffered_bytes": c.peak_buffered_bytes,
        "peak_buffered_bytes": emu.peak_buffered_bytes.load(Ordering::Relaxed),
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
    /// Negotiate (offering TLS when configured) within the handshake timeout, call `entered`
    /// on entering transmission, then serve with `limits`. The watchdog bounds the whole
    /// handshake, a TLS handshake included, by closing the socket underneath; each read has
    /// twice the timeout as a backstop.
    fn serve(
        self,
        emu: &Emulator,
        export: &ExportInfo,
        tls: Option<&TlsConfig>,
        limits: &Limits,
        activity: Arc<Activity>,
        entered: impl FnOnce(),
    ) -> EmulatorCounters {
        let timeout = Some(limits.handshake_timeout * 2);
        match self {
            Connection::Unix(s) => {
                let _ = s.set_read_timeout(timeout);
                serve_stream_tls_with(s, emu, export, tls, limits.connection, activity, |s| {
                    let _ = s.set_read_timeout(None);
                    entered();
                })
            }
            Connection::Tcp(s) => {
                let _ = s.set_read_timeout(timeout);
                serve_stream_tls_with(s, emu, export, tls, limits.connection, activity, |s| {
                    let _ = s.set_read_timeout(None);
                    entered();
                })
            }
        }
    }
}

/// Negotiate, then serve the transmission phase with the default limits; returns what the
/// connection measured.
pub fn serve_stream<T: Transport>(
    io: T,
    emu: &Emulator,
    export: &ExportInfo,
    after_handshake: impl FnOnce(&mut T),
) -> EmulatorCounters {
    serve_stream_tls(io, emu, export, None, after_handshake)
}

/// [`serve_stream`] with per-connection limits, reporting to `activity` (no TLS).
pub fn serve_stream_with<T: Transport>(
    io: T,
    emu: &Emulator,
    export: &ExportInfo,
    limits: ConnectionLimits,
    activity: Arc<Activity>,
    after_handshake: impl FnOnce(&mut T),
) -> EmulatorCounters {
    serve_stream_tls_with(io, emu, export, None, limits, activity, after_handshake)
}

/// [`serve_stream`] offering TLS: the connection may switch to TLS during negotiation, and the
/// transmission phase then runs inside it (with the default limits). `after_handshake` gets
/// the socket underneath.
pub fn serve_stream_tls<T: Transport>(
    io: T,
    emu: &Emulator,
    export: &ExportInfo,
    tls: Option<&TlsConfig>,
    after_handshake: impl FnOnce(&mut T),
) -> EmulatorCounters {
    let activity = Arc::new(Activity::new());
    serve_stream_tls_with(
        io,
        emu,
        export,
        tls,
        ConnectionLimits::default(),
        activity,
        after_handshake,
    )
}

/// The general form: TLS offered when `tls` is given, the transmission phase (inside TLS when
/// the client upgraded) served with `limits`, reporting to `activity`.
pub fn serve_stream_tls_with<T: Transport>(
    io: T,
    emu: &Emulator,
    export: &ExportInfo,
    tls: Option<&TlsConfig>,
    limits: ConnectionLimits,
    activity: Arc<Activity>,
    after_handshake: impl FnOnce(&mut T),
) -> EmulatorCounters {
    let mut io = Stream::Plain(io);
    let negotiated = negotiate_tls(&mut io, export, tls);
    let strict = match negotiated {
        Ok(Negotiated::Transmission { block_sizes_agreed }) => block_sizes_agreed,
        Ok(Negotiated::Closed) => return EmulatorCounters::for_connection(),
        Err(_) => {
            return EmulatorCounters {
                protocol_errors: 1,
                ..EmulatorCounters::for_connection()
            }
        }
    };
    if let Some(socket) = io.socket_mut() {
        after_handshake(socket);
    }
    let mut session = Session::new(&mut io, emu, export, strict)
        .with_limits(limits)
        .with_activity(activity.clone());
    // Errors here are the client's socket failing; the device state is intact either way.
    let _ = session.run();
    let counters = std::mem::take(&mut session.counters);
    drop(session);
    if io.is_tls() {
        // TLS's close_notify is a write, which blocks on a client that reads nothing: it
        // counts as waiting on the client, so that the stall timeout bounds it.
        activity.touch();
        activity.set_busy(true);
    }
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

/// Binds a Unix socket that accepts connections from the moment its file appears. A plain
/// `bind` shows the file before `listen`, and a client that waits for the file (as scripts do)
/// may connect in between and be refused; so the socket is bound and listening under a
/// staging name beside `path` and then linked to `path`, which also fails, as `bind` would,
/// if another server took the path meanwhile.
fn bind_unix_listening(path: &Path) -> io::Result<(UnixListener, SocketFile)> {
    static STAGED: AtomicU64 = AtomicU64::new(0);
    let n = STAGED.fetch_add(1, Ordering::Relaxed);
    let staging = path.with_file_name(format!(".{}-{n}.sock", std::process::id()));
    let listener = match UnixListener::bind(&staging) {
        Ok(listener) => listener,
        // A staging name over the socket path's length limit, or a directory that refuses
        // it: bind the path itself, with the short window that plain binding has.
        Err(_) => return UnixListener::bind(path).map(|l| (l, SocketFile::new(path))),
    };
    let linked = std::fs::hard_link(&staging, path).or_else(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => Err(io::Error::from(io::ErrorKind::AddrInUse)),
        // A file system without hard links: rename, which cannot refuse to replace.
        _ => std::fs::rename(&staging, path),
    });
    let _ = std::fs::remove_file(&staging);
    linked.map(|()| (listener, SocketFile::new(path)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ssdlab-bind-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_socket_file_appears_listening_and_alone() {
        let dir = scratch_dir("alone");
        let path = dir.join("s");
        let (listener, file) = bind_unix_listening(&path).unwrap();
        // The staging name is gone: only the socket is left, and it is the listener's.
        assert_eq!(entries(&dir), ["s"]);
        let mut client = UnixStream::connect(&path).unwrap();
        let (mut served, _) = listener.accept().unwrap();
        client.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        io::Read::read_exact(&mut served, &mut got).unwrap();
        assert_eq!(&got, b"ping");
        // A second server on the same path is refused, as bind refuses, and leaves nothing.
        let err = bind_unix_listening(&path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(entries(&dir), ["s"]);
        drop((client, served, listener));
        assert_eq!(
            entries(&dir),
            ["s"],
            "the file stays while its server is there"
        );
        drop(file);
        assert!(
            entries(&dir).is_empty(),
            "a server's socket file goes with it"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_socket_file_that_is_no_longer_ours_is_left_alone() {
        let dir = scratch_dir("successor");
        let path = dir.join("s");
        let (first, file) = bind_unix_listening(&path).unwrap();
        // Someone removed the file and a successor bound the path meanwhile.
        std::fs::remove_file(&path).unwrap();
        let (second, successor) = bind_unix_listening(&path).unwrap();
        drop((first, file));
        assert_eq!(entries(&dir), ["s"], "the successor's file stays");
        UnixStream::connect(&path).unwrap();
        second.accept().unwrap();
        drop((second, successor));
        assert!(entries(&dir).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_too_long_for_a_staging_name_is_bound_directly() {
        let top = scratch_dir("long");
        // sun_path holds 107 bytes and a NUL: a directory that leaves room for the one-letter
        // name "s" and not for the longer staging name beside it.
        let room = 107 - top.as_os_str().len() - "/".len() - "/s".len();
        let dir = top.join("d".repeat(room));
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("s");
        assert_eq!(path.as_os_str().len(), 107);
        let (listener, _file) = bind_unix_listening(&path).unwrap();
        assert_eq!(entries(&dir), ["s"]);
        UnixStream::connect(&path).unwrap();
        listener.accept().unwrap();
        std::fs::remove_dir_all(&top).unwrap();
    }
}
