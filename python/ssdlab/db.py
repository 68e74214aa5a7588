"""OLTP on a simulated SSD: the built-in workloads on SQLite whose files live on the device.

:func:`run_oltp` is what ``ssdlab db run``, a sweep's database workloads (``tpcc``,
``tpcb``, ``tpch``, ``sysbench``) and
``ssdlab reproduce seassd`` call. One run, in order:

1. the device is preconditioned if asked (filled, then overwritten at random until GC is in
   steady state: the database then shares a full drive with cold data, as on a real server);
2. the workload's database is loaded through :mod:`ssdlab.sqlite` (so its files are laid out on
   the device as SQLite writes them) and the connection closed, which checkpoints the WAL;
3. it is reopened with the run's memory settings -- SQLite's page cache as a fraction of the
   loaded database, the WAL limit as a fraction of the cache (the SEA-SSD paper's redo log is
   1/64 of its buffer pool) -- which sends the settings hint when hints are on;
4. ``warmup_transactions`` run unmeasured, the device's measurements are reset, and
   ``transactions`` run, timed by the device's clock (simulated time, with the host's CPU time
   between I/Os added by the ``cpu`` model);
5. ``PRAGMA integrity_check`` (and TPC-C's or TPC-B's consistency conditions) must pass, or the
   run fails.

The result is a dict: ``oltp`` (the driver's result, plus the memory settings, the share of
device traffic that was writes, in pages -- the paper's page-sized write requests --, host
bytes written over the device's capacity, energy per transaction), ``ssd`` (the device's
statistics) and ``sqlite`` (the coupling's counters).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ssdlab.sqlite import BACKENDS, HINT_KINDS, parse_hints
from ssdlab.sqlite.store import CPU_MODELS

__all__ = [
    "BACKENDS",
    "HINT_KINDS",
    "RUN_DEFAULTS",
    "OltpSettings",
    "parse_hints",
    "render",
    "run_oltp",
]

#: What a database run takes besides its workload's own parameters, with the defaults; the
#: sweep's database built-ins take the same. The paper's redo log is 1/64 of
#: its buffer pool.
RUN_DEFAULTS: dict[str, Any] = {
    "cache_fraction": 0.1,
    "wal_per_cache": 1 / 64,
    "transactions": 1000,
    "warmup_transactions": 0,
}

#: The smallest WAL limit a run uses: a few frames, whatever the cache.
MIN_WAL_LIMIT_BYTES = 64 << 10


def hints_label(kinds: frozenset[str]) -> str:
    if kinds == frozenset(HINT_KINDS):
        return "all"
    return "+".join(k for k in HINT_KINDS if k in kinds) or "none"


@dataclass(frozen=True)
class OltpSettings:
    """What one OLTP run does besides the device: workload, memory, length, hints."""

    workload: str = "tpcc"
    params: Mapping[str, Any] = field(default_factory=dict)
    cache_fraction: float = RUN_DEFAULTS["cache_fraction"]
    wal_per_cache: float = RUN_DEFAULTS["wal_per_cache"]
    transactions: int = RUN_DEFAULTS["transactions"]
    warmup_transactions: int = RUN_DEFAULTS["warmup_transactions"]
    hints: frozenset[str] = frozenset(HINT_KINDS)
    cpu: str = "zero"
    cpu_factor: float = 1.0
    page_size: int = 4096
    precondition: bool = True
    load_seed: int = 1
    #: "block": the device's FTL behind its block interface; "native": NoFTL, the store's host
    #: FTL on the device's native flash (no preconditioning or hints: the flash is the host's).
    backend: str = "block"

    def __post_init__(self) -> None:
        from ssdlab import oltp

        oltp.make_workload(self.workload, **dict(self.params))  # names a bad option
        if not 0 < self.cache_fraction <= 4:
            raise ValueError(
                f"cache_fraction: expected a number in (0, 4], got {self.cache_fraction!r}"
            )
        if not 0 < self.wal_per_cache <= 1:
            raise ValueError(
                f"wal_per_cache: expected a number in (0, 1], got {self.wal_per_cache!r}"
            )
        for name in ("transactions", "warmup_transactions"):
            value = getattr(self, name)
            low = 1 if name == "transactions" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: expected {' or '.join(BACKENDS)}, got {self.backend!r}")
        if self.cpu not in CPU_MODELS:
            raise ValueError(f"cpu: expected one of {', '.join(CPU_MODELS)}, got {self.cpu!r}")


def workload_params(builtin: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep built-in's parameters (its own and the run's, see :data:`RUN_DEFAULTS`) as
    the workload's constructor takes them; ``ValueError`` names a bad one. TPC-H's ``query``
    (one query per run, 0 for all four) becomes ``queries``."""
    from ssdlab import oltp

    labels = ("name", "kind", "builtin")
    own = {k: v for k, v in params.items() if k not in RUN_DEFAULTS and k not in labels}
    if "query" in own:
        query = own.pop("query")
        if query:
            own["queries"] = (query,)
    oltp.make_workload(builtin, **dict(own))
    return own


