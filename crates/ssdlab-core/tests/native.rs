//! The native flash interface: closed-form timing (the block interface's die and channel
//! model), NAND rules, and the block interface refused once the flash is native.

mod common;

use ssdlab_core::native::NandError;
use ssdlab_core::{Device, DeviceError, HostRequest, Op};

/// Two channels of two dies, one plane each; SLC 50/250/700 us, 4 KiB pages over a 200 MT/s
/// x8 bus (20.48 us a page), no ECC and no host-link time, so every figure is by hand.
const GEOMETRY: &[(&str, &str)] = &[
    ("geometry.channels", "2"),
    ("geometry.chips_per_channel", "2"),
    ("geometry.dies_per_chip", "1"),
    ("geometry.planes_per_die", "1"),
    ("geometry.blocks_per_plane", "64"),
    ("geometry.pages_per_block", "16"),
    ("geometry.page_size_bytes", "4096"),
    ("geometry.oob_size_bytes", "128"),
    ("geometry.over_provisioning", "0.3"),
    ("cell.type", "slc"),
    ("cell.read_x_ns", "40000"),
    ("cell.read_y_ns", "10000"),
    ("cell.program_ns", "[250000]"),
    ("cell.erase_ns", "700000"),
    ("channel.rate_mtps", "200"),
    ("channel.bus_width_bytes", "1"),
    ("ecc.code", "none"),
    ("host.link_mbps", "0"),
];

const T_R: u64 = 50_000;
const T_PROG: u64 = 250_000;
const T_ERASE: u64 = 700_000;
const XFER: u64 = 20_480;
/// 128 B of OOB over the 200 MB/s bus.
const OOB_XFER: u64 = 640;

fn device(extra: &[(&str, &str)], store: bool) -> Device {
    common::device(&[GEOMETRY, extra], 1, store)
}

const PAGE: [u8; 4096] = [0x5A; 4096];

#[test]
fn one_operation_costs_array_time_plus_transfer() {
    let mut dev = device(&[], true);
    let mut flash = dev.native().unwrap();
    assert_eq!(
        flash.program(0, &PAGE, b"lba=7", Some(1_000)).unwrap(),
        1_000 + XFER + T_PROG
    );
    let mut data = [0u8; 4096];
    let mut oob = [0u8; 128];
    let at = 1_000_000;
    assert_eq!(
        flash.read(0, &mut data, &mut oob, Some(at)).unwrap(),
        at + T_R + XFER
    );
    assert_eq!(data, PAGE);
    assert_eq!(&oob[..6], b"lba=7\xFF");
    let at = 2_000_000;
    assert_eq!(
        flash.read_oob(0, &mut oob, Some(at)).unwrap(),
        at + T_R + OOB_XFER
    );
    let at = 3_000_000;
    assert_eq!(flash.erase(0, Some(at)).unwrap(), at + T_ERASE);
    let c = flash.counters();
    assert_eq!((c.programs, c.reads, c.oob_reads, c.erases), (1, 1, 1, 1));
    assert_eq!(flash.die_busy_ns()[0], T_PROG + 2 * T_R + T_ERASE);
    let ssd = dev.ssd_json();
    assert_eq!(ssd["flash"]["programs"], 1);
    assert_eq!(ssd["flash"]["oob_reads"], 2);
}

#[test]
fn dies_overlap_one_die_serialises_and_the_channel_is_shared() {
    // Blocks 0..3 lie on (channel 0, die 0), (1, 0), (0, 1), (1, 1); block 4 on (0, 0) again.
    let mut dev = device(&[], false);
    let mut flash = dev.native().unwrap();
    let pages = flash.geometry().pages_per_block as u64;
    assert_eq!(flash.locate(2).unwrap().channel, 0);
    assert_eq!(flash.locate(2).unwrap().die, 1);
    // Different channels: fully parallel.
    assert_eq!(
        flash.program(0, &PAGE, &[], Some(0)).unwrap(),
        XFER + T_PROG
    );
    assert_eq!(
        flash.program(pages, &PAGE, &[], Some(0)).unwrap(),
        XFER + T_PROG
    );
    // Same channel, other die: waits for the bus only.
    assert_eq!(
        flash.program(2 * pages, &PAGE, &[], Some(0)).unwrap(),
        2 * XFER + T_PROG
    );
    // Same die (block 4 is on channel 0, die 0): waits for the die (no cache program).
    assert_eq!(
        flash.program(4 * pages, &PAGE, &[], Some(0)).unwrap(),
        XFER + T_PROG + XFER + T_PROG
    );
    // Erases of one die serialise; on another die they overlap.
    let t = 10_000_000;
    assert_eq!(flash.erase(1, Some(t)).unwrap(), t + T_ERASE);
    assert_eq!(flash.erase(5, Some(t)).unwrap(), t + 2 * T_ERASE);
    assert_eq!(flash.erase(3, Some(t)).unwrap(), t + T_ERASE);
    // A call never completes before its issue time, and None means the device's clock.
    assert_eq!(flash.now_ns(), t);
    assert_eq!(flash.erase(6, None).unwrap(), t + T_ERASE);
}

