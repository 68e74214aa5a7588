"""The demo: what placement hints do for a hot/cold workload, in a few seconds.

Three fresh, identical small TLC devices -- the ``tlc`` preset's cells, timing and 16 KiB pages
(mapped in 4 KiB units) on 4 channels of 2 chips with 2 dies of 2 planes each: 16 dies; the
default priority die scheduling with program/erase suspend, as current controllers do; same
configuration, same seed -- are preconditioned and then run the same mixed workload generated with
NumPy: 4 KiB requests, 70% writes, 90% of accesses to a hot 10% of the logical space, 32
outstanding. Device (a) gets no hints; device (b) tags each write with an FDP placement id (hot
data → handle 1, cold → handle 0); device (c), the control, tags each write with a random id, so
it uses both handles without knowing which data is hot. All three are configured with two
placement handles, so the placement column is the only difference between the runs.

Separating data by lifetime lets GC find blocks whose pages are mostly invalid, so it copies less:
write amplification drops and, the dies being busy either way, write IOPS rise. The read tail is
governed by something else: nearly every read finds its die programming and suspends it, and the
99th percentile adds one wait behind a flash read the die cannot suspend (a GC page read or another
host read). :func:`interpretation` says, from the runs' own counters, what moved and why.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from ssdlab.device import Device, RunResult, show_progress

PRESET = "tlc"
REQUEST_BYTES = 4096
WRITE_FRACTION = 0.7
HOT_SPACE_FRACTION = 0.1
HOT_ACCESS_FRACTION = 0.9
#: Host writes of the measured run, as multiples of the logical capacity.
WRITE_PASSES = 3.0
QUEUE_DEPTH = 32
#: Blocks per plane at scale 1.0; the smallest device keeps enough blocks for GC to work.
BLOCKS_PER_PLANE = 128
MIN_BLOCKS_PER_PLANE = 64
#: The most requests a run may have: the columns and the lists handed to the core grow with the
#: scale, and a typo in it should fail at once rather than exhaust memory (scale 2 is 5.6 M).
MAX_REQUESTS = 6_000_000
#: The device's shape, printed with the table.
CHANNELS, CHIPS_PER_CHANNEL, DIES_PER_CHIP, PLANES_PER_DIE = 4, 2, 2, 2
#: Seed offset of the control's random placement ids (a stream of their own, so the workload's
#: requests are the same on every device).
CONTROL_STREAM = 0x5EED


def device_overrides(scale: float = 1.0) -> list[str]:
    """Overrides that shrink the ``tlc`` preset so that the demo runs in seconds.

    The preset's cells, timing, 16 KiB pages, two planes per die and LDPC stay; the device gets
    fewer channels, chips and blocks, and blocks of 48 pages instead of 384, so that a small
    device still has many blocks per plane for GC to choose from. ``scale`` multiplies the
    number of blocks (and with it the capacity and the request count).
    """
    blocks = max(MIN_BLOCKS_PER_PLANE, round(BLOCKS_PER_PLANE * scale))
    return [
        f"geometry.channels={CHANNELS}",
        f"geometry.chips_per_channel={CHIPS_PER_CHANNEL}",
        f"geometry.dies_per_chip={DIES_PER_CHIP}",
        f"geometry.planes_per_die={PLANES_PER_DIE}",
        f"geometry.blocks_per_plane={blocks}",
        "geometry.pages_per_block=48",  # a multiple of 3: TLC programs whole wordlines
        "geometry.over_provisioning=0.2",
        "ftl.mapping_unit_bytes=4096",
        "placement.handles=2",
        "controller.scheduler=priority",
        # What TLC controllers do: reads suspend programs and erases.
        "cell.suspend=true",
    ]


@dataclass(frozen=True)
class Workload:
    """Request columns as :meth:`Device.run_arrays` takes them."""

    ops: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    placement: np.ndarray


def hot_cold_workload(
    logical_bytes: int,
    n_requests: int,
    seed: int,
    *,
    request_bytes: int = REQUEST_BYTES,
    write_fraction: float = WRITE_FRACTION,
    hot_space_fraction: float = HOT_SPACE_FRACTION,
    hot_access_fraction: float = HOT_ACCESS_FRACTION,
) -> Workload:
    """Random 4 KiB reads and writes, most of them to a hot tenth of the space (by default;
    sweeps vary the sizes and fractions).

    The hot pages are scattered over the whole space (a random permutation), so that hotness is
    not simply a matter of address ranges.
    """
    rng = np.random.default_rng(seed)
    n_pages = logical_bytes // request_bytes
    order = rng.permutation(n_pages)
    n_hot = max(1, int(n_pages * hot_space_fraction))
    hot, cold = order[:n_hot], order[n_hot:]
    is_hot = rng.random(n_requests) < hot_access_fraction
    page = np.where(
        is_hot,
        hot[rng.integers(0, hot.size, n_requests)],
        cold[rng.integers(0, cold.size, n_requests)],
    )
    is_write = rng.random(n_requests) < write_fraction
    return Workload(
        ops=is_write.astype(np.int64),  # 1 write, 0 read
        offsets=page.astype(np.int64) * request_bytes,
        lengths=np.full(n_requests, request_bytes, dtype=np.int64),
        placement=np.where(is_write, is_hot.astype(np.int64), -1),  # hot → 1, cold → 0
    )


def random_placement(workload: Workload, seed: int) -> np.ndarray:
    """The control's placement column: each write gets id 0 or 1 at random, reads none."""
    rng = np.random.default_rng([seed, CONTROL_STREAM])
    ids = rng.integers(0, 2, workload.ops.size)
    return np.where(workload.ops == 1, ids, -1)


