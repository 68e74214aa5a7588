"""The result store of a sweep: a Parquet dataset with one row per run, and each run's JSON.

An output directory holds::

    sweep.toml            the spec as given (a copy, for the record)
    sweep.json            spec name, scale, digest (the directory belongs to that spec), axes
                          and [report] section
    results/*.parquet     one row per run: axis values, run key, status, error, wall time,
                          version, config hash, and the flattened statistics
    runs/<key>.json       each run's full result in fio's JSON layout (or its error)

Rows are appended as part files written atomically (temporary name, then rename), so a sweep
killed at any point leaves only whole files; finished runs are then skipped by the next
invocation. At the end of a sweep the parts are compacted into one file. A part that cannot be
read (truncated, corrupt) is reported by name, set aside as ``*.corrupt`` and its runs are
recomputed. Readers keep one row per run key (a finished row over a failed one, then the
latest).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ssdlab.errors import SsdlabError

if TYPE_CHECKING:
    from ssdlab.spec import Spec

META_FILE = "sweep.json"
SPEC_FILE = "sweep.toml"
RESULTS_DIR = "results"
RUNS_DIR = "runs"

#: Columns every row has, first in the table.
META_COLUMNS = (
    "run_key",
    "status",
    "error",
    "sweep",
    "scale",
    "config",
    "config_hash",
    "workload",
    "seed",
    "hints",
    "version",
    "wall_s",
    "finished_at",
    "worker",
    "invocation",
)

#: (fio percentile key, column suffix) of the latency percentiles kept per direction.
PERCENTILES = (
    ("50.000000", "p50_us"),
    ("90.000000", "p90_us"),
    ("99.000000", "p99_us"),
    ("99.900000", "p999_us"),
    ("99.990000", "p9999_us"),
)


class StoreError(SsdlabError):
    """An output directory that cannot be used (another spec's, unreadable)."""


def flatten(report: dict[str, Any]) -> dict[str, Any]:
    """The statistics of a run's fio-layout report as flat columns.

    Per direction (``read``, ``write``, ``trim``) over all jobs: ``iops`` and ``bw_bytes``
    (summed), ``ios``, and the completion latency mean, max and percentiles in µs of the job
    with the most I/Os in that direction; flushes (fio's ``sync``) likewise: ``sync.ios``,
    ``sync.lat_mean_us``, ``sync.lat_max_us``, ``sync.p50_us`` ... The ``ssd`` section's
    scalars keep their dotted paths (``waf``, ``gc.units_moved``, ``erases.mean``,
    ``energy_j``, ``die_utilisation``, ...).
    """
    row: dict[str, Any] = {}
    jobs = report.get("jobs", [])
    for direction in ("read", "write", "trim"):
        parts = [job.get(direction) or {} for job in jobs]
        row[f"{direction}.iops"] = float(sum(p.get("iops", 0.0) for p in parts))
        row[f"{direction}.bw_bytes"] = float(sum(p.get("bw_bytes", 0) for p in parts))
        _latency_columns(row, direction, parts, "clat")
    # Flushes (fio's ``sync``): over all jobs, the count and the latency of the job with most.
    _latency_columns(row, "sync", [job.get("sync") or {} for job in jobs], "lat")
    for key, value in _scalars(report.get("ssd", {}), ""):
        if key not in ("seed", "config_hash"):
            row[key] = value
    # An SSD cache workload's (ssdlab.flexecc): response times, hits, disk and scrubber.
    for key, value in _scalars(report.get("cache", {}), "cache."):
        if not key.startswith("cache.workload."):
            row[key] = value
    # A database workload's transactions (ssdlab.db): throughput, latency, memory settings.
    for key, value in _scalars(report.get("oltp", {}), "oltp."):
        if not key.startswith(("oltp.params.", "oltp.version")):
            row[key] = value
    return row


def _latency_columns(row: dict[str, Any], prefix: str, parts: list[Any], lat: str) -> None:
    """``{prefix}.ios`` summed over ``parts`` (one direction of each job), and the mean, max
    and percentiles in µs of ``{lat}_ns`` of the part with the most I/Os (None without any)."""
    row[f"{prefix}.ios"] = int(sum(p.get("total_ios", 0) for p in parts))
    main = max(parts, key=lambda p: p.get("total_ios", 0), default={})
    stats = main.get(f"{lat}_ns") or {}
    ios = main.get("total_ios", 0)
    row[f"{prefix}.{lat}_mean_us"] = _us(stats.get("mean")) if ios else None
    row[f"{prefix}.{lat}_max_us"] = _us(stats.get("max")) if ios else None
    percentiles = stats.get("percentile") or {}
    for key, suffix in PERCENTILES:
        row[f"{prefix}.{suffix}"] = _us(percentiles.get(key)) if ios else None


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1000.0


def _scalars(tree: dict[str, Any], prefix: str) -> Iterable[tuple[str, Any]]:
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _scalars(value, f"{name}.")
        elif isinstance(value, bool):
            yield name, value
        elif isinstance(value, (int, float)):
            yield name, float(value) if isinstance(value, float) else value
        elif isinstance(value, str):
            yield name, value
        # Lists (histograms, per-handle tables) stay in the run's JSON only.


class Store:
    """The store of one output directory, opened for one spec."""

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(out_dir)
        self.results = self.dir / RESULTS_DIR
        self.runs = self.dir / RUNS_DIR
        self.invocation = uuid.uuid4().hex[:12]
        self._pending: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()
        self._seq = 0

    # -- opening ---------------------------------------------------------------------------------

    def open_for(self, spec: Spec, *, force: bool) -> None:
        """Claim the directory for a spec: refuse another spec's results unless ``force``,
        which (for any spec) discards the results there."""
        digest = spec.digest
        meta_path = self.dir / META_FILE
        if meta_path.exists() and not force:
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise StoreError(
                    f"{meta_path}: unreadable ({err}); use --force to start the directory afresh"
                ) from None
            if meta.get("digest") != digest:
                raise StoreError(
                    f"{self.dir}: holds the results of another spec ({meta.get('name')!r}"
                    f"{', scale ' + meta['scale'] if meta.get('scale') else ''}); "
                    "choose another --out, or --force to discard them"
                )
        elif not meta_path.exists() and self.dir.exists() and any(self.dir.iterdir()) and not force:
            raise StoreError(
                f"{self.dir}: exists and is not a sweep's output directory; choose another --out, "
                "or --force to write into it"
            )
        if force:
            for sub in (self.results, self.runs):
                shutil.rmtree(sub, ignore_errors=True)
        self.results.mkdir(parents=True, exist_ok=True)
        self.runs.mkdir(parents=True, exist_ok=True)
        for stale in (*self.results.glob("*.tmp"), *self.runs.glob("*.tmp")):
            stale.unlink(missing_ok=True)  # left by a sweep killed while writing
        meta = {
            "format": 1,
            "name": spec.name,
            "description": spec.description,
            "scale": spec.scale,
            "digest": digest,
            # What the report needs, so that it does not depend on the spec's files.
            "axes": [{"key": a.key, "values": a.values} for a in spec.axes],
            "report": spec.report,
        }
        _write_atomic(meta_path, json.dumps(meta, indent=2) + "\n")
        _write_atomic(self.dir / SPEC_FILE, spec.text)

    # -- reading ---------------------------------------------------------------------------------

    def read(self, *, set_aside: bool = False) -> tuple[pd.DataFrame, list[str]]:
        """The rows stored (one per run key) and a message per part file that is unreadable;
        with ``set_aside`` those files are renamed ``*.corrupt`` so that their runs are redone."""
        frame, problems = read_parts(self.results, set_aside=set_aside)
        return frame, problems

    # -- writing ---------------------------------------------------------------------------------

    def add(self, row: dict[str, Any], document: dict[str, Any]) -> None:
        """Record one run: its JSON now, its row with the next flush."""
        row = {**row, "invocation": self.invocation}
        _write_atomic(self.runs / f"{row['run_key']}.json", json.dumps(document, indent=1) + "\n")
        self._pending.append(row)

    def flush_due(self, every_s: float) -> bool:
        return bool(self._pending) and time.monotonic() - self._last_flush >= every_s

    def flush(self) -> None:
        """Write the rows recorded since the last flush as one new part file."""
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        self._seq += 1
        name = f"part-{int(time.time() * 1000):013d}-{self.invocation}-{self._seq:05d}.parquet"
        _write_table(self.results / name, _frame(self._pending))
        self._pending = []

    def compact(self) -> None:
        """Rewrite every readable part as one file with one row per run, then drop the parts."""
        self.flush()
        parts = sorted(self.results.glob("*.parquet"))
        if len(parts) <= 1:
            return
        frame, _ = read_parts(self.results, set_aside=False)
        name = f"part-{int(time.time() * 1000):013d}-{self.invocation}-compact.parquet"
        _write_table(self.results / name, frame)
        for part in parts:  # a crash here leaves duplicates, which readers drop
            part.unlink(missing_ok=True)


def read_parts(results: Path, *, set_aside: bool) -> tuple[pd.DataFrame, list[str]]:
    frames = []
    problems = []
    for part in sorted(results.glob("*.parquet")):
        try:
            frames.append(pq.read_table(part).to_pandas())
        except (OSError, pa.ArrowException, ValueError) as err:
            problems.append(f"{part}: unreadable Parquet file ({err}); its runs are recomputed")
            if set_aside:
                part.rename(part.with_suffix(".parquet.corrupt"))
    if not frames:
        return pd.DataFrame(columns=list(META_COLUMNS)), problems
    with warnings.catch_warnings():
        # Parts without a failure have an all-null error column; concat's dtype choice for
        # those is what the warning is about, and the result is the same either way.
        warnings.simplefilter("ignore", FutureWarning)
        frame = pd.concat(frames, ignore_index=True, sort=False)
    return _one_row_per_run(frame), problems


def _one_row_per_run(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    ok_first = (frame["status"] == "ok").astype(int)
    # Parts concatenated with differing columns leave the frame in hundreds of blocks, and
    # adding a column to such a frame warns on the user's terminal: consolidate it first.
    frame = frame.copy()
    order = frame.assign(_ok=ok_first).sort_values(["_ok", "finished_at"], kind="stable")
    kept = order.drop_duplicates("run_key", keep="last").drop(columns="_ok")
    columns = [c for c in META_COLUMNS if c in kept] + [c for c in kept if c not in META_COLUMNS]
    return kept[columns].sort_values("finished_at", kind="stable").reset_index(drop=True)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    columns = [c for c in META_COLUMNS if c in frame] + [c for c in frame if c not in META_COLUMNS]
    return frame[columns]


def _write_table(path: Path, frame: pd.DataFrame) -> None:
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp)
    os.replace(tmp, path)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def load_results(out_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """The results of a ``sweep`` or ``reproduce`` output directory: one row per run.

    Unreadable part files are skipped with a warning naming them (the next sweep recomputes
    their runs).

    Raises:
        StoreError: ``out_dir`` is not a sweep's output directory.
    """
    out = Path(out_dir)
    if not (out / META_FILE).is_file():
        raise StoreError(f"{out}: not a sweep's output directory (no {META_FILE})")
    frame, problems = read_parts(out / RESULTS_DIR, set_aside=False)
    for problem in problems:
        warnings.warn(problem, RuntimeWarning, stacklevel=2)
    return frame


def read_meta(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(out_dir) / META_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{out_dir}: not a sweep's output directory (no {META_FILE})") from None
    except (OSError, ValueError) as err:
        raise StoreError(f"{path}: unreadable: {err}") from None
