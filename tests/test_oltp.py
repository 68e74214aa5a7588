"""The OLTP workloads on the stdlib ``sqlite3`` module: load, run, consistency, mix, determinism.

Databases are files in ``tmp_path`` in WAL mode, at a population small enough that the whole
file runs in a few seconds; the clock is ``time.perf_counter_ns`` except where a test needs a
clock it controls.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import json
import random
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ssdlab
from ssdlab import oltp
from ssdlab.oltp import sysbench, tpcc

POPULATION = 0.01  # 1,000 items, 30 customers and orders per district, 9 undelivered
SB_TABLES = 2
SB_ROWS = 500


@pytest.fixture
def connect(tmp_path: Path) -> Iterator[Callable[[str], sqlite3.Connection]]:
    opened: list[sqlite3.Connection] = []

    def open_db(name: str) -> sqlite3.Connection:
        conn = sqlite3.connect(tmp_path / name, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # no fsync per commit: tests need no durability
        opened.append(conn)
        return conn

    yield open_db
    for conn in opened:
        conn.close()


@pytest.fixture(scope="module")
def tpcc_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TPC-C database of 2 warehouses at ``POPULATION``, loaded once, checkpointed into one
    file that each test copies."""
    path = tmp_path_factory.mktemp("tpcc") / "loaded.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    oltp.load("tpcc", conn, seed=1, warehouses=2, population=POPULATION)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


@pytest.fixture
def tpcc_db(
    tpcc_file: Path, tmp_path: Path, connect: Callable[[str], sqlite3.Connection]
) -> sqlite3.Connection:
    shutil.copyfile(tpcc_file, tmp_path / "tpcc.db")
    return connect("tpcc.db")


TPCC = tpcc.Tpcc(warehouses=2, population=POPULATION)


def integrity(conn: sqlite3.Connection) -> list[tuple[str]]:
    return conn.execute("PRAGMA integrity_check").fetchall()


def count(conn: sqlite3.Connection, table: str) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_tpcc_population_follows_the_spec(tpcc_db: sqlite3.Connection) -> None:
    conn, wl = tpcc_db, TPCC
    assert (wl.items, wl.customers, wl.new_orders) == (1000, 30, 9)
    districts = 2 * tpcc.DISTRICTS_PER_WAREHOUSE
    expected = {
        "warehouse": 2,
        "district": districts,
        "customer": districts * 30,
        "history": districts * 30,
        "orders": districts * 30,
        "new_order": districts * 9,
        "item": 1000,
        "stock": 2 * 1000,
    }
    for table, rows in expected.items():
        assert count(conn, table) == rows, table
    lines = count(conn, "order_line")
    assert districts * 30 * 5 <= lines <= districts * 30 * 15
    # Every customer has exactly one order; the first 1000 (here: all) names are c_id - 1.
    owners = conn.execute("SELECT COUNT(DISTINCT o_c_id) FROM orders WHERE o_w_id=1 AND o_d_id=1")
    assert owners.fetchone()[0] == 30
    (name,) = conn.execute("SELECT c_last FROM customer WHERE c_id=1 AND c_d_id=1 AND c_w_id=1")
    assert name == ("BARBARBAR",)
    originals = conn.execute("SELECT COUNT(*) FROM item WHERE i_data LIKE '%ORIGINAL%'")
    assert 50 <= originals.fetchone()[0] <= 150  # 10 % of 1000
    assert tpcc.check_consistency(conn) == []
    assert integrity(conn) == [("ok",)]


def test_tpcc_population_one_is_the_standard() -> None:
    standard = tpcc.Tpcc()
    assert (standard.items, standard.customers, standard.new_orders) == (100_000, 3_000, 900)
    assert tpcc.last_name(371) == "PRICALLYOUGHT"  # clause 4.3.2.3's example


