"""Benchmarks at a tiny size, so that they run in every test suite and cannot rot.

``make bench`` runs these alone (``pytest -m bench``) next to the Rust simulator-speed benchmark.
"""

from __future__ import annotations

import time

import numpy as np
import pytest


@pytest.mark.bench
def test_run_arrays_throughput(make_device, capsys):
    dev = make_device()
    n = 20_000
    rng = np.random.default_rng(0)
    ops = (rng.random(n) < 0.7).astype(np.int64)
    offsets = rng.integers(0, dev.logical_bytes // 4096, n) * 4096
    started = time.perf_counter()
    result = dev.run_arrays(ops, offsets, np.full(n, 4096), queue_depth=32, progress=False)
    elapsed = time.perf_counter() - started
    done = result.jobs[0]["read"]["total_ios"] + result.jobs[0]["write"]["total_ios"]
    assert done == n
    with capsys.disabled():
        print(f"\n  run_arrays: {n / elapsed:,.0f} requests/s ({n} requests, {elapsed:.3f} s)")
