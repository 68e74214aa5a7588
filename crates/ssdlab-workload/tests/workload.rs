//! Integration tests of ssdlab-workload, one module per scenario: fio jobs end to end (regions,
//! passes, random map, mixes, distributions, determinism, limits, errors), streaming trace
//! replay from files, generator speed, and property tests that feed arbitrary and generated
//! input to every parser.

use ssdlab_core::{HostRequest, Op, RequestSource};
use ssdlab_workload::{parse_job_file, JobSpec};

const GIB: u64 = 1 << 30;

fn job(text: &str) -> JobSpec {
    let mut f = parse_job_file(text, "test.fio").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.jobs.len(), 1);
    f.jobs.remove(0)
}

fn drain(source: &mut dyn RequestSource, max: usize) -> Vec<HostRequest> {
    let mut out = Vec::new();
    while out.len() < max {
        match source.next_request() {
            Some(r) => out.push(r.unwrap()),
            None => break,
        }
    }
    out
}

fn run(text: &str, device: u64, seed: u64) -> Vec<HostRequest> {
    let j = job(text);
    let mut s = j.source(device, seed).unwrap();
    drain(s.as_mut(), 10_000_000)
}

mod fio_sequential {
    use super::*;

    #[test]
    fn one_pass_over_the_region() {
        let j = job("[seq]\nrw=write\nbs=4k\nsize=64k\noffset=1m\n");
        assert_eq!(j.request_count(GIB), Some(16));
        let mut s = j.source(GIB, 1).unwrap();
        assert_eq!(s.len_hint(), Some(16));
        let r = drain(s.as_mut(), 100);
        assert_eq!(r.len(), 16);
        for (i, q) in r.iter().enumerate() {
            assert_eq!(
                (q.op, q.offset, q.length, q.arrival_ns),
                (Op::Write, (1 << 20) + i as u64 * 4096, 4096, None)
            );
            assert!(q.hint.is_empty());
        }
    }

    #[test]
    fn io_size_wraps_for_more_passes() {
        let r = run("[seq]\nrw=read\nbs=8k\nsize=64k\nio_size=160k\n", GIB, 1);
        assert_eq!(r.len(), 20);
        let offsets: Vec<u64> = r.iter().map(|q| q.offset / 8192).collect();
        assert_eq!(
            offsets,
            [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]
        );
    }

    #[test]
    fn variable_sizes_stay_contiguous_and_inside() {
        let r = run("[seq]\nrw=write\nbssplit=4k/50:64k/50\nsize=1m\n", GIB, 3);
        let total: u64 = r.iter().map(|q| q.length).sum();
        assert_eq!(total, 1 << 20, "one pass transfers size bytes");
        let mut next = 0;
        for q in &r {
            assert_eq!(q.offset, next);
            next += q.length;
        }
        assert!(next <= 1 << 20);
    }

    #[test]
    fn whole_device_by_default_and_percent_sizes() {
        let j = job("[d]\nrw=read\nbs=1m\n");
        assert_eq!(j.request_count(GIB), Some(1024));
        let j = job("[d]\nrw=read\nbs=1m\nsize=50%\noffset=25%\n");
        assert_eq!(j.request_count(GIB), Some(512));
        let r = run("[d]\nrw=read\nbs=1m\nsize=50%\noffset=25%\n", GIB, 0);
        assert_eq!(r[0].offset, GIB / 4);
        assert_eq!(r.last().unwrap().offset + (1 << 20), GIB / 4 + GIB / 2);
    }
}

mod fio_random_map {
    use super::*;
    use std::collections::BTreeMap;

    fn counts(r: &[HostRequest]) -> BTreeMap<u64, u32> {
        let mut m = BTreeMap::new();
        for q in r {
            *m.entry(q.offset).or_insert(0) += 1;
        }
        m
    }

    #[test]
    fn each_block_once_per_pass() {
        let r = run("[r]\nrw=randwrite\nbs=4k\nsize=4m\n", GIB, 11);
        assert_eq!(r.len(), 1024);
        let c = counts(&r);
        assert_eq!(c.len(), 1024);
        assert!(c.keys().all(|&o| o % 4096 == 0 && o < 4 << 20));
        // Random, not sequential: the first ten are not 0, 4k, 8k, ...
        assert!(r
            .iter()
            .take(10)
            .enumerate()
            .any(|(i, q)| q.offset != i as u64 * 4096));
    }

    #[test]
    fn two_passes_visit_each_block_twice() {
        let r = run("[r]\nrw=randread\nbs=4k\nsize=1m\nio_size=2m\n", GIB, 5);
        assert_eq!(r.len(), 512);
        assert_eq!(
            counts(&r[..256]).len(),
            256,
            "the first pass is a permutation"
        );
        assert!(counts(&r).values().all(|&n| n == 2));
    }

    #[test]
    fn norandommap_repeats() {
        let r = run("[r]\nrw=randread\nbs=4k\nsize=4m\nnorandommap\n", GIB, 5);
        assert_eq!(r.len(), 1024);
        let distinct = counts(&r).len();
        // Sampling with replacement: about 1024·(1 − 1/e) ≈ 647 distinct blocks.
        assert!((600..700).contains(&distinct), "{distinct}");
    }

    #[test]
    fn mixed_sizes_are_aligned_to_the_smallest() {
        let r = run(
            "[r]\nrw=randwrite\nbsrange=4k-16k\nsize=1m\nnumber_ios=2000\n",
            GIB,
            9,
        );
        assert_eq!(r.len(), 2000);
        for q in &r {
            assert_eq!(q.offset % 4096, 0);
            assert!(q.length % 4096 == 0 && (4096..=16384).contains(&q.length));
            assert!(q.offset + q.length <= 1 << 20, "I/O crosses the region end");
        }
    }
}

mod fio_mix {
    use super::*;
    use ssdlab_core::request::WriteLife;

    #[test]
    fn rwmixread_and_per_direction_sizes() {
        let r = run(
            "[m]\nrw=randrw\nrwmixread=70\nbs=4k,64k\nnumber_ios=100000\nnorandommap\n",
            GIB,
            2,
        );
        assert_eq!(r.len(), 100_000);
        let reads = r.iter().filter(|q| q.op == Op::Read).count();
        assert!((reads as f64 / 1e5 - 0.7).abs() < 0.01, "{reads}");
        for q in &r {
            match q.op {
                Op::Read => assert_eq!(q.length, 4096),
                Op::Write => assert_eq!(q.length, 65536),
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(q.offset % 4096, 0);
        }
    }

    #[test]
    fn write_hint_only_on_writes() {
        let r = run("[m]\nrw=rw\nwrite_hint=long\nsize=1m\n", GIB, 2);
        assert!(r.iter().any(|q| q.op == Op::Read));
        for q in &r {
            let expect = if q.op == Op::Write {
                Some(WriteLife::Long)
            } else {
                None
            };
            assert_eq!(q.hint.write_life, expect);
        }
        // Sequential mixed jobs keep one position per direction.
        let reads: Vec<u64> = r
            .iter()
            .filter(|q| q.op == Op::Read)
            .map(|q| q.offset)
            .collect();
        assert!(reads.windows(2).all(|w| w[1] == w[0] + 4096));
    }

    #[test]
    fn trims() {
        let r = run("[t]\nrw=randtrim\nbs=64k\nsize=1m\n", GIB, 2);
        assert_eq!(r.len(), 16);
        assert!(r.iter().all(|q| q.op == Op::Trim && q.length == 65536));
    }
}

mod fio_distributions {
    use super::*;

    #[test]
    fn zipf_hottest_block_share_and_spread() {
        let n = 256u64;
        let r = run(
            "[z]\nrw=randread\nbs=4k\nsize=1m\nrandom_distribution=zipf:1.2\nnumber_ios=100000\n",
            GIB,
            8,
        );
        let mut counts = vec![0u32; n as usize];
        for q in &r {
            counts[(q.offset / 4096) as usize] += 1;
        }
        let h: f64 = (1..=n).map(|k| (k as f64).powf(-1.2)).sum();
        let hottest = *counts.iter().max().unwrap() as f64 / 1e5;
        assert!(
            (hottest - 1.0 / h).abs() < 0.01,
            "hottest {hottest}, expected {}",
            1.0 / h
        );
        // The ten hottest blocks are scattered, not the first ten.
        let mut order: Vec<usize> = (0..n as usize).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(counts[i]));
        assert!(
            order[..10].iter().filter(|&&i| i < 10).count() <= 3,
            "{:?}",
            &order[..10]
        );
    }

