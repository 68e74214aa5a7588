//! Melded pages (Arpith K., Gopinath): read-group placement and the `host.melded_reads` modes,
//! timed on the event engine against closed forms worked out by hand. The device: TLC, 2
//! channels x 2 single-plane dies, 4 KiB pages, tR 58/78/107 us, melded 166 us, 800 MT/s
//! (5.12 us per page), no ECC latency and no host-link limit, so a read's time is the array and
//! the channel only.

mod common;
use ssdlab_core::{Device, HostRequest, Op};

const PAGE: u64 = 4096;
const XFER: u64 = 5_120;
const MELDED: u64 = 166_000;

fn device(extra: &[(&str, &str)]) -> Device {
    let base = [
        ("geometry.channels", "2"),
        ("geometry.chips_per_channel", "2"),
        ("geometry.dies_per_chip", "1"),
        ("geometry.planes_per_die", "1"),
        ("geometry.blocks_per_plane", "64"),
        ("geometry.pages_per_block", "48"),
        ("geometry.page_size_bytes", "4096"),
        ("geometry.over_provisioning", "0.3"),
        ("cell.type", "tlc"),
        ("cell.read_ns", "[58000, 78000, 107000]"),
        ("cell.melded_read_ns", "166000"),
        ("channel.rate_mtps", "800"),
        ("host.link_mbps", "0"),
        ("ecc.code", "none"),
        ("placement.allocation", "static"),
        ("controller.scheduler", "priority"),
    ];
    common::device(&[&base, extra], 1, false)
}

fn grouped(op: Op, offset: u64, length: u64, group: Option<u64>) -> HostRequest {
    let mut r = HostRequest::new(op, offset, length);
    r.hint.read_group = group;
    r
}

/// Write `pages` pages (with read group 1 when `group`), then run `reads` at queue depth `qd`;
/// returns the reads' (mean, max) completion latency in ns and the melded-read count.
fn write_then_read(
    dev: &mut Device,
    pages: u64,
    group: bool,
    reads: Vec<HostRequest>,
    qd: u32,
) -> (f64, u64, u64) {
    let write = grouped(Op::Write, 0, pages * PAGE, group.then_some(1));
    run(dev, vec![write], 1);
    let before = dev.flash_counters().melded_reads;
    let job = run(dev, reads, qd);
    let clat = &job["read"]["clat_ns"];
    (
        clat["mean"].as_f64().unwrap(),
        clat["max"].as_u64().unwrap(),
        dev.flash_counters().melded_reads - before,
    )
}

use common::closed_run as run;

#[test]
fn normal_layout_reads_each_page_of_each_wordline() {
    // Static stripe: page i on die i % 4, so each die holds one wordline's LSB, CSB and MSB.
    // Per die: 58 + x, 78 + x, 107 + x; the second die of a channel is one transfer behind.
    let mut dev = device(&[("host.melded_reads", "off")]);
    let (_, max, melded) = write_then_read(
        &mut dev,
        12,
        false,
        vec![HostRequest::new(Op::Read, 0, 12 * PAGE)],
        1,
    );
    assert_eq!(max, 58_000 + 78_000 + 107_000 + 3 * XFER + XFER);
    assert_eq!(melded, 0);
}

