//! Fixed newstyle negotiation: the greeting, then options until the client picks the export
//! (`NBD_OPT_GO` or `NBD_OPT_EXPORT_NAME`) or leaves (`NBD_OPT_ABORT`, end of stream).
//! Structured replies and metadata contexts are refused with `NBD_REP_ERR_UNSUP`; every client
//! seen (libnbd's tools, qemu, fio's engine, the kernel) falls back to simple replies.
//!
//! `NBD_OPT_STARTTLS` follows `proto.md`: without TLS configured it is unsupported; otherwise
//! the server ACKs it, runs the TLS handshake on the same socket and negotiation goes on inside
//! TLS (no second greeting). With `--tls=require` (the protocol's FORCEDTLS) every option but
//! STARTTLS and ABORT gets `NBD_REP_ERR_TLS_REQD` until then, and `NBD_OPT_EXPORT_NAME`, which
//! cannot be answered with an error, closes the connection.

use crate::protocol::*;
use crate::tls::{Stream, TlsConfig, TlsMode};
use crate::transport::Transport;
use std::io::{self, Read, Write};
use thiserror::Error;

/// What the server exports (one export, reachable as its name or as the default "").
#[derive(Debug, Clone)]
pub struct ExportInfo {
    pub name: String,
    pub description: String,
    pub size: u64,
    pub read_only: bool,
    /// Advertised block sizes: minimum, preferred, maximum.
    pub block_sizes: (u32, u32, u32),
}

impl ExportInfo {
    pub fn transmission_flags(&self) -> u16 {
        let mut flags = FLAG_HAS_FLAGS
            | FLAG_SEND_FLUSH
            | FLAG_SEND_FUA
            | FLAG_SEND_TRIM
            | FLAG_SEND_WRITE_ZEROES
            | FLAG_CAN_MULTI_CONN;
        if self.read_only {
            flags |= FLAG_READ_ONLY;
        }
        flags
    }

    fn matches(&self, name: &str) -> bool {
        name.is_empty() || name == self.name
    }
}

/// How negotiation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiated {
    /// Transmission begins. `block_sizes_agreed`: the client asked for the block-size
    /// constraints (so requests that break them get `EINVAL`).
    Transmission { block_sizes_agreed: bool },
    /// The client aborted or chose an export that does not exist.
    Closed,
}

#[derive(Debug, Error)]
pub enum HandshakeError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("more than {0} options without choosing an export")]
    TooManyOptions(u32),
    #[error("{0}")]
    Tls(io::Error),
}

/// A stream that can switch to TLS in the middle of negotiation.
pub trait StartTls: Read + Write {
    fn is_tls(&self) -> bool;
    fn start_tls(&mut self, tls: &TlsConfig) -> io::Result<()>;
}

impl<S: Transport> StartTls for Stream<S> {
    fn is_tls(&self) -> bool {
        Stream::is_tls(self)
    }

    fn start_tls(&mut self, tls: &TlsConfig) -> io::Result<()> {
        Stream::start_tls(self, tls)
    }
}

/// A plain stream for [`negotiate`]: with no TLS configured, STARTTLS is never accepted.
struct PlainOnly<'a, S>(&'a mut S);

impl<S: Read> Read for PlainOnly<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<S: Write> Write for PlainOnly<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<S: Read + Write> StartTls for PlainOnly<'_, S> {
    fn is_tls(&self) -> bool {
        false
    }

    fn start_tls(&mut self, _tls: &TlsConfig) -> io::Result<()> {
        Err(io::Error::other("TLS is not configured"))
    }
}

/// Options a client may send before it must choose an export.
const MAX_OPTIONS: u32 = 1024;

/// Negotiate on a plain stream, TLS off.
pub fn negotiate<S: Read + Write>(
    io: &mut S,
    export: &ExportInfo,
) -> Result<Negotiated, HandshakeError> {
    negotiate_tls(&mut PlainOnly(io), export, None)
}

