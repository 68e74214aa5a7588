"""TPC-C through the SQLite coupling: is the coupling the bottleneck?

The same TPC-C load and run (same seeds, one warehouse at ``--population``) twice in one
sitting: on SQLite's default VFS with the database in ``/dev/shm`` (tmpfs; WAL,
``synchronous=FULL``; APSW's SQLite, the one the coupling uses -- the standard library's is an
older release whose floating-point sums differ in the last digit -- behind the smallest PEP 249
shim the workloads need), and through ``ssdlab.sqlite`` on the
``seassd`` preset's cells with data kept and every SEA-SSD hint on (``cpu="zero"``). Reported:
the run's wall time on each and their ratio (target <= 1.5x), TPC-C transactions per wall
second on each, the coupling's own time per I/O (``vfs_ns_per_io``, target < 10 us) and the
device simulation's time per I/O beside it. The two databases must end with the same contents
(a digest of every table), so the coupling changes timing only.

The pair runs ``--rounds`` times (3), alternating, and the median round's figures are reported
with every round's ratio: on a shared machine one run now and then is slowed by others.
``--clock cpu`` times both runs by this process's CPU time (``time.process_time``) instead of
wall time: it leaves out the time the process waits for a core while others' builds run, not
the slowdown of sharing caches and cores with them, so it still spreads on a busy machine
(the coupling is single-threaded and synchronous: on a quiet machine both clocks agree).
``--backend native`` runs the device side on native flash under the host FTL
(:mod:`ssdlab.sqlite.hostftl`, NoFTL) instead.

Run with ``make bench`` (or ``python benches/tpcc_coupling_bench.py [--transactions N]``);
``tests/test_sqlite_bench.py`` runs it tiny.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import apsw

import ssdlab
import ssdlab.sqlite
from ssdlab import oltp

TABLES = ("warehouse", "district", "customer", "history", "new_order", "orders", "order_line",
          "item", "stock")  # fmt: skip

#: The seassd preset's MLC cells on 2 dies x 2 planes (149 MiB logical).
DEVICE_OVERRIDES = {
    "geometry.channels": 2,
    "geometry.chips_per_channel": 1,
    "geometry.blocks_per_plane": 160,
    "geometry.pages_per_block": 32,
}


#: The noftl preset's SLC flash on 4 single-plane dies (about 1 GiB) for ``--backend native``.
NATIVE_OVERRIDES = {
    "geometry.channels": 4,
    "geometry.chips_per_channel": 1,
    "geometry.planes_per_die": 1,
    "geometry.blocks_per_plane": 1024,
}


class PlainCursor:
    """An APSW cursor with PEP 249's ``description`` also for statements that return no rows
    (caught as each statement starts, as ``ssdlab.sqlite`` does)."""

    def __init__(self, raw: apsw.Connection) -> None:
        self.cursor = raw.cursor()
        # The trace writes into a list, not into self: a cursor -> trace -> self cycle would
        # leave a dropped cursor's statement open until the cycle collector ran, and SQLite
        # refuses to COMMIT while a statement is in progress.
        columns: list[Any] = [None]
        self._columns = columns

        def started(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            columns[0] = tuple((name, *[None] * 6) for name, _ in cursor.get_description())
            return True

        self.cursor.exec_trace = started
        self.rows: Any = iter(())

    @property
    def description(self) -> tuple[tuple[Any, ...], ...] | None:
        return self._columns[0]

    def execute(self, sql: str, params: Any = ()) -> PlainCursor:
        self._columns[0] = None
        self.rows = iter(self.cursor.execute(sql, params))
        return self

    def executemany(self, sql: str, rows: Any) -> PlainCursor:
        for _ in self.cursor.executemany(sql, rows):
            pass
        self.rows = iter(())
        return self

    def fetchone(self) -> Any:
        return next(self.rows, None)

    def fetchall(self) -> list[Any]:
        return list(self.rows)

    def __iter__(self) -> Any:
        return self.rows


class PlainConnection:
    """APSW on the default VFS with what the workloads call: ``cursor``, ``execute``,
    ``executemany``, ``commit`` and ``rollback`` (the workloads send BEGIN themselves)."""

    def __init__(self, path: str) -> None:
        self.raw = apsw.Connection(path)

    def cursor(self) -> PlainCursor:
        return PlainCursor(self.raw)

    def execute(self, sql: str, params: Any = ()) -> PlainCursor:
        return self.cursor().execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> PlainCursor:
        return self.cursor().executemany(sql, rows)

    def commit(self) -> None:
        if not self.raw.get_autocommit():
            self.raw.execute("COMMIT")

    def rollback(self) -> None:
        if not self.raw.get_autocommit():
            self.raw.execute("ROLLBACK")

    def close(self) -> None:
        self.raw.close()


#: What the runs are timed by (``--clock``): wall time, or this process's CPU time.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_timer = CLOCKS["wall"]


def on_tmpfs(population: float, transactions: int) -> tuple[float, str]:
    folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="ssdlab-tpcc-", dir=folder) as tmp:
        conn = PlainConnection(os.path.join(tmp, "tpcc.db"))
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        wl = oltp.load("tpcc", conn, seed=1, warehouses=1, population=population)
        started = _timer()
        oltp.run(wl, conn, clock=time.perf_counter_ns, seed=2, transactions=transactions)
        wall = _timer() - started
        digest = oltp.content_digest(conn, TABLES)
        conn.close()
    return wall, digest


def on_device(
    population: float, transactions: int, backend: str = "block"
) -> tuple[float, str, dict]:
    if backend == "native":
        # NoFTL: the noftl preset's flash on 4 dies, driven by the store's host FTL.
        dev = ssdlab.Device("noftl", store_data=True, seed=1, overrides=NATIVE_OVERRIDES)
        conn = ssdlab.sqlite.connect(dev, "tpcc.db", hints=False, cpu="zero", backend="native")
    else:
        dev = ssdlab.Device("seassd", store_data=True, seed=1, overrides=DEVICE_OVERRIDES)
        conn = ssdlab.sqlite.connect(dev, "tpcc.db", hints=True, cpu="zero")
    wl = oltp.load("tpcc", conn, seed=1, warehouses=1, population=population)
    before = conn.stats()["connection"]
    started = _timer()
    oltp.run(wl, conn, clock=conn.clock_ns, seed=2, transactions=transactions)
    wall = _timer() - started
    after = conn.stats()["connection"]
    io = {k: after[k] - before[k] for k in ("io_calls", "vfs_ns", "device_ns")}
    digest = oltp.content_digest(conn, TABLES)
    conn.close()
    return wall, digest, io


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", type=float, default=0.1)
    parser.add_argument("--transactions", type=int, default=5_000)
    parser.add_argument(
        "--rounds", type=int, default=3,
        help="alternate the two runs this many times and report the median ratio (a shared "
        "machine slows one run now and then; the pair of one round ran under the same load)",
    )  # fmt: skip
    parser.add_argument(
        "--backend",
        choices=("block", "native"),
        default="block",
        help="block: the seassd preset's FTL (default); native: the host FTL on native flash",
    )
    parser.add_argument(
        "--clock", choices=tuple(CLOCKS), default="wall",
        help="time the runs by wall time (default) or by this process's CPU time, which a "
        "machine loaded by others disturbs far less",
    )  # fmt: skip
    args = parser.parse_args(argv)
    global _timer
    _timer = CLOCKS[args.clock]
    rounds = []
    for _ in range(max(1, args.rounds)):
        base_s, base_digest = on_tmpfs(args.population, args.transactions)
        dev_s, dev_digest, io = on_device(args.population, args.transactions, args.backend)
        if base_digest != dev_digest:
            raise SystemExit("the two databases differ after the same transactions")
        rounds.append((dev_s / base_s, base_s, dev_s, io))
    rounds.sort(key=lambda r: r[0])
    ratio, base_s, dev_s, io = rounds[len(rounds) // 2]
    calls = max(io["io_calls"], 1)
    result = {
        "transactions": args.transactions,
        "clock": args.clock,
        "tmpfs_s": base_s,
        "device_s": dev_s,
        "ratio": ratio,
        "ratios": [r[0] for r in rounds],
        "tmpfs_tps_wall": args.transactions / base_s,
        "device_tps_wall": args.transactions / dev_s,
        "io_calls": io["io_calls"],
        "vfs_us_per_io": io["vfs_ns"] / calls / 1e3,
        "device_us_per_io": io["device_ns"] / calls / 1e3,
    }
    print(
        f"TPC-C, 1 warehouse at population {args.population}, {args.transactions} transactions,"
        f" median of {len(rounds)} alternating rounds, {args.clock} time\n"
        f"  SQLite on tmpfs        {base_s:7.2f} s  "
        f"{result['tmpfs_tps_wall']:8.0f} tx/{args.clock} s\n"
        f"  ssdlab.sqlite ({args.backend:6}) {dev_s:7.2f} s  "
        f"{result['device_tps_wall']:8.0f} tx/{args.clock} s"
        f"  ratio {ratio:.2f}x (target <= 1.5x; rounds "
        f"{', '.join(f'{r:.2f}' for r in result['ratios'])})\n"
        f"  coupling per I/O {result['vfs_us_per_io']:.2f} us (target < 10 us), device "
        f"simulation per I/O {result['device_us_per_io']:.2f} us, {io['io_calls']:,} I/O calls; "
        "same database contents"
    )
    return result


if __name__ == "__main__":
    main()