#[test]
fn grouped_writes_fill_wordlines_and_a_large_read_melds_each() {
    // Read group 1: pages 3w..3w+2 fill one wordline on the w-th plane in stripe order. Each die
    // senses once (166 us) and sends three pages; two dies share a channel.
    for mode in ["on", "auto"] {
        let mut dev = device(&[("host.melded_reads", mode)]);
        let (_, max, melded) = write_then_read(
            &mut dev,
            12,
            true,
            vec![HostRequest::new(Op::Read, 0, 12 * PAGE)],
            1,
        );
        assert_eq!(max, MELDED + 6 * XFER, "{mode}");
        assert_eq!(melded, 4, "{mode}");
        let groups = dev.read_group_counters().unwrap();
        assert_eq!(
            (groups.units_placed, groups.wordlines_opened),
            (12, 4),
            "{mode}"
        );
        assert_eq!(
            groups.units_fallback + groups.wordlines_abandoned,
            0,
            "{mode}"
        );
    }
    // Without the hint the static stripe spreads consecutive pages over the dies: pages i,
    // i + 4, i + 8 share a wordline. A read of all 12 still wants whole wordlines (auto melds
    // them); a read of 4 pages wants one page of each and reads normally.
    let mut dev = device(&[("host.melded_reads", "auto")]);
    let (_, max, melded) = write_then_read(
        &mut dev,
        12,
        false,
        vec![HostRequest::new(Op::Read, 0, 12 * PAGE)],
        1,
    );
    assert_eq!((max, melded), (MELDED + 6 * XFER, 4));
    let mut dev = device(&[("host.melded_reads", "auto")]);
    let (_, max, melded) = write_then_read(
        &mut dev,
        12,
        false,
        vec![HostRequest::new(Op::Read, 0, 4 * PAGE)],
        1,
    );
    assert_eq!((max, melded), (58_000 + 2 * XFER, 0));
}

#[test]
fn small_reads_pay_the_whole_wordline_only_when_melding_is_on() {
    // A 4 KiB read of an LSB page: on senses all seven references and sends three pages.
    for (mode, expected, melded) in [
        ("on", MELDED + 3 * XFER, 1),
        ("auto", 58_000 + XFER, 0),
        ("off", 58_000 + XFER, 0),
    ] {
        let mut dev = device(&[("host.melded_reads", mode)]);
        let (_, max, m) = write_then_read(
            &mut dev,
            12,
            true,
            vec![HostRequest::new(Op::Read, 0, PAGE)],
            1,
        );
        assert_eq!((max, m), (expected, melded), "{mode}");
    }
    // CSB + MSB: 166 + 3x = 181.36 us melded beats 78 + 107 + 2x = 195.24 us; auto melds.
    let mut dev = device(&[("host.melded_reads", "auto")]);
    let (_, max, m) = write_then_read(
        &mut dev,
        12,
        true,
        vec![HostRequest::new(Op::Read, PAGE, 2 * PAGE)],
        1,
    );
    assert_eq!((max, m), (MELDED + 3 * XFER, 1));
    // LSB + CSB: 58 + 78 + 2x = 146.24 us beats the melded read; auto reads them apart.
    let mut dev = device(&[("host.melded_reads", "auto")]);
    let (_, max, m) = write_then_read(
        &mut dev,
        12,
        true,
        vec![HostRequest::new(Op::Read, 0, 2 * PAGE)],
        1,
    );
    assert_eq!((max, m), (58_000 + 78_000 + 2 * XFER, 0));
}

#[test]
fn queued_reads_of_one_wordline_join_into_one_melded_read() {
    // Three 4 KiB reads of one wordline's pages at queue depth 3: the LSB read starts at once,
    // alone (58 + x); the CSB and MSB reads queue behind it and, when the die frees, start
    // together as one melded read (166 + 3x), since 181.36 us < 78 + 107 + 2x.
    let reads: Vec<HostRequest> = (0..3)
        .map(|p| HostRequest::new(Op::Read, p * PAGE, PAGE))
        .collect();
    let mut dev = device(&[("host.melded_reads", "auto")]);
    let (mean, max, melded) = write_then_read(&mut dev, 12, true, reads.clone(), 3);
    let lsb = 58_000 + XFER;
    assert_eq!(max, lsb + MELDED + 3 * XFER);
    assert_eq!(mean, (lsb + 2 * (lsb + MELDED + 3 * XFER)) as f64 / 3.0);
    assert_eq!(melded, 1);
    // Melding off: one by one.
    let mut dev = device(&[("host.melded_reads", "off")]);
    let (_, max, melded) = write_then_read(&mut dev, 12, true, reads, 3);
    assert_eq!(max, 58_000 + 78_000 + 107_000 + 3 * XFER);
    assert_eq!(melded, 0);
}