def test_tpcc_run_keeps_the_database_consistent(tpcc_db: sqlite3.Connection) -> None:
    conn, wl = tpcc_db, TPCC
    result = oltp.run(wl, conn, clock=time.perf_counter_ns, seed=2, transactions=400)
    assert result.committed + result.aborted == 400
    assert set(result.types) == set(tpcc.TRANSACTION_TYPES)
    for kind, counts in result.types.items():
        assert counts.committed > 0, kind
        summary = counts.latency_ns
        assert 0 < summary["p50"] <= summary["p99"] <= summary["max"], kind
    assert all(t.aborted == 0 for k, t in result.types.items() if k != "new_order")
    assert result.transactions_per_s > 0
    report = json.loads(json.dumps(result.to_dict()))
    assert report["params"] == {"warehouses": 2, "population": POPULATION, "clustered": False}
    assert (report["seed"], report["version"]) == (2, ssdlab.__version__)
    assert tpcc.check_consistency(conn) == []
    assert integrity(conn) == [("ok",)]
    # 15 % of Payments go through a remote warehouse, 1 % of order lines are supplied remotely
    # (only the run's rows: the load's have no remote ones).
    payments = result.types["payment"].committed
    (remote,) = conn.execute("SELECT COUNT(*) FROM history WHERE h_c_w_id <> h_w_id").fetchone()
    assert 0.07 * payments <= remote <= 0.25 * payments
    (lines, remote_lines) = conn.execute(
        "SELECT COUNT(*), SUM(ol_supply_w_id <> ol_w_id) FROM order_line WHERE ol_o_id > ?",
        (wl.customers,),
    ).fetchone()
    assert 0 < remote_lines <= 0.03 * lines


def test_tpcc_selects_sixty_percent_of_customers_by_last_name(
    tpcc_db: sqlite3.Connection,
) -> None:
    session = TPCC.session(tpcc_db, seed=6)
    keys = [session._customer_key() for _ in range(4000)]
    by_name = sum(field == "c_last" for field, _ in keys) / len(keys)
    assert 0.57 <= by_name <= 0.63
    # Every name drawn exists at this population: the by-name lookups never miss.
    names = {value for field, value in keys if field == "c_last"}
    for name in names:
        found = tpcc_db.execute("SELECT 1 FROM customer WHERE c_last=? LIMIT 1", (name,))
        assert found.fetchone() is not None, name


def test_tpcc_clustered_tables_hold_the_same_rows(
    connect: Callable[[str], sqlite3.Connection],
) -> None:
    digests = []
    for clustered in (False, True):
        conn = connect(f"clustered-{clustered}.db")
        wl = oltp.load("tpcc", conn, seed=1, population=0.005, clustered=clustered)
        oltp.run(wl, conn, clock=time.perf_counter_ns, seed=2, transactions=100)
        assert tpcc.check_consistency(conn) == []
        assert integrity(conn) == [("ok",)]
        without_rowid = conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND sql LIKE '%WITHOUT ROWID'"
        ).fetchall()
        expected = ["customer", "district", "new_order", "order_line", "orders", "stock"]
        assert sorted(name for (name,) in without_rowid) == (expected if clustered else [])
        digests.append(oltp.content_digest(conn, tpcc.TABLES))
    assert digests[0] == digests[1]


def test_tpcc_deck_deals_the_standard_mix(connect: Callable[[str], sqlite3.Connection]) -> None:
    session = tpcc.Tpcc(population=POPULATION).session(connect("deck.db"), seed=3)
    dealt = [session.next_type() for _ in range(1000)]
    for start in range(0, 1000, 100):
        deck = collections.Counter(dealt[start : start + 100])
        assert deck == dict(tpcc.DECK)
    assert dealt[:100] != dealt[100:200]  # each deck is shuffled anew


def test_tpcc_new_order_rolls_back_about_one_percent(tpcc_db: sqlite3.Connection) -> None:
    conn, wl = tpcc_db, TPCC
    session = wl.session(conn, seed=4)
    orders_before = count(conn, "orders")
    outcomes = [session.execute("new_order") for _ in range(1000)]
    rolled_back = outcomes.count(False)
    assert 3 <= rolled_back <= 20  # binomial(1000, 1 %): mean 10, sd 3.1
    # A rolled-back New-Order leaves nothing behind: no order, no district counter step.
    assert count(conn, "orders") == orders_before + outcomes.count(True)
    assert tpcc.check_consistency(conn) == []


