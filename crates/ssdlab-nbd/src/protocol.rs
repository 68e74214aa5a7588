//! The NBD wire format (fixed newstyle negotiation, simple replies), after `doc/proto.md` of
//! the NBD project. Everything is big-endian. Parsing is pure (bytes in, values or a
//! [`ProtocolError`] out) so that it can be fuzzed apart from any socket.

use thiserror::Error;

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943; // "NBDMAGIC"
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054; // "IHAVEOPT"
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flags (server).
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;

/// Option replies; errors have bit 31 set.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = (1 << 31) | 1;
pub const REP_ERR_INVALID: u32 = (1 << 31) | 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) | 6;
pub const REP_ERR_TLS_REQD: u32 = (1 << 31) | 5;
pub const REP_ERR_TOO_BIG: u32 = (1 << 31) | 9;

/// `NBD_REP_INFO` types.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

/// Error values of simple replies.
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const ESHUTDOWN: u32 = 108;

/// Largest READ or WRITE payload the server accepts (the protocol's customary 32 MiB, which
/// the server advertises as its maximum block size).
pub const MAX_PAYLOAD: u32 = 32 << 20;
/// Largest option payload; names are at most 4096 bytes, so a well-formed option is far
/// below this.
pub const MAX_OPTION_LENGTH: u32 = 64 << 10;
/// Length of a request header on the wire.
pub const REQUEST_HEADER_LEN: usize = 28;
/// Length of a simple reply header on the wire.
pub const REPLY_HEADER_LEN: usize = 16;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("bad request magic 0x{0:08x} (expected 0x25609513)")]
    RequestMagic(u32),
    #[error("bad option magic 0x{0:016x} (expected IHAVEOPT)")]
    OptionMagic(u64),
    #[error("client flags 0x{0:08x} carry unknown bits")]
    ClientFlags(u32),
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Read,
    Write,
    Disconnect,
    Flush,
    Trim,
    Cache,
    WriteZeroes,
    BlockStatus,
    Unknown(u16),
}

impl Command {
    pub fn from_wire(value: u16) -> Command {
        match value {
            0 => Command::Read,
            1 => Command::Write,
            2 => Command::Disconnect,
            3 => Command::Flush,
            4 => Command::Trim,
            5 => Command::Cache,
            6 => Command::WriteZeroes,
            7 => Command::BlockStatus,
            other => Command::Unknown(other),
        }
    }
}

/// A transmission-phase request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub flags: u16,
    pub command: Command,
    pub cookie: u64,
    pub offset: u64,
    pub length: u32,
}

impl RequestHeader {
    pub fn parse(b: &[u8; REQUEST_HEADER_LEN]) -> Result<RequestHeader, ProtocolError> {
        let magic = u32::from_be_bytes(b[0..4].try_into().unwrap());
        if magic != REQUEST_MAGIC {
            return Err(ProtocolError::RequestMagic(magic));
        }
        Ok(RequestHeader {
            flags: u16::from_be_bytes([b[4], b[5]]),
            command: Command::from_wire(u16::from_be_bytes([b[6], b[7]])),
            cookie: u64::from_be_bytes(b[8..16].try_into().unwrap()),
            offset: u64::from_be_bytes(b[16..24].try_into().unwrap()),
            length: u32::from_be_bytes(b[24..28].try_into().unwrap()),
        })
    }

    /// Bytes of payload that follow this header on the wire.
    pub fn payload_len(&self) -> usize {
        if self.command == Command::Write {
            self.length as usize
        } else {
            0
        }
    }

    pub fn encode(&self) -> [u8; REQUEST_HEADER_LEN] {
        let command = match self.command {
            Command::Read => 0,
            Command::Write => 1,
            Command::Disconnect => 2,
            Command::Flush => 3,
            Command::Trim => 4,
            Command::Cache => 5,
            Command::WriteZeroes => 6,
            Command::BlockStatus => 7,
            Command::Unknown(v) => v,
        };
        let mut b = [0u8; REQUEST_HEADER_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&u16::to_be_bytes(command));
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.length.to_be_bytes());
        b
    }
}

/// A simple reply header.
pub fn simple_reply(error: u32, cookie: u64) -> [u8; REPLY_HEADER_LEN] {
    let mut b = [0u8; REPLY_HEADER_LEN];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// The server's greeting: magic, `IHAVEOPT`, handshake flags.
pub fn greeting() -> [u8; 18] {
    let mut b = [0u8; 18];
    b[0..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..18].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    b
}

/// Check the client's flags word.
pub fn parse_client_flags(b: [u8; 4]) -> Result<u32, ProtocolError> {
    let flags = u32::from_be_bytes(b);
    if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(ProtocolError::ClientFlags(flags));
    }
    Ok(flags)
}

