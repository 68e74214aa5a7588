//! The NBD server against a scripted client over a real Unix socket: negotiation, every
//! command, the protocol's errors, misbehaving clients, clocks and the summary; `hostile`
//! holds the attacks on the server's limits.

mod common;
mod hostile;

use common::*;
use ssdlab_nbd::protocol::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

#[test]
fn negotiation_lists_informs_and_refuses_what_it_does_not_support() {
    let server = start("negotiate", "virtual", |_| {});
    let mut s = connect_raw(&server.socket);
    greet(&mut s, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);

    send_option(&mut s, OPT_LIST, &[]);
    let (_, kind, data) = read_option_reply(&mut s);
    assert_eq!(kind, REP_SERVER);
    assert_eq!(&data[4..], b"ssdlab");
    assert_eq!(read_option_reply(&mut s).1, REP_ACK);

    send_option(&mut s, OPT_LIST, b"x");
    assert_eq!(read_option_reply(&mut s).1, REP_ERR_INVALID);

    for refused in [OPT_STRUCTURED_REPLY, OPT_STARTTLS, 42] {
        send_option(&mut s, refused, &[]);
        assert_eq!(read_option_reply(&mut s), (refused, REP_ERR_UNSUP, vec![]));
    }

    send_option(&mut s, OPT_INFO, &info_payload("nope", &[]));
    assert_eq!(read_option_reply(&mut s).1, REP_ERR_UNKNOWN);
    send_option(&mut s, OPT_INFO, &[0, 0, 0, 9, b'x']);
    assert_eq!(read_option_reply(&mut s).1, REP_ERR_INVALID);

    // An oversized option is skipped without being held, then refused.
    send_option(
        &mut s,
        OPT_INFO,
        &vec![0u8; (MAX_OPTION_LENGTH + 1) as usize],
    );
    assert_eq!(read_option_reply(&mut s).1, REP_ERR_TOO_BIG);

    send_option(
        &mut s,
        OPT_INFO,
        &info_payload("ssdlab", &[INFO_NAME, INFO_DESCRIPTION]),
    );
    let mut infos = Vec::new();
    loop {
        let (_, kind, data) = read_option_reply(&mut s);
        if kind == REP_ACK {
            break;
        }
        assert_eq!(kind, REP_INFO);
        infos.push(data);
    }
    let export = infos
        .iter()
        .find(|d| d[0..2] == INFO_EXPORT.to_be_bytes())
        .unwrap();
    let size = u64::from_be_bytes(export[2..10].try_into().unwrap());
    let flags = u16::from_be_bytes([export[10], export[11]]);
    assert_eq!(size, tiny_device("slc").logical_bytes());
    assert_eq!(size % 4096, 0);
    for f in [
        FLAG_HAS_FLAGS,
        FLAG_SEND_FLUSH,
        FLAG_SEND_FUA,
        FLAG_SEND_TRIM,
        FLAG_SEND_WRITE_ZEROES,
        FLAG_CAN_MULTI_CONN,
    ] {
        assert_ne!(flags & f, 0, "flag {f:#x}");
    }
    assert_eq!(flags & FLAG_READ_ONLY, 0);
    let sizes = infos
        .iter()
        .find(|d| d[0..2] == INFO_BLOCK_SIZE.to_be_bytes())
        .unwrap();
    let word = |i: usize| u32::from_be_bytes(sizes[i..i + 4].try_into().unwrap());
    assert_eq!((word(2), word(6), word(10)), (512, 4096, 32 << 20));
    assert!(infos
        .iter()
        .any(|d| d[0..2] == INFO_NAME.to_be_bytes() && &d[2..] == b"ssdlab"));

    send_option(&mut s, OPT_ABORT, &[]);
    assert_eq!(read_option_reply(&mut s).1, REP_ACK);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "the server closes after ABORT");
    server.finish();
}

