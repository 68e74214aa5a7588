"""What a sweep worker does with one run: build the device, precondition it, run the workload.

:func:`execute` is the function Dask ships to workers. It takes and returns plain data (the task
of :meth:`ssdlab.spec.Run.task`; a dict with the run's fio-layout report or its error), imports
only the simulator's front end -- not pandas, pyarrow or Dask -- so that a worker starts quickly,
and never raises for a failing run: the error is part of the result, so that one bad point is
recorded in the store and does not stop the sweep.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
import time
import traceback
from collections.abc import Iterator
from typing import Any

from ssdlab.device import Device, RunResult
from ssdlab.oltp import WORKLOADS


def execute(task: dict[str, Any]) -> dict[str, Any]:
    """Simulate one run; returns ``{"key", "ok", "report" | "error", "wall_s", "worker"}``."""
    started = time.perf_counter()
    out: dict[str, Any] = {"key": task["key"], "worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        result = _simulate(task)
    except Exception as err:  # a failing run is data: its error goes to the store
        out.update(
            ok=False,
            error=f"{type(err).__name__}: {err}",
            traceback=traceback.format_exc(limit=8),
        )
    else:
        out.update(ok=True, report=result.to_dict())
    out["wall_s"] = time.perf_counter() - started
    return out


def _simulate(task: dict[str, Any]) -> RunResult | SectionRun:
    workload = task["workload"]
    kind = workload["kind"]
    if kind == "cache":
        return _cache(task, workload)
    device = Device.from_toml(
        task["config_text"],
        task["config_source"],
        seed=task["seed"],
        overrides=task["overrides"],
        store_data=kind in WORKLOADS,  # a database's pages must read back
    )
    native = task.get("backend", "block") == "native"
    if task["precondition_passes"] is not None and not native:
        device.precondition(task["precondition_passes"])
    if kind == "job":
        # The job file's text travels with the task; the core reads it from a file.
        with tempfile.TemporaryDirectory(prefix="ssdlab-job-") as tmp:
            path = os.path.join(tmp, os.path.basename(workload["path"]))
            with open(path, "w", encoding="utf-8") as out:
                out.write(workload["text"])
            return device.run_job(path, progress=False)
    if kind == "trace":
        return device.run_trace(
            workload["path"],
            workload["format"],
            time_scale=workload["time_scale"],
            queue_depth=workload["queue_depth"],
            closed_loop=workload["closed_loop"],
            progress=False,
        )
    if kind == "hotcold":
        from ssdlab.db import parse_hints

        hints = bool(parse_hints(task["hints"]))  # true/false, or "none"/"all"/a list
        return _hotcold(device, workload, seed=task["seed"], hints=hints)
    if kind == "melded_read":
        from ssdlab.db import parse_hints
        from ssdlab.melded import run_melded_read

        return run_melded_read(device, workload, hints=bool(parse_hints(task["hints"])))
    if kind == "hdfs":
        from ssdlab.db import parse_hints
        from ssdlab.melded import run_hdfs

        return run_hdfs(device, workload, seed=task["seed"], hints=bool(parse_hints(task["hints"])))
    if kind in WORKLOADS:
        return _database(
            device,
            workload,
            seed=task["seed"],
            hints=task["hints"],
            native=native,
            realtime=task.get("clock") == "realtime",
        )
    raise ValueError(f"unknown workload kind {kind!r}")


class SectionRun:
    """A workload's result in the shape the store takes: its own sections (``oltp`` and
    ``sqlite`` for a database run, see :mod:`ssdlab.db`; ``cache`` for an SSD cache run, see
    :mod:`ssdlab.flexecc`) beside ``ssd``, and no fio jobs."""

    def __init__(self, raw: dict[str, Any], seed: int, sections: tuple[str, ...]) -> None:
        self.raw = raw
        self.seed = seed
        self.sections = sections

    def to_dict(self) -> dict[str, Any]:
        ssd = self.raw["ssd"]
        return {
            "jobs": [],
            **{name: self.raw[name] for name in self.sections},
            "ssd": ssd,
            "seed": self.seed,
            "config_hash": ssd.get("config_hash"),
        }


def _cache(task: dict[str, Any], params: dict[str, Any]) -> SectionRun:
    """A cache workload over a fresh device (the cache fills it; no preconditioning)."""
    from ssdlab.flexecc import WORKLOAD_DEFAULTS, run_cache

    workload = {k: params[k] for k in WORKLOAD_DEFAULTS}
    report = run_cache(
        task["config_source"],
        workload,
        overrides=task["overrides"],
        seed=task["seed"],
        config_text=task["config_text"],
    )
    return SectionRun(report, task["seed"], ("cache",))


def _database(
    device: Device,
    params: dict[str, Any],
    *,
    seed: int,
    hints: Any,
    native: bool = False,
    realtime: bool = False,
) -> SectionRun:
    """A database workload (TPC-C, TPC-B, TPC-H, sysbench) on SQLite on the device (the
    runner has preconditioned it); in real time, the device paced to the wall clock."""
    from ssdlab.db import RUN_DEFAULTS, OltpSettings, parse_hints, run_oltp, workload_params

    # The task's workload entry is its name and kind, then the built-in's parameters: the
    # run's (RUN_DEFAULTS' keys) and the workload's own.
    own = workload_params(params["builtin"], params)
    settings = OltpSettings(
        workload=params["builtin"],
        params=own,
        hints=frozenset() if native else parse_hints(hints),
        precondition=False,
        backend="native" if native else "block",
        cpu="realtime" if realtime else "zero",
        **{k: params[k] for k in RUN_DEFAULTS},
    )
    if not realtime:
        return SectionRun(run_oltp(device, settings, seed=seed), seed, ("oltp", "sqlite"))
    with _realtime_turn():
        return SectionRun(run_oltp(device, settings, seed=seed), seed, ("oltp", "sqlite"))


@contextlib.contextmanager
def _realtime_turn() -> Iterator[None]:
    """One real-time run at a time on this machine: its figures are wall time, and two
    paced runs (each spinning on its waits) would share the cores and slow each other. Other
    runs of the sweep go on beside it."""
    path = os.path.join(tempfile.gettempdir(), "ssdlab-realtime.lock")
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _hotcold(device: Device, params: dict[str, Any], *, seed: int, hints: bool) -> RunResult:
    """The demo's hot/cold workload; with hints, each write carries its FDP placement id."""
    from ssdlab.demo import hot_cold_workload

    request_bytes = int(params["request_bytes"])
    pages = device.logical_bytes // request_bytes
    n_requests = int(params["write_passes"] * pages / params["write_fraction"])
    workload = hot_cold_workload(
        device.logical_bytes,
        n_requests,
        seed,
        request_bytes=request_bytes,
        write_fraction=params["write_fraction"],
        hot_space_fraction=params["hot_space_fraction"],
        hot_access_fraction=params["hot_access_fraction"],
    )
    return device.run_arrays(
        workload.ops,
        workload.offsets,
        workload.lengths,
        placement=workload.placement if hints else None,
        queue_depth=int(params["queue_depth"]),
        name="hotcold" + (" (hinted)" if hints else ""),
        progress=False,
    )
