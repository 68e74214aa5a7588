"""``ssdlab stats``: the summary of a per-request log, as a table or as JSON.

The log is the CSV that ``ssdlab run --request-log FILE`` writes (and the NBD emulator's
``--stats-log``): one row per request with its op, size, duration and flash work. Such logs reach
tens of millions of rows, so the native core streams the file in constant memory and returns
only the totals (:func:`summarize`); this module presents them. Durations are kept in ns in the
JSON and shown in µs in the table.

What the figures mean (the Rust module ``ssdlab_workload::request_log`` has the details):

- ``write_amplification``: media bytes programmed over host bytes written, as the simulator's
  ``waf``: flash writes of all rows (GC moves included, wherever triggered) times
  ``page_size_bytes``, over the bytes of the write rows (the log does not record the page size;
  4096 unless ``--page-size`` says otherwise).
- ``flash_time_share``: the summed flash-command time over the summed request durations; it
  can exceed 1 when a request's commands run on several dies at once.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ssdlab import _core

OPS = ("read", "write", "trim", "flush")

#: (key in an op's ``duration_ns``, label) of the rows under "duration (µs)".
DURATION_ROWS = (
    ("min", "min"),
    ("mean", "mean"),
    ("p50", "p50"),
    ("p90", "p90"),
    ("p99", "p99"),
    ("p99_9", "p99.9"),
    ("p99_99", "p99.99"),
    ("max", "max"),
)

#: (key of an op's summary, label) of the rows under "flash".
FLASH_ROWS = (
    ("flash_reads", "reads"),
    ("flash_writes", "writes"),
    ("oob_reads", "OOB reads"),
    ("oob_writes", "OOB writes"),
    ("erases", "erases"),
    ("requests_with_erases", "requests w/ erase"),
)


def summarize(path: str | os.PathLike[str], *, page_size_bytes: int = 4096) -> dict[str, Any]:
    """The summary of the request log at ``path`` (see the module doc for its figures).

    Raises :class:`ssdlab.errors.WorkloadError` naming the file and line when the file cannot
    be read or a line is not a request-log row, and ``ValueError`` for a bad page size.
    """
    try:
        summary = _core.summarize_request_log(os.fspath(path), page_size_bytes)
    except OverflowError as err:  # negative or above 2**64: the native side takes a u64
        raise ValueError(
            f"page_size_bytes must be a positive multiple of 512, got {page_size_bytes}"
        ) from err
    return summary


def write_report(summary: dict[str, Any], output_format: str, output: str | None) -> None:
    """Write ``summary`` as ``"json"`` or as the ``"normal"`` table to ``output`` (a path) or
    to stdout."""
    from rich.console import Console

    if output_format == "json":
        text = json.dumps(summary, indent=2) + "\n"
        if output is None:
            sys.stdout.write(text)
        else:
            with open(output, "w", encoding="utf-8") as out:
                out.write(text)
        return
    if output is None:
        render(summary, console=Console())
    else:
        with open(output, "w", encoding="utf-8") as out:
            render(summary, console=Console(file=out, width=120, no_color=True))


def render(summary: dict[str, Any], *, console: Any = None) -> None:
    """Print the table of ``summary`` (one column per op that occurs, and the total), then the
    write amplification and the flash share of the request time."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    columns = [op for op in OPS if summary["ops"][op]["requests"]]
    parts = [summary["ops"][op] for op in columns] + [summary["total"]]
    first, last = summary["first_request"], summary["last_request"]
    span = "" if first is None else f" (requests {first:,} to {last:,})"
    # Without vertical rules, so that four ops and the total fit 80 columns.
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("")
    for name in [*columns, "total"]:
        table.add_column(name, justify="right")

    def row(label: str, cell: Any) -> None:
        table.add_row(label, *(cell(part) for part in parts))

    row("requests", lambda p: f"{p['requests']:,}")
    row("data", lambda p: _bytes(p["bytes"]))
    table.add_row("[bold]duration (µs)[/]")
    for key, label in DURATION_ROWS:
        row(f"  {label}", lambda p, key=key: _us(p["duration_ns"] and p["duration_ns"][key]))
    table.add_row("[bold]flash[/]")
    for key, label in FLASH_ROWS:
        row(f"  {label}", lambda p, key=key: f"{p[key]:,}")
    row("  time (ms)", lambda p: f"{p['flash_duration_ns'] / 1e6:,.3f}")
    # The heading is printed on its own: as the table's title it would wrap to the table's width.
    console.print(f"{escape(summary['source'])}: {summary['rows']:,} rows{span}")
    console.print(table)
    for line in _notes(summary):
        console.print(line)


def _notes(summary: dict[str, Any]) -> list[str]:
    waf = summary["write_amplification"]
    share = summary["flash_time_share"]
    page_kib = summary["page_size_bytes"] / 1024
    notes = [
        f"write amplification: {'-' if waf is None else f'{waf:.3f}'} = "
        f"{summary['total']['flash_writes']:,} flash writes of {page_kib:g} KiB pages / "
        f"{summary['ops']['write']['bytes']:,} host bytes written",
        f"flash share of request time: {'-' if share is None else f'{share:.1%}'}",
    ]
    if share is not None and share > 1:
        notes[-1] += " (over 100%: a request's flash commands overlap on several dies)"
    return notes


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:,.2f}"


def _bytes(n: int) -> str:
    for factor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n >= factor:
            return f"{n / factor:,.1f} {unit}"
    return f"{n} B"