#[test]
fn export_name_enters_transmission_with_or_without_zeroes() {
    let server = start("export-name", "virtual", |_| {});
    for (flags, trailer) in [
        (FLAG_C_FIXED_NEWSTYLE, 124),
        (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES, 0),
    ] {
        let mut s = connect_raw(&server.socket);
        greet(&mut s, flags);
        send_option(&mut s, OPT_EXPORT_NAME, b"ssdlab");
        let mut reply = vec![0u8; 10 + trailer];
        s.read_exact(&mut reply).unwrap();
        let size = u64::from_be_bytes(reply[0..8].try_into().unwrap());
        assert_eq!(size, tiny_device("slc").logical_bytes());
        assert!(reply[10..].iter().all(|&b| b == 0));
        let mut c = Client {
            stream: s,
            size,
            flags: 0,
        };
        assert_eq!(c.write(0, &pattern(1, 4096)), 0);
        assert_eq!(c.read(0, 4096).unwrap(), pattern(1, 4096));
        c.disconnect();
    }
    // An unknown export name cannot be answered with an error: the server closes.
    let mut s = connect_raw(&server.socket);
    greet(&mut s, FLAG_C_FIXED_NEWSTYLE);
    send_option(&mut s, OPT_EXPORT_NAME, b"other");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    server.finish();
}

#[test]
fn unknown_client_flags_and_bad_option_magic_close_the_connection() {
    let server = start("bad-handshake", "virtual", |_| {});
    let mut s = connect_raw(&server.socket);
    greet(&mut s, 0x80);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());

    let mut s = connect_raw(&server.socket);
    greet(&mut s, FLAG_C_FIXED_NEWSTYLE);
    s.write_all(&[0xde; 16]).unwrap();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());

    // The server still serves others.
    let mut c = Client::connect(&server.socket);
    assert_eq!(c.write(4096, &pattern(2, 8192)), 0);
    assert_eq!(c.read(4096, 8192).unwrap(), pattern(2, 8192));
    let summary = server.finish();
    assert!(summary["emulator"]["protocol_errors"].as_u64().unwrap() >= 2);
}

#[test]
fn data_round_trips_at_any_alignment_with_every_command() {
    let server = start("commands", "virtual", |_| {});
    let mut c = Client::connect(&server.socket);
    let whole = pattern(3, 64 << 10);
    assert_eq!(c.write(0, &whole), 0);
    assert_eq!(c.read(0, whole.len()).unwrap(), whole);
    // Sub-page, sector-aligned overwrite (read-modify-write inside the device).
    let patch = pattern(4, 1536);
    assert_eq!(c.write(512, &patch), 0);
    let mut expect = whole.clone();
    expect[512..2048].copy_from_slice(&patch);
    assert_eq!(c.read(0, 8192).unwrap(), expect[..8192]);

    // FUA write and flush.
    c.send(
        Command::Write,
        CMD_FLAG_FUA,
        9,
        8192,
        4096,
        &pattern(5, 4096),
    );
    assert_eq!(c.reply(None).error, 0);
    expect[8192..12288].copy_from_slice(&pattern(5, 4096));
    assert_eq!(c.command(Command::Flush, 0, 0, 0), 0);

    // Trim of whole pages: they read back as zeros; a partial page keeps its data.
    assert_eq!(c.command(Command::Trim, 0, 16384, 8192 + 512), 0);
    expect[16384..24576].fill(0);
    assert_eq!(c.read(0, expect.len()).unwrap(), expect);

    // Write zeroes: partial head and tail pages, whole pages in the middle, with and without
    // holes.
    assert_eq!(
        c.command(Command::WriteZeroes, 0, 30 * 1024 + 512, 9 * 1024),
        0
    );
    expect[30 * 1024 + 512..39 * 1024 + 512].fill(0);
    assert_eq!(
        c.command(
            Command::WriteZeroes,
            CMD_FLAG_NO_HOLE | CMD_FLAG_FUA,
            48 << 10,
            8192
        ),
        0
    );
    expect[48 << 10..56 << 10].fill(0);
    assert_eq!(c.read(0, expect.len()).unwrap(), expect);

    // Zero-length requests are harmless no-ops.
    assert_eq!(c.command(Command::Read, 0, 0, 0), 0);
    c.disconnect();
    let summary = server.finish();
    let job = &summary["jobs"][0];
    // Device requests: writes = 3 + two partial pages of the first WRITE_ZEROES + the
    // hole-free one; trims = TRIM + the middle of the first WRITE_ZEROES; flushes = the one
    // issued with the FUA WRITE_ZEROES and FLUSH (the FUA write is the device's own FUA
    // write, not a write and a flush); the zero-length read never reaches the device.
    assert_eq!(job["write"]["total_ios"], 6);
    assert_eq!(job["trim"]["total_ios"], 2);
    assert_eq!(job["read"]["total_ios"], 4);
    assert_eq!(summary["emulator"]["flushes"], 2);
}

