//! Validation of the timing and FTL model against closed-form results. Each test computes the
//! expected figure by hand from the configuration and fails if the model disagrees.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use ssdlab_core::{Device, HostRequest, Loop, Op, PreconditionOptions, RunSpec, VecSource};

use common::closed_run;

fn overrides(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    common::settings(&[pairs])
}

fn device(pairs: &[(&str, &str)], seed: u64) -> Device {
    common::device(&[pairs], seed, false)
}

mod single_request_latency {
    use super::*;

    pub(super) use common::TLC_ONE_DIE;

    /// The one-die TLC device with the settings of each of `extra` on top, later ones winning.
    pub(super) fn tlc_one_die(extra: &[&[(&'static str, &'static str)]]) -> Device {
        let layers: Vec<_> = std::iter::once(TLC_ONE_DIE)
            .chain(extra.iter().copied())
            .collect();
        common::device(&layers, 1, false)
    }

    #[test]
    fn reads_and_writes_of_each_tlc_page_type_match_the_formula() {
        let mut dev = device(TLC_ONE_DIE, 1);
        // 4 KiB at 800 MT/s x 1 B: 5120 ns, plus 300 ns command overhead.
        let xfer = 5_120 + 300;
        // 4096 B over a 4000 MB/s link: 1024 ns.
        let link = 1_024;
        let decode = 10_900; // BCH (8192, 8360, t=12): device-model.md
        let encode = 800;
        let reads = [58_000, 78_000, 107_000];
        let programs = [500_000, 700_000, 900_000];
        // One die, one plane: consecutive writes fill pages 0, 1, 2 = LSB, CSB, MSB of wordline 0.
        for (page_type, program) in programs.iter().enumerate() {
            let c = dev
                .submit(
                    &HostRequest::new(Op::Write, page_type as u64 * 4096, 4096),
                    None,
                    None,
                )
                .unwrap();
            assert_eq!(
                c.latency_ns(),
                link + encode + xfer + program,
                "write of page type {page_type}"
            );
        }
        for (page_type, read) in reads.iter().enumerate() {
            dev.advance_to(dev.now_ns() + 10_000_000);
            let c = dev
                .submit(
                    &HostRequest::new(Op::Read, page_type as u64 * 4096, 4096),
                    None,
                    None,
                )
                .unwrap();
            assert_eq!(
                c.latency_ns(),
                read + xfer + decode + link,
                "read of page type {page_type}"
            );
        }
        // A never-written page costs no flash access, only the link.
        let c = dev
            .submit(&HostRequest::new(Op::Read, 100 * 4096, 4096), None, None)
            .unwrap();
        assert_eq!(c.latency_ns(), link);
    }

    #[test]
    fn melded_read_of_a_wordline_costs_x_plus_7y() {
        let mut pairs = TLC_ONE_DIE.to_vec();
        pairs.retain(|(k, _)| *k != "cell.read_ns");
        pairs.extend([
            ("cell.read_x_ns", "38000"),
            ("cell.read_y_ns", "20000"),
            ("host.melded_reads", "true"),
            ("host.link_mbps", "0"),
        ]);
        let mut dev = device(&pairs, 1);
        dev.submit(&HostRequest::new(Op::Write, 0, 3 * 4096), None, None)
            .unwrap();
        dev.advance_to(dev.now_ns() + 10_000_000);
        let c = dev
            .submit(&HostRequest::new(Op::Read, 0, 3 * 4096), None, None)
            .unwrap();
        let xfer = 5_420;
        // One sensing of all 7 reference voltages, then three page transfers and the last decode.
        assert_eq!(c.latency_ns(), 38_000 + 7 * 20_000 + 3 * xfer + 10_900);
        assert_eq!(dev.flash_counters().melded_reads, 1);
        // Without melding the three pages pay X three times: LSB, CSB, MSB one after another.
        let mut pairs_off = pairs.clone();
        pairs_off.retain(|(k, _)| *k != "host.melded_reads");
        let mut dev = device(&pairs_off, 1);
        dev.submit(&HostRequest::new(Op::Write, 0, 3 * 4096), None, None)
            .unwrap();
        dev.advance_to(dev.now_ns() + 10_000_000);
        let c = dev
            .submit(&HostRequest::new(Op::Read, 0, 3 * 4096), None, None)
            .unwrap();
        assert_eq!(
            c.latency_ns(),
            (58_000 + xfer) + (78_000 + xfer) + (118_000 + xfer) + 10_900
        );
    }

    #[test]
    fn multi_plane_read_senses_once_for_both_planes() {
        let mut pairs = TLC_ONE_DIE.to_vec();
        pairs.retain(|(k, _)| *k != "geometry.planes_per_die");
        pairs.extend([("geometry.planes_per_die", "2"), ("host.link_mbps", "0")]);
        let mut dev = device(&pairs, 1);
        // Striping puts pages 0 and 1 on planes 0 and 1 of the die, both at page offset 0 (LSB).
        dev.submit(&HostRequest::new(Op::Write, 0, 2 * 4096), None, None)
            .unwrap();
        dev.advance_to(dev.now_ns() + 10_000_000);
        let c = dev
            .submit(&HostRequest::new(Op::Read, 0, 2 * 4096), None, None)
            .unwrap();
        assert_eq!(c.latency_ns(), 58_000 + 2 * 5_420 + 10_900);
        assert_eq!(dev.flash_counters().multi_plane_ops, 2); // the write and the read
    }

    #[test]
    fn erase_and_write_buffer_and_partial_write() {
        let mut dev = tlc_one_die(&[&[("controller.write_buffer_pages", "4")]]);
        // With a buffer, a write completes once its data is in DRAM: link + nothing else.
        let c = dev
            .submit(&HostRequest::new(Op::Write, 0, 4096), None, None)
            .unwrap();
        assert_eq!(c.latency_ns(), 1_024);
        // A flush waits for the buffered page's program: encode + transfer + program.
        let c = dev
            .submit(&HostRequest::new(Op::Flush, 0, 0), None, None)
            .unwrap();
        assert_eq!(c.complete_ns, 1_024 + 800 + 5_420 + 500_000);
        // A 512-byte write into a mapped page reads the old page first (read-modify-write).
        let mut dev = device(TLC_ONE_DIE, 1);
        dev.submit(&HostRequest::new(Op::Write, 0, 4096), None, None)
            .unwrap();
        dev.advance_to(dev.now_ns() + 10_000_000);
        let c = dev
            .submit(&HostRequest::new(Op::Write, 512, 512), None, None)
            .unwrap();
        // Old LSB page read (58 us + xfer + decode) overlaps the 128 ns link transfer; then the
        // new page (page 1 of the block: CSB) is transferred and programmed.
        assert_eq!(c.latency_ns(), 58_000 + 5_420 + 10_900 + 5_420 + 700_000);
        assert_eq!(dev.flash_counters().rmw_reads, 1);
    }
}

mod parallel_throughput {
    use super::*;

    /// Sequential 4 KiB reads at a deep queue over a fully striped layout; returns bytes/s and
    /// the channels' utilisation.
    fn sequential_read_bandwidth(pairs: &[(&str, &str)], pages: u64) -> (f64, f64) {
        let mut dev = device(pairs, 1);
        dev.precondition(PreconditionOptions {
            max_random_passes: 0.0,
            steady_tolerance: 0.02,
        })
        .unwrap();
        let requests = (0..pages)
            .map(|i| HostRequest::new(Op::Read, i * 4096, 4096))
            .collect();
        let job = closed_run(&mut dev, requests, 256);
        let channels = dev.ssd_json()["channel_utilisation"].as_f64().unwrap();
        (job["read"]["bw_bytes"].as_f64().unwrap(), channels)
    }

    #[test]
    fn array_bound_sequential_reads() {
        // 4 channels x 4 dies; tR 50 us, 4 KiB over 800 MT/s = 5.12 us. Without cache read a
        // die is busy tR + transfer per page and a channel's bus is busy only 4 x 5.12 of every
        // 55.12 us: array bound at 16 dies x 4096 B / 55.12 us.
        let pairs = [
            ("geometry.channels", "4"),
            ("geometry.chips_per_channel", "4"),
            ("geometry.dies_per_chip", "1"),
            ("geometry.planes_per_die", "1"),
            ("geometry.blocks_per_plane", "128"),
            ("geometry.pages_per_block", "64"),
            ("cell.type", "slc"),
            ("cell.read_x_ns", "40000"),
            ("cell.read_y_ns", "10000"),
            ("host.link_mbps", "0"),
        ];
        let (measured, channels) = sequential_read_bandwidth(&pairs, 40_000);
        let expected = 16.0 * 4096.0 / 55.12e-6;
        let err = (measured - expected).abs() / expected;
        assert!(
            err < 0.02,
            "measured {measured:.0} B/s, expected {expected:.0} B/s ({:.2}%)",
            err * 100.0
        );
        let busy = 4.0 * 5.12 / 55.12;
        assert!(
            (channels - busy).abs() < 0.02 * busy,
            "{channels} against {busy}"
        );
    }

