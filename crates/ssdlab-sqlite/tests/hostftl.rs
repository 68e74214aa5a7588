//! The host FTL on native flash: a database page costs one program (by hand), random writes,
//! partial writes and trims read back under GC with either victim policy, and the page map
//! rebuilt from OOB after a power loss finds every live page.

use ssdlab_core::Device;
use ssdlab_sqlite::hostftl::{CatalogEntry, GcPolicy, HostFtl, Options, Stream};
use std::collections::HashMap;

/// One channel of `dies` single-plane SLC dies of 40 blocks of 16 4 KiB pages; 50/250/700 us,
/// a 200 MT/s x8 bus (20.48 us a page), no ECC, no host link.
fn device(dies: u32) -> Device {
    let dies = dies.to_string();
    let pairs: Vec<(String, String)> = [
        ("geometry.channels", dies.as_str()),
        ("geometry.chips_per_channel", "1"),
        ("geometry.dies_per_chip", "1"),
        ("geometry.planes_per_die", "1"),
        ("geometry.blocks_per_plane", "40"),
        ("geometry.pages_per_block", "16"),
        ("geometry.page_size_bytes", "4096"),
        ("geometry.oob_size_bytes", "64"),
        ("geometry.over_provisioning", "0.25"),
        ("cell.type", "slc"),
        ("cell.read_x_ns", "40000"),
        ("cell.read_y_ns", "10000"),
        ("cell.program_ns", "[250000]"),
        ("cell.erase_ns", "700000"),
        ("channel.rate_mtps", "200"),
        ("channel.bus_width_bytes", "1"),
        ("ecc.code", "none"),
        ("host.link_mbps", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Device::from_toml("", "test", &pairs, 1, true).unwrap_or_else(|e| panic!("{e}"))
}

const PAGE: u64 = 4096;

#[test]
fn a_database_page_costs_one_program_and_pages_of_one_request_overlap() {
    for (dies, expected) in [(1u32, 4 * (20_480 + 250_000)), (4, 20_480 + 250_000)] {
        let mut dev = device(dies);
        let logical = dev.logical_bytes();
        let mut flash = dev.native().unwrap();
        let mut ftl = HostFtl::new(&flash, logical, Options::default()).unwrap();
        ftl.set_default_owner(Some((1, Stream::Db)));
        let one = ftl
            .write(&mut flash, 0, &[7u8; PAGE as usize], 1_000)
            .unwrap();
        assert_eq!(one, 1_000 + 20_480 + 250_000);
        let start = one;
        let four = ftl
            .write(&mut flash, PAGE, &[8u8; 4 * PAGE as usize], start)
            .unwrap();
        // One die: four transfers and programs in a row; four dies on four channels: at once.
        assert_eq!(four - start, expected, "{dies} dies");
    }
}

/// A deterministic xorshift, enough to pick pages and lengths.
struct Rng(u64);
impl Rng {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

#[test]
fn random_writes_and_trims_read_back_through_gc_and_after_a_power_loss() {
    for policy in [GcPolicy::Greedy, GcPolicy::CostBenefit] {
        let mut dev = device(2);
        let logical = dev.logical_bytes();
        let mut flash = dev.native().unwrap();
        let options = Options {
            gc_policy: policy,
            ..Options::default()
        };
        let mut ftl = HostFtl::new(&flash, logical, options).unwrap();
        ftl.set_default_owner(Some((5, Stream::Db)));
        let pages = ftl.logical_pages * 9 / 10;
        let bytes = (pages * PAGE) as usize;
        let mut model = vec![0u8; bytes];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut now = 0;
        for step in 0..8 * pages {
            let offset = rng.next(bytes as u64 - 3 * PAGE) + if step % 3 == 0 { 0 } else { 17 };
            let length = 1 + rng.next(3 * PAGE - 17);
            if rng.next(10) == 0 {
                ftl.trim(offset, length);
                // Whole pages only, as the FTL deallocates.
                let first = offset.div_ceil(PAGE) * PAGE;
                let last = (offset + length) / PAGE * PAGE;
                if last > first {
                    model[first as usize..last as usize].fill(0);
                }
                continue;
            }
            let data: Vec<u8> = (0..length).map(|i| (step + i) as u8).collect();
            now = ftl.write(&mut flash, offset, &data, now).unwrap();
            model[offset as usize..(offset + length) as usize].copy_from_slice(&data);
        }
        assert!(
            ftl.counters.gc_page_copies > 0,
            "{policy:?}: GC never moved a page"
        );
        let mut out = vec![0u8; bytes];
        ftl.read(&mut flash, 0, &mut out, now).unwrap();
        assert!(
            out == model,
            "{policy:?}: data differs before the power loss"
        );
        ftl.power_loss(&flash);
        let catalog = HashMap::from([(
            5,
            CatalogEntry {
                extents: (0..ftl.logical_pages).collect(),
                extent_pages: 1,
                size_pages: ftl.logical_pages,
            },
        )]);
        let (report, done) = ftl.recover(&mut flash, &catalog, now).unwrap();
        assert!(report.scan_ns > 0 && done > now);
        assert!(report.live_pages > 0);
        ftl.read(&mut flash, 0, &mut out, done).unwrap();
        assert!(out == model, "{policy:?}: data differs after recovery");
    }
}
