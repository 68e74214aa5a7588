"""The OLTP driver: load a workload once, run it many times, measure in the clock it is given.

A workload is an object with a ``name``, its ``transaction_types``, ``params()``, ``load(conn,
seed)`` and ``session(conn, seed)``; the session picks the next transaction type
(``next_type()``) and executes it (``execute(kind) -> bool``, ``False`` for an intended
rollback). The driver times only ``execute``, with the clock it is given: a ``Callable[[], int]``
of nanoseconds, the simulated device's clock in an experiment, ``time.perf_counter_ns`` in
tests. Transactions per second are committed transactions over the clock's elapsed time after
the warm-up; ``wall_time_ns`` is always real time, so that the cost of a run is known too.

Workloads run on any PEP 249 connection with the qmark paramstyle. They start every
transaction with an explicit ``BEGIN`` and end it with ``conn.commit()`` or
``conn.rollback()``, so the connection must let ``BEGIN`` start a transaction: the stdlib
``sqlite3`` module does with ``isolation_level=None`` and in its default legacy mode (not with
``autocommit=False``, which opens transactions itself), and ``ssdlab.sqlite.connect`` must.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ssdlab import _core

#: Rows per ``executemany`` call while loading: large enough that the per-call cost vanishes,
#: small enough that a 100,000-row table is never held in memory whole.
LOAD_BATCH_ROWS = 10_000

#: The percentiles reported per transaction type, as the keys of ``latency_ns``.
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9))


class Session(Protocol):
    def next_type(self) -> str: ...

    def execute(self, kind: str) -> bool: ...


class SessionBase:
    """What every workload's session holds: its workload, the connection it runs on and one
    cursor over it (statements reuse the cursor, so none is created per transaction)."""

    def __init__(self, workload: Any, conn: Any) -> None:
        self.wl = workload
        self.conn = conn
        self.cur = conn.cursor()


class Workload(Protocol):
    name: str
    transaction_types: tuple[str, ...]

    def params(self) -> dict[str, Any]: ...

    def load(self, conn: Any, seed: int) -> None: ...

    def session(self, conn: Any, seed: int) -> Session: ...


@dataclass
class TypeResult:
    """One transaction type's counts and latency summary (ns; empty when none committed)."""

    committed: int = 0
    aborted: int = 0
    latency_ns: dict[str, float] = field(default_factory=dict)


@dataclass
class OltpResult:
    workload: str
    params: dict[str, Any]
    seed: int
    warmup_transactions: int
    committed: int
    aborted: int
    elapsed_ns: int
    wall_time_ns: int
    transactions_per_s: float
    types: dict[str, TypeResult]
    version: str = field(default=_core.__version__)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "params": dict(self.params),
            "seed": self.seed,
            "warmup_transactions": self.warmup_transactions,
            "committed": self.committed,
            "aborted": self.aborted,
            "elapsed_ns": self.elapsed_ns,
            "wall_time_ns": self.wall_time_ns,
            "transactions_per_s": self.transactions_per_s,
            "types": {
                kind: {
                    "committed": t.committed,
                    "aborted": t.aborted,
                    "latency_ns": dict(t.latency_ns),
                }
                for kind, t in self.types.items()
            },
            "version": self.version,
        }


def latency_summary(samples_ns: list[int]) -> dict[str, float]:
    """Exact percentiles (linear interpolation between order statistics), mean and max."""
    if not samples_ns:
        return {}
    values = np.asarray(samples_ns, dtype=np.int64)
    points = np.percentile(values, [q for _, q in PERCENTILES])
    summary = {name: float(v) for (name, _), v in zip(PERCENTILES, points, strict=True)}
    summary["mean"] = float(values.mean())
    summary["max"] = float(values.max())
    return summary


