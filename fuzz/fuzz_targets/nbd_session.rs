//! The NBD server's negotiation and transmission parser on arbitrary client bytes: with and
//! without a valid handshake in front, the server must answer or close, never panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ssdlab_core::Device;
use ssdlab_nbd::clock;
use ssdlab_nbd::emulator::Emulator;
use ssdlab_nbd::handshake::ExportInfo;
use ssdlab_nbd::protocol::*;
use ssdlab_nbd::server::serve_stream;
use ssdlab_nbd::transport::MemoryTransport;

const TINY: &[(&str, &str)] = &[
    ("geometry.channels", "1"),
    ("geometry.chips_per_channel", "1"),
    ("geometry.dies_per_chip", "2"),
    ("geometry.planes_per_die", "1"),
    ("geometry.blocks_per_plane", "32"),
    ("geometry.pages_per_block", "32"),
    ("geometry.over_provisioning", "0.25"),
];

fuzz_target!(|data: &[u8]| {
    let overrides: Vec<(String, String)> =
        TINY.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let device = Device::from_toml(
        ssdlab_core::presets::get("slc").unwrap(),
        "slc",
        &overrides,
        1,
        true,
    )
    .unwrap();
    let export = ExportInfo {
        name: "ssdlab".into(),
        description: String::new(),
        size: device.logical_bytes(),
        read_only: data.first().is_some_and(|b| b & 1 == 1),
        block_sizes: (512, device.page_size(), MAX_PAYLOAD),
    };
    let emu = Emulator::new(device, clock::by_name("virtual", None).unwrap(), None, 10_000);
    // Half the inputs get a valid GO in front so that the transmission phase is reached.
    let mut input = Vec::new();
    if data.first().is_some_and(|b| b & 2 == 2) {
        input.extend_from_slice(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes());
        input.extend_from_slice(&IHAVEOPT.to_be_bytes());
        input.extend_from_slice(&OPT_GO.to_be_bytes());
        input.extend_from_slice(&6u32.to_be_bytes());
        input.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    }
    input.extend_from_slice(data.get(1..).unwrap_or(&[]));
    let mut io = MemoryTransport::new(input);
    serve_stream(&mut io, &emu, &export, |_| {});
});