    #[test]
    fn bus_bound_sequential_reads() {
        // 2 channels x 8 dies at 100 MT/s: a page takes 40.96 us on the bus, and 8 dies would
        // need 8 x 40.96 us of bus per 66 us array cycle: bus bound at 2 x 4096 B / 40.96 us.
        let pairs = [
            ("geometry.channels", "2"),
            ("geometry.chips_per_channel", "8"),
            ("geometry.dies_per_chip", "1"),
            ("geometry.planes_per_die", "1"),
            ("geometry.blocks_per_plane", "128"),
            ("geometry.pages_per_block", "64"),
            ("cell.type", "slc"),
            ("cell.read_x_ns", "15000"),
            ("cell.read_y_ns", "10000"),
            ("channel.rate_mtps", "100"),
            ("host.link_mbps", "0"),
        ];
        let (measured, channels) = sequential_read_bandwidth(&pairs, 20_000);
        let expected = 2.0 * 4096.0 / 40.96e-6;
        let err = (measured - expected).abs() / expected;
        assert!(
            err < 0.02,
            "measured {measured:.0} B/s, expected {expected:.0} B/s ({:.2}%)",
            err * 100.0
        );
        // The bus is what bounds it: busy all but the first array read.
        assert!(channels > 0.98 && channels <= 1.0, "{channels}");
    }
}

mod write_amplification {
    use super::*;
    use ssdlab_core::gc::uniform_random_waf_of;

    fn measured_waf(op: f64) -> (f64, f64) {
        let pairs = [
            ("geometry.channels", "2"),
            ("geometry.chips_per_channel", "1"),
            ("geometry.dies_per_chip", "1"),
            ("geometry.planes_per_die", "2"),
            ("geometry.blocks_per_plane", "1024"),
            ("geometry.pages_per_block", "64"),
            ("cell.type", "slc"),
            ("ftl.gc_policy", "greedy"),
        ];
        let mut pairs = pairs.to_vec();
        let op_text = op.to_string();
        pairs.push(("geometry.over_provisioning", &op_text));
        let mut dev = device(&pairs, 1);
        dev.precondition(PreconditionOptions {
            max_random_passes: 4.0,
            steady_tolerance: 0.01,
        })
        .unwrap();
        let logical = dev.derived().logical_pages;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
        let requests = (0..2 * logical)
            .map(|_| HostRequest::new(Op::Write, rng.gen_range(0..logical) * 4096, 4096))
            .collect();
        closed_run(&mut dev, requests, 32);
        let ssd = dev.ssd_json();
        // Xiang & Kurkoski's closed form (`gc::uniform_random_waf`), with the foreground
        // watermark's free blocks and half of each open block held back from the user's data.
        let held = dev.config().ftl.gc_fg_free_blocks as f64 + 1.0;
        let model = uniform_random_waf_of(dev.config(), dev.derived(), held);
        (ssd["waf"].as_f64().unwrap(), model)
    }

    #[test]
    fn greedy_steady_state_matches_the_analytic_model_at_two_op_levels() {
        for op in [0.15, 0.30] {
            let (measured, model) = measured_waf(op);
            let err = (measured - model).abs() / model;
            assert!(
                err < 0.10,
                "OP {op}: measured WAF {measured:.3}, model {model:.3} ({:.1}%)",
                err * 100.0
            );
        }
    }
}

mod determinism {
    use super::*;

    fn noisy_run(seed: u64) -> String {
        let mut dev = device(
            &[
                ("geometry.blocks_per_plane", "128"),
                ("ecc.rber_base", "0.0004"),
                ("ecc.correctable_bits", "4"),
            ],
            seed,
        );
        let logical = dev.derived().logical_pages;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let requests: Vec<HostRequest> = (0..30_000)
            .map(|i| {
                let op = if i < 10_000 || rng.gen_bool(0.3) {
                    Op::Write
                } else {
                    Op::Read
                };
                HostRequest::new(op, rng.gen_range(0..logical / 4) * 4096, 4096)
            })
            .collect();
        let job = closed_run(&mut dev, requests, 16);
        serde_json::to_string(&serde_json::json!({"job": job, "ssd": dev.ssd_json()})).unwrap()
    }

    #[test]
    fn same_seed_same_json_and_other_seed_other_latencies() {
        let a = noisy_run(1);
        assert_eq!(a, noisy_run(1));
        let b = noisy_run(2);
        let mean = |s: &str| {
            let v: serde_json::Value = serde_json::from_str(s).unwrap();
            v["job"]["read"]["clat_ns"]["mean"].as_f64().unwrap()
        };
        assert_ne!(
            mean(&a),
            mean(&b),
            "the seed drives the bit-error stream, so read latencies differ"
        );
    }
}

mod data_driven {
    use super::*;

    #[test]
    fn reads_return_what_was_written_through_gc() {
        let pairs = overrides(&[
            ("geometry.channels", "2"),
            ("geometry.chips_per_channel", "1"),
            ("geometry.blocks_per_plane", "32"),
            ("geometry.pages_per_block", "48"),
            ("geometry.over_provisioning", "0.4"),
        ]);
        let mut dev = Device::from_toml("", "t", &pairs, 3, true).unwrap();
        let logical = dev.derived().logical_pages;
        let page = 4096u64;
        let mut shadow = vec![0u8; (logical * page) as usize];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for i in 0..20_000u64 {
            // Unaligned offsets and lengths, some spanning pages.
            let len = rng.gen_range(1..3 * page);
            let offset = rng.gen_range(0..logical * page - len);
            if rng.gen_bool(0.7) {
                let data: Vec<u8> = (0..len)
                    .map(|k| (i as u8).wrapping_mul(31).wrapping_add(k as u8))
                    .collect();
                dev.submit(&HostRequest::new(Op::Write, offset, len), Some(&data), None)
                    .unwrap();
                shadow[offset as usize..(offset + len) as usize].copy_from_slice(&data);
            } else {
                let mut out = vec![0u8; len as usize];
                dev.submit(
                    &HostRequest::new(Op::Read, offset, len),
                    None,
                    Some(&mut out),
                )
                .unwrap();
                assert!(
                    out == shadow[offset as usize..(offset + len) as usize],
                    "read {i} at {offset}+{len} differs"
                );
            }
        }
        assert!(
            dev.ftl().counters().gc_invocations > 0,
            "the test must exercise GC"
        );
        dev.ftl().check_invariants().unwrap();
    }

    #[test]
    fn bad_requests_are_errors_not_panics() {
        let mut dev = device(&[("geometry.blocks_per_plane", "128")], 1);
        let end = dev.logical_bytes();
        let err = dev
            .submit(&HostRequest::new(Op::Write, end - 4096, 8192), None, None)
            .unwrap_err();
        assert!(err.to_string().contains("past the device's end"), "{err}");
        let err = dev
            .submit(&HostRequest::new(Op::Read, u64::MAX - 1, 4096), None, None)
            .unwrap_err();
        assert!(err.to_string().contains("past the device's end"), "{err}");
        let err = dev
            .submit(&HostRequest::new(Op::Write, 0, 0), None, None)
            .unwrap_err();
        assert!(err.to_string().contains("length 0"), "{err}");
        let mut out = vec![0u8; 4096];
        assert!(dev
            .submit(&HostRequest::new(Op::Read, 0, 4096), None, Some(&mut out))
            .is_err());
    }

    #[test]
    fn a_bad_request_in_a_run_is_an_error_naming_its_number() {
        for scheduler in ["fcfs", "priority"] {
            let mut dev = device(
                &[
                    ("geometry.blocks_per_plane", "128"),
                    ("controller.scheduler", scheduler),
                ],
                1,
            );
            let end = dev.logical_bytes();
            let mut requests: Vec<HostRequest> = (0..5)
                .map(|i| HostRequest::new(Op::Write, i * 4096, 4096))
                .collect();
            requests[2] = HostRequest::new(Op::Write, end, 4096);
            let err = common::try_closed_run(&mut dev, requests, 4)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("request #3: ") && err.contains("past the device's end"),
                "{scheduler}: {err}"
            );
            assert!(
                !dev.run_in_progress(),
                "{scheduler}: the failed run is over"
            );
        }
    }
}

/// `submit_at` (hosts with their own clock, such as the NBD emulator): requests issued at the
/// same instant overlap on different dies and queue on the same die; an issue time before the
/// device's clock is raised to it.
mod externally_clocked_submission {
    use super::*;

    const TWO_DIES: &[(&str, &str)] = &[
        ("geometry.channels", "2"),
        ("geometry.chips_per_channel", "1"),
        ("geometry.dies_per_chip", "1"),
        ("geometry.planes_per_die", "1"),
        ("geometry.blocks_per_plane", "64"),
        ("geometry.pages_per_block", "64"),
        ("cell.type", "slc"),
        ("cell.program_ns", "[200000]"),
        ("host.link_mbps", "0"),
        ("geometry.over_provisioning", "0.2"),
        ("channel.rate_mtps", "1000"),
        ("channel.command_overhead_ns", "0"),
        ("ecc.encode_ns", "0"),
    ];