    #[test]
    fn normal_is_centred() {
        let r = run(
            "[n]\nrw=randread\nbs=4k\nsize=40m\nrandom_distribution=normal:10\nnumber_ios=50000\n",
            GIB,
            8,
        );
        let n = 10240.0;
        let xs: Vec<f64> = r.iter().map(|q| (q.offset / 4096) as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        assert!((mean - (n - 1.0) / 2.0).abs() < 30.0, "mean {mean}");
        assert!((sd - 0.1 * n).abs() < 30.0, "sd {sd}");
    }

    #[test]
    fn pareto_concentrates() {
        let r = run(
            "[p]\nrw=randread\nbs=4k\nsize=40m\nrandom_distribution=pareto:0.2\nnumber_ios=50000\n",
            GIB,
            8,
        );
        let mut counts = vec![0u32; 10240];
        for q in &r {
            counts[(q.offset / 4096) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top20: u32 = counts[..2048].iter().sum();
        // 80 % of the accesses on the hottest 20 % of the blocks (a little more: ties at the cut).
        let share = top20 as f64 / 50_000.0;
        assert!((0.79..0.85).contains(&share), "{share}");
    }
}

mod fio_determinism {
    use super::*;

    const JOB: &str = "[d]\nrw=randrw\nbssplit=4k/60:16k/40\nsize=16m\nnumber_ios=2000\n";

    #[test]
    fn same_seed_same_sequence_different_seed_different() {
        assert_eq!(run(JOB, GIB, 42), run(JOB, GIB, 42));
        assert_ne!(run(JOB, GIB, 42), run(JOB, GIB, 43));
    }

    #[test]
    fn randseed_overrides_the_run_seed() {
        let with = format!("{JOB}randseed=5\n");
        assert_eq!(run(&with, GIB, 1), run(&with, GIB, 2));
    }

    #[test]
    fn jobs_of_one_file_differ() {
        let f = parse_job_file("[global]\nrw=randread\nsize=1m\n[a]\n[b]\n", "two.fio").unwrap();
        let a = drain(f.jobs[0].source(GIB, 7).unwrap().as_mut(), 1000);
        let b = drain(f.jobs[1].source(GIB, 7).unwrap().as_mut(), 1000);
        assert_eq!(a.len(), b.len());
        assert_ne!(a, b);
    }
}

mod fio_limits {
    use super::*;

    #[test]
    fn time_based_is_unbounded_and_exposes_times() {
        let j = job(
            "[t]\nrw=randread\nsize=64k\ntime_based\nruntime=2s\nramp_time=500ms\niodepth=16\n",
        );
        assert_eq!(
            (j.runtime_ns, j.ramp_time_ns, j.iodepth),
            (Some(2_000_000_000), Some(500_000_000), 16)
        );
        assert_eq!(j.request_count(GIB), None);
        let mut s = j.source(GIB, 1).unwrap();
        assert_eq!(s.len_hint(), None);
        assert_eq!(
            drain(s.as_mut(), 10_000).len(),
            10_000,
            "keeps going past size"
        );
    }

    #[test]
    fn number_ios_and_io_size() {
        assert_eq!(
            run("[n]\nrw=read\nnumber_ios=10\nsize=4k\n", GIB, 1).len(),
            10
        );
        let j = job("[n]\nrw=read\nnumber_ios=10\nio_size=8k\n");
        assert_eq!(j.request_count(GIB), Some(2));
        assert_eq!(
            run("[n]\nrw=read\nnumber_ios=10\nio_size=8k\n", GIB, 1).len(),
            2
        );
        assert_eq!(
            job("[n]\nrw=read\nbssplit=4k/50:8k/50\nsize=1m\n").request_count(GIB),
            None
        );
    }

    #[test]
    fn range_outside_the_device_names_the_key_and_line() {
        let j = job("[big]\nrw=read\n\nsize=2g\n");
        let e = j.source(GIB, 1).err().unwrap().to_string();
        assert!(
            e.starts_with("test.fio:4: option 'size': job 'big':"),
            "{e}"
        );
        assert!(
            e.contains("exceeds the device's 1073741824 logical bytes"),
            "{e}"
        );
        let e = job("[o]\noffset=1g\n")
            .source(GIB, 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("test.fio:2: option 'offset'"), "{e}");
        let e = job("[s]\nsize=1k\n")
            .source(GIB, 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("smaller than its block size"), "{e}");
    }
}

mod fio_host_options {
    //! Options that only concern the host running fio, the buffers' contents or fio's own logs
    //! are accepted and change nothing; options that change the stream are refused by name.
    use super::*;

    #[test]
    fn a_job_file_written_for_a_real_device_gives_the_same_stream() {
        let core = "rw=randwrite\nbs=4k\nsize=1m\niodepth=32\nnumber_ios=500\n";
        let real = format!(
            "[global]\nioengine=libaio\ndirect=1\nrandrepeat=0\nallrandrepeat=1\n\
             refill_buffers\nbuffer_compress_percentage=50\nbuffer_compress_chunk=4k\n\
             zero_buffers=0\nbuffer_pattern=0xdeadbeef\ndedupe_percentage=10\n\
             cpus_allowed=0-1\ncpus_allowed_policy=split\nnice=-5\nprio=0\nprioclass=1\n\
             ioscheduler=none\ngtod_reduce=1\nclocksource=clock_gettime\nlockmem=1g\n\
             write_lat_log=lat\nwrite_bw_log=bw\nwrite_iops_log=iops\nlog_avg_msec=1000\n\
             per_job_logs=0\ndisk_util=0\nfadvise_hint=0\nunlink=0\nthread\n\
             [job]\nfilename=/dev/nvme0n1\n{core}"
        );
        let plain = format!("[job]\n{core}");
        let a = run(&real, GIB, 3);
        let b = run(&plain, GIB, 3);
        assert_eq!(a.len(), 500);
        assert!(a == b, "the host's options changed the request stream");
    }

    #[test]
    fn options_that_change_the_stream_or_the_report_are_refused_by_name() {
        for option in [
            "exitall",
            "kb_base=1000",
            "iodepth_batch_submit=8",
            "unified_rw_reporting=1",
            "verify=crc32c",
        ] {
            let e = parse_job_file(&format!("[j]\nrw=write\n{option}\n"), "j.fio")
                .unwrap_err()
                .to_string();
            let key = option.split('=').next().unwrap();
            assert!(
                e.contains("j.fio:3") && e.contains(&format!("'{key}'")),
                "{e}"
            );
        }
    }
}

mod fio_syncs {
    //! `fsync` / `fdatasync`: a flush after every N writes, as fio issues its syncs.
    use super::*;

    /// The stream as letters: W(rite), R(ead), F(lush).
    fn pattern(requests: &[HostRequest]) -> String {
        requests
            .iter()
            .map(|r| match r.op {
                Op::Write => 'W',
                Op::Read => 'R',
                Op::Trim => 'T',
                Op::Flush => 'F',
            })
            .collect()
    }

    #[test]
    fn a_flush_follows_every_nth_write_but_the_last() {
        let j = job("[s]\nrw=write\nbs=4k\nsize=40k\nfsync=4\n");
        let requests = run("[s]\nrw=write\nbs=4k\nsize=40k\nfsync=4\n", GIB, 1);
        assert_eq!(pattern(&requests), "WWWWFWWWWFWW");
        // The count the job announces includes its flushes.
        assert_eq!(j.request_count(GIB), Some(12));
        assert_eq!(j.source(GIB, 1).unwrap().len_hint(), Some(12));
        // Writes stay where they were: flushes carry no range and change no offset.
        let writes: Vec<u64> = requests
            .iter()
            .filter(|r| r.op == Op::Write)
            .map(|r| r.offset)
            .collect();
        assert_eq!(writes, (0..10).map(|i| i * 4096).collect::<Vec<_>>());
        assert!(requests
            .iter()
            .filter(|r| r.op == Op::Flush)
            .all(|r| r.length == 0 && r.offset == 0));
        // The last write is due (8 of 8) but ends the job: no flush after it.
        let exact = run("[s]\nrw=write\nsize=32k\nfdatasync=4\n", GIB, 1);
        assert_eq!(pattern(&exact), "WWWWFWWWW");
    }

    #[test]
    fn fsync_and_fdatasync_together_flush_once_per_due_write() {
        let text = "[s]\nrw=write\nsize=52k\nfsync=4\nfdatasync=6\n";
        let requests = run(text, GIB, 1);
        // Flushes after writes 4, 6, 8 and 12 (due for both: one flush).
        assert_eq!(pattern(&requests), "WWWWFWWFWWFWWWWFW");
        assert_eq!(job(text).request_count(GIB), Some(requests.len() as u64));
    }

    #[test]
    fn only_writes_are_counted_and_only_a_write_is_followed() {
        let requests = run(
            "[m]\nrw=randrw\nrwmixread=50\nsize=1m\nnumber_ios=400\nfsync=3\n",
            GIB,
            7,
        );
        let p = pattern(&requests);
        assert_eq!(
            p.matches(['W', 'R']).count(),
            400,
            "flushes are not counted I/Os"
        );
        let mut writes = 0;
        for (i, c) in p.char_indices() {
            match c {
                'W' => writes += 1,
                'F' => {
                    assert_eq!(&p[i - 1..i], "W", "a flush follows a write");
                    assert_eq!(writes % 3, 0, "after every third write");
                }
                _ => {}
            }
        }
        // Each third write is followed by a flush, unless it was the last request.
        let due = p.matches("W").count() / 3;
        let flushes = p.matches('F').count();
        assert!(
            flushes == due || flushes + 1 == due,
            "{flushes} flushes, {due} due"
        );
        // A mixed job cannot know its writes ahead.
        let j = job("[m]\nrw=randrw\nsize=1m\nnumber_ios=400\nfsync=3\n");
        assert_eq!(j.request_count(GIB), None);
        // Reads alone: no syncs (fio syncs only a job that writes).
        let reads = run("[r]\nrw=read\nsize=64k\nfsync=1\n", GIB, 1);
        assert_eq!(pattern(&reads), "R".repeat(16));
    }

    #[test]
    fn a_paced_flush_arrives_with_its_write() {
        let requests = run(
            "[p]\nrw=write\nsize=64k\nrate_iops=1000\nfdatasync=2\n",
            GIB,
            1,
        );
        for pair in requests.windows(2) {
            if pair[1].op == Op::Flush {
                assert_eq!(pair[0].op, Op::Write);
                assert_eq!(pair[1].arrival_ns, pair[0].arrival_ns);
                assert!(pair[1].arrival_ns.is_some());
            }
        }
        assert_eq!(requests.iter().filter(|r| r.op == Op::Flush).count(), 7);
    }

    #[test]
    fn end_fsync_closes_a_writing_job_with_one_flush() {
        for option in ["end_fsync=1", "end_fsync", "fsync_on_close=1"] {
            let text = format!("[w]\nrw=write\nsize=64k\n{option}\n");
            let j = job(&text);
            assert!(j.ends_with_flush(), "{option}");
            let source = j.source(GIB, 1).unwrap();
            // The run issues it once the stream is done: the stream itself has none.
            assert!(source.ends_with_flush());
            assert_eq!(
                source.len_hint(),
                Some(17),
                "16 writes and the closing flush"
            );
            assert_eq!(j.request_count(GIB), Some(17));
            assert_eq!(pattern(&run(&text, GIB, 1)), "W".repeat(16));
        }
        // The last line setting an option wins, in a job section over its global one.
        let off = job("[global]\nend_fsync=1\n[w]\nrw=write\nsize=64k\nend_fsync=0\n");
        assert!(!off.ends_with_flush());
        assert!(!off.source(GIB, 1).unwrap().ends_with_flush());
        let on = job("[w]\nrw=write\nsize=64k\nend_fsync=0\nfsync_on_close=1\n");
        assert!(on.ends_with_flush());
        // A job that only reads has nothing to sync, as in fio.
        let reads = job("[r]\nrw=read\nsize=64k\nend_fsync=1\n");
        assert!(!reads.source(GIB, 1).unwrap().ends_with_flush());
        assert_eq!(reads.request_count(GIB), Some(16));
        // With a rate limit the job would end at its last arrival, not its last completion.
        let e = parse_job_file("[p]\nrw=write\nrate_iops=100\nend_fsync=1\n", "p.fio")
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.fio:4") && e.contains("'end_fsync'"), "{e}");
    }

    /// `sync=1` (`sync`, `dsync`): every write of the job is a FUA write, and nothing else
    /// changes: the same stream, no flushes, reads untouched. `sync=none` and `sync=0` are the
    /// default; a value fio does not take is named.
    #[test]
    fn sync_makes_every_write_a_fua_write() {
        let core = "rw=randrw\nrwmixread=30\nsize=1m\nnumber_ios=200\n";
        let plain = run(&format!("[j]\n{core}"), GIB, 5);
        for option in ["sync=1", "sync=sync", "sync=dsync", "sync=true"] {
            let synced = run(&format!("[j]\n{core}{option}\n"), GIB, 5);
            assert_eq!(synced.len(), plain.len(), "{option}: no requests added");
            for (s, p) in synced.iter().zip(&plain) {
                assert_eq!((s.op, s.offset, s.length), (p.op, p.offset, p.length));
                assert_eq!(s.fua, s.op == Op::Write, "{option}: {s:?}");
            }
            assert!(job(&format!("[j]\n{core}{option}\n")).sync_writes);
        }
        assert!(plain.iter().any(|r| r.op == Op::Write) && plain.iter().all(|r| !r.fua));
        for off in ["sync=0", "sync=none"] {
            let text = format!("[global]\nsync=1\n[j]\n{core}{off}\n");
            assert!(run(&text, GIB, 5).iter().all(|r| !r.fua), "{off}");
        }
        let e = parse_job_file("[j]\nrw=write\nsync=always\n", "j.fio")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("j.fio:3") && e.contains("'sync'") && e.contains("dsync"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_count_is_named() {
        for bad in ["-1", "often", "1.5"] {
            let e = parse_job_file(&format!("[s]\nrw=write\nfsync={bad}\n"), "s.fio")
                .unwrap_err()
                .to_string();
            assert!(e.contains("s.fio:3") && e.contains("'fsync'"), "{e}");
        }
    }
}

mod fio_pacing {
    //! `rate`, `rate_iops` and `rate_process`: arrival times as fio spaces its submissions, and
    //! the core running such a job open loop; `thinktime` and its pauses.
    use super::*;
    use ssdlab_core::{Device, RunSpec};
    use ssdlab_workload::{RateLimit, RateProcess};

    fn arrivals(r: &[HostRequest]) -> Vec<u64> {
        r.iter()
            .map(|q| q.arrival_ns.expect("a paced request"))
            .collect()
    }

    #[test]
    fn rate_iops_spaces_the_requests_evenly() {
        let j = job("[r]\nrw=randread\nsize=1m\nrate_iops=1000\n");
        assert_eq!(j.rate, [Some(RateLimit::Iops(1000)); 3]);
        assert_eq!(j.pacing(), ssdlab_core::Loop::Open { time_scale: 1.0 });
        let r = run("[r]\nrw=randread\nsize=1m\nrate_iops=1000\n", GIB, 1);
        assert_eq!(r.len(), 256);
        let want: Vec<u64> = (0..256).map(|k| k * 1_000_000).collect();
        assert_eq!(arrivals(&r), want);
        // The offsets and sizes are the unpaced job's.
        let unpaced = run("[r]\nrw=randread\nsize=1m\n", GIB, 1);
        let shape = |v: &[HostRequest]| -> Vec<(Op, u64, u64)> {
            v.iter().map(|q| (q.op, q.offset, q.length)).collect()
        };
        assert_eq!(shape(&r), shape(&unpaced));
        assert!(unpaced.iter().all(|q| q.arrival_ns.is_none()));
        assert_eq!(job("[r]\nrw=read\n").pacing(), ssdlab_core::Loop::Closed);
    }

    #[test]
    fn rate_in_bytes_spaces_by_the_bytes_issued_before() {
        let r = run(
            "[r]\nrw=randwrite\nbsrange=4k-64k\nsize=16m\nnumber_ios=500\nrate=8m\n",
            GIB,
            3,
        );
        let mut bytes = 0u64;
        for q in &r {
            // fio's usec_for_io, in ns: the bytes issued before this one at 8 MiB/s.
            assert_eq!(
                q.arrival_ns,
                Some((bytes as u128 * 1_000_000_000 / (8 << 20)) as u64)
            );
            bytes += q.length;
        }
        assert!(r.iter().any(|q| q.length > 4096), "sizes vary");
    }

    #[test]
    fn per_direction_values_and_rate_over_rate_iops() {
        let j = job("[r]\nrw=randrw\nrate_iops=500,200\n");
        assert_eq!(
            j.rate,
            [
                Some(RateLimit::Iops(500)),
                Some(RateLimit::Iops(200)),
                Some(RateLimit::Iops(200))
            ]
        );
        // An empty field or 0 leaves a direction unlimited; a missing one copies the last.
        let j = job("[r]\nrw=randwrite\nrate=,1m\n");
        assert_eq!(
            j.rate,
            [
                None,
                Some(RateLimit::Bytes(1 << 20)),
                Some(RateLimit::Bytes(1 << 20))
            ]
        );
        let j = job("[r]\nrw=randread\nrate=2m,\n");
        assert_eq!(j.rate, [Some(RateLimit::Bytes(2 << 20)), None, None]);
        // rate wins over rate_iops, in either order.
        for text in [
            "[r]\nrw=read\nrate=1m\nrate_iops=10\n",
            "[r]\nrw=read\nrate_iops=10\nrate=1m\n",
        ] {
            assert_eq!(job(text).rate[0], Some(RateLimit::Bytes(1 << 20)));
        }
        assert_eq!(job("[r]\nrw=read\nrate_iops=0\n").rate, [None; 3]);
        assert!(!job("[r]\nrw=read\nrate_iops=0\n").is_rate_limited());
    }

    #[test]
    fn a_mixed_job_keeps_each_direction_at_its_own_rate() {
        // 50/50 drawn, 500 reads/s and 200 writes/s allowed: an I/O drawn for a direction that
        // is ahead goes to the other if that one is due (fio's rate_ddir), so the rates hold
        // and the mix follows them.
        let r = run(
            "[m]\nrw=randrw\nrwmixread=50\nnumber_ios=7000\nrate_iops=500,200\n",
            GIB,
            5,
        );
        let t = arrivals(&r);
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "arrivals in order");
        let reads: Vec<u64> = r
            .iter()
            .filter(|q| q.op == Op::Read)
            .map(|q| q.arrival_ns.unwrap())
            .collect();
        let writes: Vec<u64> = r
            .iter()
            .filter(|q| q.op == Op::Write)
            .map(|q| q.arrival_ns.unwrap())
            .collect();
        // Neither direction ever runs ahead of its rate: its k-th I/O is at k/rate or later.
        for (k, &at) in reads.iter().enumerate() {
            assert!(at >= k as u64 * 2_000_000, "read {k} at {at} ns");
        }
        for (k, &at) in writes.iter().enumerate() {
            assert!(at >= k as u64 * 5_000_000, "write {k} at {at} ns");
        }
        let end = *t.last().unwrap() as f64 / 1e9;
        let (read_rate, write_rate) = (reads.len() as f64 / end, writes.len() as f64 / end);
        assert!(
            (read_rate / 500.0 - 1.0).abs() < 0.01,
            "{read_rate} reads/s"
        );
        assert!(
            (write_rate / 200.0 - 1.0).abs() < 0.02,
            "{write_rate} writes/s"
        );
    }

    #[test]
    fn poisson_gaps_are_exponential_with_the_rates_mean() {
        let j = job("[p]\nrw=randread\nnumber_ios=200000\nrate_iops=10000\nrate_process=poisson\n");
        assert_eq!(j.rate_process, RateProcess::Poisson);
        let r = run(
            "[p]\nrw=randread\nnumber_ios=200000\nrate_iops=10000\nrate_process=poisson\n",
            GIB,
            9,
        );
        let t = arrivals(&r);
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
        let above_mean = gaps.iter().filter(|&&g| g > 100_000.0).count() as f64 / n;
        // Mean 100 us, coefficient of variation 1, P(gap > mean) = 1/e.
        assert!((mean / 100_000.0 - 1.0).abs() < 0.01, "mean gap {mean} ns");
        assert!((sd / mean - 1.0).abs() < 0.02, "cv {}", sd / mean);
        assert!((above_mean - (-1f64).exp()).abs() < 0.005, "{above_mean}");
        // A rate in bytes counts I/Os of the smallest size: 40 MiB/s of 4 KiB is 10,240/s.
        let r = run(
            "[p]\nrw=randread\nnumber_ios=100000\nrate=40m\nrate_process=poisson\n",
            GIB,
            9,
        );
        let t = arrivals(&r);
        let mean = (t[t.len() - 1] - t[0]) as f64 / (t.len() - 1) as f64;
        assert!(
            (mean / (1e9 / 10_240.0) - 1.0).abs() < 0.01,
            "mean gap {mean} ns"
        );
    }

    /// Job file `text` (as `p.fio`) is refused with an error that contains each of `needles`.
    fn refused(text: &str, needles: &[&str]) {
        let e = parse_job_file(text, "p.fio").unwrap_err().to_string();
        for needle in needles {
            assert!(e.contains(needle), "{needle:?} not in: {e}");
        }
    }

    #[test]
    fn bad_rate_options_name_the_key_and_line() {
        let process = "[r]\nrw=read\nrate_process=bursty\n";
        refused(process, &["p.fio:3", "rate_process", "linear or poisson"]);
        refused("[r]\nrw=read\nrate_iops=fast\n", &["p.fio:3", "rate_iops"]);
        refused("[r]\nrw=read\nrate=1m,2m,3m,4m\n", &["at most 3"]);
        // A mixed job with one unlimited direction: fio's behaviour cannot be followed.
        let writes_only = "[r]\nrw=randrw\nrate_iops=,500\n";
        refused(
            writes_only,
            &["p.fio:3", "rate_iops", "limits writes but not reads"],
        );
        let reads_only = "[global]\nrate=1m,\n[r]\nrw=rw\n";
        refused(reads_only, &["p.fio:2", "limits reads but not writes"]);
        // ... unless the mix draws one direction only.
        assert!(job("[r]\nrw=randrw\nrwmixread=0\nrate_iops=,500\n").is_rate_limited());
        // Poisson needs at least one I/O of the smallest size per second.
        let slow = "[r]\nrw=read\nbs=8k\nrate=4k\nrate_process=poisson\n";
        refused(slow, &["p.fio:4", "less than one 8192-byte I/O"]);
        assert!(job("[r]\nrw=read\nbs=8k\nrate=4k\n").is_rate_limited());
    }

    pub(super) fn device(scheduler: &str) -> Device {
        let sets: Vec<(String, String)> = [
            ("controller.scheduler", scheduler),
            ("geometry.channels", "2"),
            ("geometry.chips_per_channel", "1"),
            ("geometry.blocks_per_plane", "32"),
            ("geometry.over_provisioning", "0.25"),
            ("stats.request_log", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let text = ssdlab_core::presets::get("tlc").unwrap();
        let mut dev = Device::from_toml(text, "tlc", &sets, 1, false).unwrap();
        run_job(&mut dev, "[fill]\nrw=write\nbs=128k\nsize=8m\niodepth=8\n");
        dev
    }

    pub(super) fn run_job(dev: &mut Device, text: &str) -> serde_json::Value {
        let j = job(text);
        let source = j.source(dev.logical_bytes(), 7).unwrap();
        dev.run_to_end(RunSpec {
            name: j.name.clone(),
            source,
            queue_depth: j.iodepth,
            pacing: j.pacing(),
            runtime_ns: j.runtime_ns,
            ramp_ns: j.ramp_time_ns,
        })
        .unwrap()
    }

    /// A job run beside the same reads at QD 1 on an idle device.
    struct BesideIdle {
        /// Latencies of the `n` reads alone (closed loop, QD 1).
        idle: Vec<u64>,
        /// Latencies of the same reads with the extra options, and that run's simulated time.
        latencies: Vec<u64>,
        elapsed_ns: u64,
        job: serde_json::Value,
    }

    /// Run job `read` (`n` reads, QD 1) on one fresh device and, with `extra` options added,
    /// on another.
    fn beside_idle(scheduler: &str, read: &str, extra: &str, n: usize) -> BesideIdle {
        let mut alone = device(scheduler);
        run_job(&mut alone, read);
        let mut other = device(scheduler);
        let start = other.now_ns();
        let job = run_job(&mut other, &format!("{read}{extra}"));
        BesideIdle {
            idle: last_durations(&alone, n),
            latencies: last_durations(&other, n),
            elapsed_ns: other.now_ns() - start,
            job,
        }
    }

    /// Latencies of the last `n` requests of the device's log.
    fn last_durations(dev: &Device, n: usize) -> Vec<u64> {
        let log = dev.request_log().unwrap();
        log[log.len() - n..].iter().map(|r| r.duration_ns).collect()
    }

    #[test]
    fn a_rate_far_below_the_device_sees_the_idle_devices_latency() {
        let read = "[r]\nrw=randread\nbs=4k\nsize=8m\nnumber_ios=300\n";
        // The event engine and the reservation path alike.
        for scheduler in ["priority", "fcfs"] {
            // One read per millisecond, up to 32 outstanding: never two at once, the same reads.
            let run = beside_idle(scheduler, read, "iodepth=32\nrate_iops=1000\n", 300);
            assert_eq!(run.latencies, run.idle, "{scheduler}");
            // The run ends with the last read, which arrived at 299 ms.
            assert_eq!(run.elapsed_ns, 299_000_000 + run.idle[299], "{scheduler}");
            let job = run.job;
            let iops = job["read"]["iops"].as_f64().unwrap();
            assert!(
                (iops / 1000.0 - 1.0).abs() < 0.01,
                "{scheduler}: {iops} IOPS"
            );
        }
    }

    #[test]
    fn a_rate_above_the_device_queues_at_the_host_and_keeps_the_queue_depth() {
        let read = "[r]\nrw=randread\nbs=4k\nsize=8m\nnumber_ios=2000\niodepth=4\n";
        let mut closed = device("priority");
        let closed_job = run_job(&mut closed, read);
        let mut paced = device("priority");
        let paced_job = run_job(&mut paced, &format!("{read}rate_iops=10000000\n"));
        let iops = |j: &serde_json::Value| j["read"]["iops"].as_f64().unwrap();
        let mean = |j: &serde_json::Value, part: &str| j["read"][part]["mean"].as_f64().unwrap();
        // Arrivals outrun the device: it serves at its QD-4 speed, and the requests wait for a
        // slot at the host (lat, from arrival) far longer than in the device (clat, from issue).
        assert!((iops(&paced_job) / iops(&closed_job) - 1.0).abs() < 0.02);
        assert!((mean(&paced_job, "clat_ns") / mean(&closed_job, "clat_ns") - 1.0).abs() < 0.02);
        assert!(mean(&paced_job, "lat_ns") > 100.0 * mean(&paced_job, "clat_ns"));
    }

    #[test]
    fn think_time_options_and_their_errors() {
        let j = job("[t]\nrw=randread\nthinktime=250\n");
        assert_eq!((j.thinktime_ns, j.thinktime_blocks), (250_000, 1));
        assert_eq!(
            j.pacing(),
            ssdlab_core::Loop::Think {
                think_ns: 250_000,
                blocks: 1,
                count_completions: true
            }
        );
        let j = job("[t]\nrw=randread\nthinktime=2ms\nthinktime_blocks=8\nthinktime_blocks_type=issue\nthinktime_spin=1ms\n");
        assert_eq!(
            j.pacing(),
            ssdlab_core::Loop::Think {
                think_ns: 2_000_000,
                blocks: 8,
                count_completions: false
            }
        );
        assert_eq!(
            job("[t]\nrw=read\nthinktime=0\n").pacing(),
            ssdlab_core::Loop::Closed
        );
        let think = "[t]\nrw=read\nthinktime=5\n";
        refused(
            &format!("{think}thinktime_blocks=0\n"),
            &["p.fio:4", "from 1 to"],
        );
        let kind = format!("{think}thinktime_blocks_type=later\n");
        refused(&kind, &["p.fio:4", "complete or issue"]);
        let spin = format!("{think}thinktime_spin=6\n");
        refused(&spin, &["p.fio:4", "longer than the think time"]);
        let rate = format!("{think}rate_iops=10\n");
        refused(&rate, &["p.fio:3", "think time with a rate"]);
        let iotime = format!("{think}thinktime_iotime=1s\n");
        refused(&iotime, &["p.fio:4", "supported: thinktime,"]);
    }

    #[test]
    fn a_think_time_pauses_after_each_io_and_leaves_its_latency_alone() {
        let read = "[r]\nrw=randread\nbs=4k\nsize=8m\nnumber_ios=200\n";
        for scheduler in ["priority", "fcfs"] {
            // QD 1 with 1 ms of thinking after each read: the same reads, each on an idle
            // device, and 200 pauses (the last one too, as fio).
            let run = beside_idle(scheduler, read, "thinktime=1000\n", 200);
            assert_eq!(run.latencies, run.idle, "{scheduler}");
            let busy: u64 = run.idle.iter().sum();
            assert_eq!(run.elapsed_ns, busy + 200 * 1_000_000, "{scheduler}");
            assert_eq!(run.job["read"]["total_ios"], 200);
        }
    }

    #[test]
    fn a_think_time_with_blocks_waits_for_all_after_each_count() {
        let read = "[r]\nrw=randread\nbs=4k\nsize=8m\nnumber_ios=40\niodepth=4\n";
        let mut alone = device("priority");
        run_job(&mut alone, &read.replace("iodepth=4", "iodepth=1"));
        let slowest = *last_durations(&alone, 40).iter().max().unwrap();
        // Counted at issue: 4 issued, all 4 waited for, 10 ms of thinking; 10 pauses. Counted
        // at completion (fio's default): a full queue reaps one before the count is looked at,
        // so a pause comes when 4, 8, ... have completed and the wait for all then adds the
        // others: 1, 2, 3, 4 -> pause -> 7, 8 -> pause -> 11, 12 -> ... 9 pauses in 40 reads.
        for (kind, pauses) in [("issue", 10), ("complete", 9)] {
            let mut dev = device("priority");
            let start = dev.now_ns();
            let text =
                format!("{read}thinktime=10ms\nthinktime_blocks=4\nthinktime_blocks_type={kind}\n");
            run_job(&mut dev, &text);
            // Reads take well under 10 ms in all: the bounds tell 9 pauses from 10.
            assert!(40 * slowest < 10_000_000);
            let thinking = pauses * 10_000_000;
            let elapsed = dev.now_ns() - start;
            assert!(elapsed >= thinking, "{kind}: {elapsed} ns");
            assert!(elapsed < thinking + 40 * slowest, "{kind}: {elapsed} ns");
        }
    }

    #[test]
    fn a_think_time_gives_background_gc_the_idle_time() {
        let write = "[w]\nrw=randwrite\nbs=4k\nnumber_ios=3000\n";
        let gc = |think: &str| {
            let mut dev = device("priority");
            dev.precondition(ssdlab_core::PreconditionOptions {
                max_random_passes: 1.0,
                steady_tolerance: 0.05,
            })
            .unwrap();
            run_job(&mut dev, &format!("{write}{think}"));
            let gc = &dev.ssd_json()["gc"];
            (
                gc["background_invocations"].as_u64().unwrap(),
                gc["invocations"].as_u64().unwrap(),
            )
        };
        let (busy_bg, busy_all) = gc("");
        let (idle_bg, idle_all) = gc("thinktime=2ms\n");
        // A larger part of the collection moves to the pauses.
        assert!(
            idle_bg as f64 / idle_all as f64 > busy_bg as f64 / busy_all as f64 + 0.1,
            "background {idle_bg}/{idle_all} with think time, {busy_bg}/{busy_all} without"
        );
    }

    #[test]
    fn runtime_stops_a_paced_job_at_its_last_arrival_before_the_end() {
        let mut dev = device("fcfs");
        let job = run_job(
            &mut dev,
            "[t]\nrw=randread\nsize=8m\ntime_based\nruntime=10ms\nrate_iops=1000\niodepth=4\n",
        );
        // Arrivals at 0, 1, ..., 9 ms; the one at 10 ms is past the runtime.
        assert_eq!(job["read"]["total_ios"], 10);
    }
}

mod fio_groups {
    //! Jobs side by side: run groups (`stonewall`), `numjobs` clones and `offset_increment`,
    //! and the core running a group's jobs on one device and one clock.
    use super::fio_pacing::{device, run_job};
    use super::*;
    use ssdlab_core::{Device, Loop, RunSpec, VecSource};
    use ssdlab_workload::JobFile;

    fn file(text: &str) -> JobFile {
        parse_job_file(text, "g.fio").unwrap_or_else(|e| panic!("{e}"))
    }

    fn spec(dev: &Device, j: &JobSpec) -> RunSpec {
        RunSpec {
            name: j.name.clone(),
            source: j.source(dev.logical_bytes(), 7).unwrap(),
            queue_depth: j.iodepth,
            pacing: j.pacing(),
            runtime_ns: j.runtime_ns,
            ramp_ns: j.ramp_time_ns,
        }
    }

    /// Run `specs` side by side to the end; their job objects.
    fn run_group(dev: &mut Device, specs: Vec<RunSpec>) -> Vec<serde_json::Value> {
        dev.start_group(specs).unwrap();
        while !dev.step(1000).unwrap().done {}
        dev.finish_group().unwrap()
    }

    /// Run every group of a job file in order; all the job objects.
    fn run_file(dev: &mut Device, text: &str) -> Vec<serde_json::Value> {
        let f = file(text);
        let mut jobs = Vec::new();
        for group in f.groups().unwrap() {
            let specs = group.iter().map(|&i| spec(dev, &f.jobs[i])).collect();
            jobs.extend(run_group(dev, specs));
        }
        jobs
    }

    #[test]
    fn stonewall_starts_a_group_and_numjobs_makes_numbered_clones() {
        let f = file(
            "[global]\nsize=1m\n[a]\nrw=read\nnumjobs=2\n[b]\nrw=write\n\
             [c]\nstonewall\nrw=randread\nnumjobs=3\noffset_increment=1m\n\
             [d]\nwait_for_previous=1\nrw=read\n[e]\nstonewall=0\nrw=read\n",
        );
        assert_eq!(
            f.groups().unwrap(),
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]
        );
        let names: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["a", "a", "b", "c", "c", "c", "d", "e"]);
        let numbers: Vec<u32> = f.jobs.iter().map(|j| j.job_number).collect();
        assert_eq!(numbers, [0, 1, 0, 0, 1, 2, 0, 0]);
        let indices: Vec<usize> = f.jobs.iter().map(|j| j.index).collect();
        assert_eq!(indices, (0..8).collect::<Vec<_>>());
        // Clone n of [c] reads its own MiB, at offsets of its own.
        let mut streams = Vec::new();
        for n in 0..3u64 {
            let j = &f.jobs[3 + n as usize];
            let r = drain(j.source(GIB, 1).unwrap().as_mut(), 1000);
            assert_eq!(r.len(), 256);
            assert!(r
                .iter()
                .all(|q| q.offset >= n << 20 && q.offset + q.length <= (n + 1) << 20));
            streams.push(r.iter().map(|q| q.offset - (n << 20)).collect::<Vec<_>>());
        }
        assert_ne!(streams[0], streams[1], "each clone draws its own stream");
        assert_ne!(streams[1], streams[2]);
        // Without numjobs nothing changes: one job, number 0, in group 0.
        let j = job("[r]\nrw=read\n");
        assert_eq!((j.job_number, j.numjobs, j.group), (0, 1, 0));
    }

    #[test]
    fn group_reporting_merges_a_reporting_group_into_one_report() {
        let f = file(
            "[global]\ngroup_reporting\nrw=randread\nsize=1m\nnumber_ios=100\n\
             [a]\nnumjobs=3\n[b]\nnew_group\nnumjobs=2\n[c]\nstonewall\n[d]\n\
             [e]\ngroup_reporting=0\n",
        );
        assert_eq!(f.reports(), [0, 0, 0, 1, 1, 2, 2, 3]);
        assert_eq!(file("[a]\nnumjobs=2\n[b]\n").reports(), [0, 1, 2]);
        // On a device: the three clones of [a] and the two of [b] make two objects.
        let mut dev = device("priority");
        let groups = f.groups().unwrap();
        let reports = f.reports();
        let first: Vec<usize> = groups[0].clone();
        let specs = first.iter().map(|&i| spec(&dev, &f.jobs[i])).collect();
        dev.start_group(specs).unwrap();
        while !dev.step(1000).unwrap().done {}
        let merged = dev.finish_group_reported(&reports[..first.len()]).unwrap();
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0]["jobname"], "a");
        assert_eq!(merged[0]["read"]["total_ios"], 300);
        assert_eq!(merged[1]["jobname"], "b");
        assert_eq!(merged[1]["read"]["total_ios"], 200);
        assert_eq!(merged[0]["read"]["clat_ns"]["N"], 300);
        // The same jobs reported one by one add up to the merged figures.
        let mut again = device("priority");
        let specs = first.iter().map(|&i| spec(&again, &f.jobs[i])).collect();
        let separate = run_group(&mut again, specs);
        let of_a = &separate[..3];
        let sum =
            |key: &str| -> u64 { of_a.iter().map(|j| j["read"][key].as_u64().unwrap()).sum() };
        assert_eq!(
            merged[0]["read"]["io_bytes"].as_u64().unwrap(),
            sum("io_bytes")
        );
        let min = of_a
            .iter()
            .map(|j| j["read"]["clat_ns"]["min"].as_u64().unwrap())
            .min();
        let max = of_a
            .iter()
            .map(|j| j["read"]["clat_ns"]["max"].as_u64().unwrap())
            .max();
        assert_eq!(merged[0]["read"]["clat_ns"]["min"].as_u64(), min);
        assert_eq!(merged[0]["read"]["clat_ns"]["max"].as_u64(), max);
        let bad = device("priority").finish_group_reported(&[0]).unwrap_err();
        assert!(bad.to_string().contains("no run in progress"), "{bad}");
        let mut dev = device("priority");
        let specs = first.iter().map(|&i| spec(&dev, &f.jobs[i])).collect();
        dev.start_group(specs).unwrap();
        let bad = dev.finish_group_reported(&[0, 2, 2, 3, 3]).unwrap_err();
        assert!(bad.to_string().contains("must number the jobs"), "{bad}");
    }

    #[test]
    fn bad_groups_and_clones_are_refused_by_key_and_line() {
        let e = file("[r]\nrw=read\niodepth=40000\nnumjobs=2\n")
            .groups()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("g.fio:3: option 'iodepth'") && e.contains("80000"),
            "{e}"
        );
        let past = file("[r]\nrw=read\nsize=1m\nnumjobs=3\noffset_increment=600m\n");
        let e = match past.jobs[2].source(GIB, 1) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("clone 2 starts past the device"),
        };
        assert!(
            e.contains("g.fio:5: option 'offset_increment'") && e.contains("job number 2"),
            "{e}"
        );
        assert!(past.jobs[1].source(GIB, 1).is_ok());
    }

