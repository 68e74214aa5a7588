//! `nativebench [--tiny]`: the cost of a native flash call (NoFTL interface) from Rust, in ns of
//! wall time per call, on the `noftl` preset: page programs (erase, then fill each block in
//! order, striping over the blocks so that every die is used), page reads, OOB reads and
//! erases, with and without a data store (with one, each program and read copies its page
//! once: 4 KiB, which costs what the memory system makes it cost, so the store is measured
//! on a working set that fits the L2 cache, 8 blocks = 2 MiB, and on one that does not). Calls
//! are issued 1 us apart in simulated time, a host that keeps a few operations in flight. The
//! target is 100 ns per program or read.

use ssdlab_core::Device;
use std::hint::black_box;
use std::time::Instant;

fn device(store: bool) -> Device {
    let text = ssdlab_core::presets::get("noftl").expect("noftl preset");
    Device::from_toml(text, "noftl", &[], 1, store).unwrap_or_else(|e| panic!("{e}"))
}

struct Row {
    store: bool,
    blocks: u32,
    program_ns: f64,
    read_ns: f64,
    read_oob_ns: f64,
    erase_ns: f64,
}

fn measure(store: bool, blocks: u32, rounds: u32) -> Row {
    let mut dev = device(store);
    let mut flash = dev.native().unwrap();
    let g = flash.geometry().clone();
    let ppb = g.pages_per_block as u64;
    let data = vec![0xA5u8; g.page_bytes as usize];
    let oob = vec![1u8; 16];
    let mut out = vec![0u8; g.page_bytes as usize];
    let mut oob_out = vec![0u8; g.oob_bytes as usize];
    let (mut program, mut read, mut read_oob, mut erase) = (0.0, 0.0, 0.0, 0.0);
    let mut at = 0u64;
    for _ in 0..rounds {
        let t = Instant::now();
        for b in 0..blocks {
            at = at.max(flash.erase(b, Some(at)).unwrap());
        }
        erase += t.elapsed().as_nanos() as f64;
        let t = Instant::now();
        for i in 0..ppb {
            for b in 0..blocks as u64 {
                at += 1_000;
                black_box(flash.program(b * ppb + i, &data, &oob, Some(at)).unwrap());
            }
        }
        program += t.elapsed().as_nanos() as f64;
        let t = Instant::now();
        for i in 0..ppb {
            for b in 0..blocks as u64 {
                at += 1_000;
                black_box(
                    flash
                        .read(b * ppb + i, &mut out, &mut oob_out, Some(at))
                        .unwrap(),
                );
            }
        }
        read += t.elapsed().as_nanos() as f64;
        let t = Instant::now();
        for i in 0..ppb {
            for b in 0..blocks as u64 {
                at += 1_000;
                black_box(flash.read_oob(b * ppb + i, &mut oob_out, Some(at)).unwrap());
            }
        }
        read_oob += t.elapsed().as_nanos() as f64;
        at = flash.now_ns();
    }
    let pages = (blocks as u64 * ppb * rounds as u64) as f64;
    Row {
        store,
        blocks,
        program_ns: program / pages,
        read_ns: read / pages,
        read_oob_ns: read_oob / pages,
        erase_ns: erase / (blocks * rounds) as f64,
    }
}

fn main() {
    let tiny = std::env::args().any(|a| a == "--tiny");
    // 64 blocks of 64 pages: 16 MiB of page data, 4 blocks per die.
    let rounds = if tiny { 2 } else { 200 };
    println!("## Native flash calls (noftl preset, blocks x 64 pages, {rounds} rounds)\n");
    println!("| data store | blocks | program ns/call | read ns/call | read_oob ns/call | erase ns/call |");
    println!("|---|---|---|---|---|---|");
    for (store, blocks) in [(false, 64), (true, 2), (true, 8), (true, 64)] {
        let r = measure(store, blocks, rounds);
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            if r.store { "yes" } else { "no" },
            r.blocks,
            r.program_ns,
            r.read_ns,
            r.read_oob_ns,
            r.erase_ns
        );
    }
}
