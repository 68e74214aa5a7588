"""Sweep specs: the TOML file that names a grid of runs, read and checked before any run starts.

A spec names a base configuration (a preset or a TOML file) with fixed overrides, one or more
workloads (fio job files, block traces, the built-in ``hotcold`` workload of the demo, or the
database workloads ``tpcc``, ``tpcb``, ``tpch`` and ``sysbench`` of :mod:`ssdlab.db`), and
axes: any configuration key exactly as ``--set`` takes it, ``seed``, ``hints`` (on/off, or for a
database workload which SEA-SSD hints it sends: ``"classify+predict"``) and ``workload``. The
axes are expanded as a product, or zipped where the spec says so. Optional ``[scales.NAME]``
tables replace parts of the spec for a smaller or larger run of the same study, and
``[report]`` chooses what ``ssdlab report`` plots. ``examples/sweep.toml`` is a commented example.

Every point of the grid is validated by the core (the same parser and checks as ``--set``)
before anything runs, and every error names the spec file, the line and the key. Each run is
keyed by a hash of everything that determines its result: the configuration's canonical hash
after defaults, the workload's content, the seed, the hints, preconditioning and the version.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ssdlab import _core
from ssdlab.config import parse_overrides, resolve
from ssdlab.db import HINT_KINDS, RUN_DEFAULTS
from ssdlab.db import parse_hints as parse_hint_kinds
from ssdlab.device import TRACE_FORMATS
from ssdlab.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: Axes that are not configuration keys.
SEED, HINTS, WORKLOAD, BACKEND, CLOCK = "seed", "hints", "workload", "backend", "clock"
SPECIAL_AXES = (SEED, HINTS, WORKLOAD, BACKEND, CLOCK)
#: The ``backend`` axis: a database on the device's block interface (its FTL) or on its
#: native flash under the host's FTL (NoFTL). Only database workloads run natively.
BACKENDS = ("block", "native")
#: The ``clock`` axis: a database run in simulated time, or with the device paced to the wall
#: clock as a real-time emulator (``ssdlab.sqlite``'s ``cpu="realtime"``).
CLOCKS = ("virtual", "realtime")

#: The configuration key the ``hints`` axis sets: off gives every experiment its baseline.
HONOR_HINTS_KEY = "placement.honor_hints"

#: Built-in workloads and their parameters with defaults.
BUILTIN_WORKLOADS: dict[str, dict[str, Any]] = {
    "hotcold": {
        "write_passes": 3.0,
        "write_fraction": 0.7,
        "hot_space_fraction": 0.2,
        "hot_access_fraction": 0.8,
        "request_bytes": 4096,
        "queue_depth": 32,
    },
    # Melded pages (ssdlab.melded): write a region (with a read group when hints are on), then
    # read it whole in one request; the run's read latency is the time to serve it.
    "melded_read": {"request_bytes": 4096, "write_request_bytes": 1 << 20},
    # HDFS-style DataNode (ssdlab.melded): block files written with a read group each, read
    # whole by clients, optionally mixed with small random reads.
    "hdfs": {
        "blocks": 8,
        "block_bytes": 128 << 20,
        "writers": 4,
        "packet_bytes": 1 << 20,
        "clients": 4,
        "read_bytes": 4 << 20,
        "small_read_fraction": 0.0,
        "small_read_bytes": 4096,
    },
    # OLTP on SQLite on the device (ssdlab.db): memory settings relative to the loaded database.
    "tpcc": {"warehouses": 1, "population": 0.1, **RUN_DEFAULTS},
    "sysbench": {"tables": 1, "table_size": 10_000, **RUN_DEFAULTS},
    "tpcb": {"branches": 1, "population": 0.01, **RUN_DEFAULTS},
    # TPC-H: one query per run (0 = the four, round-robin), so a report can plot each.
    "tpch": {"scale_factor": 0.01, "query": 0, **RUN_DEFAULTS, "transactions": 4},
    # FlexECC's SSD cache over a disk (ssdlab.flexecc); the cache is the config's [cache] table.
    "cache": {
        "personality": "fileserver",
        "requests": 10_000,
        "interarrival_ns": 1_000_000,
        "working_set_bytes": 0,
    },
}

_DATABASE_BUILTINS = ("tpcc", "sysbench", "tpcb", "tpch")

#: Parameters that may be 0.
_MAY_BE_ZERO = ("warmup_transactions", "small_read_fraction", "query", "working_set_bytes")

_TOP_KEYS = {
    "name",
    "description",
    "config",
    "set",
    "precondition",
    "workloads",
    "axes",
    "zip",
    "report",
    "scales",
    "default_scale",
    "companions",
}
_REPORT_KEYS = {"x", "series", "metrics", "headline", "title"}
_TRACE_KEYS = {"trace", "format", "queue_depth", "time_scale", "closed_loop"}


class SpecError(ConfigError):
    """A sweep spec that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Workload:
    """One workload of a spec: ``kind`` is ``job``, ``trace`` or a built-in's name."""

    name: str
    kind: str
    params: dict[str, Any]
    #: SHA-256 of what determines the workload: file content (jobs, traces) and parameters.
    digest: str