    #[test]
    fn simultaneous_writes_overlap_on_two_dies_and_queue_on_one() {
        let mut dev = device(TWO_DIES, 1);
        let page = dev.page_size() as u64;
        let t0 = 1_000_000;
        // Pages stripe over the two dies: the first two writes overlap completely.
        let a = dev
            .submit_at(t0, &HostRequest::new(Op::Write, 0, page), None, None)
            .unwrap();
        let b = dev
            .submit_at(t0, &HostRequest::new(Op::Write, page, page), None, None)
            .unwrap();
        assert_eq!(a.issue_ns, t0);
        assert_eq!(a.latency_ns(), b.latency_ns());
        assert_eq!(a.complete_ns, b.complete_ns);
        // 4 KiB at 1000 MT/s x 1 B, then the program.
        assert_eq!(a.latency_ns(), 4_096 + 200_000);
        // The third lands on the first die again: it waits for that program, then pays its own
        // transfer and program (no cache program), i.e. one whole write latency more.
        let c = dev
            .submit_at(t0, &HostRequest::new(Op::Write, 2 * page, page), None, None)
            .unwrap();
        assert_eq!(c.complete_ns, a.complete_ns + 4_096 + 200_000);
        // Issue times never go back: an earlier one is raised to the device's clock.
        let d = dev
            .submit_at(0, &HostRequest::new(Op::Read, 0, page), None, None)
            .unwrap();
        assert_eq!(d.issue_ns, t0);
        assert_eq!(dev.now_ns(), t0);
        // Page 0's program is not done at t0: its data comes from the controller, at once.
        let row = dev.last_request_log_row(&HostRequest::new(Op::Read, 0, page), &d);
        assert_eq!((row.op, row.flash_reads, row.flash_writes), ("read", 0, 0));
        assert_eq!(d.latency_ns(), 0);
        // Once it is done the page is sensed.
        let e = dev
            .submit_at(
                a.complete_ns,
                &HostRequest::new(Op::Read, 0, page),
                None,
                None,
            )
            .unwrap();
        let row = dev.last_request_log_row(&HostRequest::new(Op::Read, 0, page), &e);
        assert_eq!((row.op, row.flash_reads, row.flash_writes), ("read", 1, 0));
        assert_eq!(row.duration_ns, e.latency_ns());
        assert_eq!(dev.flash_counters().controller_reads, 1);
    }
}

mod scheduling {
    use super::*;

    /// One die, one plane, TLC 500/700/900 us programs, 3 ms erases; no host link, BCH decode
    /// 10.9 us (the single-request device, with the link off).
    fn one_die(extra: &[(&'static str, &'static str)]) -> Device {
        let base = [
            ("cell.erase_ns", "3000000"),
            ("host.link_mbps", "0"),
            ("stats.request_log", "true"),
        ];
        super::single_request_latency::tlc_one_die(&[&base, extra])
    }

    fn at(op: Op, page: u64, t: u64) -> HostRequest {
        let mut r = HostRequest::new(op, page * 4096, 4096);
        r.arrival_ns = Some(t);
        r
    }

    /// The job report of an open-loop run of `requests` at queue depth 8.
    pub(super) fn open_run_report(
        dev: &mut Device,
        requests: Vec<HostRequest>,
    ) -> serde_json::Value {
        dev.run_to_end(RunSpec {
            name: "job".into(),
            source: Box::new(VecSource::new(requests)),
            queue_depth: 8,
            pacing: Loop::Open { time_scale: 1.0 },
            runtime_ns: None,
            ramp_ns: None,
        })
        .unwrap()
    }

    /// Durations of the run's requests by request number.
    pub(super) fn open_run(dev: &mut Device, requests: Vec<HostRequest>) -> Vec<u64> {
        let earlier = dev.request_log().unwrap().len();
        open_run_report(dev, requests);
        let mut rows: Vec<_> = dev.request_log().unwrap()[earlier..].to_vec();
        rows.sort_by_key(|r| r.request);
        rows.iter().map(|r| r.duration_ns).collect()
    }

    const XFER: u64 = 5_120 + 300;
    const DECODE: u64 = 10_900;
    const ENCODE: u64 = 800;

    #[test]
    fn a_read_waiting_when_a_program_is_chosen_suspends_it_as_it_starts() {
        // FCFS with suspend: the second read arrives while the die serves the first read (which
        // cannot be suspended), queued behind a program; when the die picks the program, the
        // waiting read suspends it as its array phase begins instead of waiting it out.
        let mut dev = one_die(&[
            ("controller.scheduler", "fcfs"),
            ("cell.suspend", "true"),
            ("cell.suspend_ns", "5000"),
            ("cell.resume_ns", "7000"),
        ]);
        let d = open_run(
            &mut dev,
            vec![
                at(Op::Write, 0, 0),
                at(Op::Read, 0, 1_000_000),
                at(Op::Write, 1, 1_010_000),
                at(Op::Read, 0, 1_020_000),
            ],
        );
        let first_read_off_die = 1_000_000 + 58_000 + XFER;
        let array_start = first_read_off_die + XFER; // the program's data goes in first
        let second_read_off_die = array_start + 5_000 + 58_000 + XFER;
        assert_eq!(d[3], second_read_off_die + DECODE - 1_020_000);
        // The program resumes after it with all of its 700 us still to do.
        assert_eq!(d[2], second_read_off_die + 7_000 + 700_000 - 1_010_000);
        assert_eq!(dev.flash_counters().suspensions, 1);
    }

    #[test]
    fn a_read_mid_program_suspends_it_and_the_program_resumes_with_its_remaining_time() {
        let suspend = 5_000;
        let resume = 7_000;
        let mut dev = one_die(&[
            ("controller.scheduler", "priority"),
            ("cell.suspend", "true"),
            ("cell.suspend_ns", "5000"),
            ("cell.resume_ns", "7000"),
        ]);
        // Page 0 (LSB) is written long before; page 1 (CSB, 700 us) is being programmed when
        // the read of page 0 arrives.
        let t_write = 1_000_000;
        let t_read = 1_300_000;
        let d = open_run(
            &mut dev,
            vec![
                at(Op::Write, 0, 0),
                at(Op::Write, 1, t_write),
                at(Op::Read, 0, t_read),
            ],
        );
        let program_start = t_write + ENCODE + XFER;
        let program_end = program_start + 700_000;
        let remaining = program_end - t_read;
        assert_eq!(
            d[2],
            suspend + 58_000 + XFER + DECODE,
            "read: suspend + tR + transfer"
        );
        let read_done_on_die = t_read + suspend + 58_000 + XFER;
        assert_eq!(
            t_write + d[1],
            read_done_on_die + resume + remaining,
            "the program resumes after the read with its remaining time"
        );
        assert_eq!(dev.flash_counters().suspensions, 1);
        // Without suspend the read waits for the whole program.
        let mut dev = one_die(&[("controller.scheduler", "priority")]);
        let d = open_run(
            &mut dev,
            vec![
                at(Op::Write, 0, 0),
                at(Op::Write, 1, t_write),
                at(Op::Read, 0, t_read),
            ],
        );
        assert_eq!(d[2], program_end - t_read + 58_000 + XFER + DECODE);
        assert_eq!(dev.flash_counters().suspensions, 0);
    }

    #[test]
    fn a_read_of_a_page_whose_program_is_not_done_is_served_from_the_controller() {
        // The data of a page being programmed is in the controller until the program ends:
        // a read of it neither senses the page (not on flash yet) nor suspends its program.
        // The host link is off here, so serving it from the controller takes no time. `fcfs`
        // without suspend takes the reservation path, which must agree.
        for (scheduler, suspend) in [
            ("priority", "true"),
            ("priority", "false"),
            ("fcfs", "true"),
            ("fcfs", "false"),
        ] {
            let mut dev = one_die(&[
                ("controller.scheduler", scheduler),
                ("cell.suspend", suspend),
            ]);
            let d = open_run(
                &mut dev,
                vec![
                    at(Op::Write, 0, 0),
                    at(Op::Read, 0, 100_000),
                    at(Op::Read, 0, 2_000_000),
                ],
            );
            let ctx = format!("{scheduler}, suspend {suspend}");
            assert_eq!(d[0], ENCODE + XFER + 500_000, "{ctx}: the LSB program");
            assert_eq!(d[1], 0, "{ctx}: served from the controller");
            assert_eq!(
                d[2],
                58_000 + XFER + DECODE,
                "{ctx}: sensed once programmed"
            );
            let flash = dev.flash_counters();
            assert_eq!(
                (flash.array_reads, flash.controller_reads, flash.suspensions),
                (1, 1, 0),
                "{ctx}"
            );
        }
    }

    #[test]
    fn gc_of_blocks_that_filled_a_moment_ago_moves_from_the_controller_and_waits_for_erases() {
        // Skewed overwrites through a write buffer on small blocks.
        // - Greedy GC often takes a block that filled a moment ago, some of whose host
        //   programs are still queued. Those pages' data is in the controller: moving it
        //   reads nothing. Each move otherwise costs one array read (4 KiB pages, writes only,
        //   no retries), so reads + moves from the controller add up to the moves, exactly.
        // - The plane is left without an erased block at times: the FTL then opens a
        //   collected victim whose erase has not run, and its programs wait for that erase.
        //   (Checked builds also assert, as each die starts an operation, that no block is
        //   programmed while it is erased or more often than it has pages between erases,
        //   and at the run's end that every erase ran; this run broke the first two before.)
        for scheduler in ["priority", "out_of_order", "fcfs"] {
            let mut dev = super::single_request_latency::tlc_one_die(&[&[
                ("controller.scheduler", scheduler),
                ("cell.suspend", "true"),
                ("controller.write_buffer_pages", "64"),
                ("geometry.blocks_per_plane", "48"),
                ("geometry.pages_per_block", "48"),
                ("geometry.over_provisioning", "0.3"),
            ]]);
            let units = dev.logical_bytes() / 4096;
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            let requests: Vec<HostRequest> = (0..40_000)
                .map(|i| {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let r = x >> 33;
                    // A sequential fill, then 90 % of writes to a twentieth of the device.
                    let unit = match i {
                        i if i < units => i,
                        _ if r % 10 < 9 => r % (units / 20),
                        _ => r % units,
                    };
                    HostRequest::new(Op::Write, unit * 4096, 4096)
                })
                .collect();
            common::closed_run(&mut dev, requests, 32);
            let ssd = dev.ssd_json();
            let flash = dev.flash_counters();
            let moves = ssd["gc"]["units_moved"].as_u64().unwrap();
            assert!(flash.gc_controller_reads > 0, "{scheduler}: {flash:?}");
            assert_eq!(
                flash.array_reads + flash.gc_controller_reads,
                moves,
                "{scheduler}"
            );
            assert!(flash.programs_awaiting_erase > 0, "{scheduler}: {flash:?}");
        }
    }

