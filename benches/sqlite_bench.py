"""SQLite benchmark: what running SQLite on a simulated device costs in wall time.

One workload (insert ``rows`` rows of 100 bytes in transactions of ``batch`` rows, then
``lookups`` point selects by key and one full scan) runs twice in one sitting: on APSW's default
VFS with the database in ``/dev/shm`` (WAL, ``synchronous=FULL``, exclusive locking, as
``ssdlab.sqlite`` sets), and through ``ssdlab.sqlite`` on a small TLC device with ``cpu="zero"``.
Both use the same SQLite (APSW's).

Reported:

1. Wall time of each, and the ratio.
2. The coupling's cost per I/O: the wall time spent in the VFS's I/O methods outside the device
   simulation, over the I/O calls (``vfs_ns_per_io``). Target: < 10 us. The device simulation's
   own time per request is shown beside it.

Run with ``make bench`` (or ``python benches/sqlite_bench.py [--rows N]``); the test suite runs
it tiny (``tests/test_sqlite_bench.py``).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import apsw

import ssdlab
import ssdlab.sqlite

#: A 64 MiB TLC device: large enough for the default run's database and WAL.
DEVICE_OVERRIDES = (
    "geometry.channels=2",
    "geometry.chips_per_channel=1",
    "geometry.dies_per_chip=2",
    "geometry.planes_per_die=1",
    "geometry.blocks_per_plane=96",
    "geometry.pages_per_block=48",
    "geometry.over_provisioning=0.25",
)


@dataclass
class Measured:
    wall_s: float
    io_calls: int = 0
    vfs_ns_per_io: float = 0.0
    device_ns_per_io: float = 0.0
    simulated_s: float = 0.0


def workload(execute: Callable[..., Any], commit: Callable[[], None], rows: int, batch: int,
             lookups: int) -> int:  # fmt: skip
    """The statements both runs make; returns a checksum of what the queries returned."""
    execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    commit()
    payload = "v" * 100
    for start in range(0, rows, batch):
        for k in range(start, min(start + batch, rows)):
            execute("INSERT INTO t VALUES (?, ?)", (k, payload))
        commit()
    rng = random.Random(1)
    checksum = 0
    for _ in range(lookups):
        for (v,) in execute("SELECT v FROM t WHERE k = ?", (rng.randrange(rows),)):
            checksum += len(v)
    for (count,) in execute("SELECT count(*) FROM t"):
        checksum += count
    return checksum


def measure_default(rows: int, batch: int, lookups: int) -> tuple[Measured, int]:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as directory:
        con = apsw.Connection(os.path.join(directory, "bench.db"))
        for pragma in ("locking_mode = EXCLUSIVE", "journal_mode = WAL", "synchronous = FULL"):
            list(con.execute(f"PRAGMA {pragma}"))
        start = time.perf_counter()

        def execute(sql: str, params: Any = ()) -> Any:
            if con.get_autocommit() and sql.startswith("INSERT"):
                con.execute("BEGIN")
            return con.execute(sql, params)

        def commit() -> None:
            if not con.get_autocommit():
                con.execute("COMMIT")

        checksum = workload(execute, commit, rows, batch, lookups)
        wall = time.perf_counter() - start
        con.close()
    return Measured(wall_s=wall), checksum


def measure_ssdlab(rows: int, batch: int, lookups: int) -> tuple[Measured, int]:
    device = ssdlab.Device("tlc", overrides=list(DEVICE_OVERRIDES), store_data=True)
    con = ssdlab.sqlite.connect(device, "bench.db", cpu="zero")
    start = time.perf_counter()
    checksum = workload(con.execute, con.commit, rows, batch, lookups)
    wall = time.perf_counter() - start
    stats = con.stats()["connection"]
    con.close()
    calls = max(stats["io_calls"], 1)
    return (
        Measured(
            wall_s=wall,
            io_calls=stats["io_calls"],
            vfs_ns_per_io=stats["vfs_ns_per_io"],
            device_ns_per_io=stats["device_ns"] / calls,
            simulated_s=device.now / 1e9,
        ),
        checksum,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--lookups", type=int, default=5_000)
    args = parser.parse_args()
    default, expected = measure_default(args.rows, args.batch, args.lookups)
    ours, checksum = measure_ssdlab(args.rows, args.batch, args.lookups)
    if checksum != expected:
        raise SystemExit(f"results differ: {checksum} on the device, {expected} on /dev/shm")
    print(f"workload: {args.rows} inserts in transactions of {args.batch}, {args.lookups} lookups")
    print(f"  default VFS on /dev/shm: {default.wall_s:8.3f} s wall")
    ratio = ours.wall_s / default.wall_s
    print(
        f"  ssdlab.sqlite:           {ours.wall_s:8.3f} s wall ({ratio:.1f}x), "
        f"{ours.simulated_s:.3f} s simulated"
    )
    print(
        f"  per I/O ({ours.io_calls} calls): VFS {ours.vfs_ns_per_io / 1000:.2f} us "
        f"(target < 10), device simulation {ours.device_ns_per_io / 1000:.2f} us"
    )


if __name__ == "__main__":
    main()
