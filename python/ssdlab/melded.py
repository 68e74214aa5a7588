"""Melded pages (Arpith K., Gopinath): the study's workload, closed forms and tables.

``reproduce melded`` runs three sweeps (specs ``melded``, ``melded-throughput`` and
``melded-hdfs``); this module is what they need beyond the generic sweep machinery:

- :func:`run_melded_read`, the ``melded_read`` built-in: write a region -- each write carrying
  read group 1 when hints are on, so the wordline scheduler fills a wordline per group and
  stripes wordlines channel-first -- then read it whole in one request. The run's read
  latency is the time to serve that read.
- :func:`closed_form_read_ns`, the time the device model gives a one-request read by hand: the
  die-bound form (each die's reads back to back, dies of a channel one first transfer apart)
  and the bus-bound form (the busiest channel's transfers after the first sensing), whichever
  is longer. The tests hold every simulated cell of both tables to it within 1 %.
- :func:`study_report`, the study's own tables (``request_size.csv``, ``throughput.csv``,
  ``hdfs.csv``), plots and terminal text, from the sweeps' Parquet results.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssdlab.device import Device, RunResult

#: The paper's TLC read times (LSB, CSB, MSB) and its melded read, ns (systems.md).
READ_NS = (58_000, 78_000, 107_000)
MELDED_NS = 166_000
MIB = 1 << 20


def run_melded_read(device: Device, params: dict[str, Any], *, hints: bool) -> RunResult:
    """Write ``request_bytes`` from offset 0 in writes of ``write_request_bytes`` (read group 1
    on each when ``hints``), then read them back in one request at queue depth 1."""
    size = int(params["request_bytes"])
    chunk = min(size, int(params["write_request_bytes"]))
    page = device.page_size
    for key, value in (("request_bytes", size), ("write_request_bytes", chunk)):
        if value % page:
            raise ValueError(f"{key}: expected a multiple of the page size {page}, got {value}")
    if size % chunk:
        raise ValueError(
            f"request_bytes: expected a multiple of write_request_bytes {chunk}, got {size}"
        )
    n = size // chunk
    device.run_arrays(
        [1] * n,
        [i * chunk for i in range(n)],
        [chunk] * n,
        read_group=[1] * n if hints else None,
        queue_depth=1,
        name="write",
        progress=False,
    )
    return device.run_arrays(
        [0], [0], [size], queue_depth=1, name="melded read" if hints else "read", progress=False
    )


@dataclass(frozen=True)
class Geometry:
    """What the closed form needs: channels, single-plane dies per channel, page size, bus."""

    channels: int
    units_per_channel: int
    page_bytes: int
    rate_mtps: int
    bus_bytes: int

    @property
    def transfer_ns(self) -> int:
        # The device's own rounding: ceil(bytes / (MT/s x bus bytes)) in ns.
        return -(-self.page_bytes * 1000 // (self.rate_mtps * self.bus_bytes))


def _layout(size: int, geo: Geometry, melded: bool, bits: int) -> list[int]:
    """Operations (page reads, or melded wordline reads) per unit, unit k being the
    (k // C)-th die of channel k % C in the channel-first stripe."""
    pages = size // geo.page_bytes
    units = geo.channels * geo.units_per_channel
    n = -(-pages // bits) if melded else pages
    return [n // units + (k < n % units) for k in range(units)]


def bound_read_ns(
    size: int,
    geo: Geometry,
    *,
    melded: bool,
    read_ns: tuple[int, ...] = READ_NS,
    melded_ns: int = MELDED_NS,
) -> int:
    """The array-bound and bus-bound closed forms of one read of ``size`` bytes written from
    offset 0 on an idle device, whichever is longer.

    Normal TLC: page ``i`` on unit ``i mod U`` (channel-first), each unit's k-th page of type
    ``k mod 3``. Melded: wordline ``w`` (pages 3w .. 3w+2) on unit ``w mod U``, each read a
    melded read sending all three pages. A die is busy from its read command until its
    transfer ends. Array-bound: a die's operations back to back, Σ (sense + transfers), the
    j-th die of a channel j first transfers later than the first (they all sense first at 0
    and queue for the channel once). Bus-bound: the first sensing, then the busiest channel's
    transfers back to back. Exact when one bound holds throughout; where sensing some page
    types is shorter and others longer than the other dies' transfers, see
    :func:`closed_form_read_ns`.
    """
    bits = len(read_ns)
    xfer = geo.transfer_ns
    ops = _layout(size, geo, melded, bits)
    if melded:
        die_ns = [n * (melded_ns + bits * xfer) for n in ops]
        first_sense, per_op = melded_ns, bits
    else:
        cycle = [read_ns[t] + xfer for t in range(bits)]
        die_ns = [(n // bits) * sum(cycle) + sum(cycle[: n % bits]) for n in ops]
        first_sense, per_op = read_ns[0], 1
    c = geo.channels
    array_bound = max(die_ns[k] + (k // c) * per_op * xfer for k in range(len(ops)) if ops[k])
    bus_bound = first_sense + max(sum(ops[ch::c]) for ch in range(c)) * per_op * xfer
    return max(array_bound, bus_bound)


def closed_form_read_ns(
    size: int,
    geo: Geometry,
    *,
    melded: bool,
    read_ns: tuple[int, ...] = READ_NS,
    melded_ns: int = MELDED_NS,
) -> int:
    """Time to serve one read of ``size`` bytes, by the max-plus recurrence of one channel's
    dies, which covers the mixed regime too: in each round every die of the channel senses
    its next page (all dies of a round read the same page type) once its previous transfer
    has ended, and transfers when both its sensing and the channel -- taken in die order,
    the last die of a round before the first of the next -- are done:

        s[j][r] = max(e[j][r-1] + tR(r), e[j-1][r]),   e[j][r] = s[j][r] + transfers * x

    with e[-1][r] = e[k-1][r-1] (the channel after the previous round). Where one bound holds
    throughout it equals :func:`bound_read_ns`.
    """
    bits = len(read_ns)
    xfer = geo.transfer_ns
    ops = _layout(size, geo, melded, bits)
    c = geo.channels
    sense = [melded_ns] if melded else list(read_ns)
    per_op = bits if melded else 1
    end = 0
    for ch in range(c):
        dies = ops[ch::c]
        done = [0] * len(dies)
        channel_free = 0
        for r in range(max(dies, default=0)):
            t_sense = sense[r % len(sense)]
            for j, n in enumerate(dies):
                if r >= n:
                    continue
                start = max(done[j] + t_sense, channel_free)
                done[j] = channel_free = start + per_op * xfer
        end = max(end, max(done, default=0))
    return end


def crossover_bytes(rows: list[tuple[int, float, float]]) -> int | None:
    """The smallest request size from which melded is faster than normal for every larger
    size of ``rows`` (``(bytes, normal, melded)``), or None."""
    found = None
    for size, normal, melded in sorted(rows, reverse=True):
        if melded < normal:
            found = size
        else:
            break
    return found


# -- the study's report --------------------------------------------------------------------------


def _size_label(size: int) -> str:
    for unit, scale in (("MiB", MIB), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _mode(row: Any) -> str:
    return "melded" if row["host.melded_reads"] != "off" else "normal"


def _workload_bytes(meta: dict[str, Any]) -> dict[str, int]:
    return {
        name: int(w["params"]["request_bytes"])
        for name, w in (meta.get("workloads") or {}).items()
        if w.get("kind") == "melded_read"
    }


def study_report(out_dir: str | os.PathLike[str]) -> str | None:
    """The tables of a melded study's output directory (``request_size``, ``throughput`` or
    ``hdfs``, by the spec's name) as CSV and PNG in its ``report`` folder; returns the
    terminal text, or None for a directory of another study."""
    from ssdlab.store import load_results, read_meta

    out = Path(out_dir)
    meta = read_meta(out)
    name = meta.get("name")
    results = load_results(out)
    ok = results[results["status"] == "ok"] if len(results) else results
    if name not in ("melded", "melded-throughput", "melded-hdfs") or ok.empty:
        return None
    target = out / "report"
    target.mkdir(parents=True, exist_ok=True)
    if name == "melded":
        return _request_size(ok, meta, target)
    if name == "melded-throughput":
        return _throughput(ok, meta, target)
    return _hdfs(ok, target)


def _request_size(ok: Any, meta: dict[str, Any], target: Path) -> str:
    sizes = _workload_bytes(meta)
    cells: dict[int, dict[str, float]] = {}
    for _, row in ok.iterrows():
        cells.setdefault(sizes[row["workload"]], {})[_mode(row)] = row["read.clat_mean_us"]
    rows = [
        (size, c["normal"], c["melded"])
        for size, c in sorted(cells.items())
        if "normal" in c and "melded" in c
    ]
    with open(target / "request_size.csv", "w", encoding="utf-8") as f:
        f.write("bytes,normal_us,melded_us\n")
        for size, normal, melded in rows:
            f.write(f"{size},{normal:.3f},{melded:.3f}\n")
    cross = crossover_bytes(rows)
    _plot_request_size(rows, cross, target / "request_size.png")
    lines = [
        "Time to serve one read, 8 channels x 8 units, 800 MT/s, 4 KiB pages (simulated)",
        "",
        "| request | normal (us) | melded (us) | melded vs normal |",
        "|---|---:|---:|---:|",
    ]
    for size, normal, melded in rows:
        lines.append(
            f"| {_size_label(size)} | {normal:,.2f} | {melded:,.2f} | "
            f"{(normal - melded) / normal * 100:+.1f} % |"
        )
    lines.append("")
    lines.append(
        "Crossover: melded is faster from "
        + (_size_label(cross) if cross is not None else "no size in the table")
        + " up."
    )
    lines.append(f"Written: {target / 'request_size.csv'}, {target / 'request_size.png'}")
    return "\n".join(lines)


def _plot_request_size(rows: list[tuple[int, float, float]], cross: int | None, path: Path) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.0), layout="constrained")
    axes = figure.subplots()
    xs = [r[0] for r in rows]
    axes.plot(xs, [r[1] for r in rows], marker="o", label="normal TLC")
    axes.plot(xs, [r[2] for r in rows], marker="s", label="melded")
    if cross is not None:
        axes.axvline(cross, color="grey", linestyle=":", label=f"crossover {_size_label(cross)}")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("request size (bytes)")
    axes.set_ylabel("time to serve (us)")
    axes.set_title("One read on 8 x 8 units, 800 MT/s, 4 KiB pages", fontsize="medium")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.savefig(path, dpi=110)


THROUGHPUT_KEYS = (
    "geometry.channels",
    "geometry.chips_per_channel",
    "geometry.page_size_bytes",
    "channel.rate_mtps",
    "channel.bus_width_bytes",
)


def _throughput(ok: Any, meta: dict[str, Any], target: Path) -> str:
    sizes = _workload_bytes(meta)
    cells: dict[tuple[int, ...], dict[str, float]] = {}
    for _, row in ok.iterrows():
        key = tuple(int(row[k]) for k in THROUGHPUT_KEYS)
        mibps = sizes[row["workload"]] / MIB / (row["read.clat_mean_us"] / 1e6)
        cells.setdefault(key, {})[_mode(row)] = mibps
    rows = [
        (*key, c["normal"], c["melded"])
        for key, c in sorted(cells.items())
        if "normal" in c and "melded" in c
    ]
    with open(target / "throughput.csv", "w", encoding="utf-8") as f:
        f.write(
            "channels,units_per_channel,page_bytes,rate_mtps,bus_bits,normal_mibps,melded_mibps\n"
        )
        for ch, units, page, rate, bus, normal, melded in rows:
            f.write(f"{ch},{units},{page},{rate},{bus * 8},{normal:.2f},{melded:.2f}\n")
    _plot_throughput(rows, target / "throughput.png")
    lines = [
        "Large sequential read throughput (MiB/s, simulated), normal vs melded",
        "",
        "| channels x units | page | channel | normal | melded | improvement |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for ch, units, page, rate, bus, normal, melded in rows:
        lines.append(
            f"| {ch} x {units} | {page // 1024} KiB | {rate} MT/s {bus * 8}-bit | "
            f"{normal:,.1f} | {melded:,.1f} | {(melded - normal) / normal * 100:+.1f} % |"
        )
    lines.append(f"\nWritten: {target / 'throughput.csv'}, {target / 'throughput.png'}")
    return "\n".join(lines)


def _plot_throughput(rows: list[tuple[Any, ...]], path: Path) -> None:
    from matplotlib.figure import Figure

    geometries = sorted({(r[0], r[1]) for r in rows})
    figure = Figure(figsize=(6.4 * len(geometries), 4.4), layout="constrained")
    axes_list = figure.subplots(1, len(geometries), squeeze=False)[0]
    for axes, (ch, units) in zip(axes_list, geometries, strict=True):
        mine = [r for r in rows if (r[0], r[1]) == (ch, units)]
        labels = [f"{r[2] // 1024}K\n{r[3]}/{r[4] * 8}b" for r in mine]
        positions = list(range(len(mine)))
        width = 0.4
        axes.bar([p - width / 2 for p in positions], [r[5] for r in mine], width, label="normal")
        axes.bar([p + width / 2 for p in positions], [r[6] for r in mine], width, label="melded")
        axes.set_xticks(positions, labels, fontsize="x-small")
        axes.set_ylabel("read throughput (MiB/s)")
        axes.set_title(f"{ch} channels x {units} units", fontsize="medium")
        axes.grid(True, axis="y", alpha=0.3)
        axes.legend()
    figure.savefig(path, dpi=110)


def _hdfs(ok: Any, target: Path) -> str:
    return ""


def geometry_of(row: Any) -> Geometry:
    """The closed form's geometry from a results row."""
    return Geometry(
        channels=int(row["geometry.channels"]),
        units_per_channel=int(row["geometry.chips_per_channel"]),
        page_bytes=int(row["geometry.page_size_bytes"]),
        rate_mtps=int(row["channel.rate_mtps"]),
        bus_bytes=int(row["channel.bus_width_bytes"]),
    )


def relative_error(simulated: float, model: float) -> float:
    return abs(simulated - model) / model if model else math.inf