    /// A job beside a hundred with nothing to do (closed, open and paced as it is) runs as it
    /// does alone, request for request: the group's loop orders issues and completions as one
    /// job's loops do, wherever the job stands among the others.
    #[test]
    fn a_job_beside_empty_ones_runs_exactly_as_alone() {
        const EMPTY_BEFORE: usize = 40;
        let jobs = [
            "[m]\nrw=randrw\nbsrange=4k-32k\nsize=8m\nnumber_ios=3000\niodepth=6\n",
            "[p]\nrw=randrw\nsize=8m\nnumber_ios=2000\niodepth=4\nrate_iops=3000,6000\n\
             rate_process=poisson\n",
            "[t]\nrw=randrw\nsize=8m\nnumber_ios=1500\niodepth=4\nthinktime=300\n\
             thinktime_blocks=7\n",
            "[i]\nrw=randwrite\nsize=8m\nnumber_ios=1500\niodepth=3\nthinktime=2ms\n\
             thinktime_blocks=5\nthinktime_blocks_type=issue\n",
            "[q]\nrw=randread\nsize=8m\nnumber_ios=400\nthinktime=1ms\n",
        ];
        for scheduler in ["priority", "fcfs"] {
            for text in jobs {
                let mut alone = device(scheduler);
                let start = alone.now_ns();
                let alone_job = run_job(&mut alone, text);
                let mut beside = device(scheduler);
                let j = job(text);
                // Empty jobs of every pacing before and after it.
                let empty = |i: usize| RunSpec {
                    name: "empty".into(),
                    source: Box::new(VecSource::new(Vec::new())),
                    queue_depth: 1 + i as u32 % 3,
                    pacing: [Loop::Closed, Loop::Open { time_scale: 1.0 }, j.pacing()][i % 3],
                    runtime_ns: None,
                    ramp_ns: None,
                };
                let mut specs: Vec<RunSpec> = (0..EMPTY_BEFORE).map(empty).collect();
                specs.push(spec(&beside, &j));
                specs.extend((0..60).map(empty));
                let all = run_group(&mut beside, specs);
                assert_eq!(all[EMPTY_BEFORE], alone_job, "{scheduler}: {text}");
                for (i, other) in all.iter().enumerate().filter(|&(i, _)| i != EMPTY_BEFORE) {
                    assert_eq!(other["read"]["total_ios"], 0, "{i}");
                }
                assert_eq!(alone.ssd_json(), beside.ssd_json(), "{scheduler}: {text}");
                assert_eq!(alone.request_log(), beside.request_log(), "{scheduler}");
                assert_eq!(alone.now_ns(), beside.now_ns());
                assert!(alone.now_ns() > start);
            }
        }
    }

