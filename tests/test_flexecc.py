"""FlexECC's SSD cache from Python and the command line: the quick study, the four-type trace
and its replay, and bad input that names the option."""

from __future__ import annotations

import time

import pandas as pd
import pytest

import ssdlab
from ssdlab.errors import ConfigError
from ssdlab.flexecc import run_cache
from sweep_support import run_cli

SMALL = [
    "geometry.channels=4",
    "geometry.chips_per_channel=1",
    "geometry.blocks_per_plane=64",
    "geometry.over_provisioning=0.15",
]


def test_reproduce_flexecc_quick(tmp_path):
    started = time.monotonic()
    result = run_cli("reproduce", "flexecc", "--scale", "quick", "--workers", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60
    out = tmp_path / "reproduce-flexecc-quick"
    frame = ssdlab.load_results(out)
    assert len(frame) == 16
    assert (frame["status"] == "ok").all()
    # No run returned an error to the application: BCH (t = 40) never failed at these RBERs.
    assert (frame["cache.errors_returned"] == 0).all()
    point = frame.set_index(
        ["workload", "flexecc.mode", "ecc.rber_base", "cache.scrub_pages_per_s"]
    ).sort_index()
    for workload in ("fileserver", "r90"):
        base = point.loc[(workload, "all_bch", 0.0, 0.0)]
        flex = point.loc[(workload, "flex", 0.0, 0.0)]
        # The baseline decodes everything with BCH; FlexECC reads clean pages with CRC.
        assert base["flexecc.crc_reads"] == 0
        assert flex["flexecc.crc_reads"] > 0
        # A corrupt clean page costs a disk read under FlexECC only.
        noisy_base = point.loc[(workload, "all_bch", 1e-4, 0.0)]
        noisy_flex = point.loc[(workload, "flex", 1e-4, 0.0)]
        assert noisy_base["cache.corruption_disk_reads"] == 0
        assert noisy_flex["cache.corruption_disk_reads"] > 0
        # The scrubber finds corrupt EDC pages before the host does.
        scrubbed = point.loc[(workload, "flex", 1e-4, 2000.0)]
        assert scrubbed["cache.scrub_prefetched"] > 0
        assert noisy_flex["cache.scrub_prefetched"] == 0
    # Flushed pages are re-protected with CRC when GC moves them (fileserver writes back).
    assert point.loc[("fileserver", "flex", 0.0, 0.0)]["flexecc.bch_to_crc"] > 0
    # Reads of clean pages decode in 0.8 us instead of 5 us: the mean SSD read is faster.
    r90_base = point.loc[("r90", "all_bch", 0.0, 0.0)]["cache.mean_ssd_read_response_ns"]
    r90_flex = point.loc[("r90", "flex", 0.0, 0.0)]["cache.mean_ssd_read_response_ns"]
    assert r90_flex < r90_base
    assert "flexecc.mode=flex" in result.stdout
    # Die utilisation beside the response times; no "nan" cells.
    assert "die utilisation: flexecc.mode=flex" in result.stdout
    assert "| nan" not in result.stdout
    # The gain table: what the 4.2 us saved per CRC read predicts, against what was measured.
    gain = pd.read_csv(out / "report" / "gain.csv").set_index("workload")
    assert "Why the gain is what it is" in result.stdout
    r90 = gain.loc["r90"]
    assert r90["crc_read_share"] > 0.5
    assert abs(r90["predicted_read_change"] - r90["measured_read_change"]) < 0.01
    assert abs(r90["predicted_change"] - r90["measured_change"]) < 0.005
    assert (gain["disk_utilisation"] < 0.9).all()
    for name in ("report.md", "cache.mean_ssd_response_ns.png", "gc.time_ns.png"):
        assert (out / "report" / name).exists(), name


def test_the_cache_trace_replays_on_the_ssd(tmp_path):
    trace = tmp_path / "r90.csv"
    report = run_cache(
        "flexecc",
        {"personality": "r90", "requests": 3000, "interarrival_ns": 8_000_000},
        overrides=[*SMALL, "flexecc.mode=flex"],
        trace_path=trace,
    )
    lines = trace.read_text().splitlines()
    assert lines[0] == "time_ns,op,offset,length,hint,type"
    types = [line.rsplit(",", 1)[1] for line in lines[1:]]
    cache = report["cache"]
    assert types.count("clean_write") == cache["clean_writes"]
    assert types.count("dirty_write") == cache["dirty_writes"]
    device = ssdlab.Device("flexecc", overrides=[*SMALL, "flexecc.mode=flex"], seed=1)
    result = device.run_trace(trace, "csv", progress=False)
    flex = result.ssd["flexecc"]
    assert flex["clean_writes"] == cache["clean_writes"]
    assert flex["flush_reads"] == cache["flush_reads"]
    assert flex["crc_reads"] > 0


@pytest.mark.parametrize(
    ("workload", "overrides", "named"),
    [
        ({"personality": "mailserver"}, [], "workload.personality"),
        ({"requests": -1}, [], "workload.requests"),
        ({}, ["ecc.rber_base=0.5"], "ecc.rber_base"),
        ({}, ["ecc.correctable_bits=0"], "ecc.correctable_bits"),
        ({}, ["cache.cache_bytes=1099511627776"], "cache.cache_bytes"),
        ({}, ["cache.dirty_threshold=0"], "cache.dirty_threshold"),
    ],
)
def test_bad_input_names_the_option(workload, overrides, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        run_cache("flexecc", {"requests": 10, **workload}, overrides=[*SMALL, *overrides])


def test_cache_command_prints_a_summary(tmp_path):
    result = run_cli(
        "cache",
        "flexecc",
        "--personality",
        "varmail",
        "--requests",
        "2000",
        "--working-set-bytes",
        "67108864",
        *[arg for item in SMALL for arg in ("--set", item)],
        "--set",
        "flexecc.mode=flex",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "FlexECC (flex)" in result.stdout
    assert "response (SSD)" in result.stdout
    bad = run_cli("cache", "flexecc", "--personality", "nope", cwd=tmp_path)
    assert bad.returncode != 0
    assert "workload.personality" in bad.stderr