def test_sysbench_keeps_its_row_counts(connect: Callable[[str], sqlite3.Connection]) -> None:
    conn = connect("sb.db")
    wl = oltp.load("sysbench", conn, seed=1, tables=SB_TABLES, table_size=SB_ROWS)
    (c, pad) = conn.execute("SELECT c, pad FROM sbtest1 WHERE id=7").fetchone()
    assert (len(c), len(pad), c.count("-")) == (119, 59, 9)
    sums = [conn.execute(f"SELECT SUM(k) FROM sbtest{n}").fetchone()[0] for n in (1, 2)]
    result = oltp.run(wl, conn, clock=time.perf_counter_ns, seed=2, transactions=200)
    assert (result.committed, result.aborted) == (200, 0)
    for n in (1, 2):
        assert count(conn, f"sbtest{n}") == SB_ROWS
        ids = conn.execute(f"SELECT MIN(id), MAX(id) FROM sbtest{n}").fetchone()
        assert ids == (1, SB_ROWS)
    after = [conn.execute(f"SELECT SUM(k) FROM sbtest{n}").fetchone()[0] for n in (1, 2)]
    assert after != sums  # the index updates and re-inserts changed k
    indexes = conn.execute("SELECT name FROM sqlite_master WHERE type='index' ORDER BY name")
    assert [name for (name,) in indexes] == ["k_1", "k_2"]
    assert integrity(conn) == [("ok",)]


def test_sysbench_special_distribution_has_sysbench_hot_spot() -> None:
    ids = sysbench.IdGenerator(random.Random(5), "special")
    draws = [ids.default(1, 10_000) for _ in range(20_000)]
    assert 1 <= min(draws) <= max(draws) <= 10_000
    middle = sum(4950 <= d <= 5051 for d in draws) / len(draws)
    assert 0.74 <= middle <= 0.80  # 75 % go to the middle 1 %, plus the normal part's share


@pytest.mark.parametrize(
    ("name", "params", "tables"),
    [
        ("tpcc", {"warehouses": 1, "population": 0.005}, tpcc.TABLES),
        ("sysbench", {"tables": 1, "table_size": 300}, ("sbtest1",)),
    ],
)
def test_same_seeds_give_the_same_statements_and_database(
    connect: Callable[[str], sqlite3.Connection],
    name: str,
    params: dict[str, object],
    tables: tuple[str, ...],
) -> None:
    digests = []
    for db, run_seed in (("a.db", 2), ("b.db", 2), ("c.db", 3)):
        conn = connect(db)
        wl = oltp.load(name, conn, seed=1, **params)
        statements = hashlib.sha256()  # every statement of the run, with its bound values
        conn.set_trace_callback(lambda sql, h=statements: h.update(sql.encode()))
        result = oltp.run(wl, conn, clock=time.perf_counter_ns, seed=run_seed, transactions=150)
        conn.set_trace_callback(None)
        digests.append(
            (
                statements.hexdigest(),
                oltp.content_digest(conn, tables),
                result.committed,
                result.aborted,
            )
        )
    assert digests[0] == digests[1]
    assert digests[0][0] != digests[2][0]
    assert digests[0][1] != digests[2][1]


def test_run_stops_on_the_given_clock_and_skips_the_warm_up(
    connect: Callable[[str], sqlite3.Connection],
) -> None:
    conn = connect("sb.db")
    wl = oltp.load("sysbench", conn, seed=1, tables=1, table_size=200)
    ticks = iter(range(0, 10**12, 1000))

    def clock() -> int:  # a simulated clock: 1 µs a reading
        return next(ticks)

    result = oltp.run(wl, conn, clock=clock, seed=2, duration_ns=20_000, warmup_transactions=5)
    assert result.to_dict()["warmup_transactions"] == 5
    # Each transaction reads the clock twice (start, end): 2 µs per transaction.
    assert result.committed == 10
    assert result.elapsed_ns == 20_000
    assert result.transactions_per_s == pytest.approx(500_000)
    assert result.types["read_write"].latency_ns["max"] == 1000


