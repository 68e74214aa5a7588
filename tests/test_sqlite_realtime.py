"""``cpu="realtime"``: SQLite on a device paced to the wall clock (the NoFTL paper's real-time
emulation), and the ``clock`` axis of sweeps."""

from __future__ import annotations

import time

import pytest

import ssdlab
import ssdlab.sqlite
from ssdlab.db import OltpSettings, run_oltp
from ssdlab.spec import SpecError, parse

#: One serial flash unit of the noftl preset (50 us reads, 250 us programs).
SERIAL = {
    "geometry.channels": 1,
    "geometry.chips_per_channel": 1,
    "geometry.blocks_per_plane": 100,
}


def _commits(cpu: str, backend: str) -> tuple[int, int, ssdlab.sqlite.Connection]:
    """50 commits on a fresh device: their simulated and wall time, and the connection."""
    device = ssdlab.Device("noftl", store_data=True, seed=1, overrides=SERIAL)
    con = ssdlab.sqlite.connect(device, "t.db", hints=False, cpu=cpu, backend=backend)
    con.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    con.commit()
    clock, wall = con.clock_ns(), time.perf_counter_ns()
    for i in range(50):
        con.execute("INSERT INTO t VALUES (?, ?)", (i, "x" * 500))
        con.commit()
    return con.clock_ns() - clock, time.perf_counter_ns() - wall, con


@pytest.mark.parametrize("backend", ["block", "native"])
def test_the_simulated_clock_follows_the_wall_clock(backend):
    simulated, wall, con = _commits("realtime", backend)
    # Each commit returns when the wall clock reaches its simulated completion, and the host's
    # time between commits passes on the device: both clocks measure the same interval (up to
    # the host's time between the last I/O before each measurement and the measurement).
    assert abs(simulated - wall) <= 0.05 * wall + 1_000_000
    paced = con.stats()["realtime"]
    assert paced["requests"] >= 50  # a commit syncs the WAL at least
    # The host waits for the flash most of the time (a commit programs; SQLite's work between
    # commits is far shorter).
    assert 0.3 * wall < paced["waited_ns"]
    # In simulated time the same commits cost the flash alone: real time only adds.
    virtual, _, other = _commits("zero", backend)
    assert simulated > virtual
    con.close()
    other.close()


def test_leaving_real_time_stops_the_pacing():
    _, _, con = _commits("realtime", "native")
    con.leave_realtime()
    before = con.stats()["realtime"]["requests"]
    con.execute("INSERT INTO t VALUES (1, 'y')")
    con.commit()
    assert con.stats()["realtime"]["requests"] == before
    con.close()


def test_a_clock_reset_does_not_stall_the_pacing():
    # reset_measurements() puts the device's clock back to 0 between a run's load and its
    # measured part; the pacing takes a new origin instead of waiting for the time it lost.
    device = ssdlab.Device("noftl", store_data=True, seed=1, overrides=SERIAL)
    result = run_oltp(
        device,
        OltpSettings(
            workload="tpcb",
            params={"scale": 2},
            transactions=60,
            cpu="realtime",
            backend="native",
            hints=frozenset(),
            precondition=False,
        ),
    )
    oltp = result["oltp"]
    assert oltp["clock"] == "realtime"
    assert abs(oltp["elapsed_ns"] - oltp["wall_time_ns"]) <= 0.05 * oltp["wall_time_ns"]
    # No transaction waits for the simulated time of the load (hundreds of ms).
    assert oltp["types"]["tpcb"]["latency_ns"]["max"] < 100_000_000
    assert result["sqlite"]["realtime"]["requests"] > 0


def test_a_bad_cpu_model_is_named():
    device = ssdlab.Device("noftl", store_data=True, seed=1, overrides=SERIAL)
    with pytest.raises(ValueError, match="cpu: expected 'wall', 'zero' or 'realtime'"):
        ssdlab.sqlite.connect(device, "t.db", hints=False, cpu="real")


SPEC = """
name = "rt"
config = "noftl"
precondition = false
[workloads.B]
builtin = "tpcb"
[workloads.J]
job = "noftl/randread.fio"
[axes]
workload = ["B"]
clock = {clocks}
"""


def test_the_clock_axis_is_checked(tmp_path):
    job_dir = tmp_path / "noftl"
    job_dir.mkdir()
    (job_dir / "randread.fio").write_text("[r]\nrw=randread\nbs=4k\nsize=1m\n")
    runs = parse(SPEC.format(clocks='["virtual", "realtime"]'), base_dir=tmp_path).runs
    assert [r.clock for r in runs] == ["virtual", "realtime"]
    assert runs[0].key != runs[1].key
    with pytest.raises(SpecError, match="axis 'clock': expected virtual or realtime"):
        parse(SPEC.format(clocks='["wall"]'), base_dir=tmp_path)
    text = SPEC.format(clocks='["realtime"]').replace('workload = ["B"]', 'workload = ["J"]')
    with pytest.raises(SpecError, match="runs in simulated time only"):
        parse(text, base_dir=tmp_path)