    #[test]
    fn the_suspension_cap_holds_and_priority_serves_reads_before_queued_programs() {
        // Two reads during one program with max_suspends = 1: the second arrives while the
        // resumed program runs and waits for its end.
        let mut dev = one_die(&[
            ("controller.scheduler", "priority"),
            ("cell.suspend", "true"),
            ("cell.suspend_ns", "5000"),
            ("cell.resume_ns", "7000"),
            ("cell.max_suspends", "1"),
        ]);
        let t_write = 1_000_000;
        let d = open_run(
            &mut dev,
            vec![
                at(Op::Write, 0, 0),
                at(Op::Write, 1, t_write),
                at(Op::Read, 0, 1_300_000),
                at(Op::Read, 0, 1_500_000),
            ],
        );
        let program_end = t_write + d[1];
        assert_eq!(dev.flash_counters().suspensions, 1);
        assert_eq!(d[3], program_end - 1_500_000 + 58_000 + XFER + DECODE);
        // Priority: with two programs queued behind a busy die, a read arriving after them is
        // served first; FCFS serves it last.
        let burst = |sched: &'static str| {
            let mut dev = one_die(&[("controller.scheduler", sched)]);
            open_run(
                &mut dev,
                vec![
                    at(Op::Write, 0, 0),
                    at(Op::Write, 1, 1_000_000),
                    at(Op::Write, 2, 1_000_001),
                    at(Op::Write, 3, 1_000_002),
                    at(Op::Read, 0, 1_000_003),
                ],
            )[4]
        };
        let (priority, fcfs) = (burst("priority"), burst("fcfs"));
        assert!(
            priority + 1_000_000 < fcfs,
            "priority read {priority} ns, fcfs read {fcfs} ns"
        );
    }
    #[test]
    fn a_gc_step_of_copybacks_may_be_suspended_as_often_as_its_programs_together() {
        // SLC, one die, one plane; GC steps of 2 copyback moves, each move's program allowed
        // one suspension (so the step two). With one budget for the whole step (the old rule)
        // the second read would wait for the step's end.
        let (t_r, t_p, suspend, resume) = (25_000, 200_000, 5_000, 7_000);
        let mut dev = device(
            &[
                ("geometry.channels", "1"),
                ("geometry.chips_per_channel", "1"),
                ("geometry.dies_per_chip", "1"),
                ("geometry.planes_per_die", "1"),
                ("geometry.blocks_per_plane", "32"),
                ("geometry.pages_per_block", "8"),
                ("geometry.page_size_bytes", "4096"),
                ("geometry.over_provisioning", "0.4"),
                ("cell.type", "slc"),
                ("cell.read_ns", "[25000]"),
                ("cell.program_ns", "[200000]"),
                ("cell.erase_ns", "1000000"),
                ("cell.suspend", "true"),
                ("cell.suspend_ns", "5000"),
                ("cell.resume_ns", "7000"),
                ("cell.max_suspends", "1"),
                ("channel.rate_mtps", "800"),
                ("channel.command_overhead_ns", "300"),
                ("host.link_mbps", "0"),
                ("ecc.code", "bch"),
                ("ecc.codeword_bytes", "1024"),
                ("ecc.correctable_bits", "12"),
                ("controller.scheduler", "priority"),
                ("ftl.gc_step_pages", "2"),
                ("stats.request_log", "true"),
            ],
            1,
        );
        let logical = dev.derived().logical_pages;
        // Fill, then overwrite the even pages and every fourth odd one: the plane ends below
        // the background watermark, and the fill's blocks (the victims) keep two valid pages.
        let writes = (0..logical)
            .chain((0..logical).step_by(2))
            .chain((1..logical).step_by(4))
            .map(|lpa| HostRequest::new(Op::Write, lpa * 4096, 4096))
            .collect();
        closed_run(&mut dev, writes, 1);
        let moved_before = dev.flash_counters().programs;
        // A read at 0 leaves the die idle at t_r + XFER; background GC starts 1 ms later
        // (`gc_bg_idle_ns`) with a step of two copybacks, 2 (tR + tPROG) long. Reads arrive
        // during it at +10 us and +100 us (each suspends it) and at +200 us (the budget is
        // spent: it waits for the step's end).
        let step_start = t_r + XFER + 1_000_000;
        let arrivals = [
            0,
            step_start + 10_000,
            step_start + 100_000,
            step_start + 200_000,
        ];
        let reads = arrivals
            .iter()
            .map(|&t| at(Op::Read, logical - 1, t))
            .collect();
        let d = open_run(&mut dev, reads);
        assert_eq!(
            dev.flash_counters().programs - moved_before,
            2,
            "one step of two moves"
        );
        assert_eq!(dev.flash_counters().suspensions, 2);
        let read = t_r + XFER + DECODE;
        assert_eq!(d[0], read);
        assert_eq!(d[1], suspend + read, "the first read suspends the step");
        assert_eq!(
            d[2],
            suspend + read,
            "so does the second: the step has two programs"
        );
        // Each suspension moves the step's end by suspend + the read on the die + resume.
        let step_end = step_start + 2 * (t_r + t_p) + 2 * (suspend + t_r + XFER + resume);
        assert_eq!(
            d[3],
            step_end - arrivals[3] + read,
            "the third waits for the step"
        );
    }
}

mod sustained_overwrites {
    use super::*;

    /// The smallest over-provisioning (in steps of 0.001) that validation accepts for this many
    /// pages per block on an 8-plane SLC device of 64 blocks per plane.
    fn smallest_accepted(pages_per_block: u32) -> (Vec<(String, String)>, f64) {
        let ppb = pages_per_block.to_string();
        for step in 1..=3000u32 {
            let op = step as f64 / 1000.0;
            let op_text = op.to_string();
            let pairs = overrides(&[
                ("cell.type", "slc"),
                ("geometry.channels", "2"),
                ("geometry.chips_per_channel", "2"),
                ("geometry.dies_per_chip", "1"),
                ("geometry.planes_per_die", "2"),
                ("geometry.blocks_per_plane", "64"),
                ("geometry.pages_per_block", &ppb),
                ("geometry.over_provisioning", &op_text),
            ]);
            if ssdlab_core::Config::from_toml("", "test", &pairs).is_ok() {
                return (pairs, op);
            }
        }
        panic!("no over-provisioning up to 3 is accepted for {pages_per_block} pages per block");
    }

    #[test]
    fn the_smallest_accepted_geometry_sustains_random_overwrites() {
        // Validation's spare-space rule is meant to be sufficient: on the tightest geometry it
        // accepts, a fill and ten passes of uniformly random overwrites never run out of space,
        // whatever the block size.
        for pages_per_block in [1u32, 2, 3, 4, 8, 16] {
            let (pairs, op) = smallest_accepted(pages_per_block);
            // A little less spare space is refused: the rule is tight, not just loose.
            let tighter = format!("{}", op - 0.001);
            let mut refused = pairs.clone();
            refused.last_mut().unwrap().1 = tighter;
            assert!(ssdlab_core::Config::from_toml("", "test", &refused).is_err());
            let mut dev = Device::from_toml("", "test", &pairs, 7, false).unwrap();
            let logical = dev.derived().logical_pages;
            let fill = (0..logical)
                .map(|lpa| HostRequest::new(Op::Write, lpa * 4096, 4096))
                .collect();
            closed_run(&mut dev, fill, 8);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(pages_per_block as u64);
            let overwrites = (0..10 * logical)
                .map(|_| HostRequest::new(Op::Write, rng.gen_range(0..logical) * 4096, 4096))
                .collect();
            let job = dev.run_to_end(RunSpec {
                name: "overwrite".into(),
                source: Box::new(VecSource::new(overwrites)),
                queue_depth: 8,
                pacing: Loop::Closed,
                runtime_ns: None,
                ramp_ns: None,
            });
            let job = job.unwrap_or_else(|e| {
                panic!("{pages_per_block} pages per block, over-provisioning {op}: {e}")
            });
            assert_eq!(
                job["write"]["total_ios"].as_u64(),
                Some(10 * logical),
                "{pages_per_block} pages per block"
            );
        }
    }
}

/// Mapping units: 4 KiB units packed four to a 16 KiB TLC page through the staging buffer.
mod mapping_units {
    use super::*;

    /// One die, one plane, 16 KiB pages of 4 KiB units; host link 4000 MB/s, BCH.
    fn packed(extra: &[(&'static str, &'static str)]) -> Device {
        let base = [
            ("geometry.page_size_bytes", "16384"),
            ("geometry.pages_per_block", "96"),
            ("ftl.mapping_unit_bytes", "4096"),
            ("stats.request_log", "true"),
        ];
        super::single_request_latency::tlc_one_die(&[&base, extra])
    }

    const LINK_4K: u64 = 1_024; // 4096 B at 4000 MB/s
    const ENCODE: u64 = 800;
    const XFER_16K: u64 = 20_480 + 300; // 16 KiB at 800 MT/s x 1 B, plus command overhead
    const XFER_4K: u64 = 5_120 + 300; // two 2 KiB codewords: what a 4 KiB read moves
    const LSB_PROGRAM: u64 = 500_000;
    const CSB_PROGRAM: u64 = 700_000;
    /// A 4 KiB write made durable in an empty page: link, encode, the padded page's transfer
    /// and its LSB program.
    const DURABLE_FIRST_PAGE: u64 = LINK_4K + ENCODE + XFER_16K + LSB_PROGRAM;

