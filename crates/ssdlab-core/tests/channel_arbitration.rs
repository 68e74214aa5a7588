//! Channel arbitration by the die policy: a channel carries one transfer at a time, and when it
//! frees, the transfer the scheduler ranks first goes next. Each test computes the expected
//! latencies by hand from the configuration.

mod common;

use ssdlab_core::{Device, HostRequest, Loop, Op, RunSpec, VecSource};

/// Three single-plane TLC dies on one channel (58 us LSB reads, 500 us LSB programs), static
/// striping (page n of the run's writes goes to die n mod 3), no host link, no write buffer.
fn three_dies_one_channel(extra: &[(&str, &str)]) -> Device {
    let three_dies = [
        ("geometry.dies_per_chip", "3"),
        ("host.link_mbps", "0"),
        ("placement.allocation", "static"),
        ("stats.request_log", "true"),
    ];
    common::device(&[common::TLC_ONE_DIE, &three_dies, extra], 1, false)
}

const XFER: u64 = 5_120 + 300;
const DECODE: u64 = 10_900;
const ENCODE: u64 = 800;
const T_R: u64 = 58_000;
const T_PROG: u64 = 500_000;

fn at(op: Op, page: u64, t: u64) -> HostRequest {
    let mut r = HostRequest::new(op, page * 4096, 4096);
    r.arrival_ns = Some(t);
    r
}

/// Durations of the run's requests by request number.
fn open_run(dev: &mut Device, requests: Vec<HostRequest>) -> Vec<u64> {
    dev.run_to_end(RunSpec {
        name: "job".into(),
        source: Box::new(VecSource::new(requests)),
        queue_depth: 8,
        pacing: Loop::Open { time_scale: 1.0 },
        runtime_ns: None,
        ramp_ns: None,
    })
    .unwrap();
    let mut rows: Vec<_> = dev.request_log().unwrap().to_vec();
    rows.sort_by_key(|r| r.request);
    rows.iter().map(|r| r.duration_ns).collect()
}

/// Page 0 is written (die 0) long before; at `T0` its read starts sensing. A host write to die
/// 1 starts its data transfer 800 ns (encode) after it arrives at `T0` + 56 us, so the channel
/// is busy when the read's data is sensed at `T0` + 58 us; a second write (die 2) asks for the
/// channel 1 us after the first, before the read. Returns the read's and second write's
/// latencies.
fn contended(scheduler: &str, suspend: bool) -> (u64, u64) {
    let suspend = if suspend { "true" } else { "false" };
    let mut dev = three_dies_one_channel(&[
        ("controller.scheduler", scheduler),
        ("cell.suspend", suspend),
    ]);
    let d = open_run(
        &mut dev,
        vec![
            at(Op::Write, 0, 0),
            at(Op::Read, 0, T0),
            at(Op::Write, 1, T0 + 56_000),
            at(Op::Write, 2, T0 + 57_000),
        ],
    );
    (d[1], d[3])
}

const T0: u64 = 10_000_000;

/// When the first write's data is in and the channel frees.
const FIRST_TRANSFER_END: u64 = T0 + 56_000 + ENCODE + XFER;

#[test]
fn priority_sends_a_host_reads_data_before_a_writes_that_was_ready_first() {
    for scheduler in ["priority", "out_of_order"] {
        let (read, second_write) = contended(scheduler, false);
        // The read waits for the first write's transfer only, then goes before the second.
        assert_eq!(
            read,
            FIRST_TRANSFER_END + XFER + DECODE - T0,
            "{scheduler}: read"
        );
        assert_eq!(
            second_write,
            FIRST_TRANSFER_END + 2 * XFER + T_PROG - (T0 + 57_000),
            "{scheduler}: the second write's data goes in after the read's comes out"
        );
        // Without the wait the read would cost its array time, transfer and decode.
        assert!(read > T_R + XFER + DECODE);
    }
}

#[test]
fn first_come_first_served_sends_transfers_in_the_order_they_became_ready() {
    // fcfs with suspend runs on the event engine: the second write's transfer was ready
    // before the read's, so it goes first.
    let (read, second_write) = contended("fcfs", true);
    assert_eq!(read, FIRST_TRANSFER_END + 2 * XFER + DECODE - T0);
    assert_eq!(
        second_write,
        FIRST_TRANSFER_END + XFER + T_PROG - (T0 + 57_000)
    );
}

#[test]
fn an_uncontended_channel_costs_nothing() {
    // The read alone: array time, transfer, decode, under every policy.
    for scheduler in ["priority", "out_of_order", "fcfs"] {
        let mut dev = three_dies_one_channel(&[
            ("controller.scheduler", scheduler),
            ("cell.suspend", "true"),
        ]);
        let d = open_run(&mut dev, vec![at(Op::Write, 0, 0), at(Op::Read, 0, T0)]);
        assert_eq!(d[1], T_R + XFER + DECODE, "{scheduler}");
        assert_eq!(d[0], ENCODE + XFER + T_PROG, "{scheduler}");
    }
}