@dataclass(frozen=True)
class Axis:
    key: str
    values: list[Any]
    line: int


@dataclass(frozen=True)
class Run:
    """One point of the grid, everything a worker needs to simulate it."""

    key: str
    #: Axis values of this point, by axis key (``seed``, ``hints``, ``workload`` and config keys).
    point: dict[str, Any]
    config_text: str
    config_source: str
    overrides: list[tuple[str, str]]
    config_hash: str
    workload: Workload
    seed: int
    #: On/off, or which hints a database workload sends ("classify+predict", ...).
    hints: bool | str
    precondition_passes: float | None
    #: "block" or "native" (a database on the host's FTL over the device's native flash).
    backend: str = "block"
    #: "virtual" or "realtime" (a database run with the device paced to the wall clock).
    clock: str = "virtual"

    def task(self) -> dict[str, Any]:
        """The plain-data form sent to a worker (no ssdlab objects, so any worker can load it)."""
        return {
            "key": self.key,
            "config_text": self.config_text,
            "config_source": self.config_source,
            "overrides": self.overrides,
            "workload": {"name": self.workload.name, "kind": self.workload.kind}
            | self.workload.params,
            "seed": self.seed,
            "hints": self.hints,
            "precondition_passes": self.precondition_passes,
            "backend": self.backend,
            "clock": self.clock,
        }


@dataclass(frozen=True)
class Spec:
    path: str
    name: str
    description: str
    scale: str | None
    config: str
    config_text: str
    config_source: str
    overrides: list[tuple[str, str]]
    precondition_passes: float | None
    workloads: dict[str, Workload]
    axes: list[Axis]
    zip_groups: list[list[str]]
    report: dict[str, Any]
    #: Hash of what the runs depend on (the report section and description excluded): an
    #: output directory belongs to one spec digest.
    digest: str
    text: str
    #: Studies that ``ssdlab reproduce`` runs with this one (e.g. an ablation on its own grid),
    #: each into a subdirectory of the output directory named after it.
    companions: list[str] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    @property
    def axis_keys(self) -> list[str]:
        return [axis.key for axis in self.axes]


# -- reading ---------------------------------------------------------------------------------------


def load(path: str | os.PathLike[str], *, scale: str | None = None) -> Spec:
    """Read, validate and expand the spec at ``path``; ``scale`` picks a ``[scales.NAME]``.

    Raises:
        SpecError: anything wrong in the spec, naming ``file:line`` and the key; configuration
            errors carry the core's message (with the valid keys for an unknown one).
    """
    path = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such sweep spec") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"{path}: cannot read the sweep spec: {err}") from None
    return parse(text, path, scale=scale, base_dir=Path(path).resolve().parent)