@dataclass(frozen=True)
class DemoResult:
    baseline: RunResult
    hinted: RunResult
    #: Random placement ids: both handles in use, hot and cold data mixed in each.
    control: RunResult
    requests: int
    logical_bytes: int
    wall_seconds: float
    #: The devices' resolved configuration (the same for all three).
    config: dict[str, Any]


#: (column label, what the device is told) of the three runs, in order.
RUNS = (
    ("no hints", "no hints"),
    ("hot/cold ids", "hot/cold placement"),
    ("random ids", "random placement (control)"),
)


def run_demo(*, seed: int = 0, scale: float = 1.0, progress: bool | None = None) -> DemoResult:
    """Run the unhinted, the hinted and the control device on the same workload."""
    started = time.perf_counter()
    overrides = device_overrides(scale)
    devices = [Device(PRESET, seed=seed, overrides=overrides)]
    logical_bytes = devices[0].logical_bytes
    n_requests = int(WRITE_PASSES * (logical_bytes // REQUEST_BYTES) / WRITE_FRACTION)
    if n_requests > MAX_REQUESTS:
        raise ValueError(
            f"scale: {scale:g} makes {n_requests:,} requests per run, more than the demo's "
            f"{MAX_REQUESTS:,}; use a scale of at most 2"
        )
    devices += [Device(PRESET, seed=seed, overrides=overrides) for _ in RUNS[1:]]
    workload = hot_cold_workload(logical_bytes, n_requests, seed)
    placements = (None, workload.placement, random_placement(workload, seed))
    baseline, hinted, control = (
        _precondition_and_run(device, workload, placement, label=label, progress=progress)
        for device, placement, (_, label) in zip(devices, placements, RUNS, strict=True)
    )
    return DemoResult(
        baseline=baseline,
        hinted=hinted,
        control=control,
        requests=n_requests,
        logical_bytes=logical_bytes,
        wall_seconds=time.perf_counter() - started,
        config=devices[0].config,
    )


def _precondition_and_run(
    device: Device,
    workload: Workload,
    placement: np.ndarray | None,
    *,
    label: str,
    progress: bool | None,
) -> RunResult:
    with _status(f"preconditioning ({label})", progress):
        device.precondition()
    return device.run_arrays(
        workload.ops,
        workload.offsets,
        workload.lengths,
        placement=placement,
        queue_depth=QUEUE_DEPTH,
        name=f"hotcold ({label})",
        progress=progress,
    )


def _status(message: str, progress: bool | None) -> Any:
    if not show_progress(progress):
        return nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(message)


# -- the numbers the report uses -----------------------------------------------------------------

_US = 1e-3  # ns → µs


def _clat(run: RunResult, direction: str, key: str) -> float | None:
    clat = run.jobs[0][direction].get("clat_ns", {})
    if key == "mean":
        return clat.get("mean")
    return clat.get("percentile", {}).get(key)


def read_p99_us(run: RunResult) -> float:
    """Read completion latency, 99th percentile, in µs."""
    return float(_clat(run, "read", "99.000000") or 0.0) * _US


def write_iops(run: RunResult) -> float:
    return float(sum(job["write"]["iops"] for job in run.jobs))


def host_reads(run: RunResult) -> int:
    return int(sum(job["read"]["total_ios"] for job in run.jobs))


def gc_page_reads(run: RunResult) -> int:
    """Flash pages GC read to move their valid units (each also reads the page's OOB area)."""
    return int(run.ssd.get("flash", {}).get("oob_reads", 0))


def multi_plane_ops(run: RunResult) -> int:
    return int(run.ssd.get("flash", {}).get("multi_plane_ops", 0))


def read_queue_p99_us(run: RunResult) -> float:
    """99th percentile of the time reads waited for their die, in µs."""
    split = run.jobs[0].get("ssd_job", {}).get("read", {})
    return float(split.get("queue_ns", {}).get("p99", 0.0)) * _US


def describe_device(result: DemoResult) -> str:
    """The device in one line, from the configuration the runs used."""
    config = result.config
    geo, cell = config["geometry"], config["cell"]
    dies = geo["channels"] * geo["chips_per_channel"] * geo["dies_per_chip"]
    unit = config["ftl"].get("mapping_unit_bytes") or REQUEST_BYTES
    read_us = "/".join(f"{ns / 1000:g}" for ns in cell["read_ns"])
    suspend = "with program/erase suspend" if cell["suspend"] else "without suspend"
    return (
        f"{PRESET} ({cell['type'].upper()}): {geo['channels']} channels x "
        f"{geo['chips_per_channel']} chips x {geo['dies_per_chip']} dies x "
        f"{geo['planes_per_die']} planes = {dies} dies, {geo['page_size_bytes'] // 1024} KiB "
        f"pages mapped in {unit // 1024} KiB units, tR {read_us} µs, "
        f"{config['controller']['scheduler']} scheduling {suspend}, "
        f"{geo['over_provisioning']:.0%} over-provisioning"
    )


def _rows(run: RunResult) -> list[tuple[str, float | None, str, bool]]:
    """(label, value, format, higher_is_better) for each row of the table."""
    ssd = run.ssd
    rows: list[tuple[str, float | None, str, bool]] = []
    for direction in ("read", "write"):
        rows.append((f"{direction} IOPS", run.jobs[0][direction].get("iops"), ",.0f", True))
        for key, label in (
            ("mean", "mean"),
            ("50.000000", "p50"),
            ("99.000000", "p99"),
            ("99.900000", "p99.9"),
        ):
            value = _clat(run, direction, key)
            rows.append(
                (f"{direction} {label} (µs)", None if value is None else value * _US, ",.1f", False)
            )
        if direction == "read":
            rows.append(("read die wait p99 (µs)", read_queue_p99_us(run), ",.1f", False))
    gc = ssd.get("gc", {})
    erases = ssd.get("erases", {})
    rows += [
        ("die utilisation", ssd.get("die_utilisation"), ".3f", True),
        ("GC share of die time", gc.get("share_of_die_busy"), ".3f", False),
        ("write amplification", ssd.get("waf"), ".3f", False),
        ("GC invocations", gc.get("invocations"), ",.0f", False),
        ("GC mapping units moved", gc.get("units_moved"), ",.0f", False),
        ("GC page reads", gc_page_reads(run), ",.0f", False),
        ("multi-plane operations", multi_plane_ops(run), ",.0f", True),
        ("suspensions for reads", ssd.get("suspensions"), ",.0f", False),
        ("erases per block, mean", erases.get("mean"), ",.2f", False),
        ("erases per block, max", erases.get("max"), ",.0f", False),
        ("energy (J)", ssd.get("energy_j"), ",.3f", False),
    ]
    return rows


def _change(before: float | None, after: float | None, higher_is_better: bool) -> str:
    if before is None or after is None:
        return ""
    if before == 0:
        return "=" if after == 0 else "new"
    pct = 100.0 * (after - before) / before
    if abs(pct) < 0.05:
        return "="
    better = (pct > 0) == higher_is_better
    return f"[{'green' if better else 'red'}]{pct:+.1f}%[/]"


def _pct(before: float, after: float) -> str:
    return f"{100 * (after - before) / before:+.0f}%" if before else "n/a"


# -- the explanation -----------------------------------------------------------------------------

#: A read p99 within this fraction of another counts as the same (HDR buckets and run noise).
SAME_P99 = 0.01


def interpretation(result: DemoResult) -> str:
    """What changed between the runs and why, from their own counters."""
    base, hinted, control = result.baseline, result.hinted, result.control
    a, b, c = (run.ssd.get("waf") for run in (base, hinted, control))
    if a is None or b is None or c is None:
        return "The devices reported no write amplification."
    parts = [_waf_sentence(base, hinted, control)]
    parts.append(_iops_sentence(base, hinted, control))
    parts.append(_read_tail_sentences(base, hinted, control))
    return " ".join(part for part in parts if part)


def _waf_sentence(base: RunResult, hinted: RunResult, control: RunResult) -> str:
    a, b, c = (run.ssd["waf"] for run in (base, hinted, control))
    if b >= a:
        return (
            f"Placement hints did not lower write amplification here ({a:.2f} without, {b:.2f} "
            f"with): at this size and skew, GC already finds nearly empty victims without them."
        )
    moved_a, moved_b = (run.ssd.get("gc", {}).get("units_moved", 0) for run in (base, hinted))
    sentence = (
        f"Keeping hot and cold data in separate erase blocks cut write amplification from "
        f"{a:.2f} to {b:.2f} ({_pct(a, b)}): GC found blocks whose pages were mostly invalid and "
        f"copied {moved_a - moved_b:,} fewer mapping units ({_pct(moved_a, moved_b)})"
    )
    erases_a = base.ssd.get("erases", {}).get("mean")
    erases_b = hinted.ssd.get("erases", {}).get("mean")
    if erases_a and erases_b is not None and erases_b < erases_a:
        sentence += f", so blocks wore {100 * (erases_a - erases_b) / erases_a:.0f}% less"
    sentence += "."
    sentence += _wear_spread_sentence(base, hinted)
    if c >= a:
        sentence += (
            f" Random ids, which use the same two handles without knowing what is hot, gave "
            f"{c:.2f}: the saving is the separation by lifetime, not the second handle."
        )
    return sentence


def _wear_spread_sentence(base: RunResult, hinted: RunResult) -> str:
    """Fewer erases in all can still mean more on some blocks: say so when the maximum rose."""
    max_a = base.ssd.get("erases", {}).get("max")
    max_b = hinted.ssd.get("erases", {}).get("max")
    if max_a is None or max_b is None or max_b <= max_a:
        return ""
    return (
        f" The erases gathered on fewer blocks, though: the most-erased block went from "
        f"{max_a:,} to {max_b:,} erases. Cold data now rests in blocks GC seldom picks, so the "
        f"blocks that cycle hot data take the erases; the dynamic wear levelling modelled here "
        f"(ftl.wear_leveling) chooses the least-worn free block but does not move cold data, as "
        f"static wear levelling would."
    )


def _iops_sentence(base: RunResult, hinted: RunResult, control: RunResult) -> str:
    iops_a, iops_b, iops_c = (write_iops(run) for run in (base, hinted, control))
    util_a, util_b = (run.ssd.get("die_utilisation", 0.0) for run in (base, hinted))
    if not iops_a:
        return ""
    if iops_b > iops_a:
        share_a, share_b = (
            run.ssd.get("gc", {}).get("share_of_die_busy") for run in (base, hinted)
        )
        freed = ""
        if share_a is not None and share_b is not None and share_b < share_a:
            freed = (
                f" (GC took {100 * share_a:.0f}% of the busy dies' time without hints, "
                f"{100 * share_b:.0f}% with them)"
            )
        return (
            f"With the dies busy either way (utilisation {util_a:.2f} and {util_b:.2f}), less "
            f"copying is more host work{freed}: write IOPS {_pct(iops_a, iops_b)} (random ids: "
            f"{_pct(iops_a, iops_c)})."
        )
    return (
        f"Throughput did not follow (write IOPS {_pct(iops_a, iops_b)}): the saved copies were "
        f"not what limited this run (die utilisation {util_a:.2f} and {util_b:.2f})."
    )


def _gc_reads_change(before: int, after: int) -> str:
    if after < before:
        return f"cut GC page reads by {100 * (before - after) / before:.0f}%"
    return f"did not cut GC page reads ({before:,} → {after:,})"


def _read_tail_sentences(base: RunResult, hinted: RunResult, control: RunResult) -> str:
    reads = host_reads(base)
    if not reads:
        return ""
    p99_a, p99_b, p99_c = (read_p99_us(run) for run in (base, hinted, control))
    wait_a, wait_b = read_queue_p99_us(base), read_queue_p99_us(hinted)
    gc_a, gc_b = gc_page_reads(base), gc_page_reads(hinted)
    mp_a, mp_b, mp_c = (multi_plane_ops(run) for run in (base, hinted, control))
    suspended = base.ssd.get("suspensions", 0)
    p50 = (_clat(base, "read", "50.000000") or 0) * _US
    text = (
        f"Read tails are set by the dies: {suspended / reads:.0%} of reads found their die "
        f"programming or erasing and suspended it ({suspended:,} suspensions for {reads:,} "
        f"reads), paying that on top of their own sensing and transfer (p50 {p50:.0f} µs), and "
        f"the p99 adds one wait behind an operation the die cannot suspend: a GC page read "
        f"({gc_a / reads:.1f} of them per host read without hints), another host read or a "
        f"page's transfer (waiting for the die, p99 {wait_a:.0f} µs)."
    )
    gc_change = _gc_reads_change(gc_a, gc_b)
    p99_change = f"read p99 {p99_a:.0f} → {p99_b:.0f} µs ({_pct(p99_a, p99_b)})"
    if p99_b >= p99_a * (1 - SAME_P99):
        return text + (
            f" Hot/cold ids {gc_change}, but a read still meets such a wait about as often at "
            f"the 99th percentile: {p99_change}."
        )
    if p99_c < p99_a * (1 - SAME_P99) and gc_page_reads(control) >= gc_a:
        # The control shows the same change with no GC saved: say what it is.
        return text + (
            f" Hot/cold ids {gc_change} and {p99_change}, but random ids, which save no GC "
            f"reads, gave {p99_c:.0f} µs: the gain is not the GC saved. With two handles, pages "
            f"seldom line up on both planes of a die (multi-plane operations {mp_a:,} → {mp_b:,}; "
            f"random ids {mp_c:,}), so a read less often waits behind a two-page operation's "
            f"sensing and transfers (die wait p99 {wait_a:.0f} → {wait_b:.0f} µs)."
        )
    return text + (
        f" Hot/cold ids {gc_change} and {p99_change}, die wait p99 {wait_a:.0f} → "
        f"{wait_b:.0f} µs, while random ids gave {p99_c:.0f} µs: reads met GC on their die less "
        f"often."
    )


def render(result: DemoResult, *, console: Any = None) -> None:
    """Print the side-by-side table and the interpretation."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    mib = result.logical_bytes / 2**20
    table = Table(
        title="Same device, same workload: without and with placement hints",
        title_justify="left",
        pad_edge=False,
        caption=(
            f"{describe_device(result)}. {mib:,.0f} MiB, seed {result.baseline.seed}: "
            f"{result.requests:,} requests of 4 KiB at queue depth {QUEUE_DEPTH}, "
            f"{WRITE_FRACTION:.0%} writes, {HOT_ACCESS_FRACTION:.0%} of them to a hot "
            f"{HOT_SPACE_FRACTION:.0%} of the space"
        ),
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("metric", no_wrap=True)
    table.add_column(RUNS[0][0], justify="right", no_wrap=True)
    table.add_column(RUNS[1][0].replace(" ", "\n"), justify="right", no_wrap=True)
    table.add_column("change", justify="right", no_wrap=True)
    control_header = f"{RUNS[2][0]}\n(control)".replace(" ", "\n", 1)
    table.add_column(control_header, justify="right", no_wrap=True)
    table.add_column("change", justify="right", no_wrap=True)
    runs = (result.baseline, result.hinted, result.control)
    for (label, before, fmt, higher), (_, hinted, _, _), (_, control, _, _) in zip(
        *(_rows(run) for run in runs), strict=True
    ):
        table.add_row(
            label,
            "" if before is None else format(before, fmt),
            "" if hinted is None else format(hinted, fmt),
            _change(before, hinted, higher),
            "" if control is None else format(control, fmt),
            _change(before, control, higher),
        )
    console.print(table)
    console.print(interpretation(result))