#[test]
fn native_and_block_reads_of_one_die_cost_the_same() {
    // The block interface's single-page read of an idle die: tR + transfer.
    let mut block = device(&[], false);
    let req = |op| HostRequest::new(op, 0, 4096);
    block.submit(&req(Op::Write), None, None).unwrap();
    let now = block.now_ns() + 10_000_000;
    block.advance_to(now);
    let c = block.submit(&req(Op::Read), None, None).unwrap();
    let mut native = device(&[], false);
    let mut flash = native.native().unwrap();
    flash.program(0, &PAGE, &[], Some(0)).unwrap();
    let mut data = [0u8; 4096];
    let mut oob = [0u8; 128];
    let done = flash.read(0, &mut data, &mut oob, Some(now)).unwrap();
    assert_eq!(done - now, c.latency_ns());
}

#[test]
fn nand_rules_are_errors_naming_the_address() {
    let mut dev = device(&[("cell.endurance_cycles", "1")], false);
    let mut flash = dev.native().unwrap();
    flash.program(16, &PAGE, &[], None).unwrap();
    let e = flash.program(16, &PAGE, &[], None).unwrap_err();
    assert!(e.is_rule());
    assert_eq!(
        e.to_string(),
        "program of page 16 (block 1, page 0 of the block): the page is not erased (block 1 is \
         programmed up to page 1 of the block; erase the block first)"
    );
    let e = flash.program(18, &PAGE, &[], None).unwrap_err();
    assert!(
        matches!(
            e,
            NandError::OutOfOrder {
                page: 18,
                block: 1,
                index: 2,
                next: 1,
                next_page: 17
            }
        ),
        "{e}"
    );
    assert!(!flash.is_erased(16).unwrap());
    assert!(flash.is_erased(17).unwrap());
    assert_eq!(flash.next_page(1).unwrap(), 1);
    flash.erase(1, None).unwrap();
    let e = flash.erase(1, None).unwrap_err();
    assert!(e.to_string().contains("erase of block 1") && e.to_string().contains("endurance of 1"));
    assert_eq!(flash.bad_blocks(), vec![1]);
    assert_eq!(flash.erase_count(1).unwrap(), 1);
    let total = flash.geometry().total_pages;
    let e = flash.program(total, &PAGE, &[], None).unwrap_err();
    assert!(!e.is_rule());
    assert!(e.to_string().contains(&total.to_string()));
    let e = flash.program(0, &PAGE[..100], &[], None).unwrap_err();
    assert!(e.to_string().starts_with("data:"), "{e}");
    let e = flash.program(0, &PAGE, &[0; 129], None).unwrap_err();
    assert!(e.to_string().starts_with("oob:"), "{e}");
    let mut small = [0u8; 100];
    let mut oob = [0u8; 128];
    assert!(flash.read(0, &mut small, &mut oob, None).is_err());
    assert_eq!(flash.counters().rule_violations, 3);
    // Refused calls take no time and change nothing.
    assert_eq!(flash.counters().programs, 1);
}

#[test]
fn the_block_interface_is_refused_once_the_flash_is_native() {
    let mut dev = device(&[], false);
    dev.native().unwrap();
    let req = HostRequest::new(Op::Write, 0, 4096);
    let e = dev.submit(&req, None, None).unwrap_err();
    assert!(matches!(e, DeviceError::NativeOwned), "{e}");
    assert!(e.to_string().contains("native interface"));
    // And a device whose block interface wrote data cannot be handed over.
    let mut used = device(&[], false);
    used.submit(&req, None, None).unwrap();
    assert!(used.native().is_err());
}

