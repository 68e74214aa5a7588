//! Hostile clients against the real server over a Unix socket: floods, replies never read,
//! payloads never sent, idle connections up to the caps, disconnects mid-payload. Under each
//! attack the server's buffered bytes (its own accounting of input buffers and replies, which
//! is what a client can make it allocate) stay within the configured budgets, and a
//! well-behaved client connected at the same time keeps getting correct replies.
//!
//! Every test is bounded in time: sockets have read timeouts, waits have deadlines, and the
//! timeouts under test are set to a second or less.

use crate::common::*;
use ssdlab_nbd::connection::{ConnectionLimits, INPUT_BUFFER, ONE_REQUEST_BYTES};
use ssdlab_nbd::protocol::*;
use ssdlab_nbd::server::Limits;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// 2 dies x 256 blocks x 32 pages of 4 KiB: 48 MiB logical, room for 32 MiB requests.
fn roomy_device() -> ssdlab_core::Device {
    device_with("slc", &[("geometry.blocks_per_plane", "256")])
}

/// The most one connection may hold: its budget, or one maximum request with the input
/// window when that is larger (one request always proceeds), plus reply headers.
fn connection_bound(limits: &ConnectionLimits) -> usize {
    limits.max_buffered_bytes.max(ONE_REQUEST_BYTES)
}

