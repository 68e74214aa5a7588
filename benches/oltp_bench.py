"""OLTP benchmark: what the SQL workloads cost in Python on the stdlib ``sqlite3``, on tmpfs.

TPC-C (1 warehouse at ``--population``, 0.1 by default) and sysbench ``oltp_read_write``
(``--tables`` x ``--table-size``, 4 x 10,000 by default) are each loaded into a fresh WAL-mode
file in a tmpfs directory (``/dev/shm`` when it exists), then run for ``--transactions`` after
a warm-up, with ``time.perf_counter_ns`` as the clock. It prints the load time, the file size,
and transactions per wall second: the ceiling the workloads reach when storage costs nothing,
against which a run on the simulated device is read. TPC-C's consistency conditions are
checked after its run.

Run with ``make bench`` (or ``python benches/oltp_bench.py [--json]``); the test suite runs it
tiny (``tests/test_oltp.py::test_oltp_bench_tiny``).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ssdlab import oltp
from ssdlab.oltp import tpcc


@dataclass(frozen=True)
class Measurement:
    workload: str
    params: dict[str, object]
    load_s: float
    file_bytes: int
    transactions: int
    wall_s: float

    @property
    def transactions_per_wall_s(self) -> float:
        return self.transactions / self.wall_s


def measure(
    directory: Path, name: str, params: dict[str, object], *, transactions: int, warmup: int
) -> Measurement:
    path = directory / f"{name}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        start = time.perf_counter()
        workload = oltp.load(name, conn, seed=1, **params)
        load_s = time.perf_counter() - start
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        file_bytes = path.stat().st_size
        result = oltp.run(
            workload,
            conn,
            clock=time.perf_counter_ns,
            seed=2,
            transactions=transactions,
            warmup_transactions=warmup,
        )
        if name == "tpcc" and (violations := tpcc.check_consistency(conn)):
            raise AssertionError(f"TPC-C is inconsistent after the run: {violations}")
    finally:
        conn.close()
    return Measurement(
        name, workload.params(), load_s, file_bytes, transactions, result.wall_time_ns / 1e9
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", type=float, default=0.1)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=10_000)
    parser.add_argument("--transactions", type=int, default=5_000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=None, help="tmpfs directory (/dev/shm)")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    args = parser.parse_args(argv)
    base = args.dir or (Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    with tempfile.TemporaryDirectory(prefix="oltp-bench-", dir=base) as directory:
        measured = [
            measure(
                Path(directory),
                "tpcc",
                {"warehouses": 1, "population": args.population},
                transactions=args.transactions,
                warmup=args.warmup,
            ),
            measure(
                Path(directory),
                "sysbench",
                {"tables": args.tables, "table_size": args.table_size},
                transactions=args.transactions,
                warmup=args.warmup,
            ),
        ]
    if args.json:
        rows = [
            asdict(m) | {"transactions_per_wall_s": m.transactions_per_wall_s} for m in measured
        ]
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0
    for m in measured:
        print(
            f"{m.workload:8} {m.params}: load {m.load_s:.1f} s, {m.file_bytes / 1e6:.1f} MB, "
            f"{m.transactions_per_wall_s:,.0f} transactions per wall second"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
