"""The ``ssdlab`` command line: ``run``, ``serve``, ``stats``, ``presets``, ``demo``, ``sweep``,
``report`` and ``reproduce``.

The CLI only adapts: it parses arguments, builds a :class:`~ssdlab.Device`, runs it and prints.
Errors the user can fix -- a bad configuration key, an unknown preset, a trace line that does
not parse, a missing file -- are printed as ``ssdlab: error: <message>`` on stderr with exit
status 2 (usage and configuration) or 1 (everything that fails during a run), never as a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from ssdlab import _core
from ssdlab.errors import ConfigError, SsdlabError

EXIT_OK = 0
EXIT_RUN_ERROR = 1
EXIT_USAGE = 2

#: The largest queue depth the core accepts.
MAX_QUEUE_DEPTH = 65_536

#: The largest demo scale: twice the default device (5.6 M requests per run, the demo's own
#: limit). Run time and the workload's arrays grow with the scale; a typo such as 1e12 would
#: exhaust memory.
MAX_DEMO_SCALE = 2.0

#: (fio's percentile key, label) of the percentiles the normal output shows.
PERCENTILES = tuple((f"{p:f}", f"{p:g}") for p in (50, 90, 99, 99.9, 99.99))


class UsageError(Exception):
    """A bad command line detected after argparse (exit status 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status instead of exiting."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse has printed its message (or --help/--version)
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    try:
        return args.func(args)
    except (UsageError, ConfigError) as err:
        return _fail(err, EXIT_USAGE)
    except ValueError as err:  # the Python API refused an argument value taken from the user
        return _fail(err, EXIT_USAGE)
    except MemoryError:
        print("ssdlab: error: out of memory (try a smaller device or workload)", file=sys.stderr)
        return EXIT_RUN_ERROR
    except BrokenPipeError:  # e.g. `ssdlab presets | head -1`: the reader left; not our error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_RUN_ERROR
    except (SsdlabError, OSError) as err:
        return _fail(err, EXIT_RUN_ERROR)
    except KeyboardInterrupt:
        print("ssdlab: interrupted", file=sys.stderr)
        return 130


def _check_seed(seed: int) -> None:
    if not 0 <= seed < 2**64:
        raise UsageError(f"--seed must be in 0 .. 2**64-1, got {seed}")


def _fail(err: BaseException, status: int) -> int:
    message = str(err)
    if isinstance(err, OSError) and err.filename is not None:
        message = f"{err.filename}: {err.strerror or err}"
    print(f"ssdlab: error: {message}", file=sys.stderr)
    return status


def _parser() -> argparse.ArgumentParser:
    from ssdlab.device import TRACE_FORMATS

    parser = argparse.ArgumentParser(
        prog="ssdlab",
        description="A fast, deterministic NAND-flash SSD simulator.",
    )
    parser.add_argument("--version", action="version", version=f"ssdlab {_core.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = commands.add_parser(
        "run",
        help="simulate a fio job file or a block trace on a device",
        description=(
            "Simulate a fio job file (JOB) or a block trace (--trace) on the device CONFIG "
            "(a preset name or a TOML file) and print fio-like results plus SSD statistics."
        ),
    )
    run.add_argument("config", metavar="CONFIG", help="preset name or path to a TOML file")
    run.add_argument("job", metavar="JOB", nargs="?", help="fio job file")
    run.add_argument(
        "--trace",
        metavar="FILE",
        action="append",
        help="replay this block trace instead of a job; repeat it to replay several side by side, "
        "each a job with its own queue",
    )
    run.add_argument("--trace-format", choices=TRACE_FORMATS, help="format of --trace")
    run.add_argument(
        "--builtin",
        choices=("hdfs",),
        help="run a built-in workload instead of a job: hdfs (melded pages' DataNode)",
    )
    run.add_argument(
        "--param",
        dest="params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of --builtin (repeatable), e.g. --param blocks=4",
    )
    run.add_argument(
        "--read-groups",
        action="store_true",
        help="--builtin hdfs: tag each block file's writes with a read group of its own",
    )
    run.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="multiply trace timestamps by F (open loop; default 1.0)",
    )
    run.add_argument(
        "--closed-loop",
        action="store_true",
        help="ignore trace timestamps and keep --queue-depth requests outstanding",
    )
    run.add_argument(
        "--shared-clock",
        action="store_true",
        help="with several --trace files: time them all from the earliest first request, so "
        "traces recorded side by side keep their offsets (default: each from its own first)",
    )
    run.add_argument(
        "--queue-depth", type=int, default=32, metavar="N", help="trace queue depth (default 32)"
    )
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a configuration key (repeatable), e.g. --set geometry.channels=4",
    )
    run.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    run.add_argument(
        "--precondition",
        action="store_true",
        help="fill the device and overwrite it randomly before the run",
    )
    run.add_argument("--output-format", choices=("normal", "json"), default="normal")
    run.add_argument("--output", metavar="FILE", help="write the results to FILE, not stdout")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument(
        "--request-log",
        metavar="FILE",
        help="write the per-request log (request #, op, sectors, flash work, durations) as CSV",
    )
    run.add_argument(
        "--time-series",
        metavar="FILE",
        help="write the per-interval time series as JSON (stats.interval_ns wide, 10 ms if unset; "
        "at most 4096 rows: the interval doubles when they fill up)",
    )
    run.add_argument(
        "--store-data", action="store_true", help="keep written data (reads return it)"
    )
    run.set_defaults(func=_cmd_run)

    serve = commands.add_parser(
        "serve",
        help="export a simulated SSD over NBD (fio, qemu-io, nbdcopy, nbdfuse, file systems)",
        description=(
            "Serve the device CONFIG (a preset name or a TOML file, data-driven) as an NBD "
            "export until SIGINT or SIGTERM, then print fio-like statistics of what was served."
        ),
    )
    serve.add_argument("config", metavar="CONFIG", help="preset name or path to a TOML file")
    where = serve.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", metavar="PATH", help="listen on this Unix socket")
    where.add_argument(
        "--port", type=int, metavar="N", help="listen on this TCP port (0: any free port)"
    )
    serve.add_argument(
        "--bind",
        default="127.0.0.1",
        metavar="ADDR",
        help="TCP address or host name to bind (default 127.0.0.1: loopback only; any other "
        "needs --tls=require or --insecure)",
    )
    serve.add_argument(
        "--clock",
        choices=("realtime", "virtual"),
        default="realtime",
        help="realtime: replies at the modelled completion time; virtual: as fast as possible",
    )
    serve.add_argument(
        "--stats-log",
        metavar="FILE",
        help="per-request statistics log (CSV; summarise with `ssdlab stats FILE`)",
    )
    serve.add_argument("--read-only", action="store_true", help="refuse writes with EPERM")
    serve.add_argument("--export-name", default="ssdlab", metavar="NAME", help="export name")
    serve.add_argument(
        "--miss-threshold-us",
        type=float,
        default=10.0,
        metavar="US",
        help="a reply later than its deadline by more than this is a deadline miss (default 10)",
    )
    serve.add_argument(
        "--compensate",
        default="auto",
        metavar="auto|US",
        help="real time: send replies this many microseconds early to make up for the client's "
        "own round-trip overhead (default auto: measured per connection; 0: off)",
    )
    _add_limit_flags(serve)
    serve.add_argument(
        "--tls",
        choices=("off", "on", "require"),
        default=None,
        help="require: clients must upgrade with STARTTLS; on: TLS optional; off: no TLS "
        "(default: require when --tls-cert/--tls-key or --tls-psk is given, else off)",
    )
    serve.add_argument("--tls-cert", metavar="FILE", help="X.509 certificate chain (PEM)")
    serve.add_argument("--tls-key", metavar="FILE", help="private key of --tls-cert (PEM)")
    serve.add_argument(
        "--tls-psk",
        metavar="FILE",
        help="pre-shared keys, one username:hexkey per line (as psktool writes for nbdkit/qemu)",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="allow a --bind address other than loopback without --tls=require",
    )
    serve.add_argument(
        "--image",
        metavar="FILE",
        help="keep the export's contents in this sparse file across restarts (created if "
        "missing; synced on flush, FUA and shutdown). Default: none, data lives only as long "
        "as the server",
    )
    serve.add_argument(
        "--power-loss-at",
        type=int,
        metavar="NS",
        help="simulate a power loss at simulated time NS (the request that arrives then waits "
        "for recovery of the mapping from the pages' OOB; the summary reports its cost). "
        "SIGUSR1 (kill -USR1 PID) cuts the power at the instant it arrives, any number of times",
    )
    serve.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a configuration key (repeatable)",
    )
    serve.add_argument("--seed", type=int, default=0, help="the device's seed (default 0)")
    serve.add_argument("--output-format", choices=("normal", "json"), default="normal")
    serve.add_argument("--output", metavar="FILE", help="write the summary to FILE, not stdout")
    serve.add_argument("--quiet", action="store_true", help="no 'listening on' line")
    serve.set_defaults(func=_cmd_serve)

    stats = commands.add_parser(
        "stats",
        help="summarise a per-request log (run --request-log, serve --stats-log)",
        description="Summarise the per-request CSV log FILE per op: counts, bytes, durations "
        "with percentiles, flash work, GC and write amplification (streamed, any size).",
    )
    stats.add_argument("file", metavar="FILE", help="request-log CSV")
    stats.add_argument(
        "--page-size",
        type=int,
        default=4096,
        metavar="BYTES",
        help="flash page size of the device that wrote the log, for host pages (default 4096)",
    )
    stats.add_argument("--output-format", choices=("normal", "json"), default="normal")
    stats.add_argument("--output", metavar="FILE", help="write the summary to FILE, not stdout")
    stats.set_defaults(func=_cmd_stats)

    presets = commands.add_parser("presets", help="list the built-in device presets")
    presets.set_defaults(func=_cmd_presets)

    demo = commands.add_parser(
        "demo",
        help="hinted vs unhinted placement on a small TLC device, side by side",
        description="Run a hot/cold workload on two small TLC devices, without and with "
        "placement hints, and compare latency, write amplification, GC, wear and energy.",
    )
    demo.add_argument("--quiet", action="store_true", help="no progress bar or preamble")
    demo.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    demo.add_argument(
        "--scale",
        type=float,
        default=float(os.environ.get("SSDLAB_DEMO_SCALE", "1.0")),
        help="device and workload size relative to the default (env SSDLAB_DEMO_SCALE)",
    )
    demo.set_defaults(func=_cmd_demo)
    from ssdlab.flexecc import add_cache_command

    add_cache_command(commands)
    _add_sweep_commands(commands)
    return parser