/// Wait until `done` holds, for at most `within`.
fn eventually(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < until, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn header(command: Command, flags: u16, cookie: u64, offset: u64, length: u32) -> Vec<u8> {
    RequestHeader {
        flags,
        command,
        cookie,
        offset,
        length,
    }
    .encode()
    .to_vec()
}

/// A well-behaved client's round trips: writes, reads back, compares.
fn good_client_round_trips(socket: &std::path::PathBuf, seed: u64) {
    let mut c = Client::connect(socket);
    for i in 0..8u64 {
        let offset = (seed * 8 + i) % 64 * 4096;
        let data = pattern(seed * 100 + i, 4096);
        assert_eq!(c.write(offset, &data), 0);
        assert_eq!(c.read(offset, 4096).unwrap(), data);
    }
    c.disconnect();
}

#[test]
fn unread_replies_of_pipelined_32_mib_reads_keep_memory_bounded() {
    for clock in ["realtime", "virtual"] {
        let limits = Limits {
            connection: ConnectionLimits {
                max_requests_in_flight: 64,
                max_buffered_bytes: 40 * MIB,
            },
            stall_timeout: Duration::from_secs(1),
            ..Limits::default()
        };
        let server = start_with(roomy_device(), "unread", clock, |o| o.limits = limits);
        let mut attackers: Vec<Client> = (0..3).map(|_| Client::connect(&server.socket)).collect();
        let mut flood = Vec::new();
        for i in 0..300u64 {
            flood.extend(header(Command::Read, 0, i, 0, MAX_PAYLOAD));
        }
        for a in &mut attackers {
            // 8 KiB of headers: the socket takes them whether or not the server reads.
            a.stream.write_all(&flood).unwrap();
        }
        // The server holds what its budget allows and then waits on the clients.
        let bound = 3 * connection_bound(&limits.connection);
        let until = Instant::now() + Duration::from_millis(700);
        while Instant::now() < until {
            let now = server.emu.buffered_bytes.load(Ordering::Relaxed) as usize;
            assert!(now <= bound, "{clock}: {now} bytes buffered > {bound}");
            std::thread::sleep(Duration::from_millis(10));
        }
        good_client_round_trips(&server.socket, 1);
        // Stalled on clients that never read: closed after the stall timeout.
        eventually(Duration::from_secs(10), "stalled readers closed", || {
            server.emu.buffered_bytes.load(Ordering::Relaxed) == 0
        });
        good_client_round_trips(&server.socket, 2);
        drop(attackers);
        let summary = server.finish();
        let emu = &summary["emulator"];
        let peak = emu["peak_buffered_bytes"].as_u64().unwrap() as usize;
        assert!(peak <= bound, "{clock}: peak {peak} > {bound}");
        let per_connection = emu["peak_connection_buffered_bytes"].as_u64().unwrap() as usize;
        assert!(per_connection <= connection_bound(&limits.connection));
        assert!(
            per_connection >= 32 * MIB,
            "{clock}: a 32 MiB reply was built: {emu}"
        );
        assert_eq!(emu["closed_by_server"]["stall_timeouts"], 3, "{clock}");
    }
}

#[test]
fn write_headers_without_payloads_hold_only_what_arrived() {
    let limits = Limits {
        stall_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let server = start_with(roomy_device(), "no-payload", "realtime", |o| {
        o.limits = limits
    });
    let mut attackers = Vec::new();
    for i in 0..40u64 {
        let mut a = Client::connect(&server.socket);
        a.stream
            .write_all(&header(Command::Write, 0, i, 0, MAX_PAYLOAD))
            .unwrap();
        // A few of them send part of the payload: the buffer grows with it, no further.
        if i % 10 == 0 {
            a.stream.write_all(&pattern(i, MIB + 1)).unwrap();
        }
        attackers.push(a);
    }
    good_client_round_trips(&server.socket, 3);
    // 40 input windows, and four grown to hold a little over 1 MiB (doubling: 2 MiB).
    let bound = 40 * INPUT_BUFFER + 4 * 2 * MIB + MIB;
    let now = server.emu.buffered_bytes.load(Ordering::Relaxed) as usize;
    assert!(
        now <= bound,
        "{now} bytes buffered for 40 headers > {bound}"
    );
    eventually(Duration::from_secs(10), "incomplete writes closed", || {
        server.emu.buffered_bytes.load(Ordering::Relaxed) == 0
    });
    // Closed, and nothing of the partial payloads was written.
    let mut c = Client::connect(&server.socket);
    assert_eq!(c.read(24 * 4096, 4096).unwrap(), pattern(3 * 100, 4096));
    c.disconnect();
    let summary = server.finish();
    assert_eq!(
        summary["emulator"]["closed_by_server"]["stall_timeouts"],
        40
    );
    assert_eq!(summary["jobs"][0]["write"]["total_ios"], 8);
    let peak = summary["emulator"]["peak_buffered_bytes"].as_u64().unwrap() as usize;
    assert!(peak <= bound + INPUT_BUFFER, "peak {peak}");
}

/// One command, flooded: `count` requests pipelined by one thread while another reads every
/// reply; returns the replies' (cookie, error) in arrival order, and read data by cookie.
fn flood(
    socket: &std::path::PathBuf,
    count: u64,
    request: impl Fn(u64) -> (Vec<u8>, usize) + Send + 'static,
) -> Vec<(u64, u32, Vec<u8>)> {
    let mut c = Client::connect(socket);
    let mut writer = c.stream.try_clone().unwrap();
    let lengths: Vec<usize> = (0..count).map(|i| request(i).1).collect();
    let sender = std::thread::spawn(move || {
        for i in 0..count {
            writer.write_all(&request(i).0).unwrap();
        }
        writer
    });
    let mut replies = Vec::new();
    for _ in 0..count {
        let mut h = [0u8; 16];
        c.stream.read_exact(&mut h).expect("reply header");
        assert_eq!(
            u32::from_be_bytes(h[0..4].try_into().unwrap()),
            SIMPLE_REPLY_MAGIC
        );
        let error = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
        let mut data = vec![
            0u8;
            if error == 0 {
                lengths[cookie as usize]
            } else {
                0
            }
        ];
        c.stream.read_exact(&mut data).unwrap();
        replies.push((cookie, error, data));
    }
    sender.join().unwrap();
    c.disconnect();
    replies
}

#[test]
fn pipelined_floods_of_every_command_get_every_reply_within_small_limits() {
    for clock in ["virtual", "realtime"] {
        let limits = Limits {
            connection: ConnectionLimits {
                max_requests_in_flight: 8,
                max_buffered_bytes: ssdlab_nbd::connection::MIN_BUFFERED_BYTES,
            },
            ..Limits::default()
        };
        let server = start(&format!("flood-{clock}"), clock, |o| o.limits = limits);
        let n = if clock == "realtime" { 300 } else { 2000 };
        let page = |i: u64| i % 256 * 4096;
        // Writes of a known pattern, then reads of it (each READ reply 16 KiB).
        let replies = flood(&server.socket, n, move |i| {
            let mut b = header(Command::Write, 0, i, page(i), 4096);
            b.extend(pattern(page(i), 4096));
            (b, 0)
        });
        assert!(replies.iter().all(|r| r.1 == 0), "{clock}: writes");
        let replies = flood(&server.socket, n, move |i| {
            (header(Command::Read, 0, i, i % 253 * 4096, 16384), 16384)
        });
        for (cookie, error, data) in &replies {
            assert_eq!(*error, 0);
            let at = cookie % 253;
            let expect: Vec<u8> = (at..at + 4).flat_map(|p| pattern(p * 4096, 4096)).collect();
            assert_eq!(data, &expect, "{clock}: read {cookie}");
        }
        for (command, flags, expect_error) in [
            (Command::Flush, 0, 0),
            (Command::Trim, 0, 0),
            (Command::WriteZeroes, CMD_FLAG_NO_HOLE, 0),
            (Command::WriteZeroes, 0, 0),
            (Command::Cache, 0, EINVAL),
            (Command::BlockStatus, 0, EINVAL),
            (Command::Unknown(42), 0, EINVAL),
            (Command::Read, CMD_FLAG_FUA, EINVAL),
        ] {
            let replies = flood(&server.socket, n, move |i| {
                let (offset, length) = if command == Command::Flush {
                    (0, 0)
                } else {
                    (256 * 4096 + i % 64 * 4096, 4096)
                };
                (header(command, flags, i, offset, length), 0)
            });
            assert_eq!(replies.len() as u64, n);
            assert!(
                replies.iter().all(|r| r.1 == expect_error),
                "{clock}: {command:?}"
            );
            let mut cookies: Vec<u64> = replies.iter().map(|r| r.0).collect();
            cookies.sort_unstable();
            assert_eq!(cookies, (0..n).collect::<Vec<_>>(), "{clock}: {command:?}");
        }
        // The first pages are intact after all that.
        let mut c = Client::connect(&server.socket);
        assert_eq!(c.read(0, 4096).unwrap(), pattern(0, 4096));
        c.disconnect();
        let summary = server.finish();
        let peak = summary["emulator"]["peak_connection_buffered_bytes"]
            .as_u64()
            .unwrap() as usize;
        assert!(
            peak <= connection_bound(&limits.connection),
            "{clock}: peak {peak}"
        );
        if clock == "realtime" {
            // Writes complete hundreds of microseconds later: eight in flight is the limit
            // that holds the flood back.
            let waits = summary["emulator"]["backpressure_waits"].as_u64().unwrap();
            assert!(waits > 0, "{clock}: the in-flight limit was reached");
        }
    }
}

#[test]
fn idle_connections_up_to_the_caps_do_not_lock_out_a_good_client() {
    let limits = Limits {
        max_connections: 8,
        max_handshakes: 4,
        handshake_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let server = start("idle-cap", "realtime", |o| o.limits = limits);
    // Eight clients in transmission that never send a request.
    let idle: Vec<Client> = (0..8).map(|_| Client::connect(&server.socket)).collect();
    // Sixteen that connect and never negotiate.
    let silent: Vec<UnixStream> = (0..16).map(|_| connect_raw(&server.socket)).collect();
    for round in 0..4 {
        good_client_round_trips(&server.socket, 10 + round);
    }
    let summary_so_far = || server.emu.peak_buffered_bytes.load(Ordering::Relaxed);
    assert!(summary_so_far() as usize <= 12 * INPUT_BUFFER + MIB);
    // The silent ones are closed: evicted by newer handshakes, or timed out.
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).expect("closed by the server");
        // At most the greeting came before the close.
        assert!(rest.len() <= 18);
    }
    drop(idle);
    let summary = server.finish();
    let closed = &summary["emulator"]["closed_by_server"];
    // The first good client took an idle one's place; later ones found a free place.
    assert!(closed["evicted"].as_u64().unwrap() >= 1, "{closed}");
    // Every silent one; an idle client chosen while between its last handshake reply and its
    // move to transmission is spared by the eviction grace unless its thread is descheduled
    // longer than that.
    let handshakes_closed = closed["handshakes_evicted"].as_u64().unwrap()
        + closed["handshake_timeouts"].as_u64().unwrap();
    assert!((16..=24).contains(&handshakes_closed), "{closed}");
}

#[test]
fn idle_and_handshake_timeouts_close_quiet_connections() {
    let limits = Limits {
        handshake_timeout: Duration::from_millis(300),
        idle_timeout: Some(Duration::from_millis(300)),
        ..Limits::default()
    };
    let server = start("timeouts", "virtual", |o| o.limits = limits);
    let started = Instant::now();
    let mut silent = connect_raw(&server.socket);
    let mut idle = Client::connect(&server.socket);
    assert_eq!(idle.write(0, &pattern(1, 4096)), 0);
    let mut rest = Vec::new();
    idle.stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    let mut greeting = Vec::new();
    silent.read_to_end(&mut greeting).unwrap();
    assert_eq!(greeting.len(), 18, "the greeting, then the close");
    assert!(started.elapsed() < Duration::from_secs(5));
    let summary = server.finish();
    let closed = &summary["emulator"]["closed_by_server"];
    assert_eq!(closed["idle_timeouts"], 1);
    assert_eq!(closed["handshake_timeouts"], 1);
}

#[test]
fn disconnects_mid_payload_free_everything_and_apply_nothing() {
    let server = start_with(roomy_device(), "mid-payload", "realtime", |_| {});
    let mut good = Client::connect(&server.socket);
    assert_eq!(good.write(0, &pattern(20, 8192)), 0);
    for i in 0..30usize {
        let mut c = Client::connect(&server.socket);
        let length = [4096, MIB, MAX_PAYLOAD as usize][i % 3];
        c.stream
            .write_all(&header(Command::Write, 0, 1, 0, length as u32))
            .unwrap();
        c.stream
            .write_all(&pattern(i as u64, length / 2 + 1))
            .unwrap();
        drop(c);
        // Interleaved with a well-behaved client's requests.
        assert_eq!(good.read(0, 8192).unwrap(), pattern(20, 8192));
    }
    eventually(Duration::from_secs(10), "buffers freed", || {
        server.emu.buffered_bytes.load(Ordering::Relaxed) as usize <= 2 * INPUT_BUFFER
    });
    good.disconnect();
    let summary = server.finish();
    assert_eq!(summary["jobs"][0]["write"]["total_ios"], 1);
}

#[test]
fn limits_that_make_no_sense_are_refused_at_bind() {
    let dir = TempDir::new("bad-limits");
    for (limits, message) in [
        (
            Limits {
                max_connections: 0,
                ..Limits::default()
            },
            "max_connections",
        ),
        (
            Limits {
                connection: ConnectionLimits {
                    max_requests_in_flight: 1,
                    max_buffered_bytes: 1000,
                },
                ..Limits::default()
            },
            "max_buffered_bytes",
        ),
        (
            Limits {
                stall_timeout: Duration::ZERO,
                ..Limits::default()
            },
            "stall_timeout",
        ),
    ] {
        let mut options =
            ssdlab_nbd::ServerOptions::new(ssdlab_nbd::Endpoint::Unix(dir.0.join("s")));
        options.limits = limits;
        let err = ssdlab_nbd::Server::bind(tiny_device("slc"), &options)
            .err()
            .expect("refused");
        assert!(err.to_string().contains(message), "{err}");
    }
}

/// Fixed newstyle, no zeroes, `NBD_OPT_EXPORT_NAME ""`: a TCP stream in transmission.
fn tcp_client(addr: &str) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).unwrap();
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
    let mut option = IHAVEOPT.to_be_bytes().to_vec();
    option.extend(OPT_EXPORT_NAME.to_be_bytes());
    option.extend(0u32.to_be_bytes());
    s.write_all(&option).unwrap();
    let mut export = [0u8; 10];
    s.read_exact(&mut export).unwrap();
    s
}

