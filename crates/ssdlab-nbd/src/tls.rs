//! TLS for NBD connections: the server's credentials (an X.509 certificate and key in PEM, and
//! or a PSK file of `username:hexkey` lines as nbdkit, qemu-nbd and GnuTLS's `psktool` write
//! them), the policy (`off`, `on`, `require`) and the stream a connection switches to when the
//! client sends `NBD_OPT_STARTTLS`.
//!
//! OpenSSL does the cryptography because it alone of the Rust options does both certificates
//! and pre-shared keys (rustls has no PSK cipher suites); see ARCHITECTURE.md. The TLS stream
//! runs over the same blocking socket as a plain connection: blocking reads and writes go
//! straight through, and the connection loop's non-blocking reads make the socket underneath
//! non-blocking for one `SSL_read`, so a partial record is kept by OpenSSL and the loop polls
//! again, exactly as it does for a plain socket.

use crate::transport::Transport;
use openssl::error::ErrorStack;
use openssl::pkey::PKey;
use openssl::ssl::{
    ErrorCode, HandshakeError, SslAcceptor, SslAcceptorBuilder, SslMethod, SslStream, SslVersion,
};
use openssl::x509::X509;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// When clients must use TLS (`--tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// No TLS: `NBD_OPT_STARTTLS` is refused as unsupported.
    #[default]
    Off,
    /// Clients may upgrade with STARTTLS or stay in plain text.
    On,
    /// Every option but STARTTLS and ABORT is refused with `NBD_REP_ERR_TLS_REQD` until the
    /// client has upgraded (the protocol's FORCEDTLS).
    Require,
}

impl TlsMode {
    pub fn parse(name: &str) -> Option<TlsMode> {
        match name {
            "off" => Some(TlsMode::Off),
            "on" => Some(TlsMode::On),
            "require" => Some(TlsMode::Require),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Off => "off",
            TlsMode::On => "on",
            TlsMode::Require => "require",
        }
    }
}