    #[test]
    fn two_readers_side_by_side_overlap_and_each_does_its_own_work() {
        let reader = "[r]\nrw=randread\nbs=4k\nsize=8m\nnumber_ios=400\n";
        for scheduler in ["priority", "fcfs"] {
            let mut one = device(scheduler);
            let start = one.now_ns();
            let alone = run_job(&mut one, reader);
            let alone_ns = one.now_ns() - start;
            let mut dev = device(scheduler);
            let start = dev.now_ns();
            let jobs = run_file(&mut dev, &format!("{reader}numjobs=2\n"));
            let together_ns = dev.now_ns() - start;
            assert_eq!(jobs.len(), 2);
            for j in &jobs {
                assert_eq!(j["read"]["total_ios"], 400, "{scheduler}");
                let mean = j["read"]["clat_ns"]["mean"].as_f64().unwrap();
                let alone_mean = alone["read"]["clat_ns"]["mean"].as_f64().unwrap();
                // Sharing the dies never makes a read faster, and two QD-1 streams on four
                // dies seldom meet.
                assert!(
                    mean >= alone_mean * 0.98 && mean < alone_mean * 1.5,
                    "{scheduler}"
                );
            }
            // 800 reads in about the time of 400: the two streams overlap.
            assert!(
                together_ns < alone_ns * 3 / 2,
                "{scheduler}: {together_ns} ns side by side, {alone_ns} ns alone"
            );
        }
    }