def _add_sweep_commands(commands: Any) -> None:
    db = commands.add_parser(
        "db",
        help="databases on SQLite whose files live on a simulated device (TPC-C, TPC-B, "
        "TPC-H, sysbench)",
        description="Database workloads on the simulated SSD: `ssdlab db run WORKLOAD` loads "
        "the workload's database through SQLite onto the device, runs its transactions in "
        "simulated time and prints transactions per second, latencies and device statistics.",
    )
    db_commands = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    db_run = db_commands.add_parser(
        "run",
        help="load and run TPC-C, TPC-B, TPC-H or sysbench oltp_read_write on a device",
        description="Load WORKLOAD's database onto the device --on (after preconditioning it, "
        "unless --no-precondition), reopen it with the page cache and WAL limit given, run "
        "--warmup then --transactions transactions, check integrity, and report.",
    )
    db_run.add_argument("workload", metavar="WORKLOAD", help="tpcc, tpcb, tpch or sysbench")
    db_run.add_argument(
        "--scale",
        type=float,
        metavar="N",
        help="TPC-C warehouses, TPC-B branches (pgbench's scale), TPC-H scale factor or "
        "sysbench rows per table (default 1; TPC-H 0.01; sysbench needs a larger N)",
    )
    db_run.add_argument(
        "--population",
        type=float,
        metavar="F",
        help="TPC-C: scale items, customers and orders per warehouse by F; TPC-B: accounts "
        "per branch (default 1.0)",
    )
    db_run.add_argument(
        "--queries",
        metavar="LIST",
        help="TPC-H: the queries to run round-robin, e.g. 1,6,12,14 (the default)",
    )
    db_run.add_argument(
        "--tables", type=int, metavar="N", help="sysbench: number of tables (default 1)"
    )
    db_run.add_argument(
        "--on",
        dest="config",
        default="seassd",
        metavar="CONFIG",
        help="device preset or TOML file (default seassd)",
    )
    db_run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a configuration key (repeatable)",
    )
    db_run.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    db_run.add_argument(
        "--transactions",
        type=int,
        default=1000,
        metavar="N",
        help="measured transactions (default 1000)",
    )
    db_run.add_argument(
        "--warmup", type=int, default=0, metavar="N", help="unmeasured transactions first"
    )
    db_run.add_argument(
        "--cache-fraction",
        type=float,
        default=0.1,
        metavar="F",
        help="SQLite's page cache as a fraction of the loaded database (default 0.1)",
    )
    db_run.add_argument(
        "--wal-per-cache",
        type=float,
        default=1 / 64,
        metavar="F",
        help="WAL limit as a fraction of the cache (default 1/64, the paper's redo log)",
    )
    db_run.add_argument(
        "--hints",
        default="all",
        metavar="KINDS",
        help="SEA-SSD hints to send: all (default), none, or a '+'-list of classify, "
        "predict, settings",
    )
    db_run.add_argument(
        "--cpu",
        choices=("zero", "wall"),
        default="zero",
        help="host CPU time between I/Os: none (default) or measured wall time",
    )
    db_run.add_argument(
        "--clock",
        choices=("virtual", "realtime"),
        default="virtual",
        help="virtual: simulated time (default); realtime: the device paced to the wall "
        "clock, each I/O returning at its completion, as a real-time emulator (the host's "
        "own time counts as it passes; --cpu does not apply)",
    )
    db_run.add_argument(
        "--backend",
        choices=("block", "native"),
        default="block",
        help="block: the device's FTL behind its block interface (default); native: NoFTL, "
        "SQLite's store maps pages onto the device's native flash itself",
    )
    db_run.add_argument(
        "--no-precondition",
        dest="precondition",
        action="store_false",
        help="start from an empty device rather than a full one",
    )
    db_run.add_argument("--output-format", choices=("normal", "json"), default="normal")
    db_run.add_argument("--quiet", action="store_true", help="no progress message")
    db_run.set_defaults(func=_cmd_db_run)

    sweep = commands.add_parser(
        "sweep",
        help="run a grid of simulations (a sweep spec) on Dask; results in a Parquet store",
        description="Run every point of the sweep spec SPEC (TOML; see examples/sweep.toml) on "
        "a local Dask cluster (one worker process per core) or on the scheduler --dask, "
        "recording each run in DIR as it finishes. Runs already in DIR are skipped, so an "
        "interrupted sweep resumes. Exit status 1 when any run failed (each failure is "
        "recorded with its error).",
    )
    sweep.add_argument("spec", metavar="SPEC", help="sweep spec (TOML)")
    sweep.add_argument(
        "--scale", metavar="NAME", help="use the spec's [scales.NAME] (default: its default_scale)"
    )
    _add_run_flags(sweep, "DIR (default: <spec name>-results)")
    sweep.set_defaults(func=_cmd_sweep)

    report = commands.add_parser(
        "report",
        help="markdown tables and PNG plots of a sweep's results",
        description="Write DIR/report/report.md and one PNG per metric, as the spec's "
        "[report] section chooses, and print the markdown.",
    )
    report.add_argument("dir", metavar="DIR", help="output directory of sweep or reproduce")
    report.set_defaults(func=_cmd_report)

    reproduce = commands.add_parser(
        "reproduce",
        help="run a study shipped with ssdlab (a sweep and its report); --list names them",
        description="Run the study NAME (a sweep spec inside ssdlab) at the given scale, write "
        "its report and print its headline table.",
    )
    reproduce.add_argument("name", metavar="NAME", nargs="?", help="study name (see --list)")
    reproduce.add_argument("--list", action="store_true", help="list the studies and exit")
    reproduce.add_argument(
        "--scale",
        choices=("quick", "small", "paper"),
        default="small",
        help="quick: under a minute on 2 cores; small (default); paper: the full study",
    )
    _add_run_flags(reproduce, "DIR (default: reproduce-NAME-SCALE)")
    reproduce.set_defaults(func=_cmd_reproduce)