/// What `--tls`, `--tls-cert`, `--tls-key` and `--tls-psk` said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// `None`: `require` when credentials are given, `off` otherwise.
    pub mode: Option<TlsMode>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub psk: Option<PathBuf>,
}

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("{path}: no PEM certificate could be read ({reason})")]
    Certificate { path: String, reason: String },
    #[error("{path}: no PEM private key could be read ({reason})")]
    Key { path: String, reason: String },
    #[error("{key}: the private key does not belong to the certificate in {cert}")]
    KeyMismatch { cert: String, key: String },
    #[error("{path}: line {line}: {reason} (expected username:hexkey)")]
    PskLine {
        path: String,
        line: usize,
        reason: &'static str,
    },
    #[error("{path}: no username:hexkey line")]
    PskEmpty { path: String },
    #[error("--tls-cert and --tls-key go together: {0} is missing")]
    CertKeyPair(&'static str),
    #[error("--tls={0} needs credentials: --tls-cert/--tls-key or --tls-psk")]
    NoCredentials(&'static str),
    #[error("--tls=off with --tls-cert/--tls-key or --tls-psk: drop the credentials or choose --tls=on or require")]
    CredentialsUnused,
    #[error("setting up TLS: {0}")]
    Setup(#[from] ErrorStack),
}

/// The server side of TLS: the policy and the OpenSSL context every connection shares.
pub struct TlsConfig {
    pub mode: TlsMode,
    acceptor: SslAcceptor,
    /// What the summary and the `listening on` line show: `x509`, `psk` or `x509+psk`.
    pub credentials: &'static str,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("mode", &self.mode)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

/// Longest PSK accepted, in bytes: OpenSSL's own limit (PSK_MAX_PSK_LEN).
const MAX_PSK_BYTES: usize = 512;

impl TlsConfig {
    /// Load the credentials; `Ok(None)` when TLS is off.
    pub fn load(options: &TlsOptions) -> Result<Option<TlsConfig>, TlsError> {
        let has_x509 = match (&options.cert, &options.key) {
            (None, None) => false,
            (Some(_), Some(_)) => true,
            (Some(_), None) => return Err(TlsError::CertKeyPair("--tls-key")),
            (None, Some(_)) => return Err(TlsError::CertKeyPair("--tls-cert")),
        };
        let has_credentials = has_x509 || options.psk.is_some();
        let mode = options.mode.unwrap_or(if has_credentials {
            TlsMode::Require
        } else {
            TlsMode::Off
        });
        match (mode, has_credentials) {
            (TlsMode::Off, false) => return Ok(None),
            (TlsMode::Off, true) => return Err(TlsError::CredentialsUnused),
            (m, false) => return Err(TlsError::NoCredentials(m.name())),
            _ => {}
        }
        let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
        // TLS 1.2 is the oldest version the NBD clients in use negotiate; 1.0 and 1.1 are
        // broken and the intermediate profile already refuses them.
        builder.set_min_proto_version(Some(SslVersion::TLS1_2))?;
        if let (Some(cert), Some(key)) = (&options.cert, &options.key) {
            load_x509(&mut builder, cert, key)?;
        }
        if let Some(path) = &options.psk {
            let keys = load_psk_file(path)?;
            // TLS 1.2 needs PSK cipher suites (the intermediate profile has none); TLS 1.3
            // uses its own suites with the PSK callback below. Ephemeral-key variants first.
            builder.set_cipher_list(&format!(
                "{}:ECDHE-PSK-AES128-CBC-SHA256:ECDHE-PSK-AES256-CBC-SHA384:\
                 DHE-PSK-AES128-GCM-SHA256:DHE-PSK-AES256-GCM-SHA384:\
                 PSK-AES128-GCM-SHA256:PSK-AES256-GCM-SHA384",
                if has_x509 {
                    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:\
                     ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:\
                     ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
                } else {
                    "ECDHE-PSK-CHACHA20-POLY1305"
                }
            ))?;
            builder.set_psk_server_callback(move |_ssl, identity, out| {
                // An unknown identity yields a zero-length key, which OpenSSL treats as a
                // failed handshake (the client sees a decrypt/unknown-PSK alert).
                let Some(key) = identity.and_then(|id| keys.get(id)) else {
                    return Ok(0);
                };
                let n = key.len().min(out.len());
                out[..n].copy_from_slice(&key[..n]);
                Ok(n)
            });
        }
        let credentials = match (has_x509, options.psk.is_some()) {
            (true, true) => "x509+psk",
            (true, false) => "x509",
            _ => "psk",
        };
        Ok(Some(TlsConfig {
            mode,
            acceptor: builder.build(),
            credentials,
        }))
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Load a certificate chain (leaf first) and its key, each error naming the file at fault.
fn load_x509(builder: &mut SslAcceptorBuilder, cert: &Path, key: &Path) -> Result<(), TlsError> {
    let cert_name = cert.display().to_string();
    let key_name = key.display().to_string();
    let chain = X509::stack_from_pem(&read_file(cert)?).map_err(|e| TlsError::Certificate {
        path: cert_name.clone(),
        reason: first_reason(&e),
    })?;
    let Some((leaf, rest)) = chain.split_first() else {
        return Err(TlsError::Certificate {
            path: cert_name,
            reason: "the file holds no CERTIFICATE block".into(),
        });
    };
    let pkey = PKey::private_key_from_pem(&read_file(key)?).map_err(|e| TlsError::Key {
        path: key_name.clone(),
        reason: first_reason(&e),
    })?;
    builder.set_certificate(leaf)?;
    for extra in rest {
        builder.add_extra_chain_cert(extra.clone())?;
    }
    // OpenSSL compares the key with the certificate already when it is set.
    if builder.set_private_key(&pkey).is_err() || builder.check_private_key().is_err() {
        return Err(TlsError::KeyMismatch {
            cert: cert_name,
            key: key_name,
        });
    }
    Ok(())
}

/// OpenSSL's error stacks are long; the first entry's reason is what a user can act on.
fn first_reason(e: &ErrorStack) -> String {
    e.errors()
        .first()
        .and_then(|e| e.reason().map(str::to_string))
        .unwrap_or_else(|| "not PEM".to_string())
}

/// Parse a PSK file: `username:hexkey` per line (what `psktool -u NAME -p FILE` writes).
/// Blank lines are skipped; a later line for the same username replaces an earlier one.
/// Errors name the line but never show the key.
pub fn parse_psk_file(path: &Path, text: &str) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, TlsError> {
    let mut keys = BTreeMap::new();
    let shown = path.display().to_string();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason| TlsError::PskLine {
            path: shown.clone(),
            line: i + 1,
            reason,
        };
        let Some((user, hex)) = line.rsplit_once(':') else {
            return Err(bad("no ':' between username and key"));
        };
        if user.is_empty() {
            return Err(bad("empty username"));
        }
        let key = decode_hex(hex.trim())
            .ok_or_else(|| bad("the key is not an even number of hex digits"))?;
        if key.is_empty() {
            return Err(bad("empty key"));
        }
        if key.len() > MAX_PSK_BYTES {
            return Err(bad("key longer than 512 bytes"));
        }
        keys.insert(user.as_bytes().to_vec(), key);
    }
    if keys.is_empty() {
        return Err(TlsError::PskEmpty { path: shown });
    }
    Ok(keys)
}

fn load_psk_file(path: &Path) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, TlsError> {
    let bytes = read_file(path)?;
    let text = String::from_utf8(bytes).map_err(|_| TlsError::PskLine {
        path: path.display().to_string(),
        line: 0,
        reason: "the file is not UTF-8 text",
    })?;
    parse_psk_file(path, &text)
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

/// The socket under a TLS session. OpenSSL reads through it; `nonblocking` turns one read
/// into a non-blocking one (`WouldBlock` when nothing is there), so that the connection loop
/// can keep spinning towards a reply's deadline while a TLS record is half received.
///
/// OpenSSL requires an `SSL_write` that could not finish to be retried with the same bytes: it
/// keeps the record it could not send and, on the next write, sends that record and counts it
/// as the start of the new buffer (`ACCEPT_MOVING_WRITE_BUFFER`, which the openssl crate sets,
/// checks only the length). The connection loop writes each buffer to the end or gives up on
/// the connection, so no write is left unfinished on purpose: an interrupted system call is
/// retried here, beneath OpenSSL, and after any other failure (`write_failed`) every later
/// write fails too, rather than sending the held record in place of other bytes.
pub struct TlsSocket<S> {
    inner: S,
    nonblocking: bool,
    write_failed: bool,
}

impl<S: Transport> Read for TlsSocket<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.nonblocking {
            match self.inner.read_available(buf)? {
                Some(n) => Ok(n),
                None => Err(io::ErrorKind::WouldBlock.into()),
            }
        } else {
            loop {
                match self.inner.read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    result => return result,
                }
            }
        }
    }
}

impl<S: Transport> Write for TlsSocket<S> {
    /// OpenSSL sees an interrupted write as fatal (`SSL_ERROR_SYSCALL`): retry it here.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.inner.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                result => return result,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A connection's byte stream: plain until the client sends STARTTLS, TLS after.
pub enum Stream<S> {
    Plain(S),
    Tls(Box<SslStream<TlsSocket<S>>>),
    /// A TLS handshake failed: the socket is gone and every operation fails.
    Closed,
}

impl<S: Transport> Stream<S> {
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// The socket underneath (for timeouts); `None` after a failed handshake.
    pub fn socket_mut(&mut self) -> Option<&mut S> {
        match self {
            Stream::Plain(s) => Some(s),
            Stream::Tls(t) => Some(&mut t.get_mut().inner),
            Stream::Closed => None,
        }
    }

    /// Run the server side of the TLS handshake on the plain socket. On failure the stream is
    /// closed: the protocol leaves no way back to plain text.
    pub fn start_tls(&mut self, tls: &TlsConfig) -> io::Result<()> {
        let Stream::Plain(_) = self else {
            return Err(io::Error::other("STARTTLS on a stream that is not plain"));
        };
        let Stream::Plain(socket) = std::mem::replace(self, Stream::Closed) else {
            unreachable!("checked above");
        };
        let socket = TlsSocket {
            inner: socket,
            nonblocking: false,
            write_failed: false,
        };
        match tls.acceptor.accept(socket) {
            Ok(stream) => {
                *self = Stream::Tls(Box::new(stream));
                Ok(())
            }
            Err(e) => {
                let reason = match e {
                    HandshakeError::SetupFailure(stack) => stack.to_string(),
                    HandshakeError::Failure(mid) => mid.error().to_string(),
                    // The socket's read timeout (the backstop of the handshake timeout) passed.
                    HandshakeError::WouldBlock(_) => "timed out".to_string(),
                };
                Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    format!("TLS handshake failed: {reason}"),
                ))
            }
        }
    }

    /// Best effort: tell a TLS client the session ends (close_notify), so that it sees a clean
    /// end of stream rather than a truncation.
    pub fn close(&mut self) {
        if let Stream::Tls(t) = self {
            // After a failed write close_notify could only go out behind the record OpenSSL
            // still holds, or fail the same way.
            if !t.get_ref().write_failed {
                let _ = t.shutdown();
            }
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "TLS handshake failed")
}

impl<S: Transport> Read for Stream<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
            Stream::Closed => Err(closed()),
        }
    }
}