    fn write(dev: &mut Device, offset: u64, len: u64) -> u64 {
        dev.submit(&HostRequest::new(Op::Write, offset, len), None, None)
            .unwrap()
            .latency_ns()
    }

    fn read(dev: &mut Device, offset: u64, len: u64) -> u64 {
        dev.submit(&HostRequest::new(Op::Read, offset, len), None, None)
            .unwrap()
            .latency_ns()
    }

    /// A read moves over the channel only the 1 KiB codewords of the bytes it wants, on the
    /// reservation path and on the event engine alike: tR + their transfer + decode + link.
    #[test]
    fn a_read_moves_only_the_codewords_it_wants() {
        const DECODE: u64 = 10_900; // BCH (8192, 8360, t=12)
        const LSB_READ: u64 = 58_000;
        // k codewords of 1 KiB at 800 MT/s x 1 B, plus the command overhead.
        let xfer = |k: u64| k * 1_280 + 300;
        // The host link at 4000 MB/s.
        let link = |bytes: u64| bytes / 4;
        // (offset, length, codewords it touches) within page 0's four units.
        let cases = [
            (0, 4096, 4),
            (1536, 512, 1),
            (1536, 1024, 2),
            (4096 + 3072, 2048, 2), // the last codeword of unit 1 and the first of unit 2
            (0, 16384, 16),
        ];
        for scheduler in ["fcfs", "priority"] {
            let mut dev = packed(&[("controller.scheduler", scheduler)]);
            for unit in 0..4 {
                write(&mut dev, unit * 4096, 4096);
            }
            dev.advance_to(dev.now_ns() + 10_000_000);
            for (offset, len, k) in cases {
                let before = dev.flash_counters().bytes_transferred;
                let job = closed_run(&mut dev, vec![HostRequest::new(Op::Read, offset, len)], 1);
                let clat = &job["read"]["clat_ns"];
                assert_eq!(
                    clat["min"].as_u64().unwrap(),
                    LSB_READ + xfer(k) + DECODE + link(len),
                    "{scheduler}: {len} B at {offset}"
                );
                let moved = dev.flash_counters().bytes_transferred - before;
                assert_eq!(moved, k * 1024, "{scheduler}: {len} B at {offset}");
                dev.advance_to(dev.now_ns() + 10_000_000);
            }
        }
    }

    #[test]
    fn four_kib_writes_fill_one_page_without_reading_it_and_a_flush_pads_the_rest() {
        let mut dev = packed(&[]);
        // Units 0-2 wait in the staging buffer: done once their data has crossed the link.
        for unit in 0..3 {
            assert_eq!(write(&mut dev, unit * 4096, 4096), LINK_4K, "unit {unit}");
        }
        assert_eq!(dev.flash_counters().programs, 0);
        // Unit 3 fills the page: encode, one 16 KiB transfer and one LSB program.
        assert_eq!(
            write(&mut dev, 3 * 4096, 4096),
            LINK_4K + ENCODE + XFER_16K + LSB_PROGRAM
        );
        let flash = dev.flash_counters();
        assert_eq!(
            (flash.programs, flash.array_reads, flash.rmw_reads),
            (1, 0, 0)
        );
        assert_eq!(dev.ssd_json()["waf"], 1.0);
        // The four units are one page: reading all of them senses it once, like reading one,
        // but only the codewords of the units read cross the channel (random data out).
        let before = dev.flash_counters().bytes_transferred;
        let one = read(&mut dev, 0, 4096);
        let one_bytes = dev.flash_counters().bytes_transferred - before;
        let all = read(&mut dev, 0, 16384);
        let all_bytes = dev.flash_counters().bytes_transferred - before - one_bytes;
        assert_eq!(
            all - one,
            XFER_16K - XFER_4K + 3 * LINK_4K,
            "the same page sensed, more bus and link time"
        );
        assert_eq!((one_bytes, all_bytes), (4096, 16384));
        assert_eq!(dev.flash_counters().array_reads, 2);
        // A unit still staged is read from the controller: link time only, no flash read.
        assert_eq!(write(&mut dev, 4 * 4096, 4096), LINK_4K);
        assert_eq!(read(&mut dev, 4 * 4096, 4096), LINK_4K);
        assert_eq!(dev.flash_counters().array_reads, 2);
        // A flush programs the staged page (the CSB page) with three empty slots.
        let flush = dev
            .submit(&HostRequest::new(Op::Flush, 0, 0), None, None)
            .unwrap();
        assert_eq!(flush.latency_ns(), XFER_16K + CSB_PROGRAM);
        let ssd = dev.ssd_json();
        assert_eq!(ssd["padded_units"], 3);
        assert_eq!(ssd["flash_pages_programmed"], 2);
        // One WAF: 2 pages of 16 KiB for 5 units of 4 KiB.
        assert_eq!(ssd["waf"], 32768.0 / 20480.0);
        assert_eq!(ssd["placement"]["total"]["waf"], ssd["waf"]);
        // Nothing is left to flush.
        let again = dev
            .submit(&HostRequest::new(Op::Flush, 0, 0), None, None)
            .unwrap();
        assert_eq!(again.latency_ns(), 0);
    }

    /// A job report's longest write completion and longest sync.
    fn longest_write_and_sync(job: &serde_json::Value) -> (Option<u64>, Option<u64>) {
        (
            job["write"]["clat_ns"]["max"].as_u64(),
            job["sync"]["lat_ns"]["max"].as_u64(),
        )
    }

    /// A write with Force Unit Access (an `O_DSYNC` write, fio's `sync=1`) is done once its
    /// data is on flash: a 4 KiB FUA write into an empty page pads and programs it (link,
    /// encode, 16 KiB transfer, LSB program), where a plain write is done once its data is in. It
    /// takes what a flush issued with it takes, on the reservation path and on the event
    /// engine alike, behind a write-back buffer too; on a drive with power-loss protection it
    /// is a plain write.
    #[test]
    fn a_fua_write_is_done_once_its_page_is_on_flash() {
        let fua = |offset: u64| {
            let mut r = HostRequest::new(Op::Write, offset, 4096);
            r.fua = true;
            r
        };
        for (scheduler, suspend) in [("priority", "true"), ("fcfs", "false")] {
            for buffer in ["0", "4"] {
                let case = format!("{scheduler}, {buffer} buffer pages");
                let settings = [
                    ("controller.scheduler", scheduler),
                    ("cell.suspend", suspend),
                    ("controller.write_buffer_pages", buffer),
                ];
                let mut dev = packed(&settings);
                let job = closed_run(&mut dev, vec![fua(0), fua(4096)], 1);
                let clat = &job["write"]["clat_ns"];
                assert_eq!(
                    clat["min"].as_u64(),
                    Some(DURABLE_FIRST_PAGE),
                    "{case}: {clat}"
                );
                // The second one fills the next page's first unit: the CSB program.
                assert_eq!(
                    clat["max"].as_u64(),
                    Some(LINK_4K + ENCODE + XFER_16K + CSB_PROGRAM),
                    "{case}"
                );
                let ssd = dev.ssd_json();
                assert_eq!(ssd["padded_units"], 6, "{case}");
                assert_eq!(
                    job["sync"]["total_ios"], 0,
                    "{case}: a FUA write is no sync"
                );
                // The same write, then a flush issued with it: the flush ends where the FUA
                // write did.
                let mut dev = packed(&settings);
                let at = |mut r: HostRequest| {
                    r.arrival_ns = Some(0);
                    r
                };
                let job = super::scheduling::open_run_report(
                    &mut dev,
                    vec![
                        at(HostRequest::new(Op::Write, 0, 4096)),
                        at(HostRequest::new(Op::Flush, 0, 0)),
                    ],
                );
                assert_eq!(
                    longest_write_and_sync(&job),
                    (Some(LINK_4K), Some(DURABLE_FIRST_PAGE)),
                    "{case}"
                );
            }
            let mut dev = packed(&[
                ("controller.scheduler", scheduler),
                ("cell.suspend", suspend),
                ("controller.power_loss_protection", "true"),
            ]);
            let job = closed_run(&mut dev, vec![fua(0)], 1);
            assert_eq!(job["write"]["clat_ns"]["max"].as_u64(), Some(LINK_4K));
            assert_eq!(dev.ssd_json()["padded_units"], 0);
        }
    }

    /// Without a volatile write cache (`controller.volatile_write_cache = false`) every write
    /// is done once its data is on flash, as a FUA write is, and a flush finds nothing to do.
    #[test]
    fn without_a_volatile_cache_every_write_waits_for_flash() {
        for (scheduler, suspend) in [("priority", "true"), ("fcfs", "false")] {
            let mut dev = packed(&[
                ("controller.scheduler", scheduler),
                ("cell.suspend", suspend),
                ("controller.volatile_write_cache", "false"),
            ]);
            let requests = vec![
                HostRequest::new(Op::Write, 0, 4096),
                HostRequest::new(Op::Flush, 0, 0),
            ];
            let job = closed_run(&mut dev, requests, 1);
            assert_eq!(
                longest_write_and_sync(&job),
                (Some(DURABLE_FIRST_PAGE), Some(0)),
                "{scheduler}"
            );
            assert_eq!(dev.ssd_json()["padded_units"], 3, "{scheduler}");
        }
        // The default is a volatile cache, left out of the canonical form (hashes unchanged).
        let dev = packed(&[]);
        assert!(dev.config().controller.volatile_write_cache);
        let canonical = dev.config().canonical_json();
        assert!(!canonical.contains("volatile_write_cache"), "{canonical}");
    }

