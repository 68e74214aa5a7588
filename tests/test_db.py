"""OLTP on SQLite on a simulated device (ssdlab.db and ``ssdlab db run``)."""

from __future__ import annotations

import json
import random

import pytest

import ssdlab
from ssdlab.cli import main
from ssdlab.db import HINT_KINDS, OltpSettings, parse_hints, run_oltp
from support import PowerCut

#: A small SEA-SSD device: 4 planes of 160 blocks of 32 MLC pages of 8 KiB (149 MiB logical).
SMALL_SEA = {
    "geometry.channels": 2,
    "geometry.chips_per_channel": 1,
    "geometry.blocks_per_plane": 160,
    "geometry.pages_per_block": 32,
}
SET_ARGS = [arg for key, value in SMALL_SEA.items() for arg in ("--set", f"{key}={value}")]


def small_device(*, hints: bool, seed: int = 1) -> ssdlab.Device:
    return ssdlab.Device(
        "seassd",
        seed=seed,
        store_data=True,
        overrides={**SMALL_SEA, "placement.honor_hints": hints},
    )


def tpcc_settings(**changes) -> OltpSettings:
    base = {
        "workload": "tpcc",
        "params": {"warehouses": 1, "population": 0.02},
        "transactions": 150,
        "precondition": False,
    }
    return OltpSettings(**(base | changes))


def test_a_tpcc_run_reports_transactions_device_and_coupling_figures():
    result = run_oltp(small_device(hints=False), tpcc_settings(hints=frozenset()))
    o = result["oltp"]
    assert o["committed"] + o["aborted"] == 150
    assert o["hints"] == "none"
    assert o["transactions_per_s"] > 0
    assert 0 < o["write_request_share"] < 1
    assert o["device_writes"] > 0
    assert o["cache_bytes"] >= 64 * 4096
    assert o["wal_limit_bytes"] >= 64 << 10
    assert o["main_latency_ns"]["p99"] >= o["main_latency_ns"]["p50"] > 0
    # The measurements start after the load: the device saw this run's writes only.
    assert 0 < result["ssd"]["host_bytes_written"] < 2 * o["device_writes"] * 65536
    assert result["sqlite"]["connection"]["writes"] >= o["device_writes"]


def test_same_seed_same_figures_bit_for_bit_with_zero_cpu_time():
    runs = [run_oltp(small_device(hints=True), tpcc_settings(), seed=3)["ssd"] for _ in range(2)]
    assert runs[0] == runs[1]


def test_hints_reach_the_device_as_classes():
    result = run_oltp(small_device(hints=True), tpcc_settings())
    handles = result["ssd"]["placement"]["handles"]
    written = [h["host_bytes_written"] for h in handles]
    assert all(w > 0 for w in written[:2]), written  # stat (0) and dyn (1) both used


def test_parse_hints_takes_levels_and_refuses_unknown_kinds():
    assert parse_hints(True) == frozenset(HINT_KINDS) == parse_hints("all")
    assert parse_hints("none") == frozenset() == parse_hints(False)
    assert parse_hints("classify+predict") == {"classify", "predict"}
    with pytest.raises(ValueError, match="hints: expected True, False"):
        parse_hints("classify+wishes")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"workload": "tpcd"}, "unknown workload 'tpcd'"),
        ({"params": {"warehouses": 0}}, "warehouses"),
        ({"cache_fraction": 0}, "cache_fraction"),
        ({"transactions": 0}, "transactions"),
        ({"cpu": "fast"}, "cpu"),
    ],
)
def test_bad_settings_name_the_option(change, message):
    with pytest.raises(ValueError, match=message):
        tpcc_settings(**change)


def test_cli_db_run_prints_json(capsys):
    status = main(
        [
            "db", "run", "tpcc", "--population", "0.02", "--transactions", "60",
            "--no-precondition", "--hints", "classify", "--output-format", "json", "--quiet",
            *SET_ARGS,
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, err
    result = json.loads(out)
    assert result["oltp"]["hints"] == "classify"
    assert result["oltp"]["committed"] + result["oltp"]["aborted"] == 60
    assert result["ssd"]["waf"] >= 1


def test_cli_db_run_prints_tables(capsys):
    status = main(
        ["db", "run", "sysbench", "--scale", "2000", "--transactions", "20",
         "--no-precondition", "--quiet", *SET_ARGS]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "transactions per simulated second" in out
    assert "read_write" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tpcd"], "WORKLOAD: expected tpcc, sysbench, tpcb, tpch"),
        (["tpcc", "--scale", "0"], "--scale must be at least 1"),
        (["tpcc", "--hints", "bogus"], "hints: expected True, False"),
        (["tpcc", "--cache-fraction", "0"], "--cache-fraction: expected a number in (0, 4]"),
        (["tpcc", "--warmup", "-1"], "--warmup: expected an integer >= 0"),
        (["tpcc", "--set", "placement.honor_hints=false"], "--hints sets it"),
        (["sysbench", "--population", "0.5"], "--population applies to tpcc and tpcb only"),
        (["tpch", "--scale", "0"], "--scale: a TPC-H scale factor must be > 0"),
        (["tpch", "--scale", "-0.5"], "--scale: a TPC-H scale factor must be > 0"),
        (["tpch", "--queries", "1,3"], "--queries: tpch queries: unknown query 3"),
        (["tpch", "--queries", "q99"], "--queries: tpch queries: unknown query 99"),
        (["tpcb", "--queries", "1"], "--queries applies to tpch only"),
        (["tpcb", "--scale", "1.5"], "--scale must be at least 1"),
        (["tpcb", "--population", "0"], "--population: tpcb population must be"),
        (["tpcb", "--backend", "nvme"], "argument --backend: invalid choice"),
        (["tpcc", "--tables", "2"], "--tables applies to sysbench only"),
    ],
)
def test_cli_db_run_bad_input_is_a_usage_error(capsys, args, message):
    status = main(["db", "run", *args, "--quiet"])
    _, err = capsys.readouterr()
    assert status == 2
    assert message in err


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_power_cut_during_tpcc_keeps_every_committed_transaction(seed):
    """TPC-C runs one transaction at a time until the power fails at a random device write
    (mid-commit, mid-checkpoint, ...). After reopening, the database is intact, TPC-C's
    consistency conditions hold, and every New-Order whose commit returned is there (the one
    being committed when the power went may or may not be)."""
    from ssdlab import oltp, sqlite
    from ssdlab.oltp import tpcc
    from ssdlab.sqlite.store import _STORES

    rng = random.Random(seed)
    dev = small_device(hints=True, seed=seed)
    options = {"cpu": "zero", "crash_tracking": True, "wal_limit_bytes": 128 << 10}
    con = sqlite.connect(dev, "tpcc.db", **options)
    wl = oltp.load("tpcc", con, seed=1, warehouses=1, population=0.005)

    def orders(connection) -> int:
        (total,) = connection.execute("SELECT sum(d_next_o_id) FROM district").fetchone()
        return total

    committed = orders(con)
    with PowerCut(_STORES[dev], rng.randrange(50, 3000)) as cut:
        try:
            for txn in range(100_000):
                oltp.run(wl, con, clock=con.clock_ns, seed=seed * 1_000_003 + txn, transactions=1)
                committed = orders(con)
        except sqlite.Error:
            pass
    assert cut.happened, "the run ended before the power cut"
    con.close()
    after = sqlite.connect(dev, "tpcc.db", **options)
    assert after.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert tpcc.check_consistency(after) == []
    assert orders(after) in (committed, committed + 1)
    after.close()
