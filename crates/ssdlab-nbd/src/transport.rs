//! The byte stream a connection runs on: a Unix or TCP socket, or (in tests and fuzzing) an
//! in-memory script. The real-time clock needs two things plain `Read` lacks: waiting for input
//! with a nanosecond timeout, and reading without blocking while it spins towards a deadline.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

pub trait Transport: Read + Write {
    /// Wait until input (or end of stream) is available; `false` when `timeout` passed first.
    /// `None` waits indefinitely.
    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool>;

    /// Read what is available without blocking; `Ok(None)` when nothing is.
    fn read_available(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>>;
}

fn ppoll_readable(fd: RawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    loop {
        // SAFETY: one valid pollfd, a valid (or null) timespec, no signal mask change.
        let n = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, std::ptr::null()) };
        if n >= 0 {
            return Ok(n > 0);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn recv_dontwait(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: `buf` is valid for `buf.len()` writable bytes.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(err),
        }
    }
}

macro_rules! socket_transport {
    ($t:ty) => {
        impl Transport for $t {
            fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
                ppoll_readable(self.as_raw_fd(), timeout)
            }

            fn read_available(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
                recv_dontwait(self.as_raw_fd(), buf)
            }
        }
    };
}

socket_transport!(UnixStream);
socket_transport!(TcpStream);

/// A scripted client for tests and fuzzing: reads come from `input` (then end of stream),
/// writes are collected in `output`.
#[derive(Debug, Default)]
pub struct MemoryTransport {
    pub input: io::Cursor<Vec<u8>>,
    pub output: Vec<u8>,
}

impl MemoryTransport {
    pub fn new(input: Vec<u8>) -> Self {
        MemoryTransport {
            input: io::Cursor::new(input),
            output: Vec::new(),
        }
    }
}

impl Read for MemoryTransport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for MemoryTransport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for MemoryTransport {
    fn wait_readable(&mut self, _timeout: Option<Duration>) -> io::Result<bool> {
        Ok(true)
    }

    fn read_available(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        self.input.read(buf).map(Some)
    }
}

impl<T: Transport + ?Sized> Transport for &mut T {
    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        (**self).wait_readable(timeout)
    }

    fn read_available(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        (**self).read_available(buf)
    }
}