/// Negotiate, offering STARTTLS when `tls` is given (and insisting on it per its mode).
pub fn negotiate_tls<S: StartTls>(
    io: &mut S,
    export: &ExportInfo,
    tls: Option<&TlsConfig>,
) -> Result<Negotiated, HandshakeError> {
    io.write_all(&greeting())?;
    io.flush()?;
    let mut word = [0u8; 4];
    io.read_exact(&mut word)?;
    let client_flags = parse_client_flags(word)?;
    let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
    for _ in 0..MAX_OPTIONS {
        let mut header = [0u8; 16];
        io.read_exact(&mut header)?;
        let (option, length) = parse_option_header(&header)?;
        if length > MAX_OPTION_LENGTH {
            // Skip the payload without holding it, then refuse the option.
            io::copy(&mut Read::by_ref(io).take(length as u64), &mut io::sink())?;
            io.write_all(&option_reply(option, REP_ERR_TOO_BIG, &[]))?;
            io.flush()?;
            continue;
        }
        let mut data = vec![0u8; length as usize];
        io.read_exact(&mut data)?;
        let tls_required = tls.is_some_and(|t| t.mode == TlsMode::Require) && !io.is_tls();
        match option {
            OPT_STARTTLS => {
                let reply = match tls {
                    None => REP_ERR_UNSUP,
                    Some(_) if length != 0 || io.is_tls() => REP_ERR_INVALID,
                    Some(config) => {
                        io.write_all(&option_reply(option, REP_ACK, &[]))?;
                        io.flush()?;
                        io.start_tls(config).map_err(HandshakeError::Tls)?;
                        continue;
                    }
                };
                io.write_all(&option_reply(option, reply, &[]))?;
                io.flush()?;
            }
            OPT_EXPORT_NAME if tls_required => {
                // No error reply exists for this option; the protocol says disconnect.
                return Ok(Negotiated::Closed);
            }
            OPT_EXPORT_NAME => {
                let Ok(name) = std::str::from_utf8(&data) else {
                    return Ok(Negotiated::Closed);
                };
                if !export.matches(name) {
                    // This option cannot answer with an error: the protocol says close.
                    return Ok(Negotiated::Closed);
                }
                let mut reply = Vec::with_capacity(134);
                reply.extend_from_slice(&export.size.to_be_bytes());
                reply.extend_from_slice(&export.transmission_flags().to_be_bytes());
                if !no_zeroes {
                    reply.extend_from_slice(&[0u8; 124]);
                }
                io.write_all(&reply)?;
                io.flush()?;
                return Ok(Negotiated::Transmission {
                    block_sizes_agreed: false,
                });
            }
            OPT_ABORT => {
                // The client may already have gone; a failed ACK changes nothing.
                let _ = io.write_all(&option_reply(option, REP_ACK, &[]));
                let _ = io.flush();
                return Ok(Negotiated::Closed);
            }
            _ if tls_required => {
                // Unknown options too: the protocol lets a FORCEDTLS server answer any option
                // but STARTTLS and ABORT with TLS_REQD, which reveals nothing before TLS.
                io.write_all(&option_reply(option, REP_ERR_TLS_REQD, &[]))?;
                io.flush()?;
            }
            OPT_LIST => {
                if length != 0 {
                    io.write_all(&option_reply(option, REP_ERR_INVALID, &[]))?;
                } else {
                    let mut entry = Vec::with_capacity(4 + export.name.len());
                    entry.extend_from_slice(&(export.name.len() as u32).to_be_bytes());
                    entry.extend_from_slice(export.name.as_bytes());
                    io.write_all(&option_reply(option, REP_SERVER, &entry))?;
                    io.write_all(&option_reply(option, REP_ACK, &[]))?;
                }
                io.flush()?;
            }
            OPT_INFO | OPT_GO => {
                let Some(request) = InfoRequest::parse(&data) else {
                    io.write_all(&option_reply(option, REP_ERR_INVALID, &[]))?;
                    io.flush()?;
                    continue;
                };
                if !export.matches(&request.name) {
                    io.write_all(&option_reply(option, REP_ERR_UNKNOWN, &[]))?;
                    io.flush()?;
                    continue;
                }
                let (min, preferred, max) = export.block_sizes;
                io.write_all(&option_reply(
                    option,
                    REP_INFO,
                    &info_export(export.size, export.transmission_flags()),
                ))?;
                io.write_all(&option_reply(
                    option,
                    REP_INFO,
                    &info_block_size(min, preferred, max),
                ))?;
                if request.requests.contains(&INFO_NAME) {
                    io.write_all(&option_reply(
                        option,
                        REP_INFO,
                        &info_string(INFO_NAME, &export.name),
                    ))?;
                }
                if request.requests.contains(&INFO_DESCRIPTION) {
                    io.write_all(&option_reply(
                        option,
                        REP_INFO,
                        &info_string(INFO_DESCRIPTION, &export.description),
                    ))?;
                }
                io.write_all(&option_reply(option, REP_ACK, &[]))?;
                io.flush()?;
                if option == OPT_GO {
                    return Ok(Negotiated::Transmission {
                        block_sizes_agreed: request.requests.contains(&INFO_BLOCK_SIZE),
                    });
                }
            }
            _ => {
                // STRUCTURED_REPLY, metadata contexts and unknown options.
                io.write_all(&option_reply(option, REP_ERR_UNSUP, &[]))?;
                io.flush()?;
            }
        }
    }
    Err(HandshakeError::TooManyOptions(MAX_OPTIONS))
}