#[test]
fn protocol_errors_are_reported_and_the_connection_survives() {
    let server = start("errors", "virtual", |_| {});
    let mut c = Client::connect(&server.socket);
    let size = c.size;
    assert_eq!(c.write(size - 4096, &pattern(6, 4096)), 0);
    c.send(Command::Write, 0, 1, size - 4096, 8192, &pattern(6, 8192));
    assert_eq!(c.reply(None).error, ENOSPC);
    assert_eq!(c.read(size, 512), Err(EINVAL));
    assert_eq!(c.read(u64::MAX - 511, 512), Err(EINVAL));
    assert_eq!(c.command(Command::Trim, 0, size - 4096, 8192), EINVAL);
    assert_eq!(c.command(Command::WriteZeroes, 0, size, 4096), ENOSPC);
    assert_eq!(c.read(0, (MAX_PAYLOAD + 1) as usize), Err(EINVAL));
    // Block sizes were agreed in GO: unaligned reads and writes are refused.
    assert_eq!(c.read(100, 512), Err(EINVAL));
    c.send(Command::Write, 0, 1, 0, 100, &[0u8; 100]);
    assert_eq!(c.reply(None).error, EINVAL);
    // Unknown commands and flags, and commands that were not negotiated.
    for (command, flags) in [
        (Command::Unknown(99), 0),
        (Command::Cache, 0),
        (Command::BlockStatus, 0),
        (Command::Read, CMD_FLAG_FUA),
        (Command::Trim, CMD_FLAG_NO_HOLE),
        (Command::Write, 1 << 9),
    ] {
        let payload = if command == Command::Write {
            vec![0u8; 512]
        } else {
            vec![]
        };
        c.send(command, flags, 77, 0, 512, &payload);
        let r = c.reply(None);
        assert_eq!(
            (r.error, r.cookie),
            (EINVAL, 77),
            "{command:?} flags {flags:#x}"
        );
    }
    // Still serving, and the last good write is intact.
    assert_eq!(c.read(size - 4096, 4096).unwrap(), pattern(6, 4096));

    // A write longer than the protocol maximum cannot be skipped: error, then close.
    c.send(Command::Write, 0, 5, 0, MAX_PAYLOAD + 1, &[]);
    assert_eq!(c.reply(None).error, EINVAL);
    let mut rest = Vec::new();
    c.stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    let summary = server.finish();
    assert!(summary["emulator"]["error_replies"].as_u64().unwrap() >= 12);
}

#[test]
fn read_only_export_refuses_writes_with_eperm() {
    let server = start("read-only", "virtual", |o| o.read_only = true);
    let mut c = Client::connect(&server.socket);
    assert_ne!(c.flags & FLAG_READ_ONLY, 0);
    assert_eq!(c.write(0, &pattern(7, 4096)), EPERM);
    assert_eq!(c.command(Command::Trim, 0, 0, 4096), EPERM);
    assert_eq!(c.command(Command::WriteZeroes, 0, 0, 4096), EPERM);
    assert_eq!(c.read(0, 4096).unwrap(), vec![0u8; 4096]);
    c.disconnect();
    let summary = server.finish();
    assert_eq!(summary["jobs"][0]["write"]["total_ios"], 0);
}

#[test]
fn misbehaving_clients_lose_nothing_acknowledged_and_others_keep_being_served() {
    let server = start("misbehave", "virtual", |_| {});
    let mut good = Client::connect(&server.socket);
    assert_eq!(good.write(0, &pattern(8, 4096)), 0);

    // Acknowledged, then the client vanishes without DISC.
    let mut quitter = Client::connect(&server.socket);
    assert_eq!(quitter.write(4096, &pattern(9, 4096)), 0);
    drop(quitter);

    // Disconnects in the middle of a write's payload: the write is not applied.
    let mut partial = Client::connect(&server.socket);
    let h = RequestHeader {
        flags: 0,
        command: Command::Write,
        cookie: 1,
        offset: 0,
        length: 4096,
    };
    partial.stream.write_all(&h.encode()).unwrap();
    partial.stream.write_all(&pattern(10, 1000)).unwrap();
    drop(partial);

    // A truncated header, then gone.
    let mut truncated = Client::connect(&server.socket);
    truncated.stream.write_all(&h.encode()[..11]).unwrap();
    drop(truncated);

    // Garbage instead of a request.
    let mut garbage = Client::connect(&server.socket);
    garbage.stream.write_all(&pattern(11, 4096)).unwrap();
    let mut rest = Vec::new();
    garbage.stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "garbage gets a closed connection");

    assert_eq!(good.read(0, 4096).unwrap(), pattern(8, 4096));
    assert_eq!(good.read(4096, 4096).unwrap(), pattern(9, 4096));
    good.disconnect();
    server.finish();
}