def _add_run_flags(parser: argparse.ArgumentParser, out_help: str) -> None:
    parser.add_argument("--out", metavar="DIR", help=f"output directory {out_help}")
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="local worker processes (default: one per core); not with --dask",
    )
    parser.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="submit to this Dask scheduler (e.g. tcp://host:8786) instead of a local cluster",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="give up on an unreachable --dask scheduler after S seconds (default 10)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="discard the results in DIR (even another spec's) and run everything again",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")


# -- run -----------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from ssdlab.config import parse_overrides
    from ssdlab.device import Device

    if args.builtin is not None:
        return _run_builtin(args)
    if (args.job is None) == (args.trace is None):
        raise UsageError("give exactly one of JOB or --trace FILE (or --builtin NAME)")
    if args.trace is not None and args.trace_format is None:
        raise UsageError("--trace needs --trace-format")
    if args.trace is None and (args.trace_format or args.closed_loop or args.shared_clock):
        raise UsageError("--trace-format, --closed-loop and --shared-clock apply to --trace only")
    if args.shared_clock and args.closed_loop:
        raise UsageError(
            "--shared-clock times traces by their timestamps; --closed-loop ignores them"
        )
    if not 1 <= args.queue_depth <= MAX_QUEUE_DEPTH:
        raise UsageError(f"--queue-depth must be in 1 .. {MAX_QUEUE_DEPTH}, got {args.queue_depth}")
    if not 0 < args.time_scale < math.inf:  # also refuses nan
        raise UsageError(f"--time-scale must be a finite positive number, got {args.time_scale}")
    _check_seed(args.seed)
    for workload in [args.job] if args.job is not None else args.trace:
        if not os.path.isfile(workload):
            raise UsageError(f"{workload}: no such file")
    for option, path in (
        ("--output", args.output),
        ("--request-log", args.request_log),
        ("--time-series", args.time_series),
    ):
        if path is not None and not os.path.isdir(os.path.dirname(path) or "."):
            raise UsageError(f"{option} {path}: no such directory")  # fail before the run

    overrides = parse_overrides(args.overrides)
    if args.request_log is not None:
        overrides.append(("stats.request_log", "true"))
    if args.job is not None:  # check the job file before any simulation work
        _core.job_groups(args.job)
    device = Device(
        args.config,
        seed=args.seed,
        overrides=overrides,
        store_data=args.store_data,
        time_series=args.time_series is not None,
    )
    progress = False if args.quiet else None
    if args.precondition:
        device.precondition()
    with contextlib.ExitStack() as stack:
        request_log = None
        if args.request_log is not None:
            # Streamed as the run steps: the device holds at most one step's rows.
            request_log = stack.enter_context(open(args.request_log, "w", encoding="utf-8"))
            request_log.write(device.request_log_header())
        if args.job is not None:
            result = device.run_job(args.job, progress=progress, request_log=request_log)
        else:
            result = device.run_trace(
                args.trace,
                args.trace_format,
                time_scale=args.time_scale,
                queue_depth=args.queue_depth,
                closed_loop=args.closed_loop,
                shared_clock=args.shared_clock,
                progress=progress,
                request_log=request_log,
            )

    if args.output_format == "json":
        text = result.to_json() + "\n"
    else:
        text = format_normal(result.to_dict(), device.source_name)
    _write_output(text, args.output)
    if args.time_series is not None:
        with open(args.time_series, "w", encoding="utf-8") as out:
            json.dump(device.time_series(), out, indent=1)
    return EXIT_OK


def _run_builtin(args: argparse.Namespace) -> int:
    """``ssdlab run CONFIG --builtin hdfs``: the sweep built-in on one device."""
    from ssdlab.config import parse_overrides
    from ssdlab.device import Device
    from ssdlab.melded import HdfsError, run_hdfs
    from ssdlab.spec import BUILTIN_WORKLOADS

    if args.job is not None or args.trace is not None:
        raise UsageError("give exactly one of JOB or --trace FILE (or --builtin NAME)")
    _check_seed(args.seed)
    params = dict(BUILTIN_WORKLOADS[args.builtin])
    for item in args.params:
        key, sep, value = item.partition("=")
        if not sep or key not in params:
            raise UsageError(
                f"--param {item}: expected KEY=VALUE with KEY one of {', '.join(params)}"
            )
        try:
            params[key] = type(params[key])(value)
        except ValueError:
            raise UsageError(f"--param {item}: expected a number") from None
    device = Device(args.config, seed=args.seed, overrides=parse_overrides(args.overrides))
    try:
        result = run_hdfs(device, params, seed=args.seed, hints=args.read_groups)
    except HdfsError as err:
        raise UsageError(str(err)) from None
    text = (
        result.to_json() + "\n"
        if args.output_format == "json"
        else (format_normal(result.to_dict(), device.source_name))
    )
    _write_output(text, args.output)
    return EXIT_OK


def _write_output(text: str, path: str | None) -> None:
    """A command's report: to ``--output``'s file when given, else to standard output."""
    if path is None:
        sys.stdout.write(text)
    else:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)