/// The zero-copy calls: a program that adopts the caller's buffer and a read that lends the
/// stored page are timed and checked as the copying calls are, and read back the same bytes.
#[test]
fn zero_copy_calls_match_the_copying_calls() {
    let mut copying = device(&[], true);
    let mut owned = device(&[], true);
    let mut a = copying.native().unwrap();
    let mut b = owned.native().unwrap();
    let mut out = [0u8; 4096];
    let mut oob = [0u8; 128];
    for (i, page) in [0u64, 1, 16, 2].into_iter().enumerate() {
        let data = vec![i as u8 + 1; 4096];
        let t = 1_000 + i as u64 * 10_000;
        let mut buffer = b.page_buffer().unwrap();
        assert_eq!(buffer.len(), 4096);
        buffer.copy_from_slice(&data);
        assert_eq!(
            a.program(page, &data, &[i as u8], Some(t)).unwrap(),
            b.program_owned(page, buffer, &[i as u8], Some(t)).unwrap()
        );
    }
    for (i, page) in [0u64, 1, 16, 2, 3].into_iter().enumerate() {
        let t = 10_000_000 + i as u64 * 1_000;
        let done = a.read(page, &mut out, &mut oob, Some(t)).unwrap();
        let lent = b.read_page(page, Some(t)).unwrap();
        assert_eq!(lent.done_ns, done);
        assert_eq!(lent.data.unwrap(), &out[..]);
        assert_eq!(lent.oob, &oob[..]);
    }
    assert_eq!(a.counters(), b.counters());
    // Page 3 is erased: all ones.
    let lent = b.read_page(3, None).unwrap();
    assert!(lent.data.unwrap().iter().all(|&x| x == 0xFF));
    assert!(lent.oob.iter().all(|&x| x == 0xFF));

    // NAND rules and argument checks are unchanged.
    let buffer = b.page_buffer().unwrap();
    assert!(matches!(
        b.program_owned(0, buffer, &[], None),
        Err(NandError::NotErased { next: 3, .. })
    ));
    let buffer = b.page_buffer().unwrap();
    assert!(matches!(
        b.program_owned(5, buffer, &[], None),
        Err(NandError::OutOfOrder { next: 3, .. })
    ));
    let e = b
        .program_owned(3, vec![0; 100].into_boxed_slice(), &[], None)
        .unwrap_err();
    assert!(e.to_string().starts_with("data: expected exactly"), "{e}");
    let e = b.read_page(b.geometry().total_pages, None).unwrap_err();
    assert!(e.to_string().starts_with("page: page"), "{e}");
    assert_eq!(b.counters().rule_violations, 2);

    // An erase frees the block's buffers for later programs; the data reads as erased.
    let t = b.erase(0, None).unwrap();
    let lent = b.read_page(1, Some(t)).unwrap();
    assert!(lent.data.unwrap().iter().all(|&x| x == 0xFF));
    let mut buffer = b.page_buffer().unwrap();
    buffer.fill(0x33);
    b.program_owned(0, buffer, b"new", None).unwrap();
    let lent = b.read_page(0, None).unwrap();
    assert!(lent.data.unwrap().iter().all(|&x| x == 0x33));
    assert_eq!(&lent.oob[..4], b"new\xFF");
    // Block 1 (page 16) still holds its data.
    assert!(b
        .read_page(16, None)
        .unwrap()
        .data
        .unwrap()
        .iter()
        .all(|&x| x == 3));
}

/// Without a data store the zero-copy calls keep their timing and OOB, and lend no data.
#[test]
fn zero_copy_calls_without_a_store_lend_no_data() {
    let mut dev = device(&[], false);
    let mut flash = dev.native().unwrap();
    assert!(flash.page_buffer().is_none());
    let end = flash
        .program_owned(0, vec![1; 4096].into_boxed_slice(), b"x", Some(0))
        .unwrap();
    assert_eq!(end, XFER + T_PROG);
    let lent = flash.read_page(0, Some(end)).unwrap();
    assert!(lent.data.is_none());
    assert_eq!(lent.oob[0], b'x');
    assert_eq!(lent.done_ns, end + T_R + XFER);
}
