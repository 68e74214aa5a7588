"""``ssdlab report``: markdown tables and PNG plots of a sweep's results.

The spec's ``[report]`` section chooses them: ``x`` (the axis on the horizontal axis),
``metrics`` (result columns: ``waf``, ``write.iops``, ``read.p99_us``, ``gc.units_moved``, ...)
and optionally ``series`` (the axes whose values make the plot's lines, first in their labels;
every other axis that varies, except the seed, is added to them: only seeds are averaged) and
``title``. For each metric there is one table (a row per
x value, a column per series, mean ± standard deviation over the seeds when there are several)
and one plot (a line per series, error bars across seeds). Failed runs are left out and counted.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ssdlab import spec as spec_mod
from ssdlab.errors import SsdlabError
from ssdlab.store import META_FILE, load_results, read_meta

#: The default metrics, when the spec's [report] names none.
DEFAULT_METRICS = ("waf", "write.iops", "read.p99_us")

#: Readable names of common metrics (others are shown as their column name).
LABELS = {
    "waf": "write amplification",
    "write.iops": "write IOPS",
    "read.iops": "read IOPS",
    "read.p99_us": "read p99 latency (µs)",
    "read.p999_us": "read p99.9 latency (µs)",
    "write.p99_us": "write p99 latency (µs)",
    "read.clat_mean_us": "read mean latency (µs)",
    "write.clat_mean_us": "write mean latency (µs)",
    "gc.units_moved": "GC mapping units moved",
    "erases.mean": "erases per block, mean",
    "energy_j": "energy (J)",
    "die_utilisation": "die utilisation",
    "flash.erases": "erases",
    "oltp.transactions_per_s": "transactions per simulated second",
    "oltp.main_p99_ms": "principal transaction p99 (ms)",
    "oltp.main_p50_ms": "principal transaction p50 (ms)",
    "oltp.energy_per_transaction_mj": "energy per transaction (mJ)",
    "oltp.write_request_share": "share of page-sized device requests that are writes",
    "cache.mean_ssd_response_ns": "SSD response, mean (ns)",
    "cache.mean_ssd_read_response_ns": "SSD read response, mean (ns)",
    "cache.mean_response_ns": "host response, mean (ns)",
    "cache.corruption_disk_reads": "corrupt clean pages refetched by the host",
    "cache.scrub_prefetched": "pages refetched by the scrubber",
    "cache.read_hit_ratio": "cache read hit ratio",
    "gc.time_ns": "GC time (ns)",
}

REPORT_DIR = "report"

DIE_UTILISATION = "die_utilisation"


class ReportError(SsdlabError):
    """The report cannot be made: no results, or a [report] naming what the results lack."""


@dataclass(frozen=True)
class MetricTable:
    metric: str
    label: str
    x: str
    series: list[str]
    #: The axis values behind each series label, in the order of ``series``.
    series_values: list[tuple[Any, ...]]
    series_keys: list[str]
    #: (x value, {series label: (mean, std, n)}) in x order.
    rows: list[tuple[Any, dict[str, tuple[float, float, int]]]]
    plot: Path | None


@dataclass(frozen=True)
class Report:
    title: str
    markdown: str
    path: Path
    tables: list[MetricTable]
    failed: int
    runs: int
    #: The metrics the terminal table shows (the spec's ``[report] headline``); None: all.
    headline_metrics: list[str] | None = None


def make_report(out_dir: str | os.PathLike[str], *, report_dir: str | None = None) -> Report:
    """Write ``report.md`` and one PNG per metric into ``out_dir/report`` and return them."""
    out = Path(out_dir)
    meta = read_meta(out)
    axes = {axis["key"]: axis["values"] for axis in meta.get("axes", [])}
    where = f"{out / META_FILE} ([report] of the spec)"
    results = load_results(out)
    if results.empty:
        raise ReportError(f"{out}: no results yet (run the sweep first)")
    ok = results[results["status"] == "ok"]
    failed = len(results) - len(ok)
    if ok.empty:
        raise ReportError(f"{out}: every one of its {len(results)} runs failed; nothing to plot")
    settings = meta.get("report") or {}
    varying = [k for k, values in axes.items() if len(values) > 1 and k != spec_mod.SEED]
    x = settings.get("x") or (varying[0] if varying else spec_mod.SEED)
    series_keys = settings.get("series")
    if isinstance(series_keys, str):
        series_keys = [series_keys]
    # Axes that vary are never averaged together: those the report does not name come after
    # the named ones. Only the seeds are averaged.
    series_keys = list(series_keys or [])
    series_keys += [k for k in varying if k != x and k not in series_keys]
    metrics = with_die_utilisation(list(settings.get("metrics") or DEFAULT_METRICS), ok.columns)
    for key in [x, *series_keys]:
        if key not in axes:
            raise ReportError(
                f"{where}: names {key!r}, which is not an axis (axes: {', '.join(axes)})"
            )
    for metric in metrics:
        if metric not in ok:
            raise ReportError(
                f"{where}: metric {metric!r} is not a result column; columns "
                f"include: {', '.join(c for c in ok.columns if '.' in c or c == 'waf')[:600]}"
            )
    headline_metrics = settings.get("headline")
    if headline_metrics is not None:
        unknown = [m for m in headline_metrics if m not in metrics]
        if unknown:
            raise ReportError(
                f"{where}: headline names {', '.join(map(repr, unknown))}, which "
                f"{'is' if len(unknown) == 1 else 'are'} not among the report's metrics "
                f"({', '.join(metrics)})"
            )
        headline_metrics = with_die_utilisation(list(headline_metrics), ok.columns)
    target = Path(report_dir) if report_dir else out / REPORT_DIR
    target.mkdir(parents=True, exist_ok=True)
    title = settings.get("title") or meta.get("description") or f"sweep {meta.get('name')}"
    tables = [_metric_table(ok, metric, x, series_keys, target, title, axes) for metric in metrics]
    _write_csv(ok, tables, target)
    seeds = ok[spec_mod.SEED].nunique()
    lines = [f"# {title}", ""]
    lines.append(
        f"Sweep `{meta.get('name')}`"
        + (f" at scale `{meta['scale']}`" if meta.get("scale") else "")
        + f": {len(ok)} runs"
        + (f" ({failed} failed, left out)" if failed else "")
        + f", {seeds} seed{'s' if seeds != 1 else ''} per point"
        + (" (mean ± standard deviation across seeds)" if seeds > 1 else "")
        + f", ssdlab {ok['version'].iloc[0]}."
    )
    lines.append("")
    for table in tables:
        lines += _markdown(table)
    markdown = "\n".join(lines)
    path = target / "report.md"
    path.write_text(markdown, encoding="utf-8")
    return Report(
        title=title,
        markdown=markdown,
        path=path,
        tables=tables,
        failed=failed,
        runs=len(results),
        headline_metrics=headline_metrics,
    )


#: Result columns that are a throughput or a latency (die utilisation goes beside them).
_SPEED_MARKS = ("iops", "_us", "_ms", "response", "latency", "throughput", "per_s", "mbps")


def with_die_utilisation(metrics: list[str], columns: Any) -> list[str]:
    """``metrics`` with ``die_utilisation`` (every run's share of die time busy) after the
    last throughput or latency metric (else last), when the results have it and the list
    lacks it: how busy the flash was explains most of a study's speed differences."""
    if DIE_UTILISATION in metrics or DIE_UTILISATION not in columns:
        return metrics
    speed = [i for i, m in enumerate(metrics) if any(mark in m for mark in _SPEED_MARKS)]
    at = speed[-1] + 1 if speed else len(metrics)
    return [*metrics[:at], DIE_UTILISATION, *metrics[at:]]


def _series_label(keys: list[str], values: tuple[Any, ...]) -> str:
    if not keys:
        return "all"
    return ", ".join(f"{k}={_fmt_value(v)}" for k, v in zip(keys, values, strict=True))


def _fmt_value(value: Any) -> str:
    if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
        return "on" if value else "off"
    return str(value)


def _metric_table(
    ok: pd.DataFrame,
    metric: str,
    x: str,
    series_keys: list[str],
    target: Path,
    title: str,
    axes: dict[str, list[Any]],
) -> MetricTable:
    groups = ok.groupby([x, *series_keys], sort=True, dropna=False)[metric]
    stats = groups.agg(["mean", "std", "count"]).reset_index()
    labels: list[str] = []
    label_values: list[tuple[Any, ...]] = []
    rows: dict[Any, dict[str, tuple[float, float, int]]] = {}
    for record in stats.itertuples(index=False):
        values = tuple(record)
        label = _series_label(series_keys, values[1 : 1 + len(series_keys)])
        if label not in labels:
            labels.append(label)
            label_values.append(values[1 : 1 + len(series_keys)])
        mean, std, count = values[-3:]
        rows.setdefault(values[0], {})[label] = (
            float(mean),
            float(std) if count > 1 and not math.isnan(std) else 0.0,
            int(count),
        )
    # Series as x: numbers in order, other values as the spec lists them on their axis (so a
    # two-series table's change reads from the first listed to the second).
    series_order = sorted(
        range(len(labels)),
        key=lambda i: [
            _sort_key(value, axes.get(key, []))
            for key, value in zip(series_keys, label_values[i], strict=True)
        ],
    )
    labels = [labels[i] for i in series_order]
    label_values = [label_values[i] for i in series_order]
    ordered = sorted(rows.items(), key=lambda item: _sort_key(item[0], axes.get(x, [])))
    plot = _plot(metric, x, labels, ordered, target, title)
    return MetricTable(
        metric=metric,
        label=LABELS.get(metric, metric),
        x=x,
        series=labels,
        series_values=label_values,
        series_keys=list(series_keys),
        rows=ordered,
        plot=plot,
    )


def _sort_key(value: Any, order: list[Any]) -> tuple[int, Any]:
    """Numbers in order; other values (``hints`` levels, workload names) as the spec lists
    them on their axis, which is the order its author meant."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    for index, listed in enumerate(order):
        if listed == value or str(listed) == str(value):
            return (1, index)
    return (2, str(value))


def _write_csv(ok: pd.DataFrame, tables: list[MetricTable], target: Path) -> None:
    """Every run's row (``results.csv``) and each metric's table (``METRIC.csv``: the x value,
    then per series its mean, standard deviation and number of seeds)."""
    ok.to_csv(target / "results.csv", index=False)
    for table in tables:
        records = []
        for x_value, cells in table.rows:
            record: dict[str, Any] = {table.x: x_value}
            for label in table.series:
                mean, std, count = cells.get(label, (math.nan, math.nan, 0))
                record[f"{label} mean"] = mean
                record[f"{label} std"] = std
                record[f"{label} n"] = count
            records.append(record)
        name = table.metric.replace("/", "_")
        pd.DataFrame.from_records(records).to_csv(target / f"{name}.csv", index=False)


def _plot(
    metric: str,
    x: str,
    labels: list[str],
    rows: list[tuple[Any, dict[str, tuple[float, float, int]]]],
    target: Path,
    title: str,
) -> Path:
    # The object-oriented API without pyplot: no global figure state, no GUI backend.
    from matplotlib.figure import Figure

    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v, _ in rows)
    positions = [v for v, _ in rows] if numeric else list(range(len(rows)))
    # Many series, or long names, go in a legend below the plot (a legend inside would take the
    # axes' room), and the figure grows by its rows.
    short = {label: _short_label(label) for label in labels}
    if len(set(short.values())) < len(labels):
        short = {label: label for label in labels}  # two keys of one name: keep the sections
    outside = len(labels) > 4 or any(len(name) > 32 for name in short.values())
    columns = 2 if outside and max(map(len, short.values()), default=0) <= 48 else 1
    legend_rows = math.ceil(len(labels) / columns) if outside else 0
    figure = Figure(figsize=(6.4, 4.0 + 0.2 * legend_rows), layout="constrained")
    axes = figure.subplots()
    for label in labels:
        xs, ys, errs = [], [], []
        for position, (_, cells) in zip(positions, rows, strict=True):
            if label in cells:
                mean, std, _ = cells[label]
                xs.append(position)
                ys.append(mean)
                errs.append(std)
        axes.errorbar(
            xs, ys, yerr=errs if any(errs) else None, marker="o", capsize=3, label=short[label]
        )
    if not numeric:
        axes.set_xticks(positions, [_fmt_value(v) for v, _ in rows])
    axes.set_xlabel(x)
    axes.set_ylabel(LABELS.get(metric, metric))
    axes.set_title(title, fontsize="medium")
    axes.grid(True, alpha=0.3)
    if outside:
        size = "small" if columns == 2 else "x-small"
        figure.legend(loc="outside lower center", ncols=columns, fontsize=size)
    elif len(labels) > 1:
        axes.legend()
    path = target / f"{metric.replace('/', '_')}.png"
    figure.savefig(path, dpi=110)
    return path


def _short_label(label: str) -> str:
    """A series name for a legend: each ``section.key=value`` as ``key=value`` (the section is
    the config file's; `_plot` keeps the full names when two keys of one name would collide)."""
    parts = []
    for part in label.split(", "):
        key, sep, value = part.partition("=")
        parts.append(f"{key.rsplit('.', 1)[-1]}{sep}{value}" if sep else part)
    return ", ".join(parts)


def _cell(cell: tuple[float, float, int] | None) -> str:
    """A mean (± its deviation); empty where there is none: no run, or a metric the run does
    not have (a write-only workload's read latency is NaN)."""
    if cell is None or math.isnan(cell[0]):
        return ""
    mean, std, count = cell
    text = _number(mean)
    if count > 1:
        text += f" ± {_number(std, like=mean)}"
    return text


def _number(value: float, like: float | None = None) -> str:
    """A table figure: digits by magnitude (of ``like`` when given, so that a deviation shows
    as many decimals as its mean)."""
    reference = value if like is None else like
    if not math.isfinite(value) or (value == 0 and like is None):
        return f"{value:g}"
    magnitude = abs(reference)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _markdown(table: MetricTable) -> list[str]:
    header = [table.x, *table.series]
    change = len(table.series) == 2
    if change:
        header.append("change")
    lines = [f"## {table.label}", ""]
    if table.plot is not None:
        lines += [f"![{table.label}]({table.plot.name})", ""]
    rows = []
    for x_value, cells in table.rows:
        row = [_fmt_value(x_value), *(_cell(cells.get(s)) for s in table.series)]
        if change:
            first, second = (cells.get(s) for s in table.series)
            row.append(_change(first, second))
        rows.append(row)
    return [*lines, *_table_lines(header, rows), ""]


def _change(first: tuple[float, float, int] | None, second: tuple[float, float, int] | None) -> str:
    if first is None or second is None or first[0] == 0:
        return ""
    if math.isnan(first[0]) or math.isnan(second[0]):
        return ""
    return f"{100 * (second[0] - first[0]) / abs(first[0]):+.1f}%"


def headline(report: Report) -> str:
    """The report's headline metrics (every metric unless the spec's ``[report] headline``
    names some) side by side in one markdown table (what ``reproduce`` prints): a row per x
    value; per metric, a column per value of the first series axis and,
    with two of them, the change from the first to the second. Further series axes join x in
    the rows (``0.07, T2``), so the table stays as wide as the metrics times the first axis's
    values."""
    shown = report.headline_metrics
    tables = [t for t in report.tables if shown is None or t.metric in shown]
    if not tables:
        return ""
    first = tables[0]
    column_keys, row_keys = first.series_keys[:1], first.series_keys[1:]
    columns = list(dict.fromkeys(values[:1] for values in first.series_values))
    row_groups = list(dict.fromkeys(values[1:] for values in first.series_values))
    change = len(columns) == 2
    header = [", ".join([first.x, *row_keys])]
    for table in tables:
        header += [f"{table.label}: {_series_label(column_keys, c)}" for c in columns]
        if change:
            header.append("change")
    # Per table, the series label of each (column, row group) of axis values.
    labels = [dict(zip(t.series_values, t.series, strict=True)) for t in tables]
    rows = []
    for rest in row_groups:
        for index, (x_value, _) in enumerate(first.rows):
            row = [", ".join(_fmt_value(v) for v in (x_value, *rest))]
            for table, label_of in zip(tables, labels, strict=True):
                cells = table.rows[index][1]
                picked = [cells.get(label_of.get((*c, *rest), "")) for c in columns]
                row += [_cell(cell) for cell in picked]
                if change:
                    row.append(_change(*picked))
            rows.append(row)
    return "\n".join(_table_lines(header, rows))


def _table_lines(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table: the first column left-aligned, the figures right-aligned."""
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join(["---", *["---:"] * (len(header) - 1)]) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines
