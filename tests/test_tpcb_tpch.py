"""TPC-B (pgbench) and TPC-H (queries 1, 6, 12, 14): data as the standards' generators make it,
runs that keep their invariants, the same query results on the simulated SSD as in memory, and
errors that name the option."""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
import time
from pathlib import Path

import pytest

import ssdlab
import ssdlab.sqlite
from ssdlab import oltp
from ssdlab.db import OltpSettings, run_oltp
from ssdlab.oltp import tpcb, tpch
from ssdlab.spec import load as load_spec

SF = 0.002  # 400 parts, 3,000 orders, about 12,000 lines


def same_rows(rows: list[tuple], expected: list[tuple]) -> bool:
    """Equal rows, floats to 1e-9 relative."""
    return len(rows) == len(expected) and all(
        len(row) == len(other)
        and all(
            math.isclose(a, b, rel_tol=1e-9) if isinstance(b, float) else a == b
            for a, b in zip(row, other, strict=True)
        )
        for row, other in zip(rows, expected, strict=True)
    )


def memory() -> sqlite3.Connection:
    return sqlite3.connect(":memory:", isolation_level=None)


@pytest.fixture(scope="module")
def tpch_db() -> sqlite3.Connection:
    conn = memory()
    tpch.Tpch(scale_factor=SF).load(conn, 1)
    return conn


def test_tpcb_population_is_pgbench_init() -> None:
    conn = memory()
    wl = tpcb.Tpcb(branches=3, population=0.01)
    wl.load(conn, 0)
    one = conn.execute
    assert one("SELECT COUNT(*) FROM pgbench_branches").fetchone() == (3,)
    assert one("SELECT COUNT(*), MIN(bid), MAX(bid) FROM pgbench_tellers").fetchone() == (30, 1, 3)
    # 1,000 accounts per branch at population 0.01, aid-1 // 1000 + 1 the branch.
    assert one("SELECT COUNT(*) FROM pgbench_accounts").fetchone() == (3000,)
    assert one("SELECT bid FROM pgbench_accounts WHERE aid IN (1000, 1001, 3000)").fetchall() == [
        (1,),
        (2,),
        (3,),
    ]
    assert one("SELECT SUM(abalance), MIN(LENGTH(filler)) FROM pgbench_accounts").fetchone() == (
        0,
        84,
    )
    assert one("SELECT COUNT(*) FROM pgbench_history").fetchone() == (0,)
    assert tpcb.Tpcb().accounts_per_branch == 100_000


def test_tpcb_run_keeps_balances_equal_and_one_history_row_per_transaction() -> None:
    conn = memory()
    wl = oltp.load("tpcb", conn, seed=1, scale=2, population=0.01)
    result = oltp.run(wl, conn, clock=time.perf_counter_ns, seed=5, transactions=400)
    assert result.committed == 400
    assert result.aborted == 0
    assert tpcb.check_consistency(conn, transactions=400) == []
    deltas = conn.execute("SELECT MIN(delta), MAX(delta), COUNT(DISTINCT aid) FROM pgbench_history")
    low, high, accounts = deltas.fetchone()
    assert -5000 <= low < 0 < high <= 5000
    assert accounts > 300
    # A broken invariant is reported.
    conn.execute("UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 1")
    assert "balance sums differ" in tpcb.check_consistency(conn)[0]


def test_tpch_cardinalities_follow_the_scale_factor(tpch_db: sqlite3.Connection) -> None:
    one = tpch_db.execute
    assert one("SELECT COUNT(*), MIN(p_partkey), MAX(p_partkey) FROM part").fetchone() == (
        400,
        1,
        400,
    )
    orders, lines = (
        one("SELECT COUNT(*) FROM orders").fetchone(),
        one("SELECT COUNT(*) FROM lineitem").fetchone(),
    )
    assert orders == (3000,)
    assert 3000 * 4 * 0.95 < lines[0] < 3000 * 4 * 1.05  # 1..7 lines per order, mean 4
    # Sparse keys: the first 8 of every 32.
    keys = [k for (k,) in one("SELECT o_orderkey FROM orders ORDER BY 1 LIMIT 10")]
    assert keys == [1, 2, 3, 4, 5, 6, 7, 32, 33, 34]
    assert one("SELECT COUNT(*) FROM orders WHERE o_orderkey % 32 >= 8").fetchone() == (0,)


def test_tpch_values_follow_dbgen(tpch_db: sqlite3.Connection) -> None:
    one = tpch_db.execute
    start, last_order = "1992-01-01", (dt.date(1998, 12, 31) - dt.timedelta(151)).isoformat()
    assert one(
        "SELECT MIN(o_orderdate) >= ?, MAX(o_orderdate) <= ? FROM orders", (start, last_order)
    ).fetchone() == (1, 1)
    assert one("SELECT COUNT(*) FROM orders WHERE o_custkey % 3 = 0").fetchone() == (0,)
    assert {p for (p,) in one("SELECT DISTINCT o_orderpriority FROM orders")} == set(
        tpch.PRIORITIES
    )
    # Lines: dates relative to the order, flags and statuses from CURRENTDATE, price formula.
    bad = one(
        """SELECT COUNT(*) FROM lineitem JOIN orders ON o_orderkey = l_orderkey
        JOIN part ON p_partkey = l_partkey
        WHERE julianday(l_shipdate) - julianday(o_orderdate) NOT BETWEEN 1 AND 121
        OR julianday(l_commitdate) - julianday(o_orderdate) NOT BETWEEN 30 AND 90
        OR julianday(l_receiptdate) - julianday(l_shipdate) NOT BETWEEN 1 AND 30
        OR (l_receiptdate <= '1995-06-17') <> (l_returnflag IN ('R', 'A'))
        OR (l_shipdate > '1995-06-17') <> (l_linestatus = 'O')
        OR ABS(l_extendedprice - l_quantity * p_retailprice) > 0.005
        OR l_quantity NOT BETWEEN 1 AND 50 OR l_discount NOT BETWEEN 0 AND 0.1
        OR l_tax NOT BETWEEN 0 AND 0.08"""
    ).fetchone()
    assert bad == (0,)
    # Order status: F or O when all its lines agree, else P; total price from its lines.
    wrong = one(
        """SELECT COUNT(*) FROM orders JOIN (SELECT l_orderkey,
            CASE WHEN MIN(l_linestatus) = MAX(l_linestatus) THEN MIN(l_linestatus) ELSE 'P'
            END AS status,
            SUM(l_extendedprice * (1 + l_tax) * (1 - l_discount)) AS total
            FROM lineitem GROUP BY l_orderkey) ON l_orderkey = o_orderkey
        WHERE status <> o_orderstatus OR ABS(total - o_totalprice) > 0.01"""
    ).fetchone()
    assert wrong == (0,)
    assert tpch.retail_price(1) == 901.0
    assert tpch.retail_price(200_000) == 1100.0
    parts = one("SELECT p_name, p_type, p_container, p_brand FROM part").fetchall()
    assert all(len(set(name.split())) == 5 for name, *_ in parts)
    assert {t.split()[0] for _, t, _, _ in parts} == set(tpch.TYPE_SYLLABLES[0])
    promo = one("SELECT AVG(p_type LIKE 'PROMO%') FROM part").fetchone()[0]
    assert 0.1 < promo < 0.25  # one sixth


def test_tpch_queries_give_the_same_rows_on_the_simulated_ssd_as_in_memory(
    tpch_db: sqlite3.Connection,
) -> None:
    device = ssdlab.Device("noftl", store_data=True, overrides={"geometry.blocks_per_plane": 256})
    con = ssdlab.sqlite.connect(device, "tpch.db", hints=False, cpu="zero", cache_bytes=1 << 16)
    wl = oltp.load("tpch", con, seed=1, scale_factor=SF)
    assert oltp.content_digest(con, tpch.TABLES) == oltp.content_digest(tpch_db, tpch.TABLES)
    on_ssd, in_memory = wl.session(con, 9), wl.session(tpch_db, 9)
    for _ in range(8):
        kind = on_ssd.next_type()
        assert in_memory.next_type() == kind
        before = con.clock_ns()
        assert on_ssd.execute(kind)
        assert in_memory.execute(kind)
        assert con.clock_ns() > before  # the query read the device
        assert on_ssd.arguments[kind] == in_memory.arguments[kind]
        # Equal up to summation order: the stdlib's SQLite and APSW's may be different
        # versions (3.43 changed SUM to Kahan-Babuska summation).
        assert same_rows(on_ssd.results[kind], in_memory.results[kind]), kind
        assert on_ssd.results[kind], f"{kind} returned nothing"
    assert [row[:2] for row in on_ssd.results["q1"]] == [
        ("A", "F"),
        ("N", "F"),
        ("N", "O"),
        ("R", "F"),
    ]
    con.close()