def format_normal(report: dict[str, Any], source: str) -> str:
    """A fio-like human summary of a run's JSON layout."""
    lines: list[str] = []
    for job in report["jobs"]:
        lines.append(
            f"{job.get('jobname', '?')}: ({source}, seed={report['seed']}, "
            f"config {report['config_hash'][:12]})"
        )
        for direction in ("read", "write", "trim"):
            stats = job.get(direction) or {}
            if stats.get("total_ios", 0):
                _format_direction(lines, direction, stats)
        sync = job.get("sync") or {}
        if sync.get("total_ios", 0):
            _format_sync(lines, sync)
    lines.append("")
    _format_ssd(lines, report.get("ssd", {}))
    return "\n".join(lines) + "\n"


def _format_direction(lines: list[str], direction: str, stats: dict[str, Any]) -> None:
    mib = stats.get("io_bytes", 0) / 2**20
    bw_mib = stats.get("bw_bytes", 0) / 2**20
    lines.append(
        f"  {direction}: IOPS={_si(stats.get('iops', 0))}, BW={bw_mib:.1f}MiB/s "
        f"({mib:.1f}MiB/{stats.get('runtime', 0)}ms, {stats.get('total_ios', 0)} ios)"
    )
    clat = stats.get("clat_ns") or {}
    slat = stats.get("slat_ns") or {}
    # Requests of an open-loop run (a trace, or a fio job with a rate) may wait at the host for
    # a free queue slot: fio's slat, and lat = slat + clat, as fio prints them.
    waited = (slat.get("mean") or 0) > 0
    parts = [("slat", slat)] if waited else []
    parts.append(("clat", clat))
    if waited:
        parts.append((" lat", stats.get("lat_ns") or {}))
    for name, part in parts:
        if part:
            _format_latency(lines, name, part)
    _format_percentiles(lines, "clat", clat)


