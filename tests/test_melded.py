"""Melded pages: ``reproduce melded`` at the quick scale against the closed forms, the HDFS-style
workload's targets, the read-group column and bad input."""

from __future__ import annotations

import csv
import warnings

import pytest

import ssdlab
from ssdlab import melded
from ssdlab.device import Device
from ssdlab.errors import ConfigError
from ssdlab.spec import BUILTIN_WORKLOADS
from sweep_support import run_cli

STUDY_SET = [
    ("geometry.blocks_per_plane", "128"),
    ("host.link_mbps", "0"),
    ("ecc.code", "none"),
    ("placement.allocation", "static"),
]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("melded")
    result = run_cli("reproduce", "melded", "--scale", "quick", "--workers", "2", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return cwd / "reproduce-melded-quick", result.stdout


def test_request_size_table_is_the_closed_form_in_every_cell(quick):
    out, stdout = quick
    with open(out / "report" / "request_size.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["bytes", "normal_us", "melded_us"]
    assert [int(r["bytes"]) for r in rows] == [4096 << k for k in range(16)]
    geo = melded.Geometry(8, 8, 4096, 800, 1)
    for r in rows:
        size = int(r["bytes"])
        for column, is_melded in (("normal_us", False), ("melded_us", True)):
            simulated = float(r[column]) * 1000
            # The whole table is array-bound: the simple bound is exact, and so is the recurrence.
            assert melded.regime(geo, melded=is_melded) == "array"
            for model in (melded.closed_form_read_ns, melded.bound_read_ns):
                expected = model(size, geo, melded=is_melded)
                assert simulated == pytest.approx(expected, abs=1), (size, column, model)
    # 4 KiB: 58 + 5.12 us normal, 166 + 3 x 5.12 us melded; melded wins from the crossover on.
    assert (float(rows[0]["normal_us"]), float(rows[0]["melded_us"])) == (63.12, 181.36)
    cross = melded.crossover_bytes(
        [(int(r["bytes"]), float(r["normal_us"]), float(r["melded_us"])) for r in rows]
    )
    assert cross is not None
    assert 4096 < cross < 128 << 20
    assert f"Crossover: melded is faster from {melded._size_label(cross)} up." in stdout
    assert (out / "report" / "request_size.png").stat().st_size > 10_000


def test_throughput_table_is_the_closed_form_in_every_cell(quick):
    out, _ = quick
    frame = ssdlab.load_results(out / "melded-throughput")
    assert (frame["status"] == "ok").all()
    with open(out / "melded-throughput" / "report" / "throughput.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "channels", "units_per_channel", "page_bytes", "rate_mtps", "bus_bits",
        "normal_mibps", "melded_mibps",
    ]  # fmt: skip
    assert len(rows) == 2 * 4 * 4
    regimes = set()
    for _, row in frame.iterrows():
        geo = melded.geometry_of(row)
        is_melded = row["host.melded_reads"] == "on"
        size = int(row["host_bytes_written"])
        simulated = row["read.clat_mean_us"] * 1000
        exact = melded.closed_form_read_ns(size, geo, melded=is_melded)
        assert simulated == pytest.approx(exact, rel=0.01), (geo, is_melded)
        kind = melded.regime(geo, melded=is_melded)
        regimes.add(kind)
        if kind != "mixed":
            bound = melded.bound_read_ns(size, geo, melded=is_melded)
            assert simulated == pytest.approx(bound, rel=0.01), (geo, is_melded, kind)
    assert regimes == {"array", "bus", "mixed"}
    # The CSV is the same runs in MiB/s.
    first = rows[0]
    assert (first["channels"], first["page_bytes"], first["bus_bits"]) == ("8", "2048", "8")


def test_hdfs_hints_and_melding_read_faster_and_small_reads_pay(quick):
    out, _ = quick
    frame = ssdlab.load_results(out / "melded-hdfs").set_index(
        ["workload", "hints", "host.melded_reads"]
    )
    bw = frame["read.bw_bytes"]
    # With read groups, melding reads whole blocks at least 20 % faster than without.
    assert bw[("hdfs", True, "on")] >= 1.2 * bw[("hdfs", True, "off")]
    # Point lookups pay a whole melded read when every read melds, not with auto: there they
    # are read alone, and wait no longer than without melding (less, when the large reads'
    # melding leaves the dies and channels free sooner).
    p50 = frame["read.p50_us"]
    assert p50[("hdfs-mixed", True, "on")] > 1.4 * p50[("hdfs-mixed", True, "off")]
    assert p50[("hdfs-mixed", True, "auto")] <= p50[("hdfs-mixed", True, "off")]


def _device(*extra: tuple[str, str]) -> Device:
    return Device("melded-8x8", overrides=[*STUDY_SET, *extra])


def test_read_group_column_places_a_group_per_wordline_and_runs_are_deterministic():
    params = {"request_bytes": 3 << 20, "write_request_bytes": 1 << 20}
    results = []
    for _ in range(2):
        dev = _device(("host.melded_reads", "on"))
        results.append(melded.run_melded_read(dev, params, hints=True).to_dict())
        groups = dev.stats()["read_groups"]
        assert groups["units_placed"] == 768
        assert groups["wordlines_opened"] == 256
        assert groups["units_fallback"] == 0
    assert results[0] == results[1]


def test_bad_input_names_the_option():
    with pytest.raises(ConfigError, match="melded_reads"):
        _device(("host.melded_reads", "sometimes"))
    dev = _device()
    with pytest.raises(ValueError, match="read_group"):
        dev.run_arrays([1], [0], [4096], read_group=[-2])
    with pytest.raises(ValueError, match="read_group"):
        dev.run_arrays([1], [0], [4096], read_group=[1 << 64])
    params = dict(BUILTIN_WORKLOADS["hdfs"])
    for value in (0, 4096 * 3 + 512):
        with pytest.raises(melded.HdfsError, match=r"hdfs\.block_bytes"):
            melded.hdfs_requests(
                {**params, "block_bytes": value}, 4096, 1 << 40, seed=1, hints=True
            )


def test_a_read_group_on_a_device_other_than_tlc_is_ignored_with_one_warning():
    dev = Device("mlc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dev.run_arrays([1, 1], [0, 4096], [4096, 4096], read_group=[1, 1])
        dev.write(0, 4096, hint={"read_group": 2})
    assert [str(w.message)[:28] for w in caught] == ["read_group hints are ignored"]
    assert "read_groups" not in dev.stats()


def test_cli_runs_the_hdfs_workload_and_names_bad_options(tmp_path):
    small = ["--param", "blocks=2", "--param", f"block_bytes={16 << 20}"]
    ok = run_cli("run", "melded-8x8", "--builtin", "hdfs", *small, "--read-groups", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("hdfs reads:")
    bad = run_cli(
        "run", "melded-8x8", "--builtin", "hdfs", "--param", "block_bytes=5000", cwd=tmp_path
    )
    assert bad.returncode == 2
    assert "hdfs.block_bytes: expected a positive multiple of the page size 4096" in bad.stderr
    mode = run_cli(
        "run", "melded-8x8", "--builtin", "hdfs", "--set", "host.melded_reads=maybe", cwd=tmp_path
    )
    assert mode.returncode != 0
    assert "host.melded_reads" in mode.stderr