def parse(
    text: str,
    path: str = "<spec>",
    *,
    scale: str | None = None,
    base_dir: Path | None = None,
) -> Spec:
    """Like :func:`load`, for spec text; relative file names are taken from ``base_dir``."""
    base_dir = base_dir or Path.cwd()
    lines = _Lines(text, path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: not valid TOML: {err}") from None
    for key in raw:
        if key not in _TOP_KEYS:
            raise lines.error(
                (), key, f"unknown key {key!r}; the spec's keys are: {', '.join(sorted(_TOP_KEYS))}"
            )
    scales = raw.get("scales", {})
    if not isinstance(scales, dict):
        raise lines.error((), "scales", "expected tables [scales.NAME]")
    if scale is None:
        scale = raw.get("default_scale")
    merged = {k: v for k, v in raw.items() if k not in ("scales", "default_scale")}
    prefix: tuple[str, ...] = ()
    if scale is not None:
        if scale not in scales:
            names = ", ".join(scales) or "none"
            raise SpecError(f"{path}: no scale {scale!r} (this spec's scales: {names})")
        scaled = dict(scales[scale])
        # A scale's overrides come after the base's (the core applies them in order): a
        # scale says what it changes, not the whole device again.
        extra = scaled.pop("set", [])
        _merge(merged, scaled)
        if extra:
            base = merged.get("set", [])
            merged["set"] = [*base, *extra] if isinstance(base, list) else extra
        prefix = ("scales", scale)
    return _build(merged, text, path, lines, scale, prefix, base_dir)


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> None:
    """Deep-merge ``over`` into ``base``: tables merge, everything else replaces."""
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


class _Lines:
    """Finds the line of a key in the spec text, for error messages.

    ``tomllib`` keeps no positions, so the text is scanned: the key is looked up among the
    lines of its table (``[axes]``, ``[scales.quick.axes]``, ...), then anywhere.
    """

    _HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")

    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.table_of: list[str] = []
        table = ""
        for line in self.lines:
            match = self._HEADER.match(line)
            if match:
                table = ".".join(part.strip().strip("\"'") for part in _split_dotted(match[1]))
            self.table_of.append(table)

    def find(self, tables: tuple[str, ...], key: str) -> int | None:
        quoted = rf"""(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')"""
        for wanted in tables:
            for number, line in enumerate(self.lines, 1):
                table = self.table_of[number - 1]
                # `[axes]` then `key = ...`, or `[scales.quick]` then `axes.key = ...`.
                if table == wanted:
                    dotted = ""
                elif wanted.startswith(f"{table}.") or not table:
                    dotted = wanted[len(table) :].lstrip(".")
                else:
                    continue
                path = "".join(
                    rf"""(?:{re.escape(p)}|"{re.escape(p)}")\s*\.\s*"""
                    for p in dotted.split(".")
                    if p
                )
                if re.search(rf"(?:^|[{{,])\s*{path}{quoted}\s*=", line):
                    return number
        anywhere = re.compile(rf"""(?:^|[\s{{,."'\[])(?:{re.escape(key)})(?:["'\]]|\s*=|$)""")
        for number, line in enumerate(self.lines, 1):
            if anywhere.search(line.split("#", 1)[0]):
                return number
        return None

    def where(self, tables: tuple[str, ...], key: str) -> str:
        number = self.find(tables, key)
        return f"{self.path}:{number}" if number else self.path

    def error(self, tables: tuple[str, ...] | str, key: str, message: str) -> SpecError:
        if isinstance(tables, str):
            tables = (tables,)
        return SpecError(f"{self.where(tuple(tables) or ('',), key)}: {message}")


def _split_dotted(header: str) -> list[str]:
    # Dots outside quotes separate the parts of a table name: [scales.quick."a.b"].
    return re.split(r"""\.(?=(?:[^"']*["'][^"']*["'])*[^"']*$)""", header)


def _tables(prefix: tuple[str, ...], *names: str) -> tuple[str, ...]:
    """The table names where a key of table ``names`` may be written: the scale's, then base."""
    base = ".".join(names)
    scaled = ".".join((*prefix, *names)) if prefix else None
    return tuple(t for t in (scaled, base) if t is not None)


def _build(
    raw: dict[str, Any],
    text: str,
    path: str,
    lines: _Lines,
    scale: str | None,
    prefix: tuple[str, ...],
    base_dir: Path,
) -> Spec:
    top = _tables(prefix, "")
    top = tuple(t.rstrip(".") for t in top)
    name = raw.get("name", Path(path).stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise lines.error(
            top, "name", f"name: expected letters, digits, '_', '.', '-', got {name!r}"
        )
    description = str(raw.get("description", ""))
    companions = raw.get("companions", [])
    if not isinstance(companions, list) or not all(
        isinstance(c, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", c) for c in companions
    ):
        raise lines.error(
            top, "companions", "companions: expected a list of study names (specs beside this one)"
        )
    config = raw.get("config")
    if not isinstance(config, str):
        raise lines.error(top, "config", "config: expected a preset name or a TOML file's path")
    config_arg = config
    if config.endswith(".toml") or "/" in config:
        config_arg = str(base_dir / config)
    try:
        config_text, config_source = resolve(config_arg)
    except ConfigError as err:
        raise lines.error(top, "config", f"config: {err}") from None

    items = raw.get("set", [])
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise lines.error(top, "set", 'set: expected a list of "key=value" strings')
    try:
        overrides = parse_overrides(items)
    except ConfigError as err:
        raise lines.error(top, "set", f"set: {err}") from None
    axes_raw = raw.get("axes")
    axis_keys = list(axes_raw) if isinstance(axes_raw, dict) else []
    try:
        _core.check_config(config_text, config_source, overrides)
    except ConfigError as err:
        # A key the axes set may make the base valid (more spare space, say): the points
        # decide. Anything else (an unknown key, a bad value) is the base's own error.
        if not _key_in_message(str(err), axis_keys):
            bad = _key_in_message(str(err), [k for k, _ in overrides])
            raise lines.error(top, bad or "set", f"set: {err}") from None
    if any(key == HONOR_HINTS_KEY for key, _ in overrides):
        raise lines.error(
            top, HONOR_HINTS_KEY, f"set: {HONOR_HINTS_KEY} is what the hints axis sets; use hints"
        )

    precondition = raw.get("precondition", True)
    if isinstance(precondition, bool):
        passes = 2.0 if precondition else None
    elif isinstance(precondition, (int, float)) and 0 <= precondition < float("inf"):
        passes = float(precondition)
    else:
        raise lines.error(
            top,
            "precondition",
            f"precondition: expected true, false or a number of random overwrite passes >= 0, "
            f"got {precondition!r}",
        )

    workloads = _workloads(raw.get("workloads"), lines, prefix, base_dir)
    axes = _axes(raw.get("axes", {}), lines, prefix, workloads)
    zip_groups = _zip_groups(raw.get("zip", []), axes, lines, top)
    _no_value_twice(axes, zip_groups, lines, _tables(prefix, "axes"))
    report = raw.get("report", {})
    if not isinstance(report, dict):
        raise lines.error(top, "report", "report: expected a table [report]")
    for key in report:
        if key not in _REPORT_KEYS:
            raise lines.error(
                _tables(prefix, "report"),
                key,
                f"report: unknown key {key!r}; expected one of {', '.join(sorted(_REPORT_KEYS))}",
            )

    identity = {k: v for k, v in raw.items() if k not in ("report", "description", "companions")}
    identity["config"] = config_text  # the configuration's content, not its file name
    identity["workloads"] = {n: w.digest for n, w in workloads.items()}
    digest = _sha256(identity)
    spec = Spec(
        path=path,
        name=name,
        description=description,
        scale=scale,
        config=config,
        config_text=config_text,
        config_source=config_source,
        overrides=overrides,
        precondition_passes=passes,
        workloads=workloads,
        axes=axes,
        zip_groups=zip_groups,
        report=report,
        digest=digest,
        text=text,
        companions=companions,
    )
    spec.runs.extend(_expand(spec, lines, prefix))
    return spec


def _workloads(
    raw: object, lines: _Lines, prefix: tuple[str, ...], base_dir: Path
) -> dict[str, Workload]:
    if not isinstance(raw, dict) or not raw:
        raise lines.error(
            _tables(prefix, ""), "workloads", "workloads: expected at least one [workloads.NAME]"
        )
    out: dict[str, Workload] = {}
    for name, table in raw.items():
        where = _tables(prefix, "workloads", name)
        if not isinstance(table, dict):
            raise lines.error(where, name, f"workloads.{name}: expected a table")
        kinds = [k for k in ("job", "trace", "builtin") if k in table]
        if len(kinds) != 1:
            raise lines.error(
                where, name, f"workloads.{name}: give exactly one of job, trace or builtin"
            )
        kind = kinds[0]
        if kind == "builtin":
            out[name] = _builtin(name, table, lines, where)
        else:
            out[name] = _file_workload(name, kind, table, lines, where, base_dir)
    return out


def _builtin(name: str, table: dict[str, Any], lines: _Lines, where: tuple[str, ...]) -> Workload:
    builtin = table["builtin"]
    if builtin not in BUILTIN_WORKLOADS:
        raise lines.error(
            where,
            "builtin",
            f"workloads.{name}.builtin: unknown built-in workload {builtin!r}; "
            f"built-ins are: {', '.join(BUILTIN_WORKLOADS)}",
        )
    params = dict(BUILTIN_WORKLOADS[builtin])
    for key, value in table.items():
        if key == "builtin":
            continue
        if key not in params:
            raise lines.error(
                where,
                key,
                f"workloads.{name}: {builtin} has no parameter {key!r}; "
                f"its parameters are: {', '.join(params)}",
            )
        default = params[key]
        if isinstance(default, str):
            # A name (a cache personality): the run checks it against the core's list.
            if not isinstance(value, str) or not value:
                raise lines.error(
                    where, key, f"workloads.{name}.{key}: expected a name, got {value!r}"
                )
            params[key] = value
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and (value > 0 or (value == 0 and key in _MAY_BE_ZERO))
        if isinstance(default, int):
            ok = ok and isinstance(value, int)
        if ok and "fraction" in key:
            ok = value < 1
        if not ok:
            raise lines.error(
                where,
                key,
                f"workloads.{name}.{key}: expected a "
                f"{'non-negative' if key in _MAY_BE_ZERO else 'positive'} "
                f"{'integer' if isinstance(default, int) else 'number'}"
                f"{' below 1' if 'fraction' in key else ''}, got {value!r}",
            )
        params[key] = value
    if builtin in _DATABASE_BUILTINS:
        from ssdlab.db import workload_params

        try:
            workload_params(builtin, params)
        except ValueError as error:
            raise lines.error(where, "builtin", f"workloads.{name}: {error}") from None
    params = {"builtin": builtin, **params}
    return Workload(name=name, kind=builtin, params=params, digest=_sha256(params))


def _file_workload(
    name: str,
    kind: str,
    table: dict[str, Any],
    lines: _Lines,
    where: tuple[str, ...],
    base_dir: Path,
) -> Workload:
    allowed = {"job"} if kind == "job" else _TRACE_KEYS
    for key in table:
        if key not in allowed:
            raise lines.error(
                where,
                key,
                f"workloads.{name}: unknown key {key!r} for a {kind}; "
                f"expected: {', '.join(sorted(allowed))}",
            )
    file = base_dir / str(table[kind])
    try:
        content = file.read_bytes()
    except OSError as err:
        raise lines.error(where, kind, f"workloads.{name}: {file}: {err.strerror}") from None
    params: dict[str, Any] = {"path": str(file)}
    if kind == "job":
        try:
            _core.job_names(str(file))
        except Exception as err:
            raise lines.error(where, kind, f"workloads.{name}: {err}") from None
        # The job file travels with the task: workers need not see the client's files.
        params["text"] = content.decode("utf-8", errors="replace")
    else:
        fmt = table.get("format")
        if fmt not in TRACE_FORMATS:
            raise lines.error(
                where,
                "format",
                f"workloads.{name}.format: expected one of {', '.join(TRACE_FORMATS)}, got {fmt!r}",
            )
        params.update(
            format=fmt,
            queue_depth=int(table.get("queue_depth", 32)),
            time_scale=float(table.get("time_scale", 1.0)),
            closed_loop=bool(table.get("closed_loop", False)),
        )
    identity = {k: v for k, v in params.items() if k not in ("path", "text")}
    identity["content_sha256"] = hashlib.sha256(content).hexdigest()
    identity["kind"] = kind
    return Workload(name=name, kind=kind, params=params, digest=_sha256(identity))


def _axes(
    raw: object, lines: _Lines, prefix: tuple[str, ...], workloads: dict[str, Workload]
) -> list[Axis]:
    where = _tables(prefix, "axes")
    if not isinstance(raw, dict):
        raise lines.error(where, "axes", "axes: expected a table [axes]")
    axes = []
    for key, values in raw.items():
        line = lines.find(where, key) or 0
        if not isinstance(values, list) or not values:
            raise lines.error(where, key, f"axis {key!r}: expected a non-empty list of values")
        if key == HONOR_HINTS_KEY:
            raise lines.error(
                where, key, f"axis {key!r}: use the hints axis (hints = [false, true])"
            )
        if key == SEED:
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**64:
                    raise lines.error(
                        where, key, f"axis 'seed': expected integers in 0 .. 2**64-1, got {v!r}"
                    )
        elif key == HINTS:
            for v in values:
                if isinstance(v, bool):
                    continue
                try:
                    parse_hint_kinds(v if isinstance(v, str) else repr(v))
                except ValueError:
                    raise lines.error(
                        where,
                        key,
                        f'axis \'hints\': expected true, false, "all", "none" or a '
                        f"'+'-list of {', '.join(HINT_KINDS)} (e.g. \"classify+predict\"), "
                        f"got {v!r}",
                    ) from None
        elif key == BACKEND:
            for v in values:
                if v not in BACKENDS:
                    raise lines.error(
                        where, key, f"axis 'backend': expected block or native, got {v!r}"
                    )
        elif key == CLOCK:
            for v in values:
                if v not in CLOCKS:
                    raise lines.error(
                        where, key, f"axis 'clock': expected virtual or realtime, got {v!r}"
                    )
        elif key == WORKLOAD:
            for v in values:
                if v not in workloads:
                    raise lines.error(
                        where,
                        key,
                        f"axis 'workload': no workload {v!r}; "
                        f"the spec's workloads are: {', '.join(workloads)}",
                    )
        else:
            for v in values:
                if isinstance(v, (dict, list)):
                    raise lines.error(
                        where, key, f"axis {key!r}: expected scalar values, got {v!r}"
                    )
        axes.append(Axis(key=key, values=list(values), line=line))
    keys = [a.key for a in axes]
    if WORKLOAD not in keys:
        axes.append(Axis(key=WORKLOAD, values=list(workloads), line=0))
    if SEED not in keys:
        axes.append(Axis(key=SEED, values=[0], line=0))
    if HINTS not in keys:
        axes.append(Axis(key=HINTS, values=[True], line=0))
    return axes


def _no_value_twice(
    axes: list[Axis], zip_groups: list[list[str]], lines: _Lines, where: tuple[str, ...]
) -> None:
    """An axis lists each value once; zipped axes may repeat a value (a size shared by two
    workloads) as long as no two of the group's tuples are the same."""
    zipped = {k for group in zip_groups for k in group}
    by_key = {a.key: a for a in axes}
    for axis in axes:
        values = axis.values
        if axis.key not in zipped and len({_canonical(v) for v in values}) != len(values):
            raise lines.error(where, axis.key, f"axis {axis.key!r}: a value is listed twice")
    for group in zip_groups:
        tuples = list(zip(*(by_key[k].values for k in group), strict=True))
        if len({_canonical(t) for t in tuples}) != len(tuples):
            raise lines.error(
                where, group[0], f"zipped axes {group}: a combination of values is listed twice"
            )


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def _zip_groups(
    raw: object, axes: list[Axis], lines: _Lines, top: tuple[str, ...]
) -> list[list[str]]:
    by_key = {a.key: a for a in axes}
    if raw is True:
        raw = [[a.key for a in axes if a.line]]  # every axis the spec wrote
    if raw is False:
        raw = []
    if not isinstance(raw, list) or not all(
        isinstance(g, list) and all(isinstance(k, str) for k in g) for g in raw
    ):
        raise lines.error(
            top, "zip", 'zip: expected true or a list of axis groups, e.g. [["a", "b"]]'
        )
    seen: set[str] = set()
    for group in raw:
        for key in group:
            if key not in by_key:
                raise lines.error(top, "zip", f"zip: {key!r} is not an axis of this spec")
            if key in seen:
                raise lines.error(top, "zip", f"zip: axis {key!r} is in two groups")
            seen.add(key)
        lengths = {len(by_key[k].values) for k in group}
        if len(lengths) > 1:
            sizes = ", ".join(f"{k}: {len(by_key[k].values)}" for k in group)
            raise lines.error(top, "zip", f"zip: zipped axes need as many values each ({sizes})")
    return [list(g) for g in raw if g]


# -- expansion and validation ------------------------------------------------------------------


def _points(spec: Spec) -> Iterator[dict[str, Any]]:
    """The grid's points in a stable order: zipped groups move together, the rest is a product."""
    zipped = {k for group in spec.zip_groups for k in group}
    dims: list[list[dict[str, Any]]] = []
    for group in spec.zip_groups:
        axes = [next(a for a in spec.axes if a.key == k) for k in group]
        dims.append(
            [
                dict(zip(group, values, strict=True))
                for values in zip(*(a.values for a in axes), strict=True)
            ]
        )
    for axis in spec.axes:
        if axis.key not in zipped:
            dims.append([{axis.key: v} for v in axis.values])
    for combo in itertools.product(*dims):
        point: dict[str, Any] = {}
        for part in combo:
            point.update(part)
        yield {a.key: point[a.key] for a in spec.axes}


def _expand(spec: Spec, lines: _Lines, prefix: tuple[str, ...]) -> list[Run]:
    where = _tables(prefix, "axes")
    config_keys = [a.key for a in spec.axes if a.key not in SPECIAL_AXES]
    # Each value alone first, so that an error names the one axis value that is wrong.
    for axis in spec.axes:
        if axis.key in SPECIAL_AXES:
            continue
        for value in axis.values:
            try:
                parse_overrides([(axis.key, value)])
                _core.check_config(
                    spec.config_text,
                    spec.config_source,
                    [*spec.overrides, (axis.key, _text(value))],
                )
            except ConfigError as err:
                others = [k for k in config_keys if k != axis.key]
                if _key_in_message(str(err), others):
                    continue  # it depends on another axis's value: the points decide
                raise lines.error(
                    where, axis.key, f"axis {axis.key!r}, value {value!r}: {err}"
                ) from None
    runs = []
    checked: dict[str, str] = {}
    seen: dict[str, dict[str, Any]] = {}
    for point in _points(spec):
        overrides = list(spec.overrides)
        overrides += [(k, _text(point[k])) for k in config_keys]
        overrides.append((HONOR_HINTS_KEY, "true" if hints_on(point[HINTS]) else "false"))
        signature = json.dumps(overrides)
        if signature not in checked:
            try:
                info = _core.check_config(spec.config_text, spec.config_source, overrides)
            except ConfigError as err:
                values = ", ".join(f"{k} = {point[k]!r}" for k in config_keys)
                key = _key_in_message(str(err), config_keys) or (
                    config_keys[0] if config_keys else "set"
                )
                raise lines.error(where, key, f"the point ({values}): {err}") from None
            checked[signature] = info["hash"]
        config_hash = checked[signature]
        workload = spec.workloads[point[WORKLOAD]]
        backend = point.get(BACKEND, "block")
        clock = point.get(CLOCK, "virtual")
        # Native flash and real time are for database workloads only.
        for axis, value, usual, only in (
            (BACKEND, backend, "block", "runs on the block interface only; native flash runs"),
            (CLOCK, clock, "virtual", "runs in simulated time only; real time runs"),
        ):
            if value != usual and workload.kind not in _DATABASE_BUILTINS:
                raise lines.error(
                    where,
                    axis,
                    f"axis '{axis}': workload {workload.name!r} ({workload.kind}) {only} "
                    "database workloads",
                )
        identity = {
            "version": _core.__version__,
            "config_hash": config_hash,
            "workload": workload.digest,
            "seed": point[SEED],
            "hints": point[HINTS],
            "precondition": spec.precondition_passes,
        }
        if backend != "block":  # keeps the keys of block-interface runs as they were
            identity["backend"] = backend
        if clock != "virtual":
            identity["clock"] = clock
        key = _sha256(identity)[:20]
        if key in seen:
            raise lines.error(
                where,
                WORKLOAD,
                f"the points {seen[key]} and {point} are the same run (same configuration, "
                "workload content, seed and hints); remove one of them",
            )
        seen[key] = point
        runs.append(
            Run(
                key=key,
                point=point,
                config_text=spec.config_text,
                config_source=spec.config_source,
                overrides=overrides,
                config_hash=config_hash,
                workload=workload,
                seed=point[SEED],
                hints=point[HINTS],
                precondition_passes=spec.precondition_passes,
                backend=backend,
                clock=clock,
            )
        )
    return runs


def hints_on(hints: bool | str) -> bool:
    """Whether a ``hints`` axis value lets the device honour hints (``false``/``"none"``: no)."""
    return bool(parse_hint_kinds(hints))


def _text(value: object) -> str:
    return parse_overrides([("k", value)])[0][1]


def _key_in_message(message: str, keys: list[str]) -> str | None:
    for key in keys:
        if f"'{key}'" in message or f"`{key}`" in message:
            return key
    return None


def _sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
