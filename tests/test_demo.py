"""The demo: its workload generator, and that placement hints lower WAF at a reduced size."""

from __future__ import annotations

import numpy as np
import pytest

from ssdlab.cli import main
from ssdlab.demo import hot_cold_workload, interpretation, run_demo

#: The smallest demo device (the scale floor): runs in a few seconds.
SMALL = 0.25


def test_workload_is_seeded_and_has_the_advertised_mix():
    a = hot_cold_workload(64 * 2**20, 50_000, seed=3)
    b = hot_cold_workload(64 * 2**20, 50_000, seed=3)
    c = hot_cold_workload(64 * 2**20, 50_000, seed=4)
    assert np.array_equal(a.offsets, b.offsets)
    assert np.array_equal(a.ops, b.ops)
    assert not np.array_equal(a.offsets, c.offsets)
    writes = a.ops == 1
    assert writes.mean() == pytest.approx(0.7, abs=0.01)
    assert set(np.unique(a.placement[writes])) == {0, 1}
    assert (a.placement[~writes] == -1).all()
    assert (a.offsets % 4096 == 0).all()
    assert (a.offsets < 64 * 2**20).all()
    assert (a.lengths == 4096).all()
    # hot pages (placement 1) are a fifth of the space and get about 80% of the accesses
    hot_pages = np.unique(a.offsets[a.placement == 1])
    assert hot_pages.size <= 0.2 * 64 * 2**20 / 4096
    assert (a.placement[writes] == 1).mean() == pytest.approx(0.8, abs=0.01)


@pytest.fixture(scope="module")
def small_demo():
    return run_demo(seed=1, scale=SMALL, progress=False)


@pytest.mark.slow
def test_hot_cold_placement_lowers_waf(small_demo):
    base, hinted = small_demo.baseline, small_demo.hinted
    assert base.config_hash == hinted.config_hash, "the same device; only the hints differ"
    assert base.ssd["waf"] > 1.0, "the run is long enough for GC to work"
    assert hinted.ssd["waf"] < base.ssd["waf"]
    assert hinted.ssd["gc"]["units_moved"] < base.ssd["gc"]["units_moved"]
    # The device is saturated either way, so less copying is more host work.
    assert base.ssd["die_utilisation"] > 0.9
    assert hinted.ssd["die_utilisation"] > 0.9
    assert hinted.jobs[0]["write"]["iops"] > base.jobs[0]["write"]["iops"]
    for direction in ("read", "write"):
        assert base.jobs[0][direction]["total_ios"] == hinted.jobs[0][direction]["total_ios"] > 0
    assert "cut write amplification" in interpretation(small_demo)


@pytest.mark.slow
def test_demo_command_prints_the_comparison(capsys):
    status = main(["demo", "--quiet", "--seed", "1", "--scale", str(SMALL)])
    out, err = capsys.readouterr()
    assert status == 0
    assert err == ""
    for needle in (
        "no hints",
        "hot/cold placement",
        "write amplification",
        "GC mapping units moved",
        "die utilisation",
        "energy (J)",
        "p99.9",
    ):
        assert needle in out, needle
