//! An NBD server that exports a data-driven simulated SSD, so that real tools (fio's nbd
//! engine, qemu-io, nbdcopy, nbdfuse and a file system on top) run against simulated flash.
//!
//! Layers: [`protocol`] (wire format, pure), [`handshake`] (option negotiation),
//! [`connection`] (transmission phase of one client), [`clock`] (real-time or virtual time,
//! the replaceable policy), [`emulator`] (the shared device and its statistics) and
//! [`server`] (listening, threads, shutdown, summary), with [`tls`] (STARTTLS with OpenSSL)
//! and [`image`] (the persistent image of the export). See `shared/spec/formats.md` ("NBD")
//! and the NBD project's `doc/proto.md`.

pub mod clock;
pub mod connection;
pub mod emulator;
pub mod handshake;
pub mod image;
pub mod power_signal;
pub mod protocol;
pub mod server;
pub mod tls;
pub mod transport;

pub use server::{Endpoint, ServeError, Server, ServerOptions, ShutdownHandle};
pub use tls::{TlsMode, TlsOptions};