    /// A thousand QD-1 clones, readers, think-time readers and paced readers: every job does
    /// its own work and every completion is counted once, on the engine and on the
    /// reservation path.
    #[test]
    fn a_thousand_clones_each_do_their_own_work() {
        let text = "[global]\nsize=8m\nnumber_ios=6\n[r]\nrw=randread\nnumjobs=700\n\
                    [t]\nrw=randread\nthinktime=20us\nthinktime_blocks=2\nnumjobs=200\n\
                    [p]\nrw=randread\nrate_iops=20000\nrate_process=poisson\nnumjobs=124\n";
        for scheduler in ["priority", "fcfs"] {
            let mut dev = device(scheduler);
            let f = file(text);
            let specs: Vec<RunSpec> = f.jobs.iter().map(|j| spec(&dev, j)).collect();
            dev.start_group(specs).unwrap();
            let progress = loop {
                let p = dev.step(777).unwrap();
                if p.done {
                    break p;
                }
            };
            assert_eq!((progress.completed, progress.total), (6144, Some(6144)));
            let jobs = dev.finish_group().unwrap();
            assert_eq!(jobs.len(), 1024);
            for (i, j) in jobs.iter().enumerate() {
                assert_eq!(j["read"]["total_ios"], 6, "{scheduler}: job {i}");
            }
        }
    }