#[test]
fn several_connections_share_one_device() {
    let server = start("multi", "virtual", |_| {});
    let socket = server.socket.clone();
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&socket);
                // Pipelined: 16 requests in flight, then the replies.
                for i in 0..16u64 {
                    let off = (w * 16 + i) * 4096;
                    c.send(Command::Write, 0, off, off, 4096, &pattern(off, 4096));
                }
                let mut cookies: Vec<u64> = (0..16)
                    .map(|_| c.reply(None))
                    .map(|r| {
                        assert_eq!(r.error, 0);
                        r.cookie
                    })
                    .collect();
                cookies.sort_unstable();
                assert_eq!(
                    cookies,
                    (0..16).map(|i| (w * 16 + i) * 4096).collect::<Vec<_>>()
                );
                c.disconnect();
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut reader = Client::connect(&socket);
    for page in 0..64u64 {
        assert_eq!(
            reader.read(page * 4096, 4096).unwrap(),
            pattern(page * 4096, 4096)
        );
    }
    reader.disconnect();
    let summary = server.finish();
    assert_eq!(summary["jobs"][0]["write"]["total_ios"], 64);
    assert_eq!(summary["jobs"][0]["read"]["total_ios"], 64);
    assert_eq!(summary["emulator"]["connections"], 5);
}

#[test]
fn realtime_replies_wait_for_the_modelled_completion_and_may_overtake() {
    let server = start("realtime", "realtime", |_| {});
    let mut c = Client::connect(&server.socket);
    // Model: SLC program 200 us + transfer; an unmapped read completes in ~1 us.
    let started = Instant::now();
    assert_eq!(c.write(0, &pattern(12, 4096)), 0);
    let write_rtt = started.elapsed();
    // A write, then a read of an unwritten page sent right behind it: the read's reply comes
    // first (out of order, as the protocol allows).
    c.send(Command::Write, 0, 100, 8192, 4096, &pattern(13, 4096));
    c.send(Command::Read, 0, 200, 1 << 20, 4096, &[]);
    let mut zeros = vec![1u8; 4096];
    let first = c.reply(Some(&mut zeros));
    assert_eq!(first.cookie, 200);
    assert_eq!(zeros, vec![0u8; 4096]);
    assert_eq!(c.reply(None).cookie, 100);
    c.disconnect();
    let summary = server.finish();
    let modelled = summary["jobs"][0]["write"]["clat_ns"]["min"]
        .as_u64()
        .unwrap();
    assert!(
        modelled > 100_000,
        "a program takes over 100 us in the model: {modelled}"
    );
    assert!(
        write_rtt >= Duration::from_nanos(modelled),
        "a reply never leaves before its modelled completion ({write_rtt:?} < {modelled} ns)"
    );
    let misses = &summary["emulator"]["deadline_misses"];
    assert_eq!(misses["lateness_ns"]["N"], 3);
}