def _format_sync(lines: list[str], sync: dict[str, Any]) -> None:
    """Flushes, as fio prints its syncs: their count, latency and percentiles."""
    lat = sync.get("lat_ns") or {}
    lines.append(f"  sync: {sync.get('total_ios', 0)} flushes")
    _format_latency(lines, "sync", lat)
    _format_percentiles(lines, "sync", lat)


def _format_latency(lines: list[str], name: str, lat: dict[str, Any]) -> None:
    lines.append(
        f"    {name} (usec): min={_us(lat.get('min'))}, max={_us(lat.get('max'))}, "
        f"avg={_us(lat.get('mean'))}, stdev={_us(lat.get('stddev'))}"
    )


def _format_percentiles(lines: list[str], name: str, lat: dict[str, Any]) -> None:
    pct = lat.get("percentile") or {}
    shown = [f"{label}th={_us(pct[key])}" for key, label in PERCENTILES if key in pct]
    if shown:
        lines.append(f"    {name} percentiles (usec): {', '.join(shown)}")


def _format_ssd(lines: list[str], ssd: dict[str, Any]) -> None:
    gc = ssd.get("gc", {})
    erases = ssd.get("erases", {})
    lines.append("SSD:")
    media, host = ssd.get("media_bytes_written", 0), ssd.get("host_bytes_written", 0)
    pages = ssd.get("flash_pages_programmed", 0)
    if host:
        lines.append(
            f"  WAF={ssd.get('waf', 0):.3f} (media bytes programmed / host bytes written: "
            f"{media:,} / {host:,}; flash pages programmed={pages})"
        )
    else:
        # No host writes: a ratio over zero would read as "no amplification".
        lines.append(
            f"  WAF=n/a (no host writes; media bytes programmed: {media:,}; "
            f"flash pages programmed={pages})"
        )
    flash = ssd.get("flash", {})
    lines.append(
        f"  mapping units of {ssd.get('mapping_unit_bytes', 0)} B: "
        f"merged in the write buffer={ssd.get('buffer_merged_units', 0)}, "
        f"padded={ssd.get('padded_units', 0)}, "
        f"read-modify-write reads={flash.get('rmw_reads', 0)}, "
        f"read from the controller={flash.get('controller_reads', 0)}"
    )
    # Throughput means little without it: a saturated device keeps its dies busy.
    lines.append(
        f"  dies: utilisation={ssd.get('die_utilisation', 0):.3f} "
        f"(max {ssd.get('die_utilisation_max', 0):.3f}), "
        f"channels: utilisation={ssd.get('channel_utilisation', 0):.3f}, "
        f"suspensions={ssd.get('suspensions', 0)}, scheduler={ssd.get('scheduler', '-')}"
    )
    lines.append(
        f"  GC: invocations={gc.get('invocations', 0)} "
        f"({gc.get('background_invocations', 0)} in the background), "
        f"pages programmed={gc.get('pages_programmed', 0)}, "
        f"moves from the controller={flash.get('gc_controller_reads', 0)}, "
        f"programs that waited for their block's erase={flash.get('programs_awaiting_erase', 0)}"
    )
    # Die time summed over the dies, so it can exceed the simulated time; its share of the
    # dies' busy time is what compares.
    lines.append(
        f"  GC die time={gc.get('time_ns', 0) / 1e6:.3f}ms summed over dies "
        f"(foreground {gc.get('foreground_time_ns', 0) / 1e6:.3f}ms, "
        f"background {gc.get('background_time_ns', 0) / 1e6:.3f}ms): "
        f"{gc.get('share_of_die_busy', 0):.1%} of the dies' busy time"
    )
    lines.append(
        f"  erases per block: min={erases.get('min', 0)}, mean={erases.get('mean', 0):.2f}, "
        f"max={erases.get('max', 0)}, stddev={erases.get('stddev', 0):.2f}"
    )
    power = ssd.get("energy", {}).get("average_power_w", 0)
    lines.append(f"  energy={ssd.get('energy_j', 0):.4f}J, average power={power:.3f}W")
    lines.append(f"  sim time={ssd.get('sim_time_ns', 0) / 1e9:.6f}s")


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:.2f}"


def _si(value: float) -> str:
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.1f}{suffix}"
    return f"{value:.0f}"


# -- serve ---------------------------------------------------------------------------------------

MIB = 1 << 20


def _add_limit_flags(serve: argparse.ArgumentParser) -> None:
    """The server's limits; defaults come from the Rust side, so that they live in one place."""
    d = _core.Server.default_limits()
    limits = serve.add_argument_group(
        "limits", "what clients can make the server hold, and for how long"
    )
    limits.add_argument(
        "--max-connections",
        type=int,
        default=d["max_connections"],
        metavar="N",
        help="connections served at once; a new one evicts the connection quiet longest "
        "(default %(default)s)",
    )
    limits.add_argument(
        "--max-handshakes",
        type=int,
        default=d["max_handshakes"],
        metavar="N",
        help="connections still negotiating, counted apart; the oldest is closed "
        "(default %(default)s)",
    )
    limits.add_argument(
        "--handshake-timeout",
        type=float,
        default=d["handshake_timeout_s"],
        metavar="S",
        help="seconds a client has to finish the handshake (default %(default)g)",
    )
    limits.add_argument(
        "--idle-timeout",
        type=float,
        default=d["idle_timeout_s"],
        metavar="S",
        help="close a connection with nothing outstanding after S seconds without a request "
        "(default %(default)g: never, as a mounted file system may be idle for hours)",
    )
    limits.add_argument(
        "--stall-timeout",
        type=float,
        default=d["stall_timeout_s"],
        metavar="S",
        help="close a connection waiting on its client (the rest of a request, or room for "
        "replies it does not read) after S seconds (default %(default)g)",
    )
    limits.add_argument(
        "--max-in-flight",
        type=int,
        default=d["max_requests_in_flight"],
        metavar="N",
        help="requests per connection whose replies are not sent yet; beyond, the server stops "
        "reading the connection (default %(default)s)",
    )
    limits.add_argument(
        "--max-buffered-mib",
        type=float,
        default=d["max_buffered_bytes"] / MIB,
        metavar="MIB",
        help="input and replies one connection may hold, in MiB (at least 1); beyond, the "
        "server stops reading the connection (default %(default)g)",
    )