    #[test]
    fn a_think_time_job_pauses_on_its_own_while_the_job_beside_it_goes_on() {
        let reader = "[r]\nrw=randread\nbs=4k\nsize=8m\nnumber_ios=50\nthinktime=5ms\n";
        let writer = "[w]\nrw=randwrite\nbs=4k\nsize=8m\nnumber_ios=4000\niodepth=8\n";
        let mut alone = device("priority");
        let start = alone.now_ns();
        run_job(&mut alone, writer);
        let writer_alone_ns = alone.now_ns() - start;
        let mut dev = device("priority");
        let jobs = run_file(&mut dev, &format!("{reader}{writer}"));
        let ms = |j: &serde_json::Value| j["job_runtime"].as_u64().unwrap();
        // 49 pauses of 5 ms between the reader's 50 reads.
        assert_eq!(jobs[0]["read"]["total_ios"], 50);
        assert!(ms(&jobs[0]) >= 245, "reader ran {} ms", ms(&jobs[0]));
        // The writer did not wait for the pauses (seen: 142 ms beside the reader, 152 ms
        // alone; waiting, it would take another 5 ms per read of the reader's meanwhile).
        assert_eq!(jobs[1]["write"]["total_ios"], 4000);
        let writer_ns = ms(&jobs[1]) * 1_000_000;
        assert!(
            writer_ns < writer_alone_ns * 3 / 2 + 1_000_000,
            "writer: {writer_ns} ns beside the reader, {writer_alone_ns} ns alone"
        );
    }

    /// The experiment the scheduling engine is for: a QD-1 reader beside a writer at QD 32.
    #[test]
    fn priority_with_suspend_serves_a_reader_beside_a_writer() {
        let text = "[global]\nsize=8m\nruntime=400ms\ntime_based\n\
                    [reader]\nrw=randread\nbs=4k\n[writer]\nrw=randwrite\nbs=16k\niodepth=32\n";
        let p99 = |scheduler: &str, suspend: bool| {
            let mut dev = device(scheduler);
            if suspend {
                let mut config = dev.config().clone();
                config.cell.suspend = true;
                dev = Device::new(config, 1, false);
                run_job(&mut dev, "[fill]\nrw=write\nbs=128k\nsize=8m\niodepth=8\n");
            }
            let jobs = run_file(&mut dev, text);
            assert!(jobs[1]["write"]["total_ios"].as_u64().unwrap() > 1000);
            let read = &jobs[0]["read"];
            assert!(read["total_ios"].as_u64().unwrap() > 50);
            read["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap()
        };
        let fcfs = p99("fcfs", false);
        let priority = p99("priority", false);
        let suspend = p99("priority", true);
        // Seen: fcfs 5.9 ms (a read waits behind the queued programs of its die), priority
        // 0.88 ms (behind the program under way), priority with suspend 0.19 ms.
        assert!(
            suspend * 3 < priority && priority * 3 < fcfs,
            "read p99: fcfs {fcfs} ns, priority {priority} ns, priority + suspend {suspend} ns"
        );
    }
}

mod trace_files {
    use ssdlab_workload::{open_trace, TraceFormat, TraceOptions, WorkloadError};