    #[test]
    fn a_sub_unit_write_reads_the_old_unit_only_when_it_is_on_flash() {
        let mut dev = packed(&[]);
        for unit in 0..4 {
            write(&mut dev, unit * 4096, 4096);
        }
        dev.advance_to(dev.now_ns() + 10_000_000);
        // Unit 1 is programmed: a 512 B write into it reads its page first (LSB read, 16 KiB
        // transfer, decode). It is then staged in the next page, so the write is done when that
        // read has merged its data.
        let decode = 10_900; // BCH: the page's codewords decode in a pipeline
        assert_eq!(write(&mut dev, 4096 + 512, 512), 58_000 + XFER_16K + decode);
        assert_eq!(dev.flash_counters().rmw_reads, 1);
        // The merged unit is staged now: another 512 B write into it merges in the controller.
        assert_eq!(write(&mut dev, 4096 + 1024, 512), 128);
        assert_eq!(dev.flash_counters().rmw_reads, 1);
        assert_eq!(dev.flash_counters().array_reads, 1);
    }

    /// Sequential 1 KiB writes, four to a 4 KiB unit: a unit's later writes merge into its
    /// copy in the page being filled (a write-buffer hit) rather than taking new slots. The
    /// page is programmed when its fourth unit's first KiB lands; that unit's other three
    /// writes then start the next page, the first of them reading the programmed copy. So the
    /// first page carries 13 KiB of host data and each later one 12 KiB: after 13 + 12 (P - 1)
    /// writes, P pages are programmed, with P - 1 read-modify-writes (WAF 4/3 in the limit,
    /// where taking a slot per write would make it 4).
    #[test]
    fn sequential_sub_unit_writes_merge_in_the_page_being_filled() {
        const LINK_1K: u64 = LINK_4K / 4;
        let mut dev = packed(&[]);
        let pages = 8;
        let writes = 13 + 12 * (pages - 1);
        for k in 0..writes {
            let latency = write(&mut dev, k * 1024, 1024);
            // Write 12 fills the first page, then every twelfth; the write after a fill reads
            // the programmed page. The others are done once their data crossed the link.
            let fills = k >= 12 && (k - 12) % 12 == 0;
            let reads_old = k >= 13 && (k - 13) % 12 == 0;
            if !fills && !reads_old {
                assert_eq!(latency, LINK_1K, "write {k}");
            }
        }
        let flash = dev.flash_counters();
        assert_eq!((flash.programs, flash.rmw_reads), (pages, pages - 1));
        let ssd = dev.ssd_json();
        // Every write took a slot or merged: 4 slots a page.
        assert_eq!(ssd["buffer_merged_units"], writes - 4 * pages);
        assert_eq!(ssd["padded_units"], 0);
        assert_eq!(ssd["waf"], (pages * 16384) as f64 / (writes * 1024) as f64);
        // The event engine merges the same writes (closed loop, one at a time).
        let mut engine = packed(&[("controller.scheduler", "priority")]);
        let requests = (0..writes)
            .map(|k| HostRequest::new(Op::Write, k * 1024, 1024))
            .collect();
        closed_run(&mut engine, requests, 1);
        let flash = engine.flash_counters();
        assert_eq!((flash.programs, flash.rmw_reads), (pages, pages - 1));
        let ssd_engine = engine.ssd_json();
        for key in ["buffer_merged_units", "padded_units", "waf"] {
            assert_eq!(ssd_engine[key], ssd[key], "{key}");
        }
    }

    /// The bytes of merged writes are those read back, in any order of overwrites.
    #[test]
    fn merged_sub_unit_writes_keep_every_byte() {
        let layers: [&[(&str, &str)]; 2] = [
            common::TLC_ONE_DIE,
            &[
                ("geometry.page_size_bytes", "16384"),
                ("geometry.pages_per_block", "96"),
                ("ftl.mapping_unit_bytes", "4096"),
                ("controller.write_buffer_pages", "4"),
            ],
        ];
        let mut dev = common::device(&layers, 1, true);
        let span = 64 * 1024u64;
        let mut image = vec![0u8; span as usize];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for round in 0..4000u64 {
            // Mostly sequential 512 B - 3 KiB pieces, some rewritten at once.
            let len = 512 * rng.gen_range(1..=6u64);
            let offset = if rng.gen_bool(0.2) {
                rng.gen_range(0..(span - len) / 512) * 512
            } else {
                (round * 1536) % (span - len)
            };
            let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            dev.submit(&HostRequest::new(Op::Write, offset, len), Some(&data), None)
                .unwrap();
            image[offset as usize..(offset + len) as usize].copy_from_slice(&data);
        }
        let merged = dev.ssd_json()["buffer_merged_units"].as_u64().unwrap();
        assert!(merged > 400, "{merged} merged writes");
        let mut out = vec![0u8; span as usize];
        dev.submit(&HostRequest::new(Op::Read, 0, span), None, Some(&mut out))
            .unwrap();
        assert!(out == image, "read back differs from what was written");
    }