def _limit_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The limit flags, checked, as keyword arguments of ``Server``."""
    for flag, value in (
        ("--max-connections", args.max_connections),
        ("--max-handshakes", args.max_handshakes),
        ("--max-in-flight", args.max_in_flight),
    ):
        if value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    for flag, value in (
        ("--handshake-timeout", args.handshake_timeout),
        ("--stall-timeout", args.stall_timeout),
    ):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a positive number of seconds, got {value}")
    if not (math.isfinite(args.idle_timeout) and args.idle_timeout >= 0):
        raise UsageError(f"--idle-timeout must be >= 0 seconds (0: never), got {args.idle_timeout}")
    if not (math.isfinite(args.max_buffered_mib) and args.max_buffered_mib >= 1):
        raise UsageError(f"--max-buffered-mib must be at least 1, got {args.max_buffered_mib}")
    return {
        "max_connections": args.max_connections,
        "max_handshakes": args.max_handshakes,
        "handshake_timeout_s": args.handshake_timeout,
        "idle_timeout_s": args.idle_timeout,
        "stall_timeout_s": args.stall_timeout,
        "max_requests_in_flight": args.max_in_flight,
        "max_buffered_bytes": round(args.max_buffered_mib * MIB),
    }


def _cmd_serve(args: argparse.Namespace) -> int:
    from ssdlab.serve import Server, interrupt_on_signals

    if args.port is not None and not 0 <= args.port < 65536:
        raise UsageError(f"--port must be in 0..65535 (0: any free port), got {args.port}")
    if args.power_loss_at is not None and args.power_loss_at < 0:
        raise UsageError(f"--power-loss-at must be >= 0 ns, got {args.power_loss_at}")
    if args.miss_threshold_us < 0:
        raise UsageError(f"--miss-threshold-us must be >= 0, got {args.miss_threshold_us}")
    compensation_ns = None
    if args.compensate != "auto":
        try:
            compensation_ns = round(float(args.compensate) * 1000)
        except ValueError:
            compensation_ns = -1
        if compensation_ns < 0:
            raise UsageError(
                f"--compensate: expected auto or microseconds >= 0, got {args.compensate!r}"
            )
    for option, path in (
        ("--output", args.output),
        ("--stats-log", args.stats_log),
        ("--socket", args.socket),
        ("--image", args.image),
    ):
        if path is not None and not os.path.isdir(os.path.dirname(path) or "."):
            raise UsageError(f"{option} {path}: no such directory")
    limits = _limit_kwargs(args)
    # SIGINT and SIGTERM stop the server cleanly from the moment its socket exists (scripts
    # that wait for the file may signal at once). One during start-up takes effect once the
    # device is built: the start is interrupted and the socket file goes with the server.
    with interrupt_on_signals():
        server = Server(
            args.config,
            socket=args.socket,
            port=args.port,
            host=args.bind,
            clock=args.clock,
            seed=args.seed,
            overrides=args.overrides,
            stats_log=args.stats_log,
            read_only=args.read_only,
            export_name=args.export_name,
            miss_threshold_ns=round(args.miss_threshold_us * 1000),
            compensation_ns=compensation_ns,
            **limits,
            tls=args.tls,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_psk=args.tls_psk,
            insecure=args.insecure,
            image=args.image,
            power_loss_at_ns=args.power_loss_at,
            power_loss_on_signal=True,
        )
        try:
            if not args.quiet:
                print(
                    f"ssdlab serve: listening on {server.uri} ({args.clock} clock)",
                    file=sys.stderr,
                )
            summary = server.serve_forever()
        except KeyboardInterrupt:  # before it began serving: stop it as serving would
            summary = server.stop()
    if args.output_format == "json":
        text = json.dumps(summary, indent=2) + "\n"
    else:
        text = format_normal(summary, args.config) + format_emulator(summary["emulator"])
    _write_output(text, args.output)
    return EXIT_OK


def format_emulator(emu: dict[str, Any]) -> str:
    """The emulator's own figures: connections, errors and (real time) reply timing."""
    misses = emu["deadline_misses"]
    late = misses["lateness_ns"]
    lines = [
        "Emulator:",
        f"  clock={emu['clock']}, connections={emu['connections']}, requests={emu['requests']}, "
        f"error replies={emu['error_replies']}, protocol errors={emu['protocol_errors']}",
        f"  wall time={emu['wall_time_ns'] / 1e9:.3f}s, sim time={emu['sim_time_ns'] / 1e9:.6f}s",
    ]
    if emu["clock"] == "realtime":
        compensation = emu["compensation"]
        lines.append(
            f"  replies sent {compensation['mean_ns'] / 1e3:.1f}us early on average "
            f"({compensation['mode']} compensation)"
        )
        gaps = emu["client_gaps_ns"]
        if gaps["N"]:
            # The compensation follows the lower quartile; a median far above it means client
            # latencies exceed the model's by about the difference (a host slow to wake them).
            lines.append(
                f"  client gaps (reply to next request): p25={_us(gaps['p25'])}us, "
                f"p50={_us(gaps['p50'])}us, p99={_us(gaps['p99'])}us"
            )
        lines.append(
            f"  deadline misses={misses['count']} (> {misses['threshold_ns'] / 1e3:g}us late; "
            f"lateness avg={_us(late['mean'])}us, p99={_us(late['p99'])}us, "
            f"max={_us(late['max'])}us)"
        )
    closed = emu["closed_by_server"]
    lines.append(
        f"  back-pressure waits={emu['backpressure_waits']}, "
        f"peak buffered={emu['peak_buffered_bytes'] / MIB:.1f}MiB"
    )
    lines.append(
        "  closed by the server: "
        + ", ".join(f"{k.replace('_', ' ')}={v}" for k, v in closed.items())
    )
    if emu["stats_log_error"]:
        lines.append(f"  stats log: not written completely ({emu['stats_log_error']})")
    tls = emu["tls"]
    if tls["mode"] != "off":
        lines.append(f"  TLS {tls['mode']} ({tls['credentials']} credentials)")
    image = emu["image"]
    if image is not None:
        lines.append(
            f"  image {image['path']}: {image['loaded_bytes'] / MIB:.1f}MiB loaded at start, "
            f"syncs={image['syncs']}"
        )
    for loss in emu.get("power_losses") or []:
        if loss["recovered"]:
            lines.append(
                f"  power loss ({loss['trigger']}) at {loss['at_ns'] / 1e6:.3f} ms: recovered in "
                f"{loss['recovery_ns'] / 1e6:.3f} ms simulated, {loss['oob_pages_read']} OOB "
                f"reads, {loss['lost_units']} units lost"
            )
        else:
            lines.append(
                f"  power loss ({loss['trigger']}) at {loss['at_ns'] / 1e6:.3f} ms: not recovered"
            )
    return "\n".join(lines) + "\n"