def database_bytes(connection: Any) -> int:
    (pages,) = connection.execute("PRAGMA page_count").fetchone()
    (size,) = connection.execute("PRAGMA page_size").fetchone()
    return int(pages) * int(size)


def run_oltp(device: Any, settings: OltpSettings, *, seed: int = 0) -> dict[str, Any]:
    """Run ``settings`` on ``device`` (an :class:`ssdlab.Device` with ``store_data=True``)
    and return ``{"oltp", "ssd", "sqlite"}``; see the module's description."""
    from ssdlab import oltp, sqlite
    from ssdlab.oltp import tpcb, tpcc

    started = time.perf_counter()
    native = settings.backend == "native"
    hints: Any = False if native else settings.hints
    if settings.precondition and not native:
        device.precondition()
    name = f"{settings.workload}.db"
    loader = sqlite.connect(
        device,
        name,
        hints=hints,
        page_size=settings.page_size,
        cpu="zero",
        backend=settings.backend,
    )
    try:
        workload = oltp.load(settings.workload, loader, seed=settings.load_seed, **settings.params)
        db_bytes = database_bytes(loader)
    finally:
        loader.close()
    cache_bytes = max(int(db_bytes * settings.cache_fraction), 64 * settings.page_size)
    if cache_bytes > device.logical_bytes:
        raise ValueError(
            f"cache_fraction: {settings.cache_fraction:g} of the {db_bytes:,}-byte database is "
            f"a {cache_bytes:,}-byte page cache, larger than the device "
            f"({device.logical_bytes:,} bytes)"
        )
    wal_bytes = max(int(cache_bytes * settings.wal_per_cache), MIN_WAL_LIMIT_BYTES)
    load_s = time.perf_counter() - started
    con = sqlite.connect(
        device,
        name,
        hints=hints,
        backend=settings.backend,
        cache_bytes=cache_bytes,
        wal_limit_bytes=wal_bytes,
        cpu=settings.cpu,
        cpu_factor=settings.cpu_factor,
    )
    try:
        if settings.warmup_transactions:
            oltp.run(
                workload,
                con,
                clock=con.clock_ns,
                seed=seed + 1,
                transactions=settings.warmup_transactions,
            )
        before = con.stats()["connection"]
        device.reset_measurements()
        host_before = con.stats().get("host_ftl")
        clock_before = con.clock_ns()
        result = oltp.run(
            workload, con, clock=con.clock_ns, seed=seed, transactions=settings.transactions
        )
        con.leave_realtime()  # the checks below are not part of the measurement
        after = con.stats()
        ssd = (
            _native_stats(device, after, host_before, con.clock_ns() - clock_before)
            if native
            else device.stats()
        )
        problems = [row[0] for row in con.execute("PRAGMA integrity_check").fetchall()]
        if problems != ["ok"]:
            raise RuntimeError(f"{name}: integrity_check failed: {problems[:5]}")
        checks = {"tpcc": tpcc.check_consistency, "tpcb": tpcb.check_consistency}
        if settings.workload in checks:
            violations = checks[settings.workload](con)
            if violations:
                raise RuntimeError(
                    f"{name}: {settings.workload} consistency violated: {violations[:3]}"
                )
    finally:
        con.close()
    io = after["connection"]
    reads = io["reads"] - before["reads"]
    writes = io["writes"] - before["writes"]
    # The paper counts page-sized requests (InnoDB's 16 KiB pages); the coupling gathers a
    # commit's WAL frames into one request, so the share is taken in bytes, i.e. in pages.
    read_bytes = io["read_bytes"] - before["read_bytes"]
    write_bytes = io["write_bytes"] - before["write_bytes"]
    out = result.to_dict()
    committed = max(result.committed, 1)
    main_latency = _main_latency(result)
    out.update(
        backend=settings.backend,
        hints=hints_label(frozenset() if native else settings.hints),
        database_bytes=db_bytes,
        cache_bytes=cache_bytes,
        wal_limit_bytes=wal_bytes,
        device_reads=reads,
        device_writes=writes,
        device_read_bytes=read_bytes,
        device_write_bytes=write_bytes,
        write_request_share=write_bytes / max(read_bytes + write_bytes, 1),
        host_writes_per_capacity=ssd["host_bytes_written"] / device.logical_bytes,
        energy_per_transaction_mj=1e3 * ssd["energy_j"] / committed,
        main_latency_ns=main_latency,
        main_p50_ms=main_latency.get("p50", 0.0) / 1e6,
        main_p99_ms=main_latency.get("p99", 0.0) / 1e6,
        # Per transaction type, the mean in seconds: TPC-H's query times.
        mean_s={kind: t.latency_ns.get("mean", 0.0) / 1e9 for kind, t in result.types.items()},
        load_wall_s=load_s,
        wall_s=time.perf_counter() - started,
        # Real time (cpu="realtime"): the simulated clock followed the wall clock, so this is
        # transactions_per_s measured by the wall clock instead.
        clock="realtime" if settings.cpu == "realtime" else "virtual",
        transactions_per_wall_s=result.committed * 1e9 / max(result.wall_time_ns, 1),
    )
    return {"oltp": out, "ssd": ssd, "sqlite": after}


