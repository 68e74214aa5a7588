//! Property tests of the handshake and request parser over an in-memory client (run by
//! `make fuzz-smoke` with more cases): arbitrary bytes never panic the server, and random
//! request streams, under random per-connection limits, get well-formed replies whose data
//! agrees with a shadow copy while the connection stays within its budget.

mod common;

use common::tiny_device;
use ssdlab_nbd::clock;
use ssdlab_nbd::connection::{Activity, ConnectionLimits, ONE_REQUEST_BYTES};
use ssdlab_nbd::emulator::Emulator;
use ssdlab_nbd::handshake::ExportInfo;
use ssdlab_nbd::protocol::*;
use ssdlab_nbd::server::{serve_stream, serve_stream_with};
use ssdlab_nbd::transport::MemoryTransport;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn emulator() -> (Emulator, ExportInfo) {
    let device = tiny_device("slc");
    let export = ExportInfo {
        name: "ssdlab".into(),
        description: String::new(),
        size: device.logical_bytes(),
        read_only: false,
        block_sizes: (512, device.page_size(), MAX_PAYLOAD),
    };
    let emu = Emulator::new(
        device,
        clock::by_name("virtual", None).unwrap(),
        None,
        10_000,
    );
    (emu, export)
}

/// Greeting answer and `NBD_OPT_GO` for the default export, without block sizes (so any
/// alignment is served).
fn handshake_prefix() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes());
    b.extend_from_slice(&IHAVEOPT.to_be_bytes());
    b.extend_from_slice(&OPT_GO.to_be_bytes());
    b.extend_from_slice(&6u32.to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    b
}

/// Skip the server's greeting and GO replies; returns the transmission-phase bytes.
fn transmission_output(out: &[u8]) -> &[u8] {
    let mut at = 18;
    loop {
        let kind = u32::from_be_bytes(out[at + 12..at + 16].try_into().unwrap());
        let len = u32::from_be_bytes(out[at + 16..at + 20].try_into().unwrap()) as usize;
        at += 20 + len;
        if kind == REP_ACK {
            return &out[at..];
        }
    }
}

#[derive(Debug, Clone)]
struct Req {
    command: u16,
    flags: u16,
    offset: u64,
    length: u32,
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn request() -> impl Strategy<Value = Req> {
        let command = prop_oneof![
            6 => Just(0u16), 6 => Just(1u16), 1 => Just(3u16), 2 => Just(4u16), 2 => Just(6u16),
            1 => 5u16..12,
        ];
        let flags = prop_oneof![8 => Just(0u16), 2 => Just(CMD_FLAG_FUA), 1 => Just(CMD_FLAG_NO_HOLE), 1 => any::<u16>()];
        // Offsets mostly inside a small window (so reads meet writes), some anywhere.
        let offset = prop_oneof![
            8 => (0u64..64).prop_map(|s| s * 512),
            1 => 0u64..(6 << 20),
            1 => any::<u64>(),
        ];
        let length = prop_oneof![
            8 => (0u32..=24).prop_map(|s| s * 512),
            1 => 1u32..20_000,
            1 => any::<u32>(),
        ];
        (command, flags, offset, length).prop_map(|(command, flags, offset, length)| Req {
            command,
            flags,
            offset,
            length,
        })
    }

    proptest! {
        #[test]
        fn arbitrary_client_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let (emu, export) = emulator();
            let mut io = MemoryTransport::new(bytes);
            serve_stream(&mut io, &emu, &export, |_| {});
            prop_assert_eq!(&io.output[..8], b"NBDMAGIC");
        }