# -- stats ---------------------------------------------------------------------------------------


def _cmd_stats(args: argparse.Namespace) -> int:
    from ssdlab import stats_log

    if not os.path.isfile(args.file):
        raise UsageError(f"{args.file}: no such file")
    if args.output is not None and not os.path.isdir(os.path.dirname(args.output) or "."):
        raise UsageError(f"--output {args.output}: no such directory")
    try:
        summary = stats_log.summarize(args.file, page_size_bytes=args.page_size)
    except ValueError as err:  # the page size; errors in the file are WorkloadErrors
        raise UsageError(f"--page-size: {err}") from err
    stats_log.write_report(summary, args.output_format, args.output)
    return EXIT_OK


# -- presets, demo -------------------------------------------------------------------------------


def _cmd_presets(args: argparse.Namespace) -> int:
    presets = _core.presets()
    width = max((len(name) for name, _ in presets), default=0)
    for name, description in presets:
        print(f"{name:<{width}}  {description}")
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ssdlab.demo import render, run_demo

    if not 0 < args.scale <= MAX_DEMO_SCALE:  # also refuses nan
        raise UsageError(f"--scale must be in (0, {MAX_DEMO_SCALE:g}], got {args.scale}")
    _check_seed(args.seed)
    console = Console()
    if not args.quiet:
        _err_console().print(
            "Running the same hot/cold workload on three identical small TLC devices: "
            "without hints, with hot/cold placement hints, and with random ids as a control ..."
        )
    result = run_demo(seed=args.seed, scale=args.scale, progress=False if args.quiet else None)
    render(result, console=console)
    if not args.quiet:
        _err_console().print(f"[dim]({result.wall_seconds:.1f} s wall time)[/]")
    return EXIT_OK


#: The OLTP settings' fields, as `ssdlab db run` spells them.
_DB_RUN_OPTIONS = {
    "cache_fraction": "--cache-fraction",
    "wal_per_cache": "--wal-per-cache",
    "transactions": "--transactions",
    "warmup_transactions": "--warmup",
    "hints": "--hints",
}


def _db_scale(args: argparse.Namespace) -> int | float:
    """``--scale`` as its workload takes it: a TPC-H scale factor > 0, else an integer >= 1."""
    if args.workload == "tpch":
        scale = 0.01 if args.scale is None else args.scale
        if not scale > 0:
            raise UsageError(f"--scale: a TPC-H scale factor must be > 0, got {scale:g}")
        return scale
    scale = 1 if args.scale is None else args.scale
    if scale < 1 or scale != int(scale):
        raise UsageError(f"--scale must be at least 1, got {scale:g}")
    return int(scale)


def _db_option_error(workload: str, message: str) -> str:
    """A workload's parameter error, with the option that sets the parameter named first."""
    from ssdlab.oltp import SCALE_PARAMETER

    for parameter, option in (
        (SCALE_PARAMETER[workload], "--scale"),
        ("population", "--population"),
        ("queries", "--queries"),
        ("tables", "--tables"),
    ):
        if f"{workload} {parameter}" in message:
            return f"{option}: {message}"
    return message


