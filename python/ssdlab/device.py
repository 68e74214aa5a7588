"""`Device`: a simulated SSD, as Python sees it.

A :class:`Device` holds a handle to the Rust device (``ssdlab._core.Device``) and adds what
Python is for: resolving configurations, validating hints, driving long runs in chunks with a
progress bar, and shaping results. It never loops over individual I/Os of a run; whole jobs,
traces and request arrays are handed to the core, which releases the GIL while it works.

Single requests (:meth:`Device.write`, :meth:`Device.read`, ...) run to completion at the current
simulated time and return a :class:`Completion`; runs (:meth:`Device.run_job`,
:meth:`Device.run_trace`, :meth:`Device.run_arrays`) return a :class:`RunResult` whose
:meth:`~RunResult.to_dict` is fio's JSON layout plus an ``ssd`` section.
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import numpy as np

from ssdlab import _core
from ssdlab.config import Overrides, parse_overrides, resolve
from ssdlab.errors import SsdlabError
from ssdlab.hints import Hint

if TYPE_CHECKING:
    from ssdlab.native import NativeFlash

#: Requests the core completes per :meth:`_core.Device.step` call: large enough that the Python
#: side costs nothing, small enough that the progress bar moves and Ctrl-C is seen promptly.
STEP_CHUNK = 65_536

#: Consecutive ``step`` calls that complete nothing before a run is declared stuck.
_MAX_IDLE_STEPS = 3

TRACE_FORMATS = ("msr", "spc", "blkparse", "disksim", "mqsim", "alibaba", "tencent", "fiu", "csv")

_OPCODES = (0, 1, 2)  # read, write, trim: the codes of start_arrays

#: The native side takes seeds, offsets and lengths as unsigned 64-bit integers.
_U64_MAX = 2**64 - 1

#: Queue depths the core accepts.
MAX_QUEUE_DEPTH = 65_536


@dataclass(frozen=True)
class Completion:
    """The completion of one request: simulated times in ns and, for reads, the data.

    ``uncorrectable`` is true when a page of a read failed ECC even after its read retries: the
    model reports the failure on the request, as a drive would return an error, rather than
    corrupting the data.
    """

    latency_ns: int
    submit_ns: int
    complete_ns: int
    data: bytes | None = None
    uncorrectable: bool = False


class JobResult(Mapping[str, Any]):
    """One job's results in fio's JSON layout (``jobname``, ``read``, ``write``, ``trim``, ...).

    It is a read-only mapping over that object, with shortcuts for the common parts.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self._raw = raw

    def __getitem__(self, key: str) -> Any:
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"JobResult(jobname={self.name!r})"

    @property
    def name(self) -> str:
        return str(self._raw.get("jobname", ""))

    @property
    def read(self) -> dict[str, Any]:
        return self._raw.get("read", {})

    @property
    def write(self) -> dict[str, Any]:
        return self._raw.get("write", {})

    @property
    def trim(self) -> dict[str, Any]:
        return self._raw.get("trim", {})

    @property
    def sync(self) -> dict[str, Any]:
        """Flushes, as fio reports syncs: ``total_ios`` and ``lat_ns`` (from issue)."""
        return self._raw.get("sync", {})

    def to_dict(self) -> dict[str, Any]:
        return self._raw