def test_tpch_query_parameters_follow_clause_2_4() -> None:
    import random

    rng = random.Random(1)
    for _ in range(200):
        (delta,) = tpch.query(1, rng)[1]
        assert 60 <= int(delta.split()[0][1:]) <= 120
        year, _, low, high, quantity = tpch.query(6, rng)[1]
        assert year[:4] in {"1993", "1994", "1995", "1996", "1997"}
        assert year.endswith("-01-01")
        assert low >= 0.01
        assert high <= 0.10
        assert round(high - low, 2) == 0.02
        assert quantity in (24, 25)
        first, second, *_ = tpch.query(12, rng)[1]
        assert first != second
        assert {first, second} <= set(tpch.SHIP_MODES)
        month, _ = tpch.query(14, rng)[1]
        assert month.endswith("-01")
        assert 1993 <= int(month[:4]) <= 1997


@pytest.mark.parametrize(
    ("params", "option"),
    [
        ({"scale_factor": 0}, "tpch scale_factor must be a number > 0"),
        ({"scale_factor": -1}, "tpch scale_factor must be a number > 0"),
        ({"scale_factor": 1e-7}, "tpch scale_factor 1e-07 leaves no parts"),
        ({"queries": (1, 3)}, "tpch queries: unknown query 3"),
        ({"queries": "1,22"}, "tpch queries: unknown query 22"),
        ({"queries": ()}, "tpch queries: expected at least one"),
        ({"queries": (6, 6)}, "tpch queries: a query is named twice"),
    ],
)
def test_tpch_bad_input_names_the_option(params: dict, option: str) -> None:
    with pytest.raises(ValueError, match=option):
        oltp.make_workload("tpch", **params)


@pytest.mark.parametrize(
    ("params", "option"),
    [
        ({"branches": 0}, "tpcb branches must be an integer >= 1"),
        ({"population": 0}, "tpcb population must be a number in"),
        ({"population": 1.5}, "tpcb population must be a number in"),
    ],
)
def test_tpcb_bad_input_names_the_option(params: dict, option: str) -> None:
    with pytest.raises(ValueError, match=option):
        oltp.make_workload("tpcb", **params)


def test_tpcb_on_the_device_passes_integrity_and_consistency() -> None:
    device = ssdlab.Device("noftl", store_data=True, overrides={"geometry.blocks_per_plane": 256})
    result = run_oltp(
        device,
        OltpSettings(
            workload="tpcb",
            params={"branches": 2, "population": 0.01},
            transactions=200,
            hints=frozenset(),
            precondition=False,
        ),
    )
    o = result["oltp"]
    assert o["committed"] == 200
    assert o["transactions_per_s"] > 0
    assert o["mean_s"]["tpcb"] > 0


def test_sweep_built_ins_tpcb_and_tpch(tmp_path: Path) -> None:
    spec = tmp_path / "db.toml"
    spec.write_text(
        'name = "db"\nconfig = "noftl"\nset = ["geometry.blocks_per_plane=256"]\n'
        '[workloads.B]\nbuiltin = "tpcb"\nbranches = 2\ntransactions = 50\n'
        '[workloads.H]\nbuiltin = "tpch"\nscale_factor = 0.001\nquery = 6\n'
        '[axes]\nworkload = ["B", "H"]\nseed = [1]\n'
    )
    from ssdlab.runner import execute

    runs = load_spec(spec).runs
    assert [r.workload.kind for r in runs] == ["tpcb", "tpch"]
    for run in runs:
        out = execute(run.task())
        assert out["ok"], out.get("error")
        types = out["report"]["oltp"]["types"]
        assert list(types) == (["tpcb"] if run.workload.kind == "tpcb" else ["q6"])
    bad = tmp_path / "bad.toml"
    bad.write_text(spec.read_text().replace("query = 6", "query = -1"))
    with pytest.raises(ssdlab.ConfigError, match="query"):
        load_spec(bad)