    fn temp(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ssdlab-workload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn streams_a_file_and_reports_errors_with_path_and_line() {
        let p = temp("hm_0.csv", "128166372003061629,hm,0,Read,0,4096,1\n128166372003061729,hm,0,Write,4096,8192,1\nbad line\n");
        let mut s = open_trace(&p, TraceFormat::Msr, TraceOptions::default()).unwrap();
        let a = s.next_request().unwrap().unwrap();
        let b = s.next_request().unwrap().unwrap();
        assert_eq!(
            (a.arrival_ns, b.arrival_ns, b.offset, b.length),
            (Some(0), Some(10_000), 4096, 8192)
        );
        let e = s.next_request().unwrap().unwrap_err();
        let e = e.downcast::<WorkloadError>().unwrap();
        assert_eq!(e.line(), Some(3));
        assert!(e
            .to_string()
            .starts_with(&format!("{}:3: expected 7", p.display())));
        assert!(s.next_request().is_none(), "a source stops after its error");
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let e = open_trace(
            std::path::Path::new("/nonexistent/t.csv"),
            TraceFormat::Csv,
            TraceOptions::default(),
        )
        .err()
        .unwrap();
        assert!(matches!(e, WorkloadError::Io { .. }));
        assert!(e.to_string().starts_with("/nonexistent/t.csv: "));
    }

    #[test]
    fn job_files_from_disk() {
        let p = temp(
            "j.fio",
            "[global]\nioengine=libaio\n[w]\nrw=write\nsize=8k\n",
        );
        let f = ssdlab_workload::read_job_file(&p).unwrap();
        assert_eq!(f.path, p.display().to_string());
        assert_eq!(f.jobs[0].request_count(1 << 20), Some(2));
    }
}

/// Long streams through the generator and the request-log summary: counts come out exact.
/// Their speed is a benchmark (`make bench`, `benches/src/bin/parsespeed.rs`), not a test.
mod long_streams {
    use super::*;
    use ssdlab_core::stats::RequestLogRow;
    use ssdlab_workload::request_log::{summarize_request_log, RequestLogOptions};

    #[test]
    fn a_million_requests_come_out_of_each_generator() {
        for text in [
            "[u]\nrw=randrw\nbs=4k\nsize=4g\nnumber_ios=1000000\n",
            "[s]\nrw=write\nbssplit=4k/50:16k/50\nsize=4g\nnumber_ios=1000000\n",
            "[z]\nrw=randread\nbs=4k\nsize=4g\nrandom_distribution=zipf:1.1\nnumber_ios=1000000\n",
        ] {
            let j = job(text);
            let mut s = ssdlab_workload::FioSource::new(&j, 64 * GIB, 1).unwrap();
            let mut checksum = 0u64;
            let mut n = 0u64;
            while let Some(r) = s.next_host_request() {
                assert!(r.offset + r.length <= 4 * GIB);
                checksum = checksum.wrapping_add(r.offset);
                n += 1;
            }
            assert_eq!(n, 1_000_000);
            assert_ne!(checksum, 0);
        }
    }

    #[test]
    fn a_long_request_log_is_counted_exactly() {
        let rows = 300_000u64;
        let mut text = format!("{}\n", RequestLogRow::CSV_HEADER);
        for i in 0..rows {
            let op = ["read", "write", "read", "write", "trim", "flush"][(i % 6) as usize];
            let mut row = RequestLogRow {
                request: i + 1,
                op,
                logical_sector: (i % 1000) * 8,
                size_bytes: if op == "flush" { 0 } else { 4096 },
                duration_ns: 20_000 + i % 1000,
                flash_reads: u32::from(op == "read"),
                flash_writes: u32::from(op == "write"),
                oob_reads: 0,
                oob_writes: u32::from(op == "write"),
                erases: 0,
                physical_sector: if op == "read" || op == "write" {
                    (i % 1000) as i64 * 8
                } else {
                    -1
                },
                flash_duration_ns: 50_000,
                queue_ns: 0,
                service_ns: 0,
                translation_reads: u32::from(op == "read"),
                translation_writes: 0,
                mapping_hits: u32::from(op == "write"),
                mapping_misses: u32::from(op == "read"),
                device_cpu_ns: 100,
            };
            row.set_duration(row.duration_ns, i % 3 * 1_000);
            text.push_str(&row.csv_line());
            text.push('\n');
        }
        let s =
            summarize_request_log(text.as_bytes(), "mem", &RequestLogOptions::default()).unwrap();
        assert_eq!(s.rows, rows);
        assert_eq!(s.ops.trim.requests, rows / 6);
        assert_eq!(s.ops.write.requests, rows / 3);
        assert!(s.write_amplification.is_some());
        // Every third row waited 0, 1 or 2 us.
        assert_eq!(s.total.queue_total_ns, u128::from(rows / 3 * 3_000));
        assert_eq!(
            s.total.queue_total_ns + s.total.service_total_ns,
            s.total.duration_total_ns
        );
    }
}

mod props {
    use proptest::prelude::*;
    use ssdlab_core::stats::RequestLogRow;
    use ssdlab_core::Op;
    use ssdlab_workload::request_log::{
        summarize_request_log, RequestLogOptions, RequestLogReader,
    };
    use ssdlab_workload::{
        parse_job_file, parse_trace_str, TraceFormat, TraceOptions, WorkloadError,
    };
    use std::io::BufReader;

    fn check_error(e: &WorkloadError) {
        match e {
            WorkloadError::Parse { line, .. } | WorkloadError::JobOption { line, .. } => {
                assert!(*line >= 1, "error without a line: {e}")
            }
            other => panic!("unexpected error kind: {other}"),
        }
    }

    /// Rows as the simulator writes them (`RequestLogRow::csv_line`), with values from small
    /// to extreme so that sums and histogram bounds are exercised.
    fn log_row_strategy() -> impl Strategy<Value = RequestLogRow> {
        let big = prop_oneof![0u64..100, 0u64..10_000_000, any::<u64>()];
        let count = prop_oneof![0u32..4, 0u32..1000, any::<u32>()];
        (
            (
                any::<u64>(),
                prop::sample::select(vec!["read", "write", "trim", "flush"]),
            ),
            (
                0u64..1 << 40,
                prop_oneof![0u64..1 << 20, any::<u64>()],
                big.clone(),
            ),
            (
                count.clone(),
                count.clone(),
                count.clone(),
                count.clone(),
                count,
            ),
            (prop_oneof![Just(-1i64), 0i64..i64::MAX], big.clone(), big),
        )
            .prop_map(
                |((request, op), (sector, size, dur), (fr, fw, or, ow, er), (ps, fdur, queue))| {
                    let mut row = RequestLogRow {
                        request,
                        op,
                        logical_sector: sector,
                        size_bytes: size,
                        duration_ns: dur,
                        flash_reads: fr,
                        flash_writes: fw,
                        oob_reads: or,
                        oob_writes: ow,
                        erases: er,
                        physical_sector: ps,
                        flash_duration_ns: fdur,
                        queue_ns: 0,
                        service_ns: 0,
                        translation_reads: or,
                        translation_writes: ow,
                        mapping_hits: fr,
                        mapping_misses: fw,
                        device_cpu_ns: fdur,
                    };
                    row.set_duration(dur, queue);
                    row
                },
            )
    }

    fn line_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[0-9a-zA-Z,. :+\\[\\]#;=%/-]{0,60}",
            "([0-9]{1,20}[, ]){3,9}[0-9RWrwDF]{0,4}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn trace_parsers_never_panic(lines in prop::collection::vec(line_strategy(), 0..8)) {
            let text = lines.join("\n");
            for format in TraceFormat::ALL {
                if let Err(e) = parse_trace_str(&text, "p", format, TraceOptions::default()) {
                    check_error(&e);
                }
            }
        }

        #[test]
        fn job_parser_never_panics(lines in prop::collection::vec(line_strategy(), 0..8)) {
            let text = lines.join("\n");
            match parse_job_file(&text, "p.fio") {
                Err(e) => check_error(&e),
                Ok(f) => {
                    for j in &f.jobs {
                        let _ = j.request_count(1 << 30);
                        if let Ok(mut s) = j.source(1 << 30, 1) {
                            for _ in 0..16 {
                                let _ = s.next_request();
                            }
                        }
                    }
                }
            }
        }

        #[test]
        fn well_formed_lines_round_trip(
            t0 in 0u64..1u64 << 40,
            dt in 0u64..1u64 << 30,
            sector in 0u64..1u64 << 40,
            nsectors in 1u64..1u64 << 16,
            write in any::<bool>(),
            dev in 0u32..100,
        ) {
            let (op_rw, op_msr) = if write { ("W", "Write") } else { ("R", "Read") };
            let op = if write { Op::Write } else { Op::Read };
            let t1 = t0 + dt;
            let off = sector * 512;
            let len = nsectors * 512;
            let sec = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
            let cases: Vec<(TraceFormat, String, u64)> = vec![
                // (format, two lines, expected ns between them)
                (TraceFormat::Msr, format!("{t0},h,{dev},{op_msr},{off},{len},0\n{t1},h,{dev},{op_msr},{off},{len},0"), dt * 100),
                (TraceFormat::Spc, format!("{dev},{sector},{len},{op_rw},{}\n{dev},{sector},{len},{op_rw},{}", sec(t0), sec(t1)), dt),
                (TraceFormat::Blkparse, format!("8,0 0 1 {} 5 Q {op_rw} {sector} + {nsectors} [p]\n8,0 0 2 {} 5 Q {op_rw} {sector} + {nsectors} [p]", sec(t0), sec(t1)), dt),
                (TraceFormat::Disksim, format!("{}.{:06} {dev} {sector} {nsectors} {}\n{}.{:06} {dev} {sector} {nsectors} {}", t0 / 1_000_000, t0 % 1_000_000, u8::from(!write), t1 / 1_000_000, t1 % 1_000_000, u8::from(!write)), dt),
                (TraceFormat::Mqsim, format!("{t0} {dev} {sector} {nsectors} {}\n{t1} {dev} {sector} {nsectors} {}", u8::from(!write), u8::from(!write)), dt),
                (TraceFormat::Alibaba, format!("{dev},{op_rw},{off},{len},{t0}\n{dev},{op_rw},{off},{len},{t1}"), dt * 1000),
                (TraceFormat::Tencent, format!("{},{sector},{nsectors},{},{dev}\n{},{sector},{nsectors},{},{dev}", sec(t0), u8::from(write), sec(t1), u8::from(write)), dt),
                (TraceFormat::Fiu, format!("{t0} 1 proc {sector} {nsectors} {op_rw} 8 {dev} abc\n{t1} 1 proc {sector} {nsectors} {op_rw} 8 {dev} abc"), dt),
                (TraceFormat::Csv, format!("{t0},{},{off},{len}\n{t1},{},{off},{len}", op.as_str(), op.as_str()), dt),
            ];
            for (format, text, gap) in cases {
                let r = parse_trace_str(&text, "rt", format, TraceOptions::default())
                    .unwrap_or_else(|e| panic!("{format}: {e}\n{text}"));
                prop_assert_eq!(r.len(), 2, "{}", format);
                prop_assert_eq!(r[0].arrival_ns, Some(0), "{}", format);
                prop_assert_eq!(r[1].arrival_ns, Some(gap), "{}", format);
                for q in &r {
                    prop_assert_eq!((q.op, q.offset, q.length), (op, off, len), "{}", format);
                }
            }
        }