def transaction(conn: Any, cur: Any, body: Callable[[], bool]) -> bool:
    """Run ``body`` between ``BEGIN`` and ``commit()``, or ``rollback()`` when it returns
    ``False`` (an intended rollback) or raises (then the error propagates)."""
    cur.execute("BEGIN")
    try:
        committed = body()
    except BaseException:
        conn.rollback()
        raise
    # The body's last statement may still be stepping (a SELECT read with fetchone): finish
    # it, so that no statement holds the database when the connection checkpoints after the
    # COMMIT (SQLite refuses a checkpoint then: "database table is locked").
    while cur.fetchone() is not None:
        pass
    if committed:
        conn.commit()
    else:
        conn.rollback()
    return committed


def insert_batches(cur: Any, sql: str, rows: Iterable[tuple[Any, ...]]) -> None:
    """``executemany`` over ``rows`` in lists of ``LOAD_BATCH_ROWS`` (PEP 249 asks for a
    sequence, and a generator's rows would otherwise all be built first)."""
    it = iter(rows)
    while batch := list(itertools.islice(it, LOAD_BATCH_ROWS)):
        cur.executemany(sql, batch)


def check_int(option: str, value: int | None, *, minimum: int) -> None:
    """``ValueError`` naming ``option`` unless ``value`` is None or an integer >= ``minimum``."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{option} must be an integer >= {minimum}, got {value!r}")


def resolve(workload: str | Workload, params: Mapping[str, Any]) -> Workload:
    """A workload object from a registered name and its parameters, or the object itself."""
    if isinstance(workload, str):
        from ssdlab.oltp import make_workload

        return make_workload(workload, **params)
    if params:
        raise ValueError("workload parameters are given by name only with a workload name")
    return workload


def load(workload: str | Workload, conn: Any, *, seed: int = 0, **params: Any) -> Workload:
    """Create and populate the workload's tables; returns the workload object, ready to ``run``."""
    check_int("seed", seed, minimum=0)
    wl = resolve(workload, params)
    wl.load(conn, seed)
    return wl


def run(
    workload: str | Workload,
    conn: Any,
    *,
    clock: Callable[[], int],
    seed: int = 0,
    transactions: int | None = None,
    duration_ns: int | None = None,
    warmup_transactions: int = 0,
    **params: Any,
) -> OltpResult:
    """Run ``warmup_transactions`` unmeasured, then measure until ``transactions`` (committed
    or rolled back) have run or ``duration_ns`` of the clock has passed, whichever comes first;
    at least one of the two must be given. A transaction that raises ends the run with its
    error, after its rollback."""
    check_int("seed", seed, minimum=0)
    check_int("transactions", transactions, minimum=1)
    check_int("duration_ns", duration_ns, minimum=1)
    check_int("warmup_transactions", warmup_transactions, minimum=0)
    if transactions is None and duration_ns is None:
        raise ValueError("transactions or duration_ns must be given: a run needs a stop")
    wl = resolve(workload, params)
    session = wl.session(conn, seed)
    for _ in range(warmup_transactions):
        session.execute(session.next_type())

    samples: dict[str, list[int]] = {kind: [] for kind in wl.transaction_types}
    aborted = dict.fromkeys(wl.transaction_types, 0)
    done = 0
    wall_start = time.perf_counter_ns()
    start = clock()
    now = start
    while True:
        if transactions is not None and done >= transactions:
            break
        if duration_ns is not None and now - start >= duration_ns:
            break
        kind = session.next_type()
        t0 = clock()
        committed = session.execute(kind)
        now = clock()
        if committed:
            samples[kind].append(now - t0)
        else:
            aborted[kind] += 1
        done += 1
    elapsed_ns = now - start
    wall_time_ns = time.perf_counter_ns() - wall_start

    types = {
        kind: TypeResult(len(samples[kind]), aborted[kind], latency_summary(samples[kind]))
        for kind in wl.transaction_types
    }
    committed_total = sum(t.committed for t in types.values())
    return OltpResult(
        workload=wl.name,
        params=wl.params(),
        seed=seed,
        warmup_transactions=warmup_transactions,
        committed=committed_total,
        aborted=sum(aborted.values()),
        elapsed_ns=elapsed_ns,
        wall_time_ns=wall_time_ns,
        transactions_per_s=committed_total * 1e9 / elapsed_ns if elapsed_ns > 0 else 0.0,
        types=types,
    )