#[test]
fn realtime_summary_reports_client_gaps_and_only_short_ones_set_the_compensation() {
    let server = start("gaps", "realtime", |_| {});
    let mut c = Client::connect(&server.socket);
    assert_eq!(c.write(0, &pattern(1, 4096)), 0);
    // A client thinking for 10 ms: a gap in the summary, but no transport sample.
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(c.write(4096, &pattern(2, 4096)), 0);
    assert_eq!(c.write(8192, &pattern(3, 4096)), 0);
    assert_eq!(c.write(12288, &pattern(4, 4096)), 0);
    c.disconnect();
    let summary = server.finish();
    let gaps = &summary["emulator"]["client_gaps_ns"];
    // One gap before each request but the first, the disconnect request included.
    assert_eq!(gaps["N"], 4, "{gaps}");
    assert!(gaps["max"].as_u64().unwrap() >= 10_000_000, "{gaps}");
    assert!(gaps["p25"].as_u64().unwrap() <= gaps["p50"].as_u64().unwrap());
    // Only the two short gaps (under 2 ms each) feed the estimate; had the 10 ms one, the
    // second write alone would have been sent 10 ms early.
    let compensation = &summary["emulator"]["compensation"];
    assert_eq!(compensation["mode"], "auto");
    let applied_ns = compensation["mean_ns"].as_f64().unwrap() * 4.0;
    assert!(applied_ns <= 4e6, "{compensation}");
}

#[test]
fn virtual_clock_is_deterministic_and_reports_simulated_time() {
    let deterministic = || {
        let server = start("determinism2", "virtual", |_| {});
        let mut c = Client::connect(&server.socket);
        for i in 0..300u64 {
            let off = (i * 7919 % 1024) * 4096;
            assert_eq!(c.write(off, &pattern(i, 4096)), 0);
            c.read((i * 31 % 1024) * 4096, 4096).unwrap();
        }
        c.disconnect();
        let mut s = server.finish();
        s["emulator"]["wall_time_ns"] = 0.into();
        s["emulator"]["served_latency_ns"] = 0.into();
        s
    };
    let a = deterministic();
    let b = deterministic();
    assert_eq!(a, b, "same requests, same simulated statistics");
    assert_eq!(a["emulator"]["clock"], "virtual");
    let sim = a["emulator"]["sim_time_ns"].as_u64().unwrap();
    let clat = &a["jobs"][0]["write"]["clat_ns"];
    // Closed loop at queue depth 1: simulated time covers every request's latency.
    assert!(sim as f64 >= clat["mean"].as_f64().unwrap() * 300.0);
}

#[test]
fn shutdown_with_clients_connected_flushes_the_request_log() {
    let dir = TempDir::new("log");
    let log = dir.0.join("requests.csv");
    let log_path = log.clone();
    let server = start("shutdown", "realtime", move |o| {
        o.stats_log = Some(log_path)
    });
    let mut c = Client::connect(&server.socket);
    assert_eq!(c.write(0, &pattern(14, 8192)), 0);
    c.read(0, 8192).unwrap();
    // Still connected when the server stops.
    let summary = server.finish();
    assert_eq!(summary["jobs"][0]["write"]["total_ios"], 1);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], ssdlab_core::stats::RequestLogRow::CSV_HEADER);
    assert_eq!(lines.len(), 3);
    let write: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(&write[..4], &["1", "write", "0", "8192"]);
    assert_eq!(write[6], "2", "two flash programs");
    assert_eq!(write[8], "2", "two OOB writes");
    let read: Vec<&str> = lines[2].split(',').collect();
    assert_eq!(&read[..4], &["2", "read", "0", "8192"]);
    assert_eq!(read[5], "2", "two flash reads");
    // The client sees the connection end.
    let mut rest = Vec::new();
    c.stream.read_to_end(&mut rest).unwrap();
}

#[test]
fn a_power_loss_at_a_simulated_time_is_recovered_from_oob_and_loses_no_flushed_write() {
    let server = start("powerloss", "virtual", |o| {
        o.power_loss_at_ns = Some(20_000_000)
    });
    let mut c = Client::connect(&server.socket);
    for i in 0..64u64 {
        assert_eq!(c.write(i * 4096, &pattern(i, 4096)), 0);
    }
    assert_eq!(c.command(Command::Flush, 0, 0, 0), 0);
    // Enough requests to pass the power loss's time; then everything flushed reads back.
    for round in 0..4u64 {
        for i in 0..64u64 {
            assert_eq!(
                c.read(i * 4096, 4096).unwrap(),
                pattern(i, 4096),
                "round {round}"
            );
        }
    }
    c.disconnect();
    let s = server.finish();
    let p = &s["emulator"]["power_loss"];
    assert!(p["oob_pages_read"].as_u64().unwrap() >= 64, "{p}");
    assert!(p["recovery_ns"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(p["mapped_units"], 64, "{p}");
}
