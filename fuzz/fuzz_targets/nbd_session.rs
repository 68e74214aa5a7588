//! The NBD server's negotiation and transmission phase on arbitrary client bytes, and on
//! multi-request sessions built from them, under per-connection limits chosen by the input:
//! the server must answer or close, never panic or hang, and never hold more than its budget
//! (or one request, when nothing else is buffered).
//!
//! Input layout: byte 0 picks the mode and export (bit 0: read-only; bit 1: a valid GO in
//! front; bit 2: structured session), byte 1 the limits (requests in flight 1..=16, budget
//! 1..=4 MiB). In a structured session every 6 following bytes are one request (command,
//! flags, offset and length in sectors), so that the fuzzer reaches deep request sequences
//! instead of spending its time finding a valid magic; a raw session sends the bytes as they
//! are.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ssdlab_core::Device;
use ssdlab_nbd::clock;
use ssdlab_nbd::connection::{Activity, ConnectionLimits, MIN_BUFFERED_BYTES, ONE_REQUEST_BYTES};
use ssdlab_nbd::emulator::Emulator;
use ssdlab_nbd::handshake::ExportInfo;
use ssdlab_nbd::protocol::*;
use ssdlab_nbd::server::serve_stream_with;
use ssdlab_nbd::transport::MemoryTransport;
use std::sync::Arc;

const TINY: &[(&str, &str)] = &[
    ("geometry.channels", "1"),
    ("geometry.chips_per_channel", "1"),
    ("geometry.dies_per_chip", "2"),
    ("geometry.planes_per_die", "1"),
    ("geometry.blocks_per_plane", "32"),
    ("geometry.pages_per_block", "32"),
    ("geometry.over_provisioning", "0.25"),
];

fn go_prefix() -> Vec<u8> {
    let mut input = Vec::new();
    input.extend_from_slice(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes());
    input.extend_from_slice(&IHAVEOPT.to_be_bytes());
    input.extend_from_slice(&OPT_GO.to_be_bytes());
    input.extend_from_slice(&6u32.to_be_bytes());
    input.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    input
}

/// One request per 6 bytes: command (mostly valid ones), flags, offset and length in 512-byte
/// sectors; writes carry their payload unless the session ends inside it.
fn session(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, r) in bytes.chunks_exact(6).enumerate() {
        let command = match r[0] % 10 {
            c @ 0..=6 => c as u16,
            7 => 0,
            8 => 1,
            _ => 0x100 | r[0] as u16,
        };
        let flags = if r[1] & 0x80 != 0 { r[1] as u16 } else { (r[1] & 3) as u16 };
        let offset = u16::from_be_bytes([r[2], r[3]]) as u64 * 512;
        let length = u16::from_be_bytes([r[4], r[5]]) as u32 * 512;
        let h = RequestHeader {
            flags,
            command: Command::from_wire(command),
            cookie: i as u64,
            offset,
            length,
        };
        out.extend_from_slice(&h.encode());
        if h.command == Command::Write {
            out.extend((0..length).map(|b| (b as usize ^ i) as u8));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let mode = data.first().copied().unwrap_or(0);
    let limits_byte = data.get(1).copied().unwrap_or(0);
    let rest = data.get(2..).unwrap_or(&[]);
    let overrides: Vec<(String, String)> =
        TINY.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let device = Device::from_toml(
        ssdlab_core::presets::get("slc").unwrap(),
        "slc",
        &overrides,
        1,
        true,
    )
    .unwrap();
    let export = ExportInfo {
        name: "ssdlab".into(),
        description: String::new(),
        size: device.logical_bytes(),
        read_only: mode & 1 == 1,
        block_sizes: (512, device.page_size(), MAX_PAYLOAD),
    };
    let limits = ConnectionLimits {
        max_requests_in_flight: 1 + (limits_byte & 0x0f) as usize,
        max_buffered_bytes: MIN_BUFFERED_BYTES * (1 + (limits_byte >> 6) as usize),
    };
    let emu = Emulator::new(device, clock::by_name("virtual", None).unwrap(), None, 10_000);
    let mut input = Vec::new();
    if mode & 6 != 0 {
        input.extend_from_slice(&go_prefix());
    }
    if mode & 4 != 0 {
        input.extend_from_slice(&session(rest));
    } else {
        input.extend_from_slice(rest);
    }
    let mut io = MemoryTransport::new(input);
    let counters = serve_stream_with(
        &mut io,
        &emu,
        &export,
        limits,
        Arc::new(Activity::new()),
        |_| {},
    );
    let bound = limits.max_buffered_bytes.max(ONE_REQUEST_BYTES);
    assert!(counters.peak_buffered_bytes as usize <= bound);
    assert_eq!(emu.buffered_bytes.load(std::sync::atomic::Ordering::Relaxed), 0);
});
