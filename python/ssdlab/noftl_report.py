"""The NoFTL study's slowdown table: each baseline against the database on native flash.

NoFTL (Hardock et al., VLDB 2013 demo) reports how much slower a database runs on the same
flash behind a block interface and an FTL than on native flash under its own storage manager:
slowdown = NoFTL throughput / baseline throughput for TPC-B and TPC-C, and baseline seconds /
NoFTL seconds for each TPC-H query. :func:`write_slowdown` computes it from a ``noftl-db``
sweep's results (``backend = "native"`` rows are NoFTL; each distinct device FTL among the
``backend = "block"`` rows is a baseline), per seed where both ran, and writes
``report/slowdown.csv`` and ``report/slowdown.png``; ``ssdlab reproduce noftl`` prints the
markdown table it returns.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ssdlab.report import REPORT_DIR
from ssdlab.store import load_results

#: Measures per database workload: (column, label, higher is better).
MEASURES: dict[str, list[tuple[str, str, bool]]] = {
    "tpcb": [("oltp.transactions_per_s", "transactions/s", True)],
    "tpcc": [("oltp.transactions_per_s", "transactions/s", True)],
    "tpch": [(f"oltp.mean_s.q{q}", f"Q{q} seconds", False) for q in (1, 6, 12, 14)],
}


def baseline_label(row: pd.Series) -> str:
    """The device FTL of a block-interface run: ``page_map`` or ``dftl 15 %`` (+ search)."""
    kind = row.get("ftl.kind")
    kind = kind if isinstance(kind, str) else "page_map"
    if kind != "dftl":
        return kind
    label = "dftl"
    fraction = row.get("ftl.dftl_cached_fraction")
    if isinstance(fraction, float) and not math.isnan(fraction):
        label += f" {100 * fraction:g} %"
    search = row.get("ftl.dftl_victim_search")
    if isinstance(search, str):
        label += f" {search}"
    return label


def slowdown_rows(results: pd.DataFrame) -> tuple[list[str], list[dict[str, Any]]]:
    """The baselines and, per (workload, measure), NoFTL's value and each baseline's value and
    slowdown (means and standard deviations over the seeds where both ran)."""
    ok = results[results["status"] == "ok"].copy()
    if "backend" not in ok:
        return [], []
    ok["baseline"] = ok.apply(baseline_label, axis=1)
    native = ok[ok["backend"] == "native"]
    block = ok[ok["backend"] == "block"]
    baselines = sorted(set(block["baseline"]), key=_baseline_order)
    rows = []
    for workload in dict.fromkeys(ok["workload"]):
        ours = native[native["workload"] == workload].set_index("seed")
        if ours.empty:
            continue
        kind = ours["oltp.workload"].iloc[0]
        for column, label, higher_better in MEASURES.get(kind, []):
            if column not in ours or ours[column].isna().all():
                continue
            row: dict[str, Any] = {"workload": workload, "measure": label}
            row["noftl"] = _stats(ours[column])
            for base in baselines:
                theirs = block[(block["workload"] == workload) & (block["baseline"] == base)]
                theirs = theirs.set_index("seed")
                seeds = ours.index.intersection(theirs.index)
                if theirs.empty or not len(seeds):
                    continue
                a, b = ours.loc[seeds, column], theirs.loc[seeds, column]
                ratio = a / b if higher_better else b / a
                row[base] = _stats(theirs[column])
                row[f"{base} slowdown"] = _stats(ratio)
            rows.append(row)
    return baselines, rows


def write_slowdown(out_dir: str | Path) -> str:
    """Write ``slowdown.csv`` and ``slowdown.png`` into the sweep's report folder and return
    the table as markdown ("" when the results hold no native run)."""
    out = Path(out_dir)
    baselines, rows = slowdown_rows(load_results(out))
    if not rows:
        return ""
    target = out / REPORT_DIR
    target.mkdir(parents=True, exist_ok=True)
    flat = []
    for row in rows:
        record: dict[str, Any] = {"workload": row["workload"], "measure": row["measure"]}
        for key, value in row.items():
            if isinstance(value, tuple):
                record[f"{key} mean"], record[f"{key} std"], record[f"{key} n"] = value
        flat.append(record)
    pd.DataFrame(flat).to_csv(target / "slowdown.csv", index=False)
    _plot(rows, baselines, target / "slowdown.png")
    header = ["workload", "measure", "NoFTL"]
    for base in baselines:
        header += [base, f"slowdown vs {base}"]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for row in rows:
        cells = [row["workload"], row["measure"], _fmt(row["noftl"])]
        for base in baselines:
            cells += [_fmt(row.get(base)), _fmt(row.get(f"{base} slowdown"), factor=True)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _stats(values: pd.Series) -> tuple[float, float, int]:
    clean = values.dropna().astype(float)
    n = len(clean)
    mean = float(clean.mean()) if n else math.nan
    std = float(clean.std(ddof=1)) if n > 1 else 0.0
    return mean, std, n


def _fmt(cell: tuple[float, float, int] | None, *, factor: bool = False) -> str:
    if cell is None or math.isnan(cell[0]):
        return "-"
    mean, std, n = cell
    text = f"{mean:.2f}x" if factor else (f"{mean:,.1f}" if abs(mean) >= 10 else f"{mean:.4g}")
    if n > 1:
        text += f" ± {std:.2f}" if factor or abs(std) < 10 else f" ± {std:,.1f}"
    return text


def _baseline_order(label: str) -> tuple[int, float, str]:
    if label == "page_map":
        return 0, 0.0, label
    parts = label.split()
    try:
        return 1, float(parts[1]), label
    except (IndexError, ValueError):
        return 2, 0.0, label


def _plot(rows: list[dict[str, Any]], baselines: list[str], path: Path) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(6.0, 0.9 * len(rows) + 2), 4.0), layout="constrained")
    axes = figure.add_subplot()
    width = 0.8 / max(len(baselines), 1)
    for index, base in enumerate(baselines):
        xs, heights, errors = [], [], []
        for position, row in enumerate(rows):
            cell = row.get(f"{base} slowdown")
            if cell is None:
                continue
            xs.append(position + (index - (len(baselines) - 1) / 2) * width)
            heights.append(cell[0])
            errors.append(cell[1])
        axes.bar(xs, heights, width, yerr=errors, label=base, capsize=2)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(range(len(rows)))
    axes.set_xticklabels(
        [f"{r['workload']}\n{r['measure']}" for r in rows], rotation=45, ha="right", fontsize=7
    )
    axes.set_ylabel("slowdown vs NoFTL (x)")
    axes.set_title("NoFTL: slowdown of each baseline (above 1: NoFTL is faster)")
    axes.legend(fontsize=7)
    figure.savefig(path, dpi=120)


def write_fio_table(out_dir: str | Path) -> str:
    """The fio study's results in one compact table: per workload, the direction it measures
    (a read workload's writes are its fill) for the page map and each DFTL, IOPS with mean and
    p99 latency; also written as ``report/fio.csv``. "" without results."""
    out = Path(out_dir)
    results = load_results(out)
    ok = results[results["status"] == "ok"].copy()
    if ok.empty or "ftl.kind" not in ok:
        return ""
    ok["baseline"] = ok.apply(baseline_label, axis=1)
    systems = sorted(set(ok["baseline"]), key=_baseline_order)
    records = []
    for workload in dict.fromkeys(ok["workload"]):
        direction = "read" if "read" in str(workload) else "write"
        rows = ok[ok["workload"] == workload]
        for system in systems:
            mine = rows[rows["baseline"] == system]
            if mine.empty:
                continue
            records.append(
                {
                    "workload": workload,
                    "direction": direction,
                    "ftl": system,
                    "iops": float(mine[f"{direction}.iops"].mean()),
                    "mean_us": float(mine[f"{direction}.clat_mean_us"].mean()),
                    "p99_us": float(mine[f"{direction}.p99_us"].mean()),
                }
            )
    if not records:
        return ""
    frame = pd.DataFrame(records)
    target = out / REPORT_DIR
    target.mkdir(parents=True, exist_ok=True)
    frame.to_csv(target / "fio.csv", index=False)
    header = ["workload", *systems]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * len(systems)]
    for workload in dict.fromkeys(frame["workload"]):
        cells = [f"{workload} IOPS / mean / p99 µs"]
        for system in systems:
            row = frame[(frame["workload"] == workload) & (frame["ftl"] == system)]
            if row.empty:
                cells.append("-")
                continue
            r = row.iloc[0]
            cells.append(f"{r['iops']:,.0f} / {r['mean_us']:,.1f} / {r['p99_us']:,.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_realtime(out_dir: str | Path) -> str:
    """The real-time study's table: per workload and clock (``virtual``, ``realtime``), NoFTL's
    transactions per second and each baseline's slowdown, then per workload how real time
    compares with simulated time (realtime / virtual throughput of each system). Written as
    ``report/realtime.csv`` and ``report/realtime.png``; "" without results of both clocks."""
    out = Path(out_dir)
    results = load_results(out)
    if "clock" not in results:
        return ""
    by_clock = {
        clock: slowdown_rows(results[results["clock"] == clock])
        for clock in ("virtual", "realtime")
    }
    if not all(rows for _, rows in by_clock.values()):
        return ""
    baselines = sorted({b for bases, _ in by_clock.values() for b in bases}, key=_baseline_order)
    systems = ["noftl", *baselines]
    records = []
    for clock, (_, rows) in by_clock.items():
        for row in rows:
            record: dict[str, Any] = {"workload": row["workload"], "clock": clock}
            for system in systems:
                cell = row.get(system)
                record[system] = cell[0] if cell else math.nan
                if system != "noftl":
                    slowdown = row.get(f"{system} slowdown")
                    record[f"{system} slowdown"] = slowdown[0] if slowdown else math.nan
            records.append(record)
    frame = pd.DataFrame(records)
    target = out / REPORT_DIR
    target.mkdir(parents=True, exist_ok=True)
    frame.to_csv(target / "realtime.csv", index=False)
    _plot_realtime(frame, baselines, target / "realtime.png")
    header = ["workload", "clock", "NoFTL tx/s", *(f"slowdown vs {b}" for b in baselines)]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for record in records:
        cells = [record["workload"], record["clock"], _fmt((record["noftl"], 0.0, 1))]
        cells += [_fmt((record[f"{b} slowdown"], 0.0, 1), factor=True) for b in baselines]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| workload | "
        + " | ".join(f"{'NoFTL' if s == 'noftl' else s} realtime / virtual" for s in systems)
        + " |",
        "|---|" + "---:|" * len(systems),
    ]
    for workload in dict.fromkeys(frame["workload"]):
        rows = frame[frame["workload"] == workload].set_index("clock")
        if not {"virtual", "realtime"} <= set(rows.index):
            continue
        cells = [str(workload)]
        for system in systems:
            ratio = rows.loc["realtime", system] / rows.loc["virtual", system]
            cells.append(_fmt((float(ratio), 0.0, 1), factor=True))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plot_realtime(frame: pd.DataFrame, baselines: list[str], path: Path) -> None:
    from matplotlib.figure import Figure

    groups = list(frame.itertuples(index=False))
    figure = Figure(figsize=(max(6.0, 1.2 * len(groups) + 2), 4.0), layout="constrained")
    axes = figure.add_subplot()
    width = 0.8 / max(len(baselines), 1)
    columns = list(frame.columns)
    for index, base in enumerate(baselines):
        column = columns.index(f"{base} slowdown")
        xs = [p + (index - (len(baselines) - 1) / 2) * width for p in range(len(groups))]
        axes.bar(xs, [g[column] for g in groups], width, label=base)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(range(len(groups)))
    axes.set_xticklabels([f"{g.workload}\n{g.clock}" for g in groups], fontsize=8)
    axes.set_ylabel("slowdown vs NoFTL (x)")
    axes.set_title("NoFTL: slowdown of each baseline, simulated vs real time")
    axes.legend(fontsize=7)
    figure.savefig(path, dpi=120)
