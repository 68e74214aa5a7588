"""FlexECC's SSD cache from Python: a write-back cache over a disk model on a simulated SSD.

The cache, the disk and the workloads live in the core (``ssdlab_core::cache``); this module
only names the workloads, checks what it is given and runs the core. The cache's settings are
the configuration's ``[cache]`` table (``--set cache.cache_bytes=...``), FlexECC's the
``[flexecc]`` table (``flexecc.mode = "all_bch"`` is the baseline, ``"flex"`` FlexECC).

    >>> report = run_cache("flexecc", {"personality": "r90", "requests": 2000},
    ...                    overrides={"flexecc.mode": "flex"})   # doctest: +SKIP
    >>> report["cache"]["mean_ssd_response_ns"]                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from typing import Any

from ssdlab import _core
from ssdlab.config import Overrides, parse_overrides, resolve
from ssdlab.errors import ConfigError

#: The cache workloads: filebench's personalities and two random read-heavy mixes.
PERSONALITIES = ("fileserver", "webserver", "varmail", "oltp", "r75", "r90")

#: A cache workload's parameters and their defaults (``working_set_bytes = 0``: twice the
#: cache for r75/r90, the personality's whole file set otherwise).
WORKLOAD_DEFAULTS: dict[str, Any] = {
    "personality": "fileserver",
    "requests": 10_000,
    "interarrival_ns": 1_000_000,
    "working_set_bytes": 0,
}


def workload_spec(workload: dict[str, Any], seed: int) -> dict[str, Any]:
    """The workload with defaults filled in, checked.

    Raises:
        ConfigError: an unknown parameter or personality, or a value of the wrong kind; the
            message names it (``workload.personality``, ...).
    """
    spec = dict(WORKLOAD_DEFAULTS)
    for key, value in workload.items():
        if key not in WORKLOAD_DEFAULTS:
            raise ConfigError(
                f"workload.{key}: unknown parameter; the parameters are: "
                f"{', '.join(WORKLOAD_DEFAULTS)}"
            )
        spec[key] = value
    if spec["personality"] not in PERSONALITIES:
        raise ConfigError(
            f"workload.personality: unknown personality {spec['personality']!r}; "
            f"expected one of {', '.join(PERSONALITIES)}"
        )
    for key in ("requests", "interarrival_ns", "working_set_bytes"):
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"workload.{key}: expected a non-negative integer, got {value!r}")
    spec["seed"] = int(seed)
    return spec


def run_cache(
    config: str | os.PathLike[str],
    workload: dict[str, Any],
    *,
    overrides: Overrides = None,
    seed: int = 1,
    trace_path: str | os.PathLike[str] | None = None,
    config_text: str | None = None,
) -> dict[str, Any]:
    """Run a cache workload on the SSD of ``config`` (a preset name or TOML file); returns
    ``{"cache": {...}, "ssd": {...}}``. With ``trace_path`` the cache's SSD requests are
    written there as ssdlab's CSV trace with a ``type`` column (dirty_write, clean_write,
    host_read, flush_read), which ``ssdlab run --trace FILE --format csv`` replays.

    ``config_text`` (with ``config`` as its source name) skips reading the configuration.
    """
    if config_text is None:
        config_text, source = resolve(config)
    else:
        source = os.fspath(config)
    spec = workload_spec(workload, seed)
    report, trace = _core.cache_run(
        config_text,
        source,
        parse_overrides(overrides),
        int(seed),
        json.dumps(spec),
        trace_path is not None,
    )
    if trace_path is not None and trace is not None:
        with open(trace_path, "w", encoding="utf-8") as out:
            out.write(trace)
    return report


# -- `ssdlab cache` ------------------------------------------------------------------------------


def add_cache_command(commands: Any) -> None:
    """Register ``ssdlab cache CONFIG``: one cache workload, a summary (or the JSON report)."""
    cache = commands.add_parser(
        "cache",
        help="an SSD cache over a disk model (FlexECC's four request types)",
        description="Run a write-back SSD cache (flashcache-like) over a disk model on the "
        "simulated SSD with a block-level workload, and print response times, hit rates, "
        "disk work and the SSD's FlexECC counters. The cache's settings are the [cache] "
        "table (--set cache.cache_bytes=...), FlexECC's the [flexecc] table "
        '(--set flexecc.mode=flex; "all_bch" is the baseline).',
    )
    cache.add_argument("config", metavar="CONFIG", help="preset name or TOML file (e.g. flexecc)")
    cache.add_argument(
        "--personality",
        default=WORKLOAD_DEFAULTS["personality"],
        help=f"workload: {', '.join(PERSONALITIES)} (default fileserver)",
    )
    cache.add_argument("--requests", type=int, default=WORKLOAD_DEFAULTS["requests"])
    cache.add_argument(
        "--interarrival-ns",
        type=int,
        default=WORKLOAD_DEFAULTS["interarrival_ns"],
        help="mean gap between arrivals (Poisson, open loop)",
    )
    cache.add_argument(
        "--working-set-bytes",
        type=int,
        default=0,
        help="bytes the workload spans (0: twice the cache for r75/r90, all files otherwise)",
    )
    cache.add_argument("--seed", type=int, default=1)
    cache.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a configuration key (repeatable)",
    )
    cache.add_argument(
        "--trace-out",
        metavar="FILE",
        help="write the SSD requests the cache issued (CSV with a type column) to FILE",
    )
    cache.add_argument("--json", action="store_true", help="print the JSON report")
    cache.set_defaults(func=_cmd_cache)


def _cmd_cache(args: Any) -> int:
    workload = {
        "personality": args.personality,
        "requests": args.requests,
        "interarrival_ns": args.interarrival_ns,
        "working_set_bytes": args.working_set_bytes,
    }
    report = run_cache(
        args.config,
        workload,
        overrides=args.overrides,
        seed=args.seed,
        trace_path=args.trace_out,
    )
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for line in summary_lines(report):
        print(line)
    return 0


def summary_lines(report: dict[str, Any]) -> list[str]:
    """A readable summary of a cache run's report."""
    c, ssd = report["cache"], report["ssd"]
    f = ssd.get("flexecc", {})
    hits = c["read_hits"] / max(1, c["read_hits"] + c["read_misses"])
    return [
        f"workload {c['workload']['personality']}: {c['reads']} reads, {c['writes']} writes; "
        f"read hit rate {hits:.1%}",
        f"response (app)  mean {c['mean_response_ns'] / 1e3:.1f} us "
        f"(read {c['mean_read_response_ns'] / 1e3:.1f}, "
        f"write {c['mean_write_response_ns'] / 1e3:.1f})",
        f"response (SSD)  mean {c['mean_ssd_response_ns'] / 1e3:.2f} us "
        f"(read {c['mean_ssd_read_response_ns'] / 1e3:.2f}, "
        f"write {c['mean_ssd_write_response_ns'] / 1e3:.2f})",
        f"SSD requests    dirty writes {c['dirty_writes']}, clean writes {c['clean_writes']}, "
        f"host reads {c['host_reads']}, flush reads {c['flush_reads']}",
        f"disk            reads {c['disk']['reads']}, writes {c['disk']['writes']}; "
        f"corruption misses {c['corruption_disk_reads']}, scrubber prefetched "
        f"{c['scrub_prefetched']} of {c['scrub_reads']} scrubbed; errors {c['errors_returned']}",
        f"FlexECC ({f.get('mode', 'off')})  BCH reads {f.get('bch_reads', 0)}, CRC reads "
        f"{f.get('crc_reads', 0)}, CRC moves {f.get('crc_moves', 0)}, BCH->CRC "
        f"{f.get('bch_to_crc', 0)}, BCH corrected {f.get('bch_corrected_pages', 0)}",
        f"GC              {ssd['gc']['time_ns'] / 1e6:.1f} ms busy, WAF {ssd['waf']:.2f}",
    ]