@dataclass(frozen=True)
class RunResult:
    """The results of a run: one :class:`JobResult` per job and the device's ``ssd`` statistics."""

    seed: int
    config_hash: str
    jobs: list[JobResult]
    ssd: dict[str, Any]
    version: str = field(default=_core.__version__)

    def to_dict(self) -> dict[str, Any]:
        """fio's JSON layout (``jobs[]`` with ``read``/``write``/``trim``) plus ``ssd``."""
        return {
            "ssdlab version": self.version,
            "seed": self.seed,
            "config_hash": self.config_hash,
            "jobs": [job.to_dict() for job in self.jobs],
            "ssd": self.ssd,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


class _Progress(Protocol):
    def __call__(self, completed: int, total: int | None) -> None: ...


class Device:
    """A simulated SSD.

    Args:
        config: a preset name (see :func:`ssdlab.presets`) or a path to a TOML file.
        seed: the run's seed; (config, workload, seed) determine every result bit for bit.
        overrides: configuration overrides, as ``{"key": value}`` or ``["key=value", ...]``.
        store_data: keep written data so that reads return it (costs memory per written page).
        time_series: keep the per-interval time series (:meth:`time_series`), at
            ``stats.interval_ns`` or 10 ms when the configuration sets none. It is bounded:
            when it reaches 4096 rows its interval doubles and neighbouring rows merge.

    A device may be shared between threads: calls take turns (a call made while another thread
    is stepping a run waits for that step), and a request submitted while a run is in progress
    is refused with :class:`DeviceError`.

    Raises:
        ConfigError: unknown preset, unreadable file, bad key or value (the message names it),
            or a geometry whose tables would not fit in the memory available.
        ValueError: a seed outside 0 .. 2**64-1.
    """

    def __init__(
        self,
        config: str | os.PathLike[str],
        *,
        seed: int = 0,
        overrides: Overrides = None,
        store_data: bool = False,
        time_series: bool = False,
    ) -> None:
        toml_text, source_name = resolve(config)
        self._build(toml_text, source_name, seed, overrides, store_data, time_series)

    @classmethod
    def from_toml(
        cls,
        toml_text: str,
        source_name: str,
        *,
        seed: int = 0,
        overrides: Overrides = None,
        store_data: bool = False,
        time_series: bool = False,
    ) -> Device:
        """A device from configuration text already read (``source_name`` prefixes its errors),
        e.g. on a sweep worker that need not see the files the configuration came from."""
        device = cls.__new__(cls)
        device._build(toml_text, source_name, seed, overrides, store_data, time_series)
        return device

    def _build(
        self,
        toml_text: str,
        source_name: str,
        seed: int,
        overrides: Overrides,
        store_data: bool,
        time_series: bool,
    ) -> None:
        _check_int("seed", seed, 0, _U64_MAX)
        self.seed = seed
        self.source_name = source_name
        self.store_data = store_data
        self._handle = _core.Device(
            toml_text,
            source_name,
            parse_overrides(overrides),
            seed,
            store_data,
            bool(time_series),
        )

    def __repr__(self) -> str:
        return (
            f"Device({self.source_name!r}, seed={self.seed}, "
            f"logical_bytes={self.logical_bytes}, now={self.now})"
        )

    # -- state -----------------------------------------------------------------------------------

    @property
    def now(self) -> int:
        """Current simulated time in ns."""
        return self._handle.now

    def advance_to(self, time_ns: int) -> None:
        """Move the simulated clock forward to ``time_ns`` (a host's think time between
        requests; background GC may run in the idle window). An earlier time is ignored."""
        _check_int("time_ns", time_ns, 0, _U64_MAX)
        self._handle.advance_to(time_ns)

    @property
    def logical_bytes(self) -> int:
        """Exported (logical) capacity in bytes."""
        return self._handle.logical_bytes

    @property
    def page_size(self) -> int:
        """Flash page size in bytes."""
        return self._handle.page_size

    @property
    def config_hash(self) -> str:
        """Hex hash of the canonical resolved configuration (defaults filled in)."""
        return self._handle.config_hash

    @property
    def config(self) -> dict[str, Any]:
        """The canonical resolved configuration."""
        return self._handle.config

    # -- single requests -------------------------------------------------------------------------

    def submit(
        self,
        op: str,
        offset: int,
        length: int,
        *,
        data: bytes | None = None,
        hint: Hint | dict[str, Any] | None = None,
        fua: bool = False,
    ) -> Completion:
        """Run one request (``read``, ``write``, ``trim`` or ``flush``) to completion.

        ``fua`` (a write only): Force Unit Access, as an ``O_DSYNC`` write sends it; the write
        is done once its data is on flash, as if a flush were issued with it.

        Raises:
            DeviceError: the device refuses it (e.g. past the end of the device, device full).
            ValueError: a bad op or hint.
        """
        if op not in ("read", "write", "trim", "flush"):
            raise ValueError(f"op: expected read, write, trim or flush, got {op!r}")
        _check_int("offset", offset, 0, _U64_MAX)
        _check_int("length", length, 0, _U64_MAX)
        checked = Hint.coerce(hint)
        if checked is not None and checked.read_group is not None:
            self._read_group_sent()
        raw = self._handle.submit(
            op, offset, length, data, checked.to_dict() if checked is not None else None, fua
        )
        return Completion(
            latency_ns=raw["latency_ns"],
            submit_ns=raw["submit_ns"],
            complete_ns=raw["complete_ns"],
            data=raw.get("data"),
            uncorrectable=bool(raw["uncorrectable"]),
        )

    def write(
        self,
        offset: int,
        length: int | None = None,
        *,
        data: bytes | None = None,
        hint: Hint | dict[str, Any] | None = None,
        fua: bool = False,
    ) -> Completion:
        """Write ``length`` bytes at ``offset`` (``length`` defaults to ``len(data)``); with
        ``fua`` it is done once its data is on flash."""
        if data is not None:
            data = bytes(data)
            if length is None:
                length = len(data)
            elif length != len(data):
                raise ValueError(f"length {length} differs from len(data) {len(data)}")
        elif length is None:
            raise ValueError("write needs a length or data")
        return self.submit("write", offset, length, data=data, hint=hint, fua=fua)

    def read(
        self, offset: int, length: int, *, hint: Hint | dict[str, Any] | None = None
    ) -> Completion:
        """Read ``length`` bytes at ``offset``; ``data`` is set when the device stores data."""
        return self.submit("read", offset, length, hint=hint)

    def trim(self, offset: int, length: int) -> Completion:
        """Deallocate a range: its pages are no longer valid and GC never copies them."""
        return self.submit("trim", offset, length)

    def flush(self) -> Completion:
        """Make every completed write durable (drains the write buffer, if any)."""
        return self.submit("flush", 0, 0)

    def peek(self, offset: int, length: int) -> bytes:
        """The ``length`` bytes at ``offset`` as a read would return them now (unwritten bytes
        are zeros), untimed: no flash work, no statistics, the clock stays where it is. For
        hosts that inspect the contents, such as a coupling that simulates a crash.

        Raises:
            DeviceError: the device stores no data (create it with ``store_data=True``), the
                range is empty or past the end of the device.
            ValueError: an argument that is not an integer in range.
        """
        _check_int("offset", offset, 0, _U64_MAX)
        _check_int("length", length, 0, _U64_MAX)
        return self._handle.peek(offset, length)

    # -- power loss ------------------------------------------------------------------------------

    def power_loss(self) -> None:
        """Simulate a power loss now: the mapping in RAM, DFTL's cached mapping table and the
        units staged in partly filled pages are lost (commands already issued to the flash
        complete; with ``controller.power_loss_protection`` the staged pages are programmed
        too). Until :meth:`recover`, requests raise :class:`DeviceError`."""
        self._handle.power_loss()

    def recover(self) -> dict[str, int]:
        """Power on after :meth:`power_loss`: rebuild the mapping from the OOB area of the
        programmed pages (DFTL: its translation pages, then the OOB of newer pages). Returns
        ``oob_pages_read``, ``full_pages_read``, ``lost_units``, ``mapped_units``,
        ``duration_ns`` (simulated) and ``ready_ns``; the clock moves to ``ready_ns``."""
        return self._handle.recover()

    # -- native flash (NoFTL) ---------------------------------------------------------------------

    def native(self) -> NativeFlash:
        """The flash's native interface (read page, program page with OOB, erase block; see
        :mod:`ssdlab.native`). The first call hands the flash to the caller, all blocks erased;
        from then on the block interface (reads, writes, runs) raises :class:`DeviceError`.

        Raises:
            DeviceError: the block interface has already written to this device, or a run is
                in progress.
        """
        from ssdlab.native import NativeFlash

        return NativeFlash(self._handle.native())

    # -- SEA-SSD hints ---------------------------------------------------------------------------

    def sea_settings(self, *, wal_bytes: int, cache_bytes: int) -> None:
        """SEA-SSD settings hint: the storage engine's WAL (redo log) and cache (buffer pool)
        sizes. They size the ``dyn`` segment: (WAL + cache x ``sea.dirty_fraction``) x
        ``sea.dyn_multiplier``, in blocks per plane; GC then collects inside ``dyn`` while it
        holds more than that, else inside ``stat``. Ignored (only counted) with
        ``placement.honor_hints = false``.

        Raises:
            DeviceError: hints are honoured but the dyn and stat classes share one placement
                handle (``placement.handles`` is 1).
            ValueError: an argument that is not an integer in range.
        """
        _check_int("wal_bytes", wal_bytes, 0, _U64_MAX)
        _check_int("cache_bytes", cache_bytes, 0, _U64_MAX)
        self._handle.sea_settings(int(wal_bytes), int(cache_bytes))

    def sea_predict(self, offset: int, length: int) -> None:
        """SEA-SSD prediction hint: the bytes ``offset .. offset + length`` will be written
        soon (a page entering the engine's flush list; in SQLite, a page in the WAL). GC of a
        ``stat`` block moves their valid data to ``dyn``. Ignored (only counted) with
        ``placement.honor_hints = false``.

        Raises:
            DeviceError: the range is empty or past the end of the device, or hints are
                honoured but the dyn and stat classes share one placement handle.
            ValueError: an argument that is not an integer in range.
        """
        _check_int("offset", offset, 0, _U64_MAX)
        _check_int("length", length, 0, _U64_MAX)
        self._handle.sea_predict(int(offset), int(length))

    def sea_predict_many(self, ranges: list[tuple[int, int]]) -> None:
        """SEA-SSD prediction hints for many ``(offset, length)`` ranges at once, in order, as
        :meth:`sea_predict` would send them one by one (one call into the core).

        Raises:
            DeviceError: as :meth:`sea_predict`, for the first range refused (the ranges
                before it were taken).
            ValueError: a range that is not two integers in range.
        """
        try:
            self._handle.sea_predict_many(ranges)
        except (TypeError, OverflowError):
            # Found again here, on the error path only: the ranges arrive a commit at a time.
            for offset, length in ranges:
                _check_int("offset", offset, 0, _U64_MAX)
                _check_int("length", length, 0, _U64_MAX)
            raise

    def precondition(self, random_overwrite_passes: float = 2.0) -> dict[str, Any]:
        """Fill the device sequentially, overwrite it randomly, then reset the statistics.

        Returns ``{"units_written": int, "waf_last_window": float}``: mapping units written
        and the write amplification of the last window.
        """
        if not _is_number(random_overwrite_passes) or not (0 <= random_overwrite_passes < math.inf):
            raise ValueError(
                "random_overwrite_passes: expected a finite number >= 0, "
                f"got {random_overwrite_passes!r}"
            )
        return self._handle.precondition(float(random_overwrite_passes))

    def reset_measurements(self) -> None:
        """Zero the clock and every statistic, keeping data, mapping and wear: what a host
        set up on the device (a database loaded, files laid out) stays, and measurements
        start from here."""
        self._handle.reset_measurements()

    # -- runs ------------------------------------------------------------------------------------

    def run_job(
        self,
        path: str | os.PathLike[str],
        *,
        progress: bool | None = None,
        request_log: TextIO | None = None,
    ) -> RunResult:
        """Run every job of a fio job file on this device, as fio runs them.

        Jobs run side by side in groups: a job with ``stonewall`` starts a new group once the
        earlier jobs are done, and ``numjobs`` clones a job. A job keeps ``iodepth`` requests
        outstanding (closed loop, paused by ``thinktime`` if set), or
        with ``rate``/``rate_iops`` issues them at that rate (open loop: ``slat`` is then the
        wait for a queue slot). Each job, clone or not, has its own result, unless
        ``group_reporting`` reports the jobs of a group (split by ``new_group``) as one.

        ``request_log``: a text file to which the per-request log rows are appended as the run
        goes (see :meth:`request_log_header`); the device then holds at most one step's rows.

        Raises:
            WorkloadError: the job file is bad or uses an unsupported option (names file:line).
        """
        self._check_request_log(request_log)
        path = os.fspath(path)
        names = _core.job_names(path)
        reports = _core.job_reports(path)
        jobs = []
        for group in _core.job_groups(path):
            self._handle.start_jobs(path, group)
            label = f"job {names[group[0]]}" + (f" + {len(group) - 1}" if len(group) > 1 else "")
            # The group's reports, numbered from 0 (group_reporting merges jobs of one).
            merged = [reports[i] - reports[group[0]] for i in group]
            jobs.extend(self._drive(label, progress, request_log, merged))
        return self._result(jobs)

    def run_trace(
        self,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        fmt: str,
        *,
        time_scale: float = 1.0,
        queue_depth: int = 32,
        closed_loop: bool = False,
        shared_clock: bool = False,
        progress: bool | None = None,
        request_log: TextIO | None = None,
    ) -> RunResult:
        """Replay a block trace (``fmt`` is one of :data:`TRACE_FORMATS`), or several side by side.

        Open loop (the default) issues each request at its timestamp times ``time_scale``; closed
        loop ignores timestamps and keeps ``queue_depth`` requests outstanding. Given several
        paths, each trace is a job of its own (an I/O flow with its own ``queue_depth``, as
        MQSim's flows), timed from its own first request, all on this device at once; the
        result has one job per trace. With ``shared_clock``, every trace is timed from the
        earliest first request among them instead, so traces recorded side by side (the volumes
        of one server) keep their offsets.

        Raises:
            WorkloadError: a line that does not parse (the message names file:line).
        """
        if fmt not in TRACE_FORMATS:
            raise ValueError(f"fmt: expected one of {', '.join(TRACE_FORMATS)}, got {fmt!r}")
        if not _is_number(time_scale) or not (0 < time_scale < math.inf):
            raise ValueError(f"time_scale: expected a finite number > 0, got {time_scale!r}")
        _check_int("queue_depth", queue_depth, 1, MAX_QUEUE_DEPTH)
        self._check_request_log(request_log)
        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        if not paths:
            raise ValueError("path: expected a trace file or a non-empty list of them")
        paths = [os.fspath(p) for p in paths]
        if shared_clock and closed_loop:
            raise ValueError(
                "shared_clock: a closed loop ignores timestamps; give one or the other"
            )
        self._handle.start_traces(
            paths, fmt, float(time_scale), queue_depth, closed_loop, bool(shared_clock)
        )
        label = f"trace {os.path.basename(paths[0])}" + (
            f" + {len(paths) - 1}" if len(paths) > 1 else ""
        )
        return self._result(self._drive(label, progress, request_log))

    def run_arrays(
        self,
        ops: Sequence[int] | Any,
        offsets: Sequence[int] | Any,
        lengths: Sequence[int] | Any,
        *,
        placement: Sequence[int] | Any | None = None,
        read_group: Sequence[int] | Any | None = None,
        queue_depth: int = 32,
        name: str = "arrays",
        progress: bool | None = None,
        request_log: TextIO | None = None,
    ) -> RunResult:
        """Run requests given as columns (lists or NumPy arrays), closed loop at ``queue_depth``.

        ``ops``: 0 read, 1 write, 2 trim; ``placement``: an FDP placement id per request, -1 none;
        ``read_group``: a melded-pages read group per request (writes of one group will be read
        together), -1 none.
        """
        columns = {"ops": ops, "offsets": offsets, "lengths": lengths}
        if placement is not None:
            columns["placement"] = placement
        if read_group is not None:
            columns["read_group"] = read_group
        arrays = {key: _int_column(key, value) for key, value in columns.items()}
        if "read_group" in arrays and (arrays["read_group"] >= 0).any():
            self._read_group_sent()
        sizes = {key: array.size for key, array in arrays.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"columns differ in length: {sizes}")
        bad_ops = arrays["ops"][~np.isin(arrays["ops"], _OPCODES)]
        if bad_ops.size:
            raise ValueError(f"ops: expected 0 (read), 1 (write) or 2 (trim), got {bad_ops[0]}")
        for key, low in (("offsets", 0), ("lengths", 0), ("placement", -1), ("read_group", -1)):
            if key in arrays and arrays[key].size and arrays[key].min() < low:
                raise ValueError(f"{key}: expected values >= {low}, got {arrays[key].min()}")
        _check_int("queue_depth", queue_depth, 1, MAX_QUEUE_DEPTH)
        self._check_request_log(request_log)
        lists = {key: array.tolist() for key, array in arrays.items()}
        self._handle.start_arrays(
            lists["ops"],
            lists["offsets"],
            lists["lengths"],
            lists.get("placement"),
            queue_depth,
            name,
            lists.get("read_group"),
        )
        return self._result(self._drive(name, progress, request_log))

    def _read_group_sent(self) -> None:
        """Read groups place data a wordline per group on TLC only; elsewhere they are
        ignored, which the user hears about once per device."""
        if self.config["cell"]["type"] != "tlc" and not getattr(self, "_read_group_warned", False):
            self._read_group_warned = True
            warnings.warn(
                f"read_group hints are ignored: melded pages need TLC cells, this device's are "
                f"{self.config['cell']['type']}",
                stacklevel=3,
            )

    def stats(self) -> dict[str, Any]:
        """The cumulative ``ssd`` statistics: WAF, GC, erases, energy, ECC, placement, time."""
        return self._handle.ssd_stats()

    def time_series(self) -> list[dict[str, Any]]:
        """Per-interval rows (for plots); empty unless the device was built with
        ``time_series=True`` (or ``stats.interval_ns`` set).

        Only intervals with completions or device work have a row; each row gives its
        ``start_ns`` and ``interval_ns`` (which doubles when the series reaches its row budget).
        """
        return self._handle.time_series()

    def request_log_csv(self) -> str:
        """The per-request log the device holds, as CSV text with its header (rows only with
        ``stats.request_log = true``, and not those already streamed to a ``request_log``)."""
        return self._handle.request_log_csv()

    @staticmethod
    def request_log_header() -> str:
        """The header line (with its newline) of the per-request log's CSV."""
        return _core.Device.request_log_header()

    # -- internals -------------------------------------------------------------------------------

    def _check_request_log(self, request_log: TextIO | None) -> None:
        if request_log is not None and not self.config["stats"]["request_log"]:
            raise ValueError(
                "request_log: the device keeps no request log; "
                "build it with overrides {'stats.request_log': True}"
            )

    def _drive(
        self,
        label: str,
        progress: bool | None,
        request_log: TextIO | None,
        reports: list[int] | None = None,
    ) -> list[JobResult]:
        """Step the started job (or jobs side by side) to the end, then collect the results."""
        with _progress_bar(label, progress) as update:
            idle = 0
            last = -1
            while True:
                done, completed, total = self._handle.step(STEP_CHUNK)
                if request_log is not None:
                    # Rows leave the device after every step: the log costs constant memory.
                    request_log.write(self._handle.drain_request_log_csv())
                update(completed, total)
                if done:
                    break
                idle = idle + 1 if completed == last else 0
                if idle >= _MAX_IDLE_STEPS:
                    raise SsdlabError(
                        f"{label}: the simulation stopped making progress after "
                        f"{completed} requests (at {self.now} ns)"
                    )
                last = completed
        return [JobResult(job) for job in self._handle.finish_jobs(reports or [])]

    def _result(self, jobs: list[JobResult]) -> RunResult:
        return RunResult(seed=self.seed, config_hash=self.config_hash, jobs=jobs, ssd=self.stats())


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    """Refuse a non-integer or out-of-range argument before the native side sees it (where
    it would be an ``OverflowError`` or ``TypeError`` naming no argument)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name}: expected an integer in {low} .. {high}, got {value}")


def _int_column(name: str, column: Any) -> np.ndarray:
    """A request column as a 1-D integer array (checked by dtype, not element by element)."""
    array = np.asarray(column)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name}: expected integers, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False)


def show_progress(progress: bool | None) -> bool:
    """Whether to draw a progress bar: as asked, or when unasked only if stderr is a terminal."""
    if progress is None:
        return sys.stderr.isatty()
    return progress


@contextmanager
def _progress_bar(label: str, progress: bool | None) -> Iterator[_Progress]:
    if not show_progress(progress):
        yield lambda completed, total: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        task = bar.add_task(label, total=None)

        def update(completed: int, total: int | None) -> None:
            bar.update(task, completed=completed, total=total)

        yield update
