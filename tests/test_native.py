"""The native flash interface from Python: the contract a host FTL builds on."""

from __future__ import annotations

import pytest

import ssdlab

SMALL_NOFTL = {
    "geometry.blocks_per_plane": 32,
    "geometry.over_provisioning": 0.3,
    "cell.endurance_cycles": 2,
}


@pytest.fixture
def dev() -> ssdlab.Device:
    return ssdlab.Device("noftl", store_data=True, overrides=SMALL_NOFTL)


def test_geometry_locate_and_round_trip(dev: ssdlab.Device) -> None:
    flash = dev.native()
    g = flash.geometry
    assert (g["channels"], g["dies_per_channel"], g["planes_per_die"]) == (4, 2, 2)
    assert (g["pages_per_block"], g["page_bytes"], g["oob_bytes"]) == (64, 4096, 224)
    assert g["total_blocks"] == 4 * 2 * 2 * 32
    assert g["endurance"] == 2
    # Consecutive blocks go round the channels, then the dies.
    assert [flash.locate(b)[:2] for b in range(5)] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1)]
    data = bytes(range(256)) * 16
    done = flash.program(64, data, oob=b"\x01\x02", at_ns=1000)
    assert done > 1000
    got, oob, read_done = flash.read(64, at_ns=done)
    assert got == data
    assert len(oob) == 224
    assert oob[:3] == b"\x01\x02\xff"
    assert read_done > done
    at = read_done + 1_000_000
    oob_only, oob_done = flash.read_oob(64, at_ns=at)
    # Array time and a tiny transfer: shorter than the whole page's read.
    assert oob_only == oob
    assert oob_done - at < read_done - done
    assert flash.next_page(1) == 1
    assert not flash.is_erased(64)
    assert flash.is_erased(65)
    # Erased pages read as ones.
    assert flash.read(65)[0] == b"\xff" * 4096
    counters = flash.counters()
    assert (counters["programs"], counters["reads"], counters["oob_reads"]) == (1, 2, 1)
    assert dev.stats()["flash"]["programs"] == 1


def test_dies_overlap_in_simulated_time(dev: ssdlab.Device) -> None:
    flash = dev.native()
    page = b"\0" * 4096
    ppb = flash.geometry["pages_per_block"]
    one = flash.program(0, page, at_ns=0)
    # Another channel: overlapped (only the host link, ~1 us a page, is shared); the same
    # die (block 16): serialised after the first.
    assert one < flash.program(ppb, page, at_ns=0) < one + 2_000
    assert flash.program(16 * ppb, page, at_ns=0) > one + 250_000


def test_rules_and_bad_arguments(dev: ssdlab.Device) -> None:
    flash = dev.native()
    page = b"\0" * 4096
    flash.program(0, page)
    with pytest.raises(ssdlab.NandRuleError, match=r"page 0 .*not erased"):
        flash.program(0, page)
    with pytest.raises(ssdlab.NandRuleError, match=r"page 5 .*out of order"):
        flash.program(5, page)
    assert issubclass(ssdlab.NandRuleError, ssdlab.DeviceError)
    with pytest.raises(ValueError, match=r"^data: expected exactly the page size"):
        flash.program(1, b"short")
    with pytest.raises(ValueError, match=r"^oob: expected at most"):
        flash.program(1, page, oob=b"x" * 225)
    with pytest.raises(ValueError, match=r"^page: page"):
        flash.read_oob(flash.geometry["total_pages"])
    with pytest.raises(ValueError, match=r"^block: expected an integer in"):
        flash.erase(-1)
    with pytest.raises(ValueError, match=r"^at_ns"):
        flash.erase(0, at_ns=-5)
    flash.erase(0)
    flash.erase(0)
    with pytest.raises(ssdlab.NandRuleError, match=r"erase of block 0.*endurance of 2"):
        flash.erase(0)
    assert flash.bad_blocks() == [0]
    assert flash.erase_count(0) == 2
    assert flash.erase_counts()[0] == 2


def test_the_block_interface_is_refused(dev: ssdlab.Device) -> None:
    dev.native()
    with pytest.raises(ssdlab.DeviceError, match="native interface"):
        dev.write(0, 4096)
    used = ssdlab.Device("noftl", overrides=SMALL_NOFTL)
    used.write(0, 4096)
    with pytest.raises(ssdlab.DeviceError, match="block interface has written"):
        used.native()


def test_without_a_data_store_only_oob_is_read() -> None:
    flash = ssdlab.Device("noftl", overrides=SMALL_NOFTL).native()
    flash.program(0, b"\0" * 4096, oob=b"lba")
    assert flash.read_oob(0)[0][:3] == b"lba"
    with pytest.raises(ssdlab.DeviceError, match="keeps no page data"):
        flash.read(0)
