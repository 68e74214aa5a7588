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


class HdfsError(ValueError):
    """A bad parameter of the ``hdfs`` workload; the message names it."""


def hdfs_requests(
    params: dict[str, Any], page_bytes: int, capacity_bytes: int, *, seed: int, hints: bool
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """The HDFS-style DataNode's two phases as request columns.

    Writes: ``blocks`` block files of ``block_bytes``, ``writers`` of them written at once
    (their ``packet_bytes`` writes interleaved, as a DataNode receives several pipelines), each
    block its own read group (1, 2, ...) when ``hints``. Reads: clients read whole blocks in
    ``read_bytes`` requests, ``clients`` blocks at a time, blocks in a seeded random order;
    with ``small_read_fraction`` > 0 that share of the read requests are ``small_read_bytes``
    reads at random page-aligned offsets of the written data (a mix of point lookups).
    """
    block = int(params["block_bytes"])
    page = page_bytes
    for key in ("block_bytes", "packet_bytes", "read_bytes", "small_read_bytes"):
        value = int(params[key])
        if value <= 0 or value % page:
            raise HdfsError(
                f"hdfs.{key}: expected a positive multiple of the page size {page}, got {value}"
            )
    packet, read = int(params["packet_bytes"]), int(params["read_bytes"])
    for key, value in (("packet_bytes", packet), ("read_bytes", read)):
        if block % value:
            raise HdfsError(f"hdfs.{key}: expected a divisor of block_bytes {block}, got {value}")
    blocks = int(params["blocks"])
    if blocks * block > capacity_bytes:
        raise HdfsError(
            f"hdfs.blocks: {blocks} blocks of {block} bytes exceed the device's "
            f"{capacity_bytes} logical bytes"
        )
    import numpy as np

    rng = np.random.default_rng(seed)

    def interleave(streams: list[list[tuple[int, int, int]]]) -> list[tuple[int, int, int]]:
        out = []
        for i in range(max((len(s) for s in streams), default=0)):
            out += [s[i] for s in streams if i < len(s)]
        return out

    def columns(items: list[tuple[int, int, int]], op: int) -> dict[str, list[int]]:
        return {
            "ops": [op] * len(items),
            "offsets": [o for o, _, _ in items],
            "lengths": [n for _, n, _ in items],
            "read_group": [g for _, _, g in items],
        }

    writers = max(1, int(params["writers"]))
    writes: list[tuple[int, int, int]] = []
    for first in range(0, blocks, writers):
        streams = [
            [(b * block + k, packet, b + 1 if hints else -1) for k in range(0, block, packet)]
            for b in range(first, min(first + writers, blocks))
        ]
        writes += interleave(streams)
    clients = max(1, int(params["clients"]))
    order = [int(b) for b in rng.permutation(blocks)]
    reads: list[tuple[int, int, int]] = []
    for first in range(0, blocks, clients):
        streams = [
            [(b * block + k, read, -1) for k in range(0, block, read)]
            for b in order[first : first + clients]
        ]
        reads += interleave(streams)
    fraction = float(params["small_read_fraction"])
    if fraction > 0:
        small = int(params["small_read_bytes"])
        # As many small reads as make them `fraction` of all read requests.
        count = round(len(reads) * fraction / (1 - fraction))
        slots = (blocks * block - small) // page + 1
        offsets = rng.integers(0, slots, size=count) * page
        positions = np.sort(rng.integers(0, len(reads) + 1, size=count))
        mixed: list[tuple[int, int, int]] = []
        j = 0
        for i, item in enumerate(reads):
            while j < count and positions[j] == i:
                mixed.append((int(offsets[j]), small, -1))
                j += 1
            mixed.append(item)
        mixed += [(int(o), small, -1) for o in offsets[j:]]
        reads = mixed
    return columns(writes, 1), columns(reads, 0)


def run_hdfs(device: Device, params: dict[str, Any], *, seed: int, hints: bool) -> RunResult:
    """Write the DataNode's block files, then read them (see :func:`hdfs_requests`); the
    result is the read phase's."""
    writes, reads = hdfs_requests(
        params, device.page_size, device.logical_bytes, seed=seed, hints=hints
    )
    device.run_arrays(
        writes["ops"],
        writes["offsets"],
        writes["lengths"],
        read_group=writes["read_group"],
        queue_depth=max(1, int(params["writers"])),
        name="datanode writes",
        progress=False,
    )
    return device.run_arrays(
        reads["ops"],
        reads["offsets"],
        reads["lengths"],
        queue_depth=max(1, int(params["clients"])),
        name="hdfs reads",
        progress=False,
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


def regime(
    geo: Geometry, *, melded: bool, read_ns: tuple[int, ...] = READ_NS, melded_ns: int = MELDED_NS
) -> str:
    """``"array"`` when every sensing outlasts the other dies' transfers on the channel (the
    dies stay staggered and never wait for it), ``"bus"`` when none does (the channel never
    idles once started), ``"mixed"`` otherwise: then only the recurrence is exact."""
    per_op = len(read_ns) if melded else 1
    others = (geo.units_per_channel - 1) * per_op * geo.transfer_ns
    senses = [melded_ns] if melded else list(read_ns)
    if min(senses) >= others:
        return "array"
    if max(senses) <= others:
        return "bus"
    return "mixed"


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


def _request_bytes(row: Any) -> int:
    # A melded_read run writes exactly the region it reads (the device starts empty).
    return int(row["host_bytes_written"])


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
        return _request_size(ok, target)
    if name == "melded-throughput":
        return _throughput(ok, target)
    return _hdfs(ok, target)


def _request_size(ok: Any, target: Path) -> str:
    cells: dict[int, dict[str, float]] = {}
    for _, row in ok.iterrows():
        cells.setdefault(_request_bytes(row), {})[_mode(row)] = row["read.clat_mean_us"]
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


#: The paper's channel settings (MT/s, bus bytes): 400, 800, 1600 MT/s on 8 bits, 1600 on 16.
PAPER_CHANNELS = ((400, 1), (800, 1), (1600, 1), (1600, 2))

THROUGHPUT_KEYS = (
    "geometry.channels",
    "geometry.chips_per_channel",
    "geometry.page_size_bytes",
    "channel.rate_mtps",
    "channel.bus_width_bytes",
)


def _throughput(ok: Any, target: Path) -> str:
    cells: dict[tuple[int, ...], dict[str, float]] = {}
    for _, row in ok.iterrows():
        key = tuple(int(row[k]) for k in THROUGHPUT_KEYS)
        if key[3:] not in PAPER_CHANNELS:
            continue
        mibps = _request_bytes(row) / MIB / (row["read.clat_mean_us"] / 1e6)
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
        labels = [f"{r[2] // 1024}K\n{r[3]}\n{r[4] * 8}b" for r in mine]
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
    rows = []
    for _, row in ok.iterrows():
        rows.append(
            (
                row["workload"],
                "on" if row["hints"] else "off",
                row["host.melded_reads"],
                row["read.bw_bytes"] / MIB,
                row["read.clat_mean_us"],
                row["read.p50_us"],
                row["read.p99_us"],
            )
        )
    order = {"off": 0, "on": 1, "auto": 2}
    rows.sort(key=lambda r: (r[0], r[1], order.get(r[2], 3)))
    with open(target / "hdfs.csv", "w", encoding="utf-8") as f:
        f.write("workload,hints,melded_reads,read_mibps,read_mean_us,read_p50_us,read_p99_us\n")
        for r in rows:
            f.write(",".join([*r[:3], *(f"{v:.2f}" for v in r[3:])]) + "\n")
    base = {(r[0], r[1]): r[3] for r in rows if r[2] == "off"}
    lines = [
        "HDFS-style DataNode reads (simulated): block files written with or without read-group",
        "hints, read whole by clients (hdfs-mixed: 95 % of read requests are 4 KiB random reads;",
        "its p50 is a small read's latency)",
        "",
        "| workload | hints | melded_reads | read MiB/s | vs melding off | mean (us) | p50 (us) "
        "| p99 (us) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for workload, hint, mode, mibps, mean, p50, p99 in rows:
        ref = base.get((workload, hint))
        change = f"{(mibps - ref) / ref * 100:+.1f} %" if ref else ""
        lines.append(
            f"| {workload} | {hint} | {mode} | {mibps:,.1f} | {change} | {mean:,.1f} | "
            f"{p50:,.1f} | {p99:,.1f} |"
        )
    lines.append(f"\nWritten: {target / 'hdfs.csv'}")
    return "\n".join(lines)


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
