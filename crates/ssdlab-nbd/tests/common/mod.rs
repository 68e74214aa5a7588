//! A minimal NBD client and a tiny device for the server's tests.

#![allow(dead_code)]

use ssdlab_core::Device;
use ssdlab_nbd::emulator::Emulator;
use ssdlab_nbd::protocol::*;
use ssdlab_nbd::{Endpoint, Server, ServerOptions, ShutdownHandle};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// 2 dies x 32 blocks x 32 pages of 4 KiB, SLC, data-driven.
pub const TINY: &[(&str, &str)] = &[
    ("geometry.channels", "1"),
    ("geometry.chips_per_channel", "1"),
    ("geometry.dies_per_chip", "2"),
    ("geometry.planes_per_die", "1"),
    ("geometry.blocks_per_plane", "32"),
    ("geometry.pages_per_block", "32"),
    ("geometry.page_size_bytes", "4096"),
    ("geometry.over_provisioning", "0.25"),
];

pub fn tiny_device(preset: &str) -> Device {
    device_with(preset, &[])
}

/// The tiny device with some keys changed (e.g. more blocks, for 32 MiB requests).
pub fn device_with(preset: &str, changes: &[(&str, &str)]) -> Device {
    let overrides: Vec<(String, String)> = TINY
        .iter()
        .filter(|(k, _)| !changes.iter().any(|(c, _)| c == k))
        .chain(changes)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let text = ssdlab_core::presets::get(preset).expect("preset");
    Device::from_toml(text, preset, &overrides, 7, true).expect("device")
}

pub struct Running {
    pub socket: PathBuf,
    pub stop: ShutdownHandle,
    pub emu: Arc<Emulator>,
    pub thread: JoinHandle<Result<serde_json::Value, ssdlab_nbd::ServeError>>,
    _dir: TempDir,
}

impl Running {
    pub fn finish(self) -> serde_json::Value {
        self.stop.shutdown();
        self.thread.join().expect("server thread").expect("summary")
    }
}

/// A directory removed on drop (no extra dependency for one helper).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let unique = format!(
            "ssdlab-nbd-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], "");
        let path = std::env::temp_dir().join(unique);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn start(tag: &str, clock: &str, configure: impl FnOnce(&mut ServerOptions)) -> Running {
    start_with(tiny_device("slc"), tag, clock, configure)
}

pub fn start_with(
    device: Device,
    tag: &str,
    clock: &str,
    configure: impl FnOnce(&mut ServerOptions),
) -> Running {
    let dir = TempDir::new(tag);
    let socket = dir.0.join("nbd.sock");
    let mut options = ServerOptions::new(Endpoint::Unix(socket.clone()));
    options.clock = clock.to_string();
    configure(&mut options);
    let server = Server::bind(device, &options).expect("bind");
    let stop = server.shutdown_handle();
    let emu = server.emulator();
    let thread = std::thread::spawn(move || server.run());
    Running {
        socket,
        stop,
        emu,
        thread,
        _dir: dir,
    }
}

pub struct Client {
    pub stream: UnixStream,
    pub size: u64,
    pub flags: u16,
}

pub struct Reply {
    pub error: u32,
    pub cookie: u64,
}

pub fn connect_raw(socket: &PathBuf) -> UnixStream {
    let s = UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Read the greeting and send the client flags.
pub fn greet(s: &mut UnixStream, client_flags: u32) {
    let mut g = [0u8; 18];
    s.read_exact(&mut g).expect("greeting");
    assert_eq!(&g[0..8], b"NBDMAGIC");
    assert_eq!(&g[8..16], b"IHAVEOPT");
    assert_eq!(u16::from_be_bytes([g[16], g[17]]), 3);
    s.write_all(&client_flags.to_be_bytes()).unwrap();
}

pub fn send_option(s: &mut UnixStream, option: u32, data: &[u8]) {
    let mut b = Vec::new();
    b.extend_from_slice(&IHAVEOPT.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

/// One option reply: (option, type, data).
pub fn read_option_reply(s: &mut UnixStream) -> (u32, u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).expect("option reply");
    assert_eq!(
        u64::from_be_bytes(h[0..8].try_into().unwrap()),
        OPTION_REPLY_MAGIC
    );
    let option = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    let mut data = vec![0u8; len];
    s.read_exact(&mut data).unwrap();
    (option, kind, data)
}

pub fn info_payload(name: &str, requests: &[u16]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(requests.len() as u16).to_be_bytes());
    for r in requests {
        d.extend_from_slice(&r.to_be_bytes());
    }
    d
}

impl Client {
    /// Connect with NBD_OPT_GO, asking for block sizes.
    pub fn connect(socket: &PathBuf) -> Client {
        let mut s = connect_raw(socket);
        greet(&mut s, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
        send_option(&mut s, OPT_GO, &info_payload("", &[INFO_BLOCK_SIZE]));
        let (mut size, mut flags) = (0, 0);
        loop {
            let (option, kind, data) = read_option_reply(&mut s);
            assert_eq!(option, OPT_GO);
            match kind {
                REP_INFO => {
                    if u16::from_be_bytes([data[0], data[1]]) == INFO_EXPORT {
                        size = u64::from_be_bytes(data[2..10].try_into().unwrap());
                        flags = u16::from_be_bytes([data[10], data[11]]);
                    }
                }
                REP_ACK => break,
                other => panic!("unexpected GO reply {other:#x}"),
            }
        }
        Client {
            stream: s,
            size,
            flags,
        }
    }

    pub fn send(
        &mut self,
        command: Command,
        flags: u16,
        cookie: u64,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) {
        let h = RequestHeader {
            flags,
            command,
            cookie,
            offset,
            length,
        };
        let mut b = h.encode().to_vec();
        b.extend_from_slice(payload);
        self.stream.write_all(&b).unwrap();
    }

    /// A simple reply; `data_len` bytes of data follow a successful read reply.
    pub fn reply(&mut self, data: Option<&mut [u8]>) -> Reply {
        let mut h = [0u8; 16];
        self.stream.read_exact(&mut h).expect("reply");
        assert_eq!(
            u32::from_be_bytes(h[0..4].try_into().unwrap()),
            SIMPLE_REPLY_MAGIC
        );
        let error = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
        if error == 0 {
            if let Some(buf) = data {
                self.stream.read_exact(buf).unwrap();
            }
        }
        Reply { error, cookie }
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> u32 {
        self.send(Command::Write, 0, 1, offset, data.len() as u32, data);
        self.reply(None).error
    }

    pub fn read(&mut self, offset: u64, length: usize) -> Result<Vec<u8>, u32> {
        self.send(Command::Read, 0, 2, offset, length as u32, &[]);
        let mut buf = vec![0u8; length];
        let r = self.reply(Some(&mut buf));
        if r.error == 0 {
            Ok(buf)
        } else {
            Err(r.error)
        }
    }

    pub fn command(&mut self, command: Command, flags: u16, offset: u64, length: u32) -> u32 {
        self.send(command, flags, 3, offset, length, &[]);
        self.reply(None).error
    }

    pub fn disconnect(mut self) {
        self.send(Command::Disconnect, 0, 0, 0, 0, &[]);
    }
}

/// Deterministic bytes for a block.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