def _native_stats(
    device: Any, after: dict[str, Any], before: dict[str, Any], elapsed_ns: int
) -> dict[str, Any]:
    """The ``ssd`` section of a run on native flash: the device's statistics of the measured
    transactions (flash operations, energy, die utilisation), with write amplification, host
    bytes written and GC moves taken from the host FTL, which is the FTL here."""
    now = after["host_ftl"]
    delta = {
        key: now[key] - before[key]
        for key in ("host_page_writes", "gc_page_copies", "erases", "gc_ns", "wear_moves")
    }
    writes = delta["host_page_writes"]
    ssd = dict(device.stats())
    ssd["backend"] = "native"
    ssd["waf"] = (writes + delta["gc_page_copies"]) / writes if writes else 0.0
    ssd["host_bytes_written"] = writes * device.page_size
    ssd["gc"] = dict(ssd.get("gc") or {}) | {
        "units_moved": delta["gc_page_copies"],
        "host_wait_ns": delta["gc_ns"],
        "wear_moves": delta["wear_moves"],
    }
    ssd["elapsed_ns"] = elapsed_ns
    ssd["host_ftl"] = now
    return ssd


def _main_latency(result: Any) -> dict[str, float]:
    """The latency summary of the workload's principal transaction (TPC-C's New-Order)."""
    kind = "new_order" if "new_order" in result.types else next(iter(result.types))
    return dict(result.types[kind].latency_ns)


def render(result: dict[str, Any], device_name: str, console: Any = None) -> None:
    """Print a run's result as the terminal tables of ``ssdlab db run``."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    o, ssd = result["oltp"], result["ssd"]
    native = o.get("backend") == "native"
    where = f"native flash of {device_name} (host FTL)" if native else device_name
    head = Table(title=f"{o['workload']} on {where}, hints: {o['hints']}", show_header=False)
    head.add_column(justify="left")
    head.add_column(justify="right")
    rows = [
        ("transactions committed / rolled back", f"{o['committed']:,} / {o['aborted']:,}"),
        ("transactions per simulated second", f"{o['transactions_per_s']:,.1f}"),
        *(
            [("transactions per wall second (real time)", f"{o['transactions_per_wall_s']:,.1f}")]
            if o.get("clock") == "realtime"
            else []
        ),
        ("database / page cache / WAL limit", _sizes(o)),
        ("device traffic that was writes (pages)", f"{100 * o['write_request_share']:.1f} %"),
        ("host writes / device capacity", f"{o['host_writes_per_capacity']:.2f}"),
        ("write amplification", f"{ssd['waf']:.3f}"),
        ("GC units moved", f"{ssd['gc']['units_moved']:,}"),
        ("erases", f"{ssd['flash']['erases']:,}"),
        ("energy per transaction", f"{o['energy_per_transaction_mj']:.3f} mJ"),
        (
            "die utilisation (mean / max)",
            f"{ssd['die_utilisation']:.3f} / {ssd['die_utilisation_max']:.3f}",
        ),
        ("wall time (load / total)", f"{o['load_wall_s']:.1f} s / {o['wall_s']:.1f} s"),
    ]
    sea = None if native else ssd.get("sea")
    if native:
        rows.append(("host FTL: GC wait / wear moves", _host_gc(ssd)))
    if isinstance(sea, dict):
        for key, value in _flat(sea):
            text = f"{value:,}" if type(value) is int else str(value).lower()  # bools: true
            rows.append((f"sea.{key}", text))
    for label, value in rows:
        head.add_row(label, value)
    console.print(head)
    lat = Table(title="latency per transaction type (simulated ms)")
    for column in ("type", "committed", "aborted", "mean", "p50", "p99", "max"):
        lat.add_column(column, justify="left" if column == "type" else "right")
    for kind, t in o["types"].items():
        ns = t["latency_ns"]
        lat.add_row(
            kind,
            f"{t['committed']:,}",
            f"{t['aborted']:,}",
            *(f"{ns[k] / 1e6:.2f}" if k in ns else "-" for k in ("mean", "p50", "p99", "max")),
        )
    console.print(lat)


def _host_gc(ssd: dict[str, Any]) -> str:
    gc = ssd.get("gc", {})
    return f"{gc.get('host_wait_ns', 0) / 1e6:,.1f} ms / {gc.get('wear_moves', 0):,}"


def _sizes(o: dict[str, Any]) -> str:
    return " / ".join(
        f"{o[k] / 2**20:.1f} MiB" for k in ("database_bytes", "cache_bytes", "wal_limit_bytes")
    )


def _flat(tree: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        elif not isinstance(value, list):
            yield f"{prefix}{key}", value