        #[test]
        fn arbitrary_bytes_after_the_handshake_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let (emu, export) = emulator();
            let mut input = handshake_prefix();
            input.extend_from_slice(&tail);
            let mut io = MemoryTransport::new(input);
            serve_stream(&mut io, &emu, &export, |_| {});
            // Garbage is answered with simple replies (or not at all), never with anything
            // that breaks the reply framing.
            let rest = transmission_output(&io.output);
            if !rest.is_empty() {
                prop_assert!(rest.len() >= REPLY_HEADER_LEN);
                prop_assert_eq!(u32::from_be_bytes(rest[0..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
            }
        }

        #[test]
        fn random_request_streams_get_valid_replies_and_consistent_data(
            reqs in proptest::collection::vec(request(), 1..60),
            in_flight in 1usize..=16,
            budget_mib in 1usize..=4,
        ) {
            let (emu, export) = emulator();
            let size = export.size;
            let mut input = handshake_prefix();
            let mut sent = Vec::new();
            for (i, r) in reqs.iter().enumerate() {
                let h = RequestHeader { flags: r.flags, command: Command::from_wire(r.command), cookie: i as u64, offset: r.offset, length: r.length };
                input.extend_from_slice(&h.encode());
                if h.command == Command::Write {
                    if r.length > 256 << 10 {
                        // A long write whose payload never comes: the stream ends here.
                        sent.push((h, Vec::new()));
                        break;
                    }
                    let payload: Vec<u8> = (0..r.length).map(|b| (b as u64 ^ (i as u64 * 131)) as u8).collect();
                    input.extend_from_slice(&payload);
                    sent.push((h, payload));
                } else {
                    sent.push((h, Vec::new()));
                }
                if h.command == Command::Disconnect {
                    break;
                }
            }
            let mut io = MemoryTransport::new(input);
            // Small limits, so that back-pressure interleaves with every kind of request.
            let limits = ConnectionLimits {
                max_requests_in_flight: in_flight,
                max_buffered_bytes: budget_mib << 20,
            };
            let counters = serve_stream_with(&mut io, &emu, &export, limits, Arc::new(Activity::new()), |_| {});
            prop_assert!(counters.peak_buffered_bytes as usize <= limits.max_buffered_bytes.max(ONE_REQUEST_BYTES));
            prop_assert_eq!(emu.buffered_bytes.load(Ordering::Relaxed), 0, "freed at the end");
            let mut rest = transmission_output(&io.output);
            // Shadow copy of the first 64 KiB: None where a trim left the content open.
            let window = 64usize << 10;
            let mut shadow: Vec<Option<u8>> = vec![Some(0); window];
            let mut replies = 0;
            for (h, payload) in &sent {
                if h.command == Command::Disconnect || rest.is_empty() {
                    break;
                }
                prop_assert!(rest.len() >= REPLY_HEADER_LEN, "truncated reply");
                prop_assert_eq!(u32::from_be_bytes(rest[0..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
                let error = u32::from_be_bytes(rest[4..8].try_into().unwrap());
                let cookie = u64::from_be_bytes(rest[8..16].try_into().unwrap());
                prop_assert_eq!(cookie, h.cookie, "replies come in order under the virtual clock");
                prop_assert_eq!(error, ssdlab_nbd::connection::validate(h, &export, false));
                rest = &rest[REPLY_HEADER_LEN..];
                replies += 1;
                let end = h.offset.saturating_add(h.length as u64);
                let in_window = |f: &mut dyn FnMut(usize)| {
                    for a in h.offset.min(window as u64)..end.min(window as u64) {
                        f(a as usize);
                    }
                };
                if error != 0 {
                    continue;
                }
                if h.command != Command::Flush {
                    prop_assert!(end <= size);
                }
                match h.command {
                    Command::Read => {
                        let data = &rest[..h.length as usize];
                        let mut ok = true;
                        in_window(&mut |a| {
                            if let Some(v) = shadow[a] {
                                ok &= data[a - h.offset as usize] == v;
                            }
                        });
                        prop_assert!(ok, "read of {}+{} disagrees with the shadow", h.offset, h.length);
                        rest = &rest[h.length as usize..];
                    }
                    Command::Write => in_window(&mut |a| shadow[a] = Some(payload[a - h.offset as usize])),
                    Command::Trim => in_window(&mut |a| shadow[a] = None),
                    Command::WriteZeroes => in_window(&mut |a| shadow[a] = Some(0)),
                    _ => {}
                }
            }
            prop_assert!(rest.is_empty(), "{} bytes after {} replies", rest.len(), replies);
        }
    }
}