#[test]
fn transfer_oob_lengthens_every_page_transfer() {
    // 4096 + 224 bytes at 800 MB/s: 5.4 us per page.
    let mut dev = device(&[
        ("host.melded_reads", "off"),
        ("channel.transfer_oob", "true"),
        ("geometry.oob_size_bytes", "224"),
    ]);
    let (_, max, _) = write_then_read(
        &mut dev,
        12,
        false,
        vec![HostRequest::new(Op::Read, 0, PAGE)],
        1,
    );
    assert_eq!(max, 58_000 + 5_400);
}

#[test]
fn wordline_allocation_lays_sequential_data_out_melded_without_hints() {
    let mut dev = device(&[
        ("host.melded_reads", "on"),
        ("placement.allocation", "wordline"),
    ]);
    let (_, max, melded) = write_then_read(
        &mut dev,
        12,
        false,
        vec![HostRequest::new(Op::Read, 0, 12 * PAGE)],
        1,
    );
    assert_eq!((max, melded), (MELDED + 6 * XFER, 4));
}

#[test]
fn read_groups_are_ignored_on_cells_other_than_tlc() {
    let dev = device(&[("cell.type", "mlc"), ("cell.read_ns", "[50000, 70000]")]);
    assert!(dev.read_group_counters().is_none());
}

#[test]
fn learnt_groups_place_a_rewrite_of_data_read_together_a_wordline_per_group() {
    // Unhinted data on the static stripe: pages i, i + 4, i + 8 share a wordline, so a read
    // of pages 0..6 wants no whole wordline. Reading them teaches one group; rewriting them
    // (unhinted) then fills two wordlines, and the same read melds both.
    let mut dev = device(&[
        ("host.melded_reads", "auto"),
        ("placement.learn_read_groups", "true"),
    ]);
    let read = || vec![HostRequest::new(Op::Read, 0, 6 * PAGE)];
    let (_, before, melded) = write_then_read(&mut dev, 12, false, read(), 1);
    assert_eq!(melded, 0);
    // Pages 4 and 5 are the CSB pages of the first die of each channel.
    assert_eq!(before, 58_000 + 78_000 + 2 * XFER);
    let (_, after, melded) = write_then_read(&mut dev, 6, false, read(), 1);
    assert_eq!((after, melded), (MELDED + 3 * XFER, 2));
    assert_eq!(dev.read_group_counters().unwrap().groups_learnt, 2);
}

