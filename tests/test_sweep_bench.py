"""The sweep benchmark (benches/sweep_bench.py) at a tiny size, so that it cannot rot.

``make bench`` runs the full one: 16 runs of about a second, one worker against two.
"""

from __future__ import annotations

import pytest

from support import load_bench


@pytest.mark.bench
def test_sweep_bench_tiny(tmp_path, capsys):
    bench = load_bench("sweep_bench")
    spec = bench.bench_spec(tmp_path, runs=2, passes=0.5)
    one = bench.measure(spec, tmp_path / "one", workers=1)
    two = bench.measure(spec, tmp_path / "two", workers=2)
    for measured in (one, two):
        assert measured.runs == 2
        assert 0 < measured.simulated_s < measured.wall_s * measured.workers
        assert 0 < measured.cluster_s < measured.wall_s
    assert one.overhead > one.per_run_overhead
    with capsys.disabled():
        print(
            f"\n  sweep of 2 tiny runs: {one.wall_s:.2f} s with 1 worker, {two.wall_s:.2f} s "
            f"with 2; cluster start and stop {one.cluster_s:.2f} s"
        )
