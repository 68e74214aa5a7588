"""The SQLite benchmark (benches/sqlite_bench.py) at a tiny size, so that it cannot rot.

``make bench`` runs the full one: 20,000 inserts and 5,000 lookups, on /dev/shm and on the
simulated device.
"""

from __future__ import annotations

import pytest

from support import load_bench


@pytest.mark.bench
def test_sqlite_bench_tiny(capsys):
    bench = load_bench("sqlite_bench")
    default, expected = bench.measure_default(rows=500, batch=50, lookups=100)
    ours, checksum = bench.measure_ssdlab(rows=500, batch=50, lookups=100)
    assert checksum == expected
    assert default.wall_s > 0
    assert ours.io_calls > 0
    assert 0 < ours.vfs_ns_per_io < 10_000_000  # sane, not the target: CI machines vary
    assert ours.simulated_s > 0
    with capsys.disabled():
        print(
            f"\n  sqlite tiny: {ours.wall_s:.3f} s on the device vs {default.wall_s:.3f} s on "
            f"/dev/shm; VFS {ours.vfs_ns_per_io / 1000:.2f} us per I/O"
        )


@pytest.mark.bench
def test_tpcc_coupling_bench_tiny(capsys):
    bench = load_bench("tpcc_coupling_bench")
    with capsys.disabled():
        result = bench.main(["--population", "0.02", "--transactions", "100", "--rounds", "1"])
    # main() exits when the databases differ; here the figures must be sane, not on target.
    assert result["io_calls"] > 0
    assert result["tmpfs_s"] > 0
    assert result["device_s"] > 0
    assert 0 < result["vfs_us_per_io"] < 10_000


@pytest.mark.bench
def test_tpcc_coupling_bench_by_cpu_time(capsys):
    bench = load_bench("tpcc_coupling_bench")
    with capsys.disabled():
        result = bench.main(
            ["--population", "0.02", "--transactions", "50", "--rounds", "1", "--clock", "cpu"]
        )
    assert result["clock"] == "cpu"
    assert result["tmpfs_s"] > 0
    assert result["device_s"] > 0
