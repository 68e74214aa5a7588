"""The study tables' shape: every metric's columns in the headline's header, one header field
per row field, empty cells (not ``nan``) where a run has no such figure, and die utilisation
beside throughput and latency."""

from __future__ import annotations

import math
from pathlib import Path

from ssdlab.report import MetricTable, Report, _markdown, headline, with_die_utilisation


def _table(metric: str, rows: list[tuple[float, list[float]]]) -> MetricTable:
    """A metric over x = RBER, series flexecc.mode x workload (all_bch/flex x fileserver/r90)."""
    series_values = [(mode, w) for mode in ("all_bch", "flex") for w in ("fileserver", "r90")]
    series = [f"flexecc.mode={m}, workload={w}" for m, w in series_values]
    return MetricTable(
        metric=metric,
        label=metric,
        x="ecc.rber_base",
        series=series,
        series_values=series_values,
        series_keys=["flexecc.mode", "workload"],
        rows=[
            (x, {s: (v, 0.0, 1) for s, v in zip(series, values, strict=True)}) for x, values in rows
        ],
        plot=None,
    )


def _report(tables: list[MetricTable]) -> Report:
    return Report(title="t", markdown="", path=Path("report.md"), tables=tables, failed=0, runs=8)


def test_the_headline_header_names_every_metrics_columns():
    response = _table("cache.mean_ssd_response_ns", [(0.0, [100, 50, 101, 45])])
    crc = _table("flexecc.crc_reads", [(0.0, [0, 0, 7, 9])])
    util = _table("die_utilisation", [(0.0, [0.5, 0.25, 0.5, 0.2])])
    lines = headline(_report([response, crc, util])).splitlines()
    header, rule, *rows = lines
    fields = [f.strip() for f in header.strip("|").split("|")]
    # x joined with the second series axis, then per metric: all_bch, flex, change.
    assert fields[0] == "ecc.rber_base, workload"
    for metric in ("cache.mean_ssd_response_ns", "flexecc.crc_reads", "die_utilisation"):
        assert f"{metric}: flexecc.mode=all_bch" in fields
        assert f"{metric}: flexecc.mode=flex" in fields
    assert len(fields) == 1 + 3 * 3
    assert rule.count("|") == header.count("|")
    assert all(row.count("|") == header.count("|") for row in rows)
    fileserver = [f.strip() for f in rows[0].strip("|").split("|")]
    assert fileserver == [
        "0.0, fileserver",
        "100.0",
        "101.0",
        "+1.0%",
        "0",
        "7.000",
        "",
        "0.500",
        "0.500",
        "+0.0%",
    ]


def test_a_metric_a_run_does_not_have_prints_empty_not_nan():
    # A write-only workload has no read latency: NaN in the results.
    table = _table("read.p99_us", [(0.0, [math.nan, 80.0, math.nan, 70.0])])
    text = "\n".join(_markdown(table)) + headline(_report([table]))
    assert "nan" not in text.lower()
    row = [f.strip() for f in headline(_report([table])).splitlines()[2].strip("|").split("|")]
    assert row == ["0.0, fileserver", "", "", ""]


def test_die_utilisation_goes_beside_throughput_and_latency():
    columns = ["waf", "read.iops", "die_utilisation", "gc.time_ns"]
    assert with_die_utilisation(["read.iops", "read.p99_us", "waf"], columns) == [
        "read.iops",
        "read.p99_us",
        "die_utilisation",
        "waf",
    ]
    assert with_die_utilisation(["gc.time_ns"], columns) == ["gc.time_ns", "die_utilisation"]
    listed = ["die_utilisation", "read.iops"]
    assert with_die_utilisation(listed, columns) == listed
    assert with_die_utilisation(["read.iops"], ["read.iops"]) == ["read.iops"]


def test_the_headline_shows_only_the_metrics_the_spec_names():
    response = _table("cache.mean_ssd_response_ns", [(0.0, [100, 50, 101, 45])])
    crc = _table("flexecc.crc_reads", [(0.0, [0, 0, 7, 9])])
    util = _table("die_utilisation", [(0.0, [0.5, 0.25, 0.5, 0.2])])
    report = _report([response, crc, util])
    shown = Report(
        **{**report.__dict__, "headline_metrics": ["die_utilisation", "flexecc.crc_reads"]}
    )
    header = headline(shown).splitlines()[0]
    fields = [f.strip() for f in header.strip("|").split("|")]
    assert "flexecc.crc_reads: flexecc.mode=flex" in fields
    assert "die_utilisation: flexecc.mode=flex" in fields
    assert not any(f.startswith("cache.mean_ssd_response_ns") for f in fields)
    assert len(fields) == 1 + 2 * 3


def test_many_long_series_names_leave_the_plot_its_room(tmp_path: Path) -> None:
    """24 series with long names, as `reproduce melded-throughput` plots: the legend goes below
    the plot with the names' sections dropped, and matplotlib has room to lay the axes out (its
    warning that they collapsed is an error under this suite's settings)."""
    from ssdlab.report import _plot, _short_label

    assert _short_label("geometry.channels=8, hints=off") == "channels=8, hints=off"
    labels = [
        f"host.melded_reads={m}, channel.rate_mtps={r}, channel.bus_width_bytes={w}, "
        f"geometry.channels={c}, geometry.chips_per_channel={64 // c}, hints=off"
        for m in ("off", "on")
        for r in (400, 800, 1600)
        for w in (1, 2)
        for c in (8, 16)
    ]
    rows = [(x, {label: (x * (i + 1), 0.0, 1) for i, label in enumerate(labels)}) for x in (1, 2)]
    path = _plot("die_utilisation", "geometry.page_size_bytes", labels, rows, tmp_path, "t")
    assert path.stat().st_size > 0