    /// With a write-back buffer a write also merges into its unit's copy in a full page whose
    /// program has not taken its data yet, as a controller's DRAM absorbs an overwrite: on the
    /// event engine (a program not started) and on the reservation path (a program whose
    /// reserved transfer starts after the write's data is in) alike. Hot overwrites under load,
    /// pages waiting behind busy dies: fewer bytes reach flash than the host wrote.
    #[test]
    fn a_write_back_buffer_absorbs_overwrites_of_pages_not_yet_programmed() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let requests: Vec<HostRequest> = (0..4_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                HostRequest::new(Op::Write, (x >> 33) % 64 * 4096, 4096)
            })
            .collect();
        for (scheduler, suspend) in [("priority", "true"), ("fcfs", "false")] {
            let path = [
                ("controller.scheduler", scheduler),
                ("cell.suspend", suspend),
            ];
            let run = |buffer: &'static str| {
                let mut dev =
                    packed(&[path[0], path[1], ("controller.write_buffer_pages", buffer)]);
                closed_run(&mut dev, requests.clone(), 8);
                let ssd = dev.ssd_json();
                (
                    ssd["waf"].as_f64().unwrap(),
                    ssd["buffer_merged_units"].as_u64().unwrap(),
                )
            };
            let (through_waf, through_merged) = run("0");
            let (waf, merged) = run("8");
            // Write-through merges only into the page being filled (WAF 0.98 here; buffered
            // 0.25 on the engine, 0.11 on the reservation path).
            assert!(
                waf < 0.9 * through_waf && merged > through_merged + 400,
                "{scheduler}: buffered WAF {waf}, {merged} merged (write-through {through_waf}, \
                 {through_merged})"
            );
        }
    }

    /// The event engine's merge into a page queued behind a busy die holds its program until
    /// the merged data is in, for one write: the first page (LSB) programs from its arrival;
    /// the second page queues behind it; a rewrite of its first unit arrives just before the
    /// die is free, so the second page (CSB) waits for that data; a later rewrite, whose data
    /// would hold it longer, takes a new slot; a flush waits for all three pages. On the
    /// reservation path the first rewrite, whose data comes after the second page's reserved
    /// transfer begins, takes a new slot too.
    #[test]
    fn a_merge_holds_a_queued_program_for_one_write() {
        let first_done = 4 * LINK_4K + ENCODE + XFER_16K + LSB_PROGRAM;
        let rewrite = first_done - 500;
        let at = |op: Op, offset: u64, len: u64, t: u64| {
            let mut r = HostRequest::new(op, offset, len);
            r.arrival_ns = Some(t);
            r
        };
        let requests = || {
            vec![
                at(Op::Write, 0, 16384, 0),
                at(Op::Write, 16384, 16384, 10_000),
                at(Op::Write, 16384, 4096, rewrite),
                at(Op::Write, 16384 + 4096, 4096, rewrite + 1_100),
                at(Op::Flush, 0, 0, rewrite + 2_000),
            ]
        };
        let buffered = ("controller.write_buffer_pages", "4");
        let mut dev = packed(&[("controller.scheduler", "priority"), buffered]);
        let durations = super::scheduling::open_run(&mut dev, requests());
        assert_eq!(dev.ssd_json()["buffer_merged_units"], 1, "{durations:?}");
        assert_eq!(dev.flash_counters().programs, 3);
        // The rewrites are done once their data is in the buffer.
        assert_eq!((durations[2], durations[3]), (LINK_4K, LINK_4K));
        // The second page waits for the first rewrite's data; the third (TLC's MSB page,
        // holding the second rewrite) follows it.
        let second_done = rewrite + LINK_4K + ENCODE + XFER_16K + CSB_PROGRAM;
        let third_done = second_done + XFER_16K + 900_000;
        assert_eq!(durations[4], third_done - (rewrite + 2_000));

        let mut dev = packed(&[
            ("controller.scheduler", "fcfs"),
            ("cell.suspend", "false"),
            buffered,
        ]);
        let durations = super::scheduling::open_run(&mut dev, requests());
        assert_eq!(dev.ssd_json()["buffer_merged_units"], 0, "{durations:?}");
        assert_eq!(dev.flash_counters().programs, 3);
    }

    /// Flushes are reported as fio reports syncs: counted in the job's `sync.total_ios`, their
    /// latency from issue in `sync.lat_ns`, percentiles included. With a write-back buffer a
    /// flush waits for the pages buffered before it; one with nothing buffered is done at once.
    #[test]
    fn flushes_are_reported_as_fio_syncs() {
        let first_done = 4 * LINK_4K + ENCODE + XFER_16K + LSB_PROGRAM;
        let at = |op: Op, offset: u64, len: u64, t: u64| {
            let mut r = HostRequest::new(op, offset, len);
            r.arrival_ns = Some(t);
            r
        };
        let requests = vec![
            at(Op::Write, 0, 16384, 0),
            at(Op::Flush, 0, 0, 1_000),
            at(Op::Flush, 0, 0, 2_000_000),
        ];
        let mut dev = packed(&[
            ("controller.scheduler", "priority"),
            ("controller.write_buffer_pages", "4"),
        ]);
        let job = super::scheduling::open_run_report(&mut dev, requests);
        let sync = &job["sync"];
        assert_eq!(sync["total_ios"], 2, "{sync}");
        let lat = &sync["lat_ns"];
        assert_eq!((lat["N"].as_u64(), lat["min"].as_u64()), (Some(2), Some(0)));
        assert_eq!(lat["max"].as_u64(), Some(first_done - 1_000));
        assert_eq!(
            lat["mean"].as_f64(),
            Some((first_done - 1_000) as f64 / 2.0)
        );
        let pct = &lat["percentile"];
        // Histograms count from 1 ns (as the clat percentiles do): the instant flush is 1.
        assert_eq!(pct["1.000000"].as_u64(), Some(1), "{pct}");
        assert_eq!(pct["99.990000"].as_u64(), Some(first_done - 1_000), "{pct}");
        // Flushes are not reads, writes or trims.
        assert_eq!(job["write"]["total_ios"], 1);
        assert_eq!(job["read"]["total_ios"], 0);
    }

    /// A job that ends with a flush (fio's `end_fsync`): the run issues it once every request
    /// of the job is done, and reports it as fio does, its latency in `sync.lat_ns` but not in
    /// `sync.total_ios`. At queue depth 1 it is timed as a flush issued after the last write;
    /// at depth 4 it still waits for the writes, where a flush in the stream goes at once.
    /// An open-loop job refuses it.
    #[test]
    fn a_closing_flush_follows_the_last_completion() {
        struct Closing(VecSource);
        impl ssdlab_core::RequestSource for Closing {
            fn next_request(
                &mut self,
            ) -> Option<Result<HostRequest, ssdlab_core::request::SourceError>> {
                self.0.next_request()
            }
            fn ends_with_flush(&self) -> bool {
                true
            }
        }
        let writes = || -> Vec<HostRequest> {
            (0..3)
                .map(|i| HostRequest::new(Op::Write, i * 16384, 16384))
                .collect()
        };
        let run = |closing: bool, depth: u32| {
            let mut dev = packed(&[
                ("controller.scheduler", "priority"),
                ("controller.write_buffer_pages", "4"),
            ]);
            let source: Box<dyn ssdlab_core::RequestSource> = if closing {
                Box::new(Closing(VecSource::new(writes())))
            } else {
                let mut requests = writes();
                requests.push(HostRequest::new(Op::Flush, 0, 0));
                Box::new(VecSource::new(requests))
            };
            let job = dev
                .run_to_end(RunSpec {
                    name: "job".into(),
                    source,
                    queue_depth: depth,
                    pacing: Loop::Closed,
                    runtime_ns: None,
                    ramp_ns: None,
                })
                .unwrap();
            let sync = &job["sync"];
            assert_eq!(job["write"]["total_ios"], 3);
            assert_eq!(sync["lat_ns"]["N"], 1);
            (
                sync["total_ios"].as_u64().unwrap(),
                sync["lat_ns"]["max"].as_u64().unwrap(),
            )
        };
        let (closing_count, closing_lat) = run(true, 1);
        assert_eq!((closing_count, closing_lat), (0, run(false, 1).1));
        // The three programs (500, 700, 900 us on the one die) outlast the writes' transfers.
        assert!(closing_lat > 1_500_000, "{closing_lat}");
        let (count, in_stream) = run(false, 4);
        let (_, closing_at_depth) = run(true, 4);
        assert_eq!(count, 1);
        assert!(
            closing_at_depth < in_stream,
            "{closing_at_depth} {in_stream}"
        );
        let mut dev = packed(&[]);
        let e = dev
            .run_to_end(RunSpec {
                name: "job".into(),
                source: Box::new(Closing(VecSource::new(writes()))),
                queue_depth: 1,
                pacing: Loop::Open { time_scale: 1.0 },
                runtime_ns: None,
                ramp_ns: None,
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("end_fsync"), "{e}");
    }

    #[test]
    fn a_sub_unit_write_into_a_page_whose_program_is_not_done_merges_without_a_read() {
        // Unit 1's page is full and programming (500 us) when 1 KiB of unit 1 arrives: the old
        // copy is still in the controller, so nothing is read from flash: on the event engine
        // and on the reservation path (`fcfs` without suspend) alike.
        for (scheduler, suspend) in [("priority", "true"), ("fcfs", "false")] {
            let mut dev = packed(&[
                ("controller.scheduler", scheduler),
                ("cell.suspend", suspend),
            ]);
            let mut first = HostRequest::new(Op::Write, 0, 16384);
            first.arrival_ns = Some(0);
            let mut partial = HostRequest::new(Op::Write, 4096 + 1024, 1024);
            partial.arrival_ns = Some(100_000);
            let d = super::scheduling::open_run(&mut dev, vec![first, partial]);
            let flash = dev.flash_counters();
            assert_eq!(
                (flash.rmw_reads, flash.array_reads, flash.suspensions),
                (0, 0, 0),
                "{scheduler}"
            );
            // Staged in the next page: done once across the link.
            assert_eq!(d[1], LINK_4K / 4, "{scheduler}");
        }
    }

    #[test]
    fn the_event_engine_times_packed_pages_as_the_reservation_path_does() {
        let mut dev = packed(&[("controller.scheduler", "priority")]);
        let requests: Vec<HostRequest> = (0..4)
            .map(|unit| {
                let mut r = HostRequest::new(Op::Write, unit * 4096, 4096);
                r.arrival_ns = Some(unit * 10_000);
                r
            })
            .collect();
        dev.run_to_end(RunSpec {
            name: "packed".into(),
            source: Box::new(VecSource::new(requests)),
            queue_depth: 4,
            pacing: Loop::Open { time_scale: 1.0 },
            runtime_ns: None,
            ramp_ns: None,
        })
        .unwrap();
        let durations: Vec<u64> = dev
            .request_log()
            .unwrap()
            .iter()
            .map(|r| r.duration_ns)
            .collect();
        assert_eq!(
            durations,
            [
                LINK_4K,
                LINK_4K,
                LINK_4K,
                LINK_4K + ENCODE + XFER_16K + LSB_PROGRAM
            ]
        );
        let flash = dev.flash_counters();
        assert_eq!((flash.programs, flash.array_reads), (1, 0));
    }

    #[test]
    fn bad_mapping_units_are_refused_naming_the_key() {
        let config = |unit: &str, page: &str| {
            Device::from_toml(
                "",
                "t",
                &overrides(&[
                    ("ftl.mapping_unit_bytes", unit),
                    ("geometry.page_size_bytes", page),
                ]),
                1,
                false,
            )
        };
        for (unit, page) in [("3000", "16384"), ("256", "4096"), ("32768", "16384")] {
            let err = config(unit, page).err().expect("refused").to_string();
            assert!(
                err.contains("ftl.mapping_unit_bytes") && err.contains("power of two from 512"),
                "{unit}/{page}: {err}"
            );
        }
        // Unset: 4 KiB, or the whole page when pages are smaller.
        let small = Device::from_toml(
            "",
            "t",
            &overrides(&[("geometry.page_size_bytes", "2048")]),
            1,
            false,
        )
        .unwrap();
        assert_eq!(small.derived().mapping_unit_bytes, 2048);
        assert_eq!(config("512", "16384").unwrap().derived().units_per_page, 32);
    }
}

mod request_log_time_split {
    use super::*;

    /// A 4-die TLC device with the request log on, timed by `scheduler` (`fcfs`: the
    /// reservation path; `priority`: the event engine).
    fn logged(scheduler: &str) -> Device {
        let pairs = overrides(&[
            ("geometry.channels", "2"),
            ("geometry.chips_per_channel", "1"),
            ("geometry.dies_per_chip", "2"),
            ("geometry.planes_per_die", "2"),
            ("geometry.blocks_per_plane", "64"),
            ("geometry.pages_per_block", "96"),
            ("geometry.page_size_bytes", "4096"),
            ("geometry.over_provisioning", "0.2"),
            ("stats.request_log", "true"),
            ("controller.scheduler", scheduler),
        ]);
        Device::from_toml("", "test", &pairs, 3, false).unwrap()
    }