/// An option header: magic, option, length.
pub fn parse_option_header(b: &[u8; 16]) -> Result<(u32, u32), ProtocolError> {
    let magic = u64::from_be_bytes(b[0..8].try_into().unwrap());
    if magic != IHAVEOPT {
        return Err(ProtocolError::OptionMagic(magic));
    }
    let option = u32::from_be_bytes(b[8..12].try_into().unwrap());
    let length = u32::from_be_bytes(b[12..16].try_into().unwrap());
    Ok((option, length))
}

/// An option reply with its payload.
pub fn option_reply(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// The payload of `NBD_OPT_INFO` / `NBD_OPT_GO`: an export name and the info types asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    pub requests: Vec<u16>,
}

impl InfoRequest {
    /// `None` when the payload is malformed (the caller answers `NBD_REP_ERR_INVALID`).
    pub fn parse(data: &[u8]) -> Option<InfoRequest> {
        let name_len = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
        let name_end = 4usize.checked_add(name_len)?;
        let name = std::str::from_utf8(data.get(4..name_end)?)
            .ok()?
            .to_string();
        let count = u16::from_be_bytes(data.get(name_end..name_end + 2)?.try_into().ok()?);
        let rest = &data[name_end + 2..];
        if rest.len() != count as usize * 2 {
            return None;
        }
        let requests = rest
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        Some(InfoRequest { name, requests })
    }
}

/// `NBD_INFO_EXPORT`: size and transmission flags.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(12);
    b.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b
}

/// `NBD_INFO_BLOCK_SIZE`: minimum, preferred and maximum block size.
pub fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(14);
    b.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    b.extend_from_slice(&min.to_be_bytes());
    b.extend_from_slice(&preferred.to_be_bytes());
    b.extend_from_slice(&max.to_be_bytes());
    b
}

/// `NBD_INFO_NAME` or `NBD_INFO_DESCRIPTION`: a string.
pub fn info_string(kind: u16, text: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(2 + text.len());
    b.extend_from_slice(&kind.to_be_bytes());
    b.extend_from_slice(text.as_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_header_round_trips() {
        let h = RequestHeader {
            flags: CMD_FLAG_FUA,
            command: Command::Write,
            cookie: 0x0102_0304_0506_0708,
            offset: 1 << 40,
            length: 4096,
        };
        let wire = h.encode();
        assert_eq!(&wire[0..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(RequestHeader::parse(&wire), Ok(h));
        assert_eq!(h.payload_len(), 4096);
    }

    #[test]
    fn bad_magic_is_an_error() {
        let mut wire = RequestHeader {
            flags: 0,
            command: Command::Read,
            cookie: 1,
            offset: 0,
            length: 512,
        }
        .encode();
        wire[0] = 0;
        assert_eq!(
            RequestHeader::parse(&wire),
            Err(ProtocolError::RequestMagic(0x0060_9513))
        );
    }

    #[test]
    fn info_request_parses_and_rejects_truncation() {
        let mut data = Vec::new();
        data.extend_from_slice(&6u32.to_be_bytes());
        data.extend_from_slice(b"ssdlab");
        data.extend_from_slice(&2u16.to_be_bytes());
        data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        data.extend_from_slice(&INFO_NAME.to_be_bytes());
        let parsed = InfoRequest::parse(&data).unwrap();
        assert_eq!(parsed.name, "ssdlab");
        assert_eq!(parsed.requests, vec![INFO_BLOCK_SIZE, INFO_NAME]);
        for cut in 0..data.len() {
            assert_eq!(InfoRequest::parse(&data[..cut]), None, "cut at {cut}");
        }
        let mut long = data.clone();
        long.push(0);
        assert_eq!(InfoRequest::parse(&long), None);
        let mut huge = data;
        huge[0..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(InfoRequest::parse(&huge), None);
    }

    #[test]
    fn client_flags_reject_unknown_bits() {
        assert_eq!(parse_client_flags([0, 0, 0, 3]), Ok(3));
        assert_eq!(
            parse_client_flags([0, 0, 0, 4]),
            Err(ProtocolError::ClientFlags(4))
        );
    }

    #[test]
    fn option_reply_layout() {
        let r = option_reply(OPT_GO, REP_ACK, &[]);
        assert_eq!(r.len(), 20);
        assert_eq!(&r[0..8], &OPTION_REPLY_MAGIC.to_be_bytes());
        assert_eq!(u32::from_be_bytes(r[12..16].try_into().unwrap()), REP_ACK);
    }
}
