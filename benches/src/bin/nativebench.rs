//! `nativebench [--tiny]`: the cost of a native flash call (NoFTL interface) from Rust, in ns of
//! wall time per call, on the `noftl` preset: page programs (erase, then fill each block in
//! order, striping over the blocks so that every die is used; the first fill, which allocates the page
//! buffers, is reported apart from the steady state), page reads, OOB reads and
//! erases, with and without a data store. With a store each call is measured twice: the
//! copying calls (`program` copies the caller's 4 KiB into the store, `read` copies the stored
//! page out), whose cost is that of the memory system once the working set leaves the cache,
//! and the zero-copy calls (`page_buffer` + `program_owned` adopt a buffer as the page's
//! storage, `read_page` lends the stored page). The host's own work on the data (filling the
//! buffer, using what it read) is not counted. Calls are issued 1 us apart in simulated time,
//! a host that keeps a few operations in flight. The target is 100 ns per program or read.

use ssdlab_core::Device;
use std::hint::black_box;
use std::time::Instant;

fn device(store: bool) -> Device {
    let text = ssdlab_core::presets::get("noftl").expect("noftl preset");
    Device::from_toml(text, "noftl", &[], 1, store).unwrap_or_else(|e| panic!("{e}"))
}

#[derive(Clone, Copy, PartialEq)]
enum Calls {
    Copying,
    ZeroCopy,
}

struct Row {
    first_fill_ns: f64,
    program_ns: f64,
    read_ns: f64,
    read_oob_ns: f64,
    erase_ns: f64,
}

fn measure(store: bool, calls: Calls, blocks: u32, rounds: u32) -> Row {
    let mut dev = device(store);
    let mut flash = dev.native().unwrap();
    let g = flash.geometry().clone();
    let ppb = g.pages_per_block as u64;
    let data = vec![0xA5u8; g.page_bytes as usize];
    let oob = vec![1u8; 16];
    let mut out = vec![0u8; g.page_bytes as usize];
    let mut oob_out = vec![0u8; g.oob_bytes as usize];
    let (mut program, mut read, mut read_oob, mut erase) = (0.0, 0.0, 0.0, 0.0);
    let mut first_fill = 0.0;
    let mut at = 0u64;
    for round in 0..=rounds {
        if round == 1 {
            // The first round's programs allocate the page buffers (the memory's first
            // touch, once per page of flash): reported apart from the steady state.
            first_fill = program;
            (program, read, read_oob, erase) = (0.0, 0.0, 0.0, 0.0);
        }
        let t = Instant::now();
        for b in 0..blocks {
            at = at.max(flash.erase(b, Some(at)).unwrap());
        }
        erase += t.elapsed().as_nanos() as f64;
        let t = Instant::now();
        for i in 0..ppb {
            for b in 0..blocks as u64 {
                at += 1_000;
                let page = b * ppb + i;
                let end = match calls {
                    Calls::Copying => flash.program(page, &data, &oob, Some(at)),
                    Calls::ZeroCopy => {
                        let buffer = flash
                            .page_buffer()
                            .unwrap_or_else(|| data.clone().into_boxed_slice());
                        flash.program_owned(page, black_box(buffer), &oob, Some(at))
                    }
                };
                black_box(end.unwrap());
            }
        }
        program += t.elapsed().as_nanos() as f64;
        let t = Instant::now();
        for i in 0..ppb {
            for b in 0..blocks as u64 {
                at += 1_000;
                let page = b * ppb + i;
                match calls {
                    Calls::Copying => {
                        black_box(flash.read(page, &mut out, &mut oob_out, Some(at)).unwrap());
                    }
                    Calls::ZeroCopy => {
                        black_box(flash.read_page(page, Some(at)).unwrap());
                    }
                }
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
        first_fill_ns: first_fill / (blocks as u64 * ppb) as f64,
        program_ns: program / pages,
        read_ns: read / pages,
        read_oob_ns: read_oob / pages,
        erase_ns: erase / (blocks * rounds) as f64,
    }
}

fn main() {
    let tiny = std::env::args().any(|a| a == "--tiny");
    let rounds = |blocks: u32| if tiny { 2 } else { (12_800 / blocks).max(20) };
    println!("## Native flash calls (noftl preset, blocks x 64 pages of 4 KiB)\n");
    println!(
        "| data store | calls | blocks (working set) | program ns/call (first fill) | \
         program ns/call | read ns/call | read_oob ns/call | erase ns/call |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let cases = [
        (false, Calls::Copying, 64),
        (true, Calls::Copying, 8),
        (true, Calls::ZeroCopy, 8),
        (true, Calls::Copying, 64),
        (true, Calls::ZeroCopy, 64),
        (true, Calls::Copying, 512),
        (true, Calls::ZeroCopy, 512),
    ];
    for (store, calls, blocks) in cases {
        let r = measure(store, calls, blocks, rounds(blocks));
        println!(
            "| {} | {} | {} ({} MiB) | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            if store { "yes" } else { "no" },
            match calls {
                Calls::Copying => "program/read",
                Calls::ZeroCopy => "program_owned/read_page",
            },
            blocks,
            blocks / 4,
            r.first_fill_ns,
            r.program_ns,
            r.read_ns,
            r.read_oob_ns,
            r.erase_ns
        );
    }
}