    fn requests(n: usize, seed: u64, logical: u64) -> Vec<HostRequest> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let op = if rng.gen_bool(0.4) {
                    Op::Read
                } else {
                    Op::Write
                };
                HostRequest::new(op, rng.gen_range(0..logical) * 4096, 4096)
            })
            .collect()
    }

    #[test]
    fn an_idle_device_queues_nothing_and_the_log_splits_each_duration() {
        for scheduler in ["fcfs", "priority"] {
            let mut dev = logged(scheduler);
            let logical = dev.derived().logical_pages;
            closed_run(&mut dev, requests(200, 1, logical), 1);
            let log = dev.request_log().unwrap();
            assert_eq!(log.len(), 200);
            for row in log {
                assert_eq!(
                    (row.queue_ns, row.service_ns),
                    (0, row.duration_ns),
                    "{scheduler}: one request at a time waits for no die"
                );
            }
        }
    }

    #[test]
    fn under_load_the_log_sums_to_the_jobs_queue_and_service_figures() {
        for scheduler in ["fcfs", "priority"] {
            let mut dev = logged(scheduler);
            let logical = dev.derived().logical_pages;
            let job = closed_run(&mut dev, requests(4_000, 2, logical), 32);
            let log = dev.request_log().unwrap();
            assert_eq!(log.len(), 4_000);
            for (op, name) in [("read", "read"), ("write", "write")] {
                let rows: Vec<_> = log.iter().filter(|r| r.op == op).collect();
                let n = rows.len() as f64;
                let queue: u128 = rows.iter().map(|r| r.queue_ns as u128).sum();
                let service: u128 = rows.iter().map(|r| r.service_ns as u128).sum();
                for r in &rows {
                    assert_eq!(r.queue_ns + r.service_ns, r.duration_ns);
                }
                let split = &job["ssd_job"][name];
                // The job's means are the same integer sums over the same count.
                assert_eq!(
                    split["queue_ns"]["mean"].as_f64().unwrap(),
                    queue as f64 / n
                );
                assert_eq!(
                    split["service_ns"]["mean"].as_f64().unwrap(),
                    service as f64 / n
                );
                let max_queue = rows.iter().map(|r| r.queue_ns).max().unwrap();
                assert_eq!(split["queue_ns"]["max"].as_u64().unwrap(), max_queue);
                assert!(
                    queue > 0,
                    "{scheduler} {op}: at QD 32 on 4 dies requests wait for their die"
                );
            }
        }
    }
}

/// GC time is the dies' array time spent on GC: a part of the busy time behind
/// `die_utilisation`, so that the two can be compared (GC's share of the busy dies).
mod gc_time {
    use super::*;

    const READ_NS: u64 = 25_000;
    const PROGRAM_NS: u64 = 200_000;
    const ERASE_NS: u64 = 1_500_000;

    /// Dies of the device `overwritten` builds (2 channels x 1 chip x 2 dies).
    const DIES: f64 = 4.0;

    /// Random 4 KiB overwrites in GC steady state on an SLC device with round-number times and
    /// `planes` planes a die; the `ssd` section.
    fn overwritten(page_bytes: &str, scheduler: &str, planes: &str) -> serde_json::Value {
        let (r, p, e) = (
            format!("[{READ_NS}]"),
            format!("[{PROGRAM_NS}]"),
            ERASE_NS.to_string(),
        );
        let mut dev = device(
            &[
                ("cell.type", "slc"),
                ("cell.read_ns", &r),
                ("cell.program_ns", &p),
                ("cell.erase_ns", &e),
                ("geometry.channels", "2"),
                ("geometry.chips_per_channel", "1"),
                ("geometry.dies_per_chip", "2"),
                ("geometry.planes_per_die", planes),
                ("geometry.blocks_per_plane", "48"),
                ("geometry.pages_per_block", "32"),
                ("geometry.page_size_bytes", page_bytes),
                ("geometry.over_provisioning", "0.25"),
                ("controller.scheduler", scheduler),
            ],
            3,
        );
        common::precondition(&mut dev);
        let units = dev.logical_bytes() / 4096;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let writes = (0..2 * units)
            .map(|_| HostRequest::new(Op::Write, rng.gen_range(0..units) * 4096, 4096))
            .collect();
        closed_run(&mut dev, writes, 16);
        dev.ssd_json()
    }

    /// GC's array time with each page counted: its page reads (every array read of a
    /// write-only run), its page programs, and the erases.
    fn per_page_gc_ns(ssd: &serde_json::Value) -> u64 {
        let n = |v: &serde_json::Value| v.as_u64().unwrap();
        n(&ssd["flash"]["array_reads"]) * READ_NS
            + n(&ssd["gc"]["pages_programmed"]) * PROGRAM_NS
            + n(&ssd["flash"]["erases"]) * ERASE_NS
    }

    /// The dies' busy time as the report gives it: mean utilisation over the simulated time.
    fn reported_busy_ns(ssd: &serde_json::Value) -> f64 {
        ssd["die_utilisation"].as_f64().unwrap()
            * ssd["sim_time_ns"].as_u64().unwrap() as f64
            * DIES
    }

    #[test]
    fn gc_time_is_the_array_time_of_its_reads_programs_and_erases() {
        // 16 KiB pages: GC reads whole pages through the controller and packs 4 KiB units
        // into new pages (each crossing the channel); 4 KiB pages: copyback, within the die.
        for page_bytes in ["16384", "4096"] {
            for scheduler in ["fcfs", "priority"] {
                let ssd = overwritten(page_bytes, scheduler, "1");
                let at = format!("{page_bytes} B pages, {scheduler}");
                let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("{at}: {v}"));
                let flash = &ssd["flash"];
                let gc = &ssd["gc"];
                // A write-only run: every array read is GC's (no read-modify-write of 4 KiB
                // units), every erase is GC's.
                assert_eq!(n(&flash["rmw_reads"]), 0, "{at}");
                let (reads, programs, erases) = (
                    n(&flash["array_reads"]),
                    n(&flash["programs"]),
                    n(&flash["erases"]),
                );
                let gc_programs = n(&gc["pages_programmed"]);
                assert!(gc_programs > 0 && reads > 0, "{at}: GC ran");
                let expected = per_page_gc_ns(&ssd);
                assert_eq!(n(&gc["time_ns"]), expected, "{at}");
                assert_eq!(
                    n(&gc["foreground_time_ns"]) + n(&gc["background_time_ns"]),
                    expected,
                    "{at}"
                );
                // The dies' busy time is the same sums over all of the work, host programs
                // included; GC's time is a part of it.
                let busy = reads * READ_NS + programs * PROGRAM_NS + erases * ERASE_NS;
                let reported = reported_busy_ns(&ssd);
                assert!(
                    (reported - busy as f64).abs() <= 1e-9 * busy as f64,
                    "{at}: busy {busy} ns, reported {reported}"
                );
                assert!(expected < busy, "{at}");
                let share = ssd["gc"]["share_of_die_busy"].as_f64().unwrap();
                assert!(
                    (share - expected as f64 / busy as f64).abs() < 1e-12,
                    "{at}: {share}"
                );
            }
        }
    }

    #[test]
    fn a_multi_plane_gc_operation_counts_its_die_time_once() {
        // Two planes a die: GC pages programmed (and read) at one offset on both planes go
        // as one operation, one tPROG (tR) of die time for two pages. GC time counts the die's
        // time, so it is at most the per-page sum, less by at most one page time per merge,
        // and it is a part of the busy time with the host programs' least possible time.
        let ssd = overwritten("16384", "priority", "2");
        let n = |v: &serde_json::Value| v.as_u64().unwrap();
        let gc_time = n(&ssd["gc"]["time_ns"]);
        let per_page = per_page_gc_ns(&ssd);
        let merges = n(&ssd["flash"]["multi_plane_ops"]);
        assert!(
            merges > 100,
            "GC pages line up on the two planes: {merges} merges"
        );
        // Some of the merged operations are GC's own (its frontiers fill both planes), so
        // counting each page would overstate its time.
        assert!(gc_time < per_page, "{gc_time} >= {per_page}");
        assert!(
            gc_time >= per_page - merges * PROGRAM_NS,
            "{gc_time}, {per_page}, {merges}"
        );
        let busy = reported_busy_ns(&ssd);
        let host_least = n(&ssd["host_pages_programmed"]).div_ceil(2) * PROGRAM_NS;
        assert!(
            (gc_time + host_least) as f64 <= busy * (1.0 + 1e-9),
            "GC {gc_time} + host {host_least} > busy {busy}"
        );
        let share = ssd["gc"]["share_of_die_busy"].as_f64().unwrap();
        assert!((share - gc_time as f64 / busy).abs() < 1e-6, "{share}");
    }
}

mod side_by_side {
    use super::*;
    use ssdlab_core::ArrivalClock;

    /// Open-loop jobs side by side count their timestamps from their own first request, or,
    /// on a shared clock, from the earliest first request among them: a trace that starts
    /// 4 ms after the other then issues 4 ms into the run. A closed-loop job beside them
    /// issues at once either way.
    #[test]
    fn a_shared_clock_keeps_the_offsets_between_traces() {
        let one = |offset: u64, timestamp: u64| {
            let mut r = HostRequest::new(Op::Read, offset, 4096);
            r.arrival_ns = Some(timestamp);
            vec![r]
        };
        let end_of_run = |clock: ArrivalClock| {
            let mut dev = single_request_latency::tlc_one_die(&[]);
            let start = dev.now_ns();
            let open = |requests| RunSpec {
                name: "trace".into(),
                source: Box::new(VecSource::new(requests)),
                queue_depth: 4,
                pacing: Loop::Open { time_scale: 1.0 },
                runtime_ns: None,
                ramp_ns: None,
            };
            // Reads of units never written: the controller answers them, no flash involved.
            let mut closed = open(vec![HostRequest::new(Op::Read, 8192, 4096)]);
            closed.pacing = Loop::Closed;
            let specs = vec![open(one(0, 1_000_000)), open(one(4096, 5_000_000)), closed];
            dev.start_group_clocked(specs, clock).unwrap();
            while !dev.step(1 << 10).unwrap().done {}
            let jobs = dev.finish_group().unwrap();
            let ios: u64 = jobs
                .iter()
                .map(|job| job["read"]["total_ios"].as_u64().unwrap())
                .sum();
            assert_eq!(ios, 3, "{clock:?}");
            dev.now_ns() - start
        };
        const LINK_4K: u64 = 1_024;
        assert_eq!(end_of_run(ArrivalClock::Shared), 4_000_000 + LINK_4K);
        assert!(end_of_run(ArrivalClock::PerJob) < 4 * LINK_4K);
    }
}
