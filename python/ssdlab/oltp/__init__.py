"""Database workloads written in SQL: TPC-C, TPC-B (pgbench), TPC-H queries 1/6/12/14 and
sysbench's ``oltp_read_write``, and their driver.

The workloads run on any PEP 249 connection with the qmark paramstyle (the stdlib ``sqlite3``
module, or ``ssdlab.sqlite.connect`` whose files live on a simulated SSD) and are measured in
the clock they are given, so that with the device's clock latencies and transactions per
second are simulated time::

    from ssdlab import oltp

    wl = oltp.load("tpcc", conn, seed=1, warehouses=1, population=0.1)
    result = oltp.run(wl, conn, clock=device_clock_ns, seed=2, transactions=10_000)
    print(result.transactions_per_s, result.types["new_order"].latency_ns["p99"])
    assert not oltp.tpcc.check_consistency(conn)

The same seeds give the same SQL in the same order and the same database contents
(:func:`content_digest`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from ssdlab.oltp import driver, sysbench, tpcb, tpcc, tpch
from ssdlab.oltp.driver import OltpResult, TypeResult, Workload, load, run
from ssdlab.oltp.sysbench import Sysbench
from ssdlab.oltp.tpcb import Tpcb
from ssdlab.oltp.tpcc import Tpcc
from ssdlab.oltp.tpch import Tpch

#: The registered workloads by name; each constructor checks its parameters.
WORKLOADS: dict[str, Callable[..., Workload]] = {
    "tpcc": Tpcc,
    "sysbench": Sysbench,
    "tpcb": Tpcb,
    "tpch": Tpch,
}

#: The parameter each workload's ``scale`` stands for.
SCALE_PARAMETER = {
    "tpcc": "warehouses",
    "sysbench": "table_size",
    "tpcb": "branches",
    "tpch": "scale_factor",
}

__all__ = [
    "SCALE_PARAMETER",
    "WORKLOADS",
    "OltpResult",
    "Sysbench",
    "Tpcb",
    "Tpcc",
    "Tpch",
    "TypeResult",
    "Workload",
    "content_digest",
    "driver",
    "load",
    "make_workload",
    "run",
    "sysbench",
    "tpcb",
    "tpcc",
    "tpch",
]


def make_workload(name: str, **params: Any) -> Workload:
    """The workload registered as ``name`` with ``params``; ``ValueError`` names a bad option.

    TPC-C takes ``warehouses`` (alias ``scale``) and ``population``; sysbench takes
    ``tables``, ``table_size`` (alias ``scale``), ``range_size`` and ``rand_type``; TPC-B
    ``branches`` (alias ``scale``, pgbench's) and ``population``; TPC-H ``scale_factor``
    (alias ``scale``) and ``queries``."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}: choose one of {sorted(WORKLOADS)}")
    if "scale" in params:
        alias = SCALE_PARAMETER[name]
        if alias in params:
            raise ValueError(f"{name}: give scale or {alias}, not both")
        params[alias] = params.pop("scale")
    try:
        return WORKLOADS[name](**params)
    except TypeError as error:
        raise ValueError(f"{name}: unknown option in {sorted(params)} ({error})") from None


def content_digest(conn: Any, tables: tuple[str, ...] | list[str]) -> str:
    """SHA-256 over the rows of ``tables``, each read in the order of all its columns."""
    digest = hashlib.sha256()
    cur = conn.cursor()
    for table in tables:
        cur.execute(f"SELECT * FROM {table} LIMIT 0")
        order = ", ".join(str(i) for i in range(1, len(cur.description) + 1))
        digest.update(table.encode())
        for row in cur.execute(f"SELECT * FROM {table} ORDER BY {order}"):
            digest.update(repr(row).encode())
    return digest.hexdigest()