@pytest.mark.parametrize(
    ("call", "option"),
    [
        (lambda c: oltp.make_workload("tpcx"), "unknown workload"),
        (lambda c: oltp.make_workload("tpcc", scale=0), "warehouses"),
        (lambda c: oltp.make_workload("tpcc", population=0), "population"),
        (lambda c: oltp.make_workload("tpcc", population=1.5), "population"),
        (lambda c: oltp.make_workload("tpcc", warehouse=2), "unknown option"),
        (lambda c: oltp.make_workload("tpcc", clustered="yes"), "clustered"),
        (lambda c: oltp.make_workload("sysbench", scale=0), "table_size"),
        (lambda c: oltp.make_workload("sysbench", tables=-1), "tables"),
        (lambda c: oltp.make_workload("sysbench", range_size=0), "range_size"),
        (lambda c: oltp.make_workload("sysbench", rand_type="zipf"), "rand_type"),
        (lambda c: oltp.run("sysbench", c, clock=time.perf_counter_ns), "a run needs a stop"),
        (lambda c: oltp.run("sysbench", c, clock=int, transactions=-1), "transactions"),
        (lambda c: oltp.run("sysbench", c, clock=int, duration_ns=0), "duration_ns"),
        (
            lambda c: oltp.run("sysbench", c, clock=int, transactions=1, warmup_transactions=-1),
            "warmup_transactions",
        ),
        (lambda c: oltp.load("sysbench", c, seed=-1), "seed"),
        (lambda c: oltp.make_workload("tpcc", scale=1, warehouses=1), "not both"),
        (lambda c: oltp.load(TPCC, c, warehouses=3), "by name only"),
    ],
)
def test_bad_parameters_name_the_option(
    connect: Callable[[str], sqlite3.Connection], call: Callable, option: str
) -> None:
    with pytest.raises(ValueError, match=option):
        call(connect("bad.db"))


def test_a_failing_transaction_is_rolled_back(
    connect: Callable[[str], sqlite3.Connection],
) -> None:
    conn = connect("t.db")
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)")

    def insert_then(outcome: object) -> Callable[[], bool]:
        def body() -> bool:
            cur.execute("INSERT INTO t VALUES (1)")
            if isinstance(outcome, Exception):
                raise outcome
            return bool(outcome)

        return body

    with pytest.raises(sqlite3.IntegrityError):
        oltp.driver.transaction(conn, cur, insert_then(sqlite3.IntegrityError("boom")))
    assert not oltp.driver.transaction(conn, cur, insert_then(False))
    assert not conn.in_transaction
    assert count(conn, "t") == 0
    assert oltp.driver.transaction(conn, cur, insert_then(True))
    assert count(conn, "t") == 1


def test_registry_and_scale_alias() -> None:
    assert sorted(oltp.WORKLOADS) == ["sysbench", "tpcb", "tpcc", "tpch"]
    assert oltp.make_workload("tpcc", scale=3).params() == {
        "warehouses": 3,
        "population": 1.0,
        "clustered": False,
    }
    bench = oltp.make_workload("sysbench", scale=50, tables=4, rand_type="special")
    assert bench.params() == {
        "tables": 4,
        "table_size": 50,
        "range_size": 100,
        "rand_type": "special",
    }


@pytest.mark.bench
def test_oltp_bench_tiny(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The OLTP benchmark (benches/oltp_bench.py) at a tiny size, so that it cannot rot."""
    path = Path(__file__).resolve().parent.parent / "benches" / "oltp_bench.py"
    spec = importlib.util.spec_from_file_location("oltp_bench", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    args = ["--population", "0.005", "--table-size", "200", "--transactions", "50"]
    assert bench.main([*args, "--warmup", "5", "--dir", str(tmp_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["workload"] for row in rows] == ["tpcc", "sysbench"]
    for row in rows:
        assert row["transactions"] == 50
        assert row["file_bytes"] > 0
        assert row["transactions_per_wall_s"] > 0


def test_sqlite3_default_transaction_mode_works_too() -> None:
    """The explicit BEGIN works in sqlite3's default (legacy) mode, not only with
    ``isolation_level=None``."""
    conn = sqlite3.connect(":memory:")
    try:
        wl = oltp.load("tpcc", conn, seed=1, population=0.005)
        result = oltp.run(wl, conn, clock=time.perf_counter_ns, seed=2, transactions=100)
        assert result.committed + result.aborted == 100
        assert not conn.in_transaction
        assert tpcc.check_consistency(conn) == []
    finally:
        conn.close()