        #[test]
        fn request_log_reader_never_panics(
            bytes in prop::collection::vec(any::<u8>(), 0..600),
            lines in prop::collection::vec(line_strategy(), 0..8),
            with_header in any::<bool>(),
        ) {
            let header = if with_header { RequestLogRow::CSV_HEADER } else { "" };
            let opts = RequestLogOptions::default();
            let mut raw = format!("{header}\n").into_bytes();
            raw.extend_from_slice(&bytes);
            let text = format!("{header}\n{}", lines.join("\n"));
            for input in [&bytes[..], &raw[..], text.as_bytes()] {
                if let Err(e) = summarize_request_log(input, "log", &opts) {
                    check_error(&e);
                }
            }
        }

        #[test]
        fn request_log_round_trips_to_independent_sums(
            rows in prop::collection::vec(log_row_strategy(), 0..60),
            page_size_bytes in prop::sample::select(vec![512u64, 4096, 16384]),
            buffer_bytes in prop::sample::select(vec![1usize, 7, 100, 1 << 16]),
        ) {
            let mut text = format!("{}\n", RequestLogRow::CSV_HEADER);
            for row in &rows {
                text.push_str(&row.csv_line());
                text.push('\n');
            }
            let opts = RequestLogOptions { page_size_bytes };
            // Small buffers split rows across refills, which sends them down the careful path.
            let reader = BufReader::with_capacity(buffer_bytes, text.as_bytes());
            let records: Vec<_> = RequestLogReader::new(reader, "log")
                .collect::<Result<_, _>>()
                .unwrap();
            prop_assert_eq!(records.len(), rows.len());
            for (rec, row) in records.iter().zip(&rows) {
                prop_assert_eq!(rec.op.as_str(), row.op);
                prop_assert_eq!(
                    (rec.request, rec.logical_sector, rec.size_bytes, rec.duration_ns, rec.flash_duration_ns),
                    (row.request, row.logical_sector, row.size_bytes, row.duration_ns, row.flash_duration_ns)
                );
                prop_assert_eq!(
                    [rec.flash_reads, rec.flash_writes, rec.oob_reads, rec.oob_writes, rec.erases],
                    [row.flash_reads, row.flash_writes, row.oob_reads, row.oob_writes, row.erases].map(u64::from)
                );
                prop_assert_eq!(rec.physical_sector.map_or(-1, |p| p as i64), row.physical_sector);
                prop_assert_eq!((rec.queue_ns, rec.service_ns), (Some(row.queue_ns), Some(row.service_ns)));
            }

            let s = summarize_request_log(text.as_bytes(), "log", &opts).unwrap();
            prop_assert_eq!(s.rows, rows.len() as u64);
            prop_assert_eq!(s.first_request, rows.first().map(|r| r.request));
            prop_assert_eq!(s.last_request, rows.last().map(|r| r.request));
            let sum = |f: &dyn Fn(&RequestLogRow) -> u128, op: Option<&str>| -> u128 {
                rows.iter().filter(|r| op.map_or(true, |o| r.op == o)).map(f).sum()
            };
            for (op, got) in [
                (Some("read"), &s.ops.read),
                (Some("write"), &s.ops.write),
                (Some("trim"), &s.ops.trim),
                (Some("flush"), &s.ops.flush),
                (None, &s.total),
            ] {
                prop_assert_eq!(u128::from(got.requests), sum(&|_| 1, op));
                prop_assert_eq!(got.bytes, sum(&|r| r.size_bytes.into(), op));
                prop_assert_eq!(got.duration_total_ns, sum(&|r| r.duration_ns.into(), op));
                prop_assert_eq!(got.flash_reads, sum(&|r| r.flash_reads.into(), op));
                prop_assert_eq!(got.flash_writes, sum(&|r| r.flash_writes.into(), op));
                prop_assert_eq!(got.oob_reads, sum(&|r| r.oob_reads.into(), op));
                prop_assert_eq!(got.oob_writes, sum(&|r| r.oob_writes.into(), op));
                prop_assert_eq!(got.erases, sum(&|r| r.erases.into(), op));
                prop_assert_eq!(got.flash_duration_ns, sum(&|r| r.flash_duration_ns.into(), op));
                prop_assert_eq!(got.queue_total_ns, sum(&|r| r.queue_ns.into(), op));
                prop_assert_eq!(got.service_total_ns, sum(&|r| r.service_ns.into(), op));
                prop_assert_eq!(u128::from(got.requests_with_erases), sum(&|r| u128::from(r.erases > 0), op));
                let durations: Vec<u64> = rows
                    .iter()
                    .filter(|r| op.map_or(true, |o| r.op == o))
                    .map(|r| r.duration_ns)
                    .collect();
                match &got.duration_ns {
                    None => prop_assert!(durations.is_empty()),
                    Some(d) => {
                        let (min, max) = (*durations.iter().min().unwrap(), *durations.iter().max().unwrap());
                        prop_assert_eq!((d.min, d.max), (min, max));
                        let mean = durations.iter().map(|&v| v as f64).sum::<f64>() / durations.len() as f64;
                        prop_assert!((d.mean - mean).abs() <= 1e-9 * mean.max(1.0));
                        let p = [d.min, d.p50, d.p90, d.p99, d.p99_9, d.p99_99, d.max];
                        prop_assert!(p.windows(2).all(|w| w[0] <= w[1]), "{:?}", p);
                        // The median is within 0.1% (3 significant digits) of an exact one,
                        // unless it lies beyond the histogram's 10^13 ns and saturated.
                        let mut sorted = durations.clone();
                        sorted.sort_unstable();
                        let exact = sorted[(sorted.len() - 1) / 2] as f64;
                        prop_assert!(exact > 1e13 ||(d.p50 as f64 - exact).abs() <= exact * 1e-3 + 1.0, "{} vs {}", d.p50, exact);
                    }
                }
            }
            // Media bytes programmed over host bytes written.
            let page = u128::from(page_size_bytes);
            let host_bytes = sum(&|r| r.size_bytes.into(), Some("write"));
            let flash_writes = sum(&|r| r.flash_writes.into(), None);
            prop_assert_eq!(s.write_amplification, (host_bytes > 0).then(|| (flash_writes * page) as f64 / host_bytes as f64));
        }

        #[test]
        fn generated_jobs_stay_inside_their_region(
            rw in prop::sample::select(vec!["read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "randrw"]),
            bs_kib in prop::sample::select(vec![1u64, 4, 8, 64]),
            size_blocks in 1u64..200,
            offset_blocks in 0u64..50,
            dist in prop::sample::select(vec!["random", "zipf:1.2", "pareto:0.3", "normal:20"]),
            norandommap in any::<bool>(),
            seed in any::<u64>(),
            rate in prop::sample::select(vec![
                "", "rate_iops=1000\n", "rate=1m\nrate_process=poisson\n",
                "rate_iops=300,700\nrate_process=poisson\n", "rate=64k,2m\n",
            ]),
        ) {
            let bs = bs_kib * 1024;
            let text = format!(
                "[global]\nbs={bs_kib}k\n[j]\nrw={rw}\nsize={}\noffset={}\nrandom_distribution={dist}\n{}{rate}",
                size_blocks * bs, offset_blocks * bs, if norandommap { "norandommap\n" } else { "" }
            );
            let f = parse_job_file(&text, "g.fio").unwrap();
            let j = &f.jobs[0];
            let device = 1u64 << 30;
            prop_assert_eq!(j.request_count(device), Some(size_blocks));
            let mut s = j.source(device, seed).unwrap();
            let mut n = 0;
            let mut last_arrival = 0;
            while let Some(r) = s.next_request() {
                let r = r.unwrap();
                // Paced jobs arrive in order, unpaced ones carry no time.
                prop_assert_eq!(r.arrival_ns.is_some(), !rate.is_empty());
                prop_assert!(r.arrival_ns.unwrap_or(0) >= last_arrival);
                last_arrival = r.arrival_ns.unwrap_or(0);
                let start = offset_blocks * bs;
                prop_assert!(r.offset >= start && r.offset + r.length <= start + size_blocks * bs);
                prop_assert_eq!((r.offset - start) % bs, 0);
                prop_assert_eq!(r.length, bs);
                n += 1;
            }
            prop_assert_eq!(n, size_blocks);
        }
    }
}
