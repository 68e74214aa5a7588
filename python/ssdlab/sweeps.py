"""Sweeps: the runs of a spec, executed on Dask distributed, recorded in a result store.

:func:`run_sweep` reads and checks the spec (every point, before any run), claims the output
directory, skips the runs the store already holds, and submits the rest to Dask: a
``LocalCluster`` with one worker process per core by default, or an existing scheduler by
address (``tcp://host:8786``), which is how the same spec runs on SLURM or Kubernetes through
dask-jobqueue or dask-kubernetes. Results are recorded as they arrive: each run's JSON at once,
its row in a Parquet part file as soon as no other result is waiting (at most every 0.1 s), so
a killed sweep loses its runs in flight and little else; the next invocation runs only what the
store lacks. A run that
fails (or whose worker dies too often) is recorded with its error and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ssdlab import _core
from ssdlab import spec as spec_mod
from ssdlab.device import show_progress
from ssdlab.errors import SsdlabError
from ssdlab.runner import execute
from ssdlab.spec import Run, Spec
from ssdlab.store import Store, flatten

#: Rows are written to Parquet when no other result is waiting, at most this often: a burst
#: of short runs becomes one part file, a finished long run is in the store at once.
FLUSH_EVERY_S = 0.1

#: Seconds to wait for a scheduler given by address before giving up.
CONNECT_TIMEOUT_S = 10.0


class SchedulerError(SsdlabError):
    """The Dask scheduler cannot be reached (or the local cluster cannot start)."""


@dataclass
class SweepOutcome:
    """What a sweep did: its results, and how many runs it ran, skipped and saw fail."""

    spec: Spec
    out_dir: Path
    results: pd.DataFrame
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    problems: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    #: Seconds to start (or reach) the cluster and to stop (or leave) it: once per sweep.
    cluster_start_s: float = 0.0
    cluster_stop_s: float = 0.0

    @property
    def total(self) -> int:
        return len(self.spec.runs)


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def sweep(spec: str | os.PathLike[str] | Spec, **options: Any) -> pd.DataFrame:
    """Run the sweep spec (a path, or a :class:`~ssdlab.spec.Spec`) and return its results:
    one row per run, with the axis values, ``status`` (``ok`` or ``failed``), ``error`` and the
    flattened statistics. The options are :func:`run_sweep`'s; ``out`` defaults to
    ``<spec name>-results`` in the working directory.
    """
    return run_sweep(spec, **options).results


def run_sweep(
    spec: str | os.PathLike[str] | Spec,
    *,
    out: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    dask: str | None = None,
    force: bool = False,
    scale: str | None = None,
    progress: bool | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    on_problem: Callable[[str], None] | None = None,
) -> SweepOutcome:
    """Run a sweep and return a :class:`SweepOutcome` (results, counts, problems, wall time).

    ``workers``: local worker processes (default: one per core, at most one per run);
    ``dask``: a scheduler's address instead of a local cluster; ``force``: discard what ``out``
    holds and run everything; ``scale``: the spec's ``[scales.NAME]``; ``progress``: draw the
    bar (default: when stderr is a terminal); ``on_problem``: called with each message about
    the store (an unreadable part file), logged by default.
    """
    started = time.perf_counter()
    if not isinstance(spec, Spec):
        spec = spec_mod.load(spec, scale=scale)
    if workers is not None and workers < 1:
        raise ValueError(f"workers: expected at least 1, got {workers}")
    out_dir = Path(out) if out is not None else Path(default_out(spec))
    store = Store(out_dir)
    store.open_for(spec, force=force)
    stored, problems = store.read(set_aside=True)
    for problem in problems:
        (on_problem or _log_problem)(problem)
    done = set(stored.loc[stored["status"] == "ok", "run_key"]) if len(stored) else set()
    todo = [run for run in spec.runs if run.key not in done]
    outcome = SweepOutcome(
        spec=spec,
        out_dir=out_dir,
        results=stored,
        skipped=len(spec.runs) - len(todo),
        problems=problems,
    )
    if todo:
        n_workers = min(workers or default_workers(), len(todo))
        connecting = time.perf_counter()
        with _client(dask, n_workers, connect_timeout_s) as client:
            outcome.cluster_start_s = time.perf_counter() - connecting
            with _bar(spec, len(todo), progress) as bar:
                try:
                    _execute_all(client, todo, store, spec, outcome, bar)
                finally:
                    store.flush()
            closing = time.perf_counter()
        outcome.cluster_stop_s = time.perf_counter() - closing
    store.compact()
    frame, late = store.read()
    outcome.problems += late
    known = {run.key for run in spec.runs}
    outcome.results = frame[frame["run_key"].isin(known)].reset_index(drop=True)
    outcome.wall_s = time.perf_counter() - started
    return outcome


def default_out(spec: Spec) -> str:
    return f"{spec.name}-{spec.scale}-results" if spec.scale else f"{spec.name}-results"


def _log_problem(message: str) -> None:
    logging.getLogger("ssdlab.sweep").warning("%s", message)


def _execute_all(
    client: Any, todo: list[Run], store: Store, spec: Spec, outcome: SweepOutcome, bar: Any
) -> None:
    from distributed import as_completed

    by_key = {run.key: run for run in todo}
    # One Dask key per run: resubmitting a run another client already has in flight on a
    # shared scheduler joins it instead of computing it twice.
    futures = [
        client.submit(execute, run.task(), key=f"ssdlab-run-{run.key}", pure=False) for run in todo
    ]
    # A second reference keeps each future until its result is recorded.
    pending = {f.key: f for f in futures}
    finished = as_completed(futures, loop=client.loop)
    for future in finished:
        run = by_key[future.key.removeprefix("ssdlab-run-")]
        if future.status == "finished":
            result = future.result()
        else:  # the worker died (often enough for Dask to give up), or the task was lost
            result = {
                "key": run.key,
                "ok": False,
                "error": _lost(future),
                "wall_s": None,
                "worker": None,
            }
        _record(store, spec, run, result)
        outcome.ran += 1
        outcome.failed += 0 if result["ok"] else 1
        bar(outcome.ran, outcome.failed)
        pending.pop(future.key, None)
        future.release()
        if not finished.has_ready() and store.flush_due(FLUSH_EVERY_S):
            store.flush()


def _lost(future: Any) -> str:
    """Why Dask has no result for a run: its error (``KilledWorker``, ...) or a cancellation
    (the scheduler went away, or another client cancelled the shared task)."""
    if future.status == "cancelled":
        return "CancelledError: the run was cancelled by the scheduler (did it stop?)"
    try:
        error = future.exception(timeout=5)
    except Exception as err:  # the error itself cannot be fetched any more
        error = err
    return f"{type(error).__name__}: {error}"


def _record(store: Store, spec: Spec, run: Run, result: dict[str, Any]) -> None:
    row: dict[str, Any] = {
        "run_key": run.key,
        "status": "ok" if result["ok"] else "failed",
        "error": None if result["ok"] else result["error"],
        "sweep": spec.name,
        "scale": spec.scale,
        "config": spec.config,
        "config_hash": run.config_hash,
        "workload": run.workload.name,
        "seed": run.seed,
        "hints": run.hints,
        "version": _core.__version__,
        "wall_s": result.get("wall_s"),
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        "worker": result.get("worker"),
    }
    for key, value in run.point.items():
        row.setdefault(key, value)
    sweep_meta = {
        "run_key": run.key,
        "spec": spec.name,
        "scale": spec.scale,
        "point": run.point,
        "overrides": [f"{k}={v}" for k, v in run.overrides],
        "workload": run.workload.name,
        "wall_s": result.get("wall_s"),
        "worker": result.get("worker"),
    }
    if result["ok"]:
        report = result["report"]
        row.update(flatten(report))
        document = {**report, "sweep": sweep_meta}
    else:
        document = {
            "ssdlab version": _core.__version__,
            "seed": run.seed,
            "config_hash": run.config_hash,
            "error": result["error"],
            "traceback": result.get("traceback"),
            "sweep": sweep_meta,
        }
    store.add(row, document)


@contextlib.contextmanager
def _client(address: str | None, n_workers: int, timeout_s: float) -> Iterator[Any]:
    """A Dask client: of a new local cluster of ``n_workers`` processes, or of ``address``."""
    import dask
    from distributed import Client, LocalCluster

    _quiet_dask()
    # Runs take seconds or minutes: Dask's work stealing and its warnings about long tasks
    # only add noise.
    settings = {
        "distributed.admin.tick.limit": "1h",
        "distributed.comm.timeouts.connect": f"{timeout_s}s",
        # Workers inherit this: their start, stop and cancel messages are not the user's news.
        "logging.distributed": "error",
    }
    with dask.config.set(settings):
        if address is not None:
            try:
                client = Client(address, timeout=timeout_s, set_as_default=False)
            except (OSError, TimeoutError) as err:
                raise SchedulerError(
                    f"cannot reach the Dask scheduler at {address} within {timeout_s:g} s: {err}"
                ) from None
            with client:
                yield client
            return
        try:
            cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                # The Nanny would restart a worker that dies; Dask then retries its run.
            )
        except Exception as err:
            raise SchedulerError(f"cannot start a local Dask cluster: {err}") from None
        with cluster, Client(cluster, set_as_default=False) as client:
            yield client


def _quiet_dask() -> None:
    """Dask logs a line per worker start and stop; only its errors matter here."""
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.ERROR)


@contextlib.contextmanager
def _bar(spec: Spec, total: int, progress: bool | None) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr (runs done / total, failures, ETA) when it is a terminal."""
    if not show_progress(progress):
        yield lambda done, failed: None
        return
    import rich.progress as rp
    from rich.console import Console

    bar = rp.Progress(
        rp.TextColumn("{task.description}"),
        rp.BarColumn(),
        rp.MofNCompleteColumn(),
        rp.TextColumn("[red]{task.fields[failed]}[/]"),
        rp.TimeElapsedColumn(),
        rp.TextColumn("ETA"),
        rp.TimeRemainingColumn(),
        console=Console(stderr=True),
    )
    with bar:
        task = bar.add_task(f"sweep {spec.name}", total=total, failed="")

        def update(done: int, failed: int) -> None:
            bar.update(task, completed=done, failed=f"{failed} failed" if failed else "")

        yield update