#[test]
fn over_loopback_tcp_a_client_that_never_reads_is_bounded_and_closed() {
    let mut options =
        ssdlab_nbd::ServerOptions::new(ssdlab_nbd::Endpoint::Tcp("127.0.0.1:0".parse().unwrap()));
    options.clock = "realtime".into();
    options.limits.stall_timeout = Duration::from_millis(500);
    let limits = options.limits;
    let server = ssdlab_nbd::Server::bind(roomy_device(), &options).expect("bind");
    let addr = server
        .uri()
        .trim_start_matches("nbd://")
        .trim_end_matches("/ssdlab")
        .to_string();
    assert!(addr.starts_with("127.0.0.1:"), "loopback only: {addr}");
    let stop = server.shutdown_handle();
    let emu = server.emulator();
    let thread = std::thread::spawn(move || server.run());

    let mut attacker = tcp_client(&addr);
    let flood: Vec<u8> = (0..300u64)
        .flat_map(|i| header(Command::Read, 0, i, 0, MAX_PAYLOAD))
        .collect();
    attacker.write_all(&flood).unwrap();
    // A well-behaved client over TCP meanwhile.
    let mut good = tcp_client(&addr);
    let data = pattern(40, 4096);
    good.write_all(&header(Command::Write, 0, 1, 8192, 4096))
        .unwrap();
    good.write_all(&data).unwrap();
    let mut reply = [0u8; 16];
    good.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[4..8], &[0, 0, 0, 0]);
    good.write_all(&header(Command::Read, 0, 2, 8192, 4096))
        .unwrap();
    good.read_exact(&mut reply).unwrap();
    let mut back = vec![0u8; 4096];
    good.read_exact(&mut back).unwrap();
    assert_eq!(back, data);
    let bound = connection_bound(&limits.connection) + 2 * INPUT_BUFFER;
    assert!(emu.buffered_bytes.load(Ordering::Relaxed) as usize <= bound);
    // First the replies pile up (a slow build may not have made them yet), then they go.
    eventually(
        Duration::from_secs(30),
        "replies to the non-reader pile up",
        || emu.peak_buffered_bytes.load(Ordering::Relaxed) as usize > INPUT_BUFFER,
    );
    eventually(Duration::from_secs(10), "the non-reader is closed", || {
        emu.buffered_bytes.load(Ordering::Relaxed) as usize <= INPUT_BUFFER
    });
    drop(attacker);
    drop(good);
    stop.shutdown();
    let summary = thread.join().unwrap().expect("summary");
    let emulator = &summary["emulator"];
    assert_eq!(emulator["closed_by_server"]["stall_timeouts"], 1);
    assert!(emulator["peak_buffered_bytes"].as_u64().unwrap() as usize <= bound);
}