def _cmd_db_run(args: argparse.Namespace) -> int:
    from ssdlab import oltp
    from ssdlab.config import parse_overrides
    from ssdlab.db import OltpSettings, parse_hints, run_oltp
    from ssdlab.device import Device
    from ssdlab.spec import HONOR_HINTS_KEY

    _check_seed(args.seed)
    if args.workload not in oltp.WORKLOADS:
        raise UsageError(f"WORKLOAD: expected {', '.join(oltp.WORKLOADS)}, got {args.workload!r}")
    params: dict[str, Any] = {"scale": _db_scale(args)}
    for option, value, workloads in (
        ("--tables", args.tables, ("sysbench",)),
        ("--population", args.population, ("tpcc", "tpcb")),
        ("--queries", args.queries, ("tpch",)),
    ):
        if value is None:
            continue
        if args.workload not in workloads:
            raise UsageError(f"{option} applies to {' and '.join(workloads)} only")
        params[option[2:]] = value
    try:
        oltp.make_workload(args.workload, **dict(params))
    except ValueError as err:
        raise UsageError(_db_option_error(args.workload, str(err))) from None
    if args.clock == "realtime" and args.cpu != "zero":
        raise UsageError("--cpu: a --clock realtime run counts the host's time as it passes")
    try:
        settings = OltpSettings(
            workload=args.workload,
            params=params,
            cache_fraction=args.cache_fraction,
            wal_per_cache=args.wal_per_cache,
            transactions=args.transactions,
            warmup_transactions=args.warmup,
            hints=frozenset() if args.backend == "native" else parse_hints(args.hints),
            cpu="realtime" if args.clock == "realtime" else args.cpu,
            precondition=args.precondition,
            backend=args.backend,
        )
    except ValueError as err:
        # The settings' errors start with their field's name: say the option's instead.
        field, _, rest = str(err).partition(":")
        raise UsageError(f"{_DB_RUN_OPTIONS.get(field, field)}:{rest}") from None
    overrides = parse_overrides(args.overrides)
    if any(key == HONOR_HINTS_KEY for key, _ in overrides):
        raise UsageError(f"--set {HONOR_HINTS_KEY}: --hints sets it (--hints none for off)")
    overrides.append((HONOR_HINTS_KEY, "true" if settings.hints else "false"))
    device = Device(args.config, seed=args.seed, overrides=overrides, store_data=True)
    if not args.quiet:
        _err_console().print(
            f"Loading {args.workload} onto {device.source_name}"
            f"{' (preconditioned)' if settings.precondition and args.backend == 'block' else ''}"
            f"{', native flash under the host FTL' if args.backend == 'native' else ''} ..."
        )
    result = run_oltp(device, settings, seed=args.seed)
    if args.output_format == "json":
        print(json.dumps(result, indent=2))
    else:
        from ssdlab.db import render

        render(result, device.source_name)
    return EXIT_OK


def _err_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


# -- sweep, report, reproduce ------------------------------------------------------------------


def _sweep_options(args: argparse.Namespace) -> dict[str, Any]:
    if args.workers is not None and args.dask is not None:
        raise UsageError("--workers sets the local cluster's size; it does not go with --dask")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if not (math.isfinite(args.connect_timeout) and args.connect_timeout > 0):
        raise UsageError(f"--connect-timeout must be a positive number, got {args.connect_timeout}")
    return {
        "out": args.out,
        "workers": args.workers,
        "dask": args.dask,
        "force": args.force,
        "progress": False if args.quiet else None,
        "connect_timeout_s": args.connect_timeout,
        "on_problem": lambda message: print(f"ssdlab: warning: {message}", file=sys.stderr),
    }


def _summary(outcome: Any, quiet: bool) -> int:
    """Print what the sweep did; exit status 1 when any of the spec's runs failed."""
    results = outcome.results
    failed = results[results["status"] != "ok"] if len(results) else results
    if not quiet:
        print(
            f"ssdlab sweep {outcome.spec.name}: {outcome.total} runs, {outcome.ran} run now, "
            f"{outcome.skipped} already done, {len(failed)} failed; results in {outcome.out_dir} "
            f"({outcome.wall_s:.1f} s)",
            file=sys.stderr,
        )
    for row in failed.head(10).itertuples(index=False):
        print(f"ssdlab: run {row.run_key} failed: {row.error}", file=sys.stderr)
    if len(failed) > 10:
        print(f"ssdlab: ... and {len(failed) - 10} more failed runs", file=sys.stderr)
    return EXIT_RUN_ERROR if len(failed) else EXIT_OK


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ssdlab.sweeps import run_sweep

    outcome = _run(run_sweep, args.spec, scale=args.scale, **_sweep_options(args))
    return _summary(outcome, args.quiet)


def _run(run_sweep: Any, spec: Any, **options: Any) -> Any:
    from ssdlab.store import StoreError

    try:
        return run_sweep(spec, **options)
    except StoreError as err:  # another spec's directory: the user chooses --out or --force
        raise UsageError(str(err)) from None


def _cmd_report(args: argparse.Namespace) -> int:
    from ssdlab.report import make_report

    report = make_report(args.dir)
    sys.stdout.write(report.markdown)
    print(f"ssdlab report: {report.path} and {len(report.tables)} plots", file=sys.stderr)
    return EXIT_OK


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from ssdlab import reproduce
    from ssdlab.report import headline, make_report
    from ssdlab.sweeps import run_sweep

    if args.list:
        for name, description in reproduce.studies():
            print(f"{name}  {description}")
        return EXIT_OK
    if args.name is None:
        raise UsageError("give a study NAME, or --list to see them")
    try:
        spec = reproduce.load(args.name, args.scale)
    except reproduce.UnknownStudy as err:
        raise UsageError(str(err)) from None
    options = _sweep_options(args)
    out = options["out"] or reproduce.default_out(args.name, args.scale)
    studies = [(spec, out)]
    for companion in spec.companions:
        companion_spec = reproduce.load(companion, args.scale)
        studies.append((companion_spec, os.path.join(out, companion)))
    status = EXIT_OK
    for study, study_out in studies:
        outcome = _run(run_sweep, study, **(options | {"out": study_out}))
        status = max(status, _summary(outcome, args.quiet))
        report = make_report(outcome.out_dir)
        print(f"# {report.title} ({args.scale})\n")
        # A study with tables of its own (reproduce.study_text) prints them instead; some add
        # a table of their own after the headline (reproduce.extra_report).
        print(reproduce.study_text(study.name, outcome.out_dir) or headline(report))
        extra = reproduce.extra_report(study.name, outcome.out_dir)
        if extra:
            print(f"\n{extra}")
        print(f"\nReport: {report.path}\n")
    return status