impl<S: Transport> Write for Stream<S> {
    /// For TLS: after a failed write every later write fails (see [`TlsSocket`]).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) if t.get_ref().write_failed => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "an earlier TLS write failed",
            )),
            Stream::Tls(t) => {
                let result = t.write(buf);
                if result.is_err() {
                    t.get_mut().write_failed = true;
                }
                result
            }
            Stream::Closed => Err(closed()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
            Stream::Closed => Err(closed()),
        }
    }
}

impl<S: Transport> Transport for Stream<S> {
    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        match self {
            Stream::Plain(s) => s.wait_readable(timeout),
            // Decrypted bytes OpenSSL holds are readable without the socket. It reads one
            // record at a time (no read-ahead), so anything else is still in the socket.
            Stream::Tls(t) if t.ssl().pending() > 0 => Ok(true),
            Stream::Tls(t) => t.get_mut().inner.wait_readable(timeout),
            Stream::Closed => Err(closed()),
        }
    }

    fn read_available(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self {
            Stream::Plain(s) => s.read_available(buf),
            Stream::Tls(t) => {
                if buf.is_empty() {
                    return Ok(Some(0));
                }
                t.get_mut().nonblocking = true;
                let result = t.ssl_read(buf);
                t.get_mut().nonblocking = false;
                match result {
                    Ok(n) => Ok(Some(n)),
                    // A partial record, or a record that carried no data (a TLS 1.3 key
                    // update): nothing to hand over yet.
                    Err(e) if e.code() == ErrorCode::WANT_READ => Ok(None),
                    Err(e) if e.code() == ErrorCode::ZERO_RETURN => Ok(Some(0)),
                    Err(e) if e.code() == ErrorCode::SYSCALL && e.io_error().is_none() => {
                        Ok(Some(0))
                    }
                    Err(e) => Err(e
                        .into_io_error()
                        .unwrap_or_else(|e| io::Error::new(io::ErrorKind::ConnectionAborted, e))),
                }
            }
            Stream::Closed => Err(closed()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psk_file_lines() {
        let p = Path::new("keys.psk");
        let keys = parse_psk_file(p, "alice:00ff10\n\nbob:ABCD\r\n").unwrap();
        assert_eq!(keys[b"alice".as_slice()], vec![0x00, 0xff, 0x10]);
        assert_eq!(keys[b"bob".as_slice()], vec![0xab, 0xcd]);
        for (text, want) in [
            ("alice", "line 1: no ':'"),
            (":00ff", "line 1: empty username"),
            ("\nalice:0g", "line 2: the key is not"),
            ("alice:abc", "line 1: the key is not"),
            ("alice:", "line 1: empty key"),
        ] {
            let err = parse_psk_file(p, text).unwrap_err().to_string();
            assert!(
                err.starts_with("keys.psk: ") && err.contains(want),
                "{text:?}: {err}"
            );
        }
        let err = parse_psk_file(p, "\n \n").unwrap_err().to_string();
        assert_eq!(err, "keys.psk: no username:hexkey line");
    }

    #[test]
    fn modes_and_missing_credentials() {
        assert_eq!(TlsMode::parse("require"), Some(TlsMode::Require));
        assert_eq!(TlsMode::parse("yes"), None);
        assert!(TlsConfig::load(&TlsOptions::default()).unwrap().is_none());
        let on = TlsOptions {
            mode: Some(TlsMode::On),
            ..TlsOptions::default()
        };
        assert!(matches!(
            TlsConfig::load(&on),
            Err(TlsError::NoCredentials("on"))
        ));
        let half = TlsOptions {
            cert: Some("c.pem".into()),
            ..TlsOptions::default()
        };
        assert!(matches!(
            TlsConfig::load(&half),
            Err(TlsError::CertKeyPair("--tls-key"))
        ));
        let missing = TlsOptions {
            psk: Some("/nonexistent/keys.psk".into()),
            ..TlsOptions::default()
        };
        let err = TlsConfig::load(&missing).unwrap_err().to_string();
        assert!(err.starts_with("/nonexistent/keys.psk: "), "{err}");
    }
}