#[test]
fn gc_keeps_read_groups_on_whole_wordlines() {
    // Four read groups of 12 pages each fill one wordline on each of the 4 planes; after each,
    // 12 unhinted filler pages (3 a plane) follow them in the same blocks, and every other
    // filler page is then overwritten, so the groups' blocks hold 1 or 2 valid filler pages
    // between a group's wordlines. Two passes over most of the rest of the device make FIFO
    // GC collect those blocks first. Moved in physical order, a group's units would straddle
    // wordlines after the first odd run of filler; GC must put each group's units on whole
    // wordlines of its destination, so every group still reads as 4 melded reads.
    use ssdlab_core::ftl::Ftl;
    let mut dev = device(&[
        ("host.melded_reads", "auto"),
        ("geometry.blocks_per_plane", "24"),
        ("ftl.gc_policy", "fifo"),
    ]);
    const GROUP: u64 = 12;
    const FILLER: u64 = 100;
    let mut setup = Vec::new();
    for g in 0..4 {
        setup.push(grouped(
            Op::Write,
            g * GROUP * PAGE,
            GROUP * PAGE,
            Some(g + 1),
        ));
        setup.push(grouped(
            Op::Write,
            (FILLER + g * 12) * PAGE,
            12 * PAGE,
            None,
        ));
    }
    for p in (FILLER..FILLER + 48).step_by(3) {
        setup.push(grouped(Op::Write, p * PAGE, PAGE, None));
    }
    run(&mut dev, setup, 1);
    let ftl: &dyn Ftl = dev.ftl();
    let before: Vec<u32> = (0..4 * GROUP).map(|u| ftl.mapped(u).unwrap()).collect();
    let mut other = Vec::new();
    for _ in 0..2 {
        for p in (192..3168).step_by(48) {
            other.push(grouped(Op::Write, p * PAGE, 48 * PAGE, None));
        }
    }
    run(&mut dev, other, 1);
    let ftl: &dyn Ftl = dev.ftl();
    let after: Vec<u32> = (0..4 * GROUP).map(|u| ftl.mapped(u).unwrap()).collect();
    assert!(
        before.iter().zip(&after).all(|(b, a)| b != a),
        "GC moved every grouped unit: {before:?} -> {after:?}"
    );
    assert_eq!(ftl.gc_read_group_units(), (4 * GROUP, 4 * GROUP));
    // Each group's 12 pages are 4 whole wordlines (TLC: ppa / 3), on 4 different planes.
    for g in 0..4 {
        let pages = &after[(g * GROUP) as usize..((g + 1) * GROUP) as usize];
        let mut wordlines: Vec<u32> = pages.iter().map(|p| p / 3).collect();
        wordlines.sort_unstable();
        for w in wordlines.chunks(3) {
            assert!(w.iter().all(|&x| x == w[0]), "group {g}: {pages:?}");
        }
        wordlines.dedup();
        assert_eq!(wordlines.len(), 4, "group {g}: {pages:?}");
    }
    let before = dev.flash_counters().melded_reads;
    let reads = (0..4)
        .map(|g| HostRequest::new(Op::Read, g * GROUP * PAGE, GROUP * PAGE))
        .collect();
    let job = run(&mut dev, reads, 1);
    assert_eq!(dev.flash_counters().melded_reads - before, 16);
    assert_eq!(job["read"]["clat_ns"]["max"], MELDED + 6 * XFER);
}

#[test]
fn a_page_whose_units_lie_apart_in_a_read_is_sensed_and_decoded_once() {
    // 16 KiB pages of four 4 KiB units. Units 0, 2, 4, 6 are written first and pack into one
    // page, 1, 3, 5, 7 into the next: a read of units 0..8 wants each of the two pages four
    // times, never twice in a row. Each page is read once, on both paths, melded or not.
    // (Counted once per unit, a melded wordline of three pages read for four units underflowed
    // the decode count; unmelded, each page was sensed four times.)
    for scheduler in ["priority", "fcfs"] {
        for melded in ["on", "off"] {
            let mut dev = device(&[
                ("geometry.page_size_bytes", "16384"),
                ("ftl.mapping_unit_bytes", "4096"),
                ("host.melded_reads", melded),
                ("controller.scheduler", scheduler),
            ]);
            let unit = 4096;
            let order = [0, 2, 4, 6, 1, 3, 5, 7];
            let writes = order
                .iter()
                .map(|&u| HostRequest::new(Op::Write, u * unit, unit))
                .collect();
            run(&mut dev, writes, 1);
            let pages: Vec<u32> = (0..8).map(|u| dev.ftl().mapped(u).unwrap() / 4).collect();
            let apart = [pages[0], pages[1]].map(|p| pages.iter().filter(|&&q| q == p).count());
            assert_eq!(apart, [4, 4], "{pages:?}");
            let before = dev.flash_counters();
            let job = run(&mut dev, vec![HostRequest::new(Op::Read, 0, 8 * unit)], 1);
            assert_eq!(job["read"]["io_bytes"], 8 * unit);
            let after = dev.flash_counters();
            let ctx = format!("{scheduler}, melded reads {melded}");
            let per_page = dev.derived().codewords_per_page as u64;
            let melded_reads = after.melded_reads - before.melded_reads;
            assert_eq!(melded_reads, if melded == "on" { 2 } else { 0 }, "{ctx}");
            if melded == "off" {
                assert_eq!(
                    after.array_reads - before.array_reads,
                    2,
                    "{ctx}: pages sensed"
                );
            }
            assert_eq!(
                after.codewords_decoded - before.codewords_decoded,
                2 * per_page,
                "{ctx}: each wanted page decoded once"
            );
        }
    }
}
