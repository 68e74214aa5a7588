"""``ssdlab stats``: a request log written by ``ssdlab run`` summarised, and checked against the
same CSV read independently with :mod:`csv`; clean errors for bad files."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from ssdlab import stats_log
from ssdlab.cli import main
from ssdlab.errors import WorkloadError
from support import PRESET, set_args

HEADER = (
    "request,op,logical_sector,size_bytes,duration_ns,flash_reads,flash_writes,oob_reads,"
    "oob_writes,erases,physical_sector,flash_duration_ns"
)
COUNTERS = ("flash_reads", "flash_writes", "oob_reads", "oob_writes", "erases")
PAGE = 4096


def ssdlab(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def assert_clean_error(stderr: str, *needles: str) -> None:
    assert "Traceback" not in stderr
    assert stderr.startswith("ssdlab: error: "), stderr
    assert stderr.count("\n") == 1, stderr
    for needle in needles:
        assert needle in stderr, f"{needle!r} not in {stderr!r}"


@pytest.fixture(scope="module")
def run_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A request log of a preconditioned tiny device (so GC erases blocks) replaying a trace of
    all four ops, among them writes that straddle a page; and the run's JSON report."""
    tmp = tmp_path_factory.mktemp("stats")
    rng = random.Random(7)
    lines = []
    for i in range(3000):
        kind = rng.random()
        offset = rng.randrange(2048) * PAGE
        if kind < 0.6:
            shift = 2048 if i % 10 == 0 else 0  # every tenth write covers two pages
            lines.append(f"{i},write,{offset + shift},{PAGE * rng.choice((1, 1, 2))}")
        elif kind < 0.9:
            lines.append(f"{i},read,{offset},{PAGE}")
        elif kind < 0.97:
            lines.append(f"{i},trim,{offset},{PAGE * 4}")
        else:
            lines.append(f"{i},flush,0,0")
    trace = tmp / "trace.csv"
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log, report = tmp / "requests.csv", tmp / "report.json"
    status = main(
        [
            "run", PRESET, "--trace", str(trace), "--trace-format", "csv", "--closed-loop",
            *set_args(), "--precondition", "--quiet", "--output-format", "json",
            "--output", str(report), "--request-log", str(log),
        ]
    )  # fmt: skip
    assert status == 0
    return log, json.loads(report.read_text(encoding="utf-8"))


def test_summary_matches_the_csv_read_independently(capsys, run_log):
    log, report = run_log
    status, out, err = ssdlab(capsys, "stats", str(log), "--output-format", "json")
    assert status == 0, err
    summary = json.loads(out)

    with log.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == summary["rows"] == 3000
    assert summary["first_request"] == int(rows[0]["request"])
    assert summary["last_request"] == int(rows[-1]["request"])
    by_op = {op: [r for r in rows if r["op"] == op] for op in stats_log.OPS}
    assert all(by_op.values()), "the log has every op"

    for name, part in [*((op, summary["ops"][op]) for op in stats_log.OPS), ("total", None)]:
        mine = rows if part is None else by_op[name]
        got = summary["total"] if part is None else part
        durations = sorted(int(r["duration_ns"]) for r in mine)
        assert got["requests"] == len(mine), name
        assert got["bytes"] == sum(int(r["size_bytes"]) for r in mine), name
        assert got["duration_total_ns"] == sum(durations), name
        assert got["flash_duration_ns"] == sum(int(r["flash_duration_ns"]) for r in mine), name
        for key in COUNTERS:
            assert got[key] == sum(int(r[key]) for r in mine), (name, key)
        assert got["requests_with_erases"] == sum(int(r["erases"]) > 0 for r in mine), name
        d = got["duration_ns"]
        assert (d["min"], d["max"]) == (durations[0], durations[-1]), name
        assert d["mean"] == pytest.approx(sum(durations) / len(durations)), name
        median = durations[(len(durations) - 1) // 2]
        assert d["p50"] == pytest.approx(median, rel=1e-3, abs=1), name  # 3 significant digits
        ladder = [d[k] for k in ("min", "p50", "p90", "p99", "p99_9", "p99_99", "max")]
        assert ladder == sorted(ladder), name

    # Media bytes programmed over the bytes the writes carried.
    host_bytes = sum(int(r["size_bytes"]) for r in by_op["write"])
    flash_writes = sum(int(r["flash_writes"]) for r in rows)
    assert summary["write_amplification"] == pytest.approx(flash_writes * PAGE / host_bytes)
    flash_ns = sum(int(r["flash_duration_ns"]) for r in rows)
    total_ns = sum(int(r["duration_ns"]) for r in rows)
    assert summary["flash_time_share"] == pytest.approx(flash_ns / total_ns)

    # And the log agrees with what the device itself counted during the run.
    ssd = report["ssd"]
    assert summary["ops"]["write"]["bytes"] == ssd["host_bytes_written"]
    assert summary["total"]["flash_writes"] == ssd["flash"]["programs"]
    assert summary["write_amplification"] == pytest.approx(ssd["waf"])
    assert summary["total"]["erases"] > 0, "the preconditioned device collected garbage"
    # The Python API gives the same summary as the CLI.
    assert stats_log.summarize(log) == summary


def test_normal_output_is_a_table(capsys, run_log, tmp_path):
    log, _ = run_log
    status, out, err = ssdlab(capsys, "stats", str(log))
    assert status == 0, err
    assert "3,000 rows (requests 1 to 3,000)" in " ".join(out.split())
    header = next(line for line in out.splitlines() if "total" in line)
    assert header.split() == ["read", "write", "trim", "flush", "total"]
    summary = stats_log.summarize(log)
    requests = next(line for line in out.splitlines() if line.split()[:1] == ["requests"])
    parts = [summary["ops"][op] for op in stats_log.OPS] + [summary["total"]]
    assert requests.split()[1:] == [f"{part['requests']:,}" for part in parts]
    assert "duration (µs)" in out
    assert any(line.split()[0] == "p99.9" for line in out.splitlines() if line.strip())
    assert f"write amplification: {summary['write_amplification']:.3f} = " in out

    target = tmp_path / "summary.txt"
    status, out, err = ssdlab(capsys, "stats", str(log), "--output", str(target))
    assert (status, out) == (0, ""), err
    text = target.read_text(encoding="utf-8")
    assert "requests w/ erase" in text
    assert "\x1b[" not in text, "no colour codes in a file"


@pytest.mark.parametrize(
    ("body", "line", "needles"),
    [
        ("", 1, ["the file is empty", "expected the request-log header"]),
        ("time_ns,op,offset,length\n", 1, ["column 1 is 'time_ns', expected 'request'"]),
        (
            f"{HEADER}\n1,write,0,4096,10,0,1,0,1,0,8,5\n2,read,8,4096,abc,1,0,0,0,0,8,5\n",
            3,
            ["column 'duration_ns': expected a non-negative integer, found 'abc'"],
        ),
        (f"{HEADER}\n1,write,0,4096\n", 2, ["expected 12 columns, found 4"]),
        (f"{HEADER}\n1,erase,0,4096,10,0,1,0,1,0,8,5\n", 2, ["column 'op'", "found 'erase'"]),
        (f"{HEADER}\n1,read,0,-1,10,1,0,0,0,0,8,5\n", 2, ["column 'size_bytes'", "negative"]),
        (f"{HEADER}\n1,read,0,1,10,1,0,0,0,0,-7,5\n", 2, ["column 'physical_sector'"]),
    ],
)
def test_bad_file_names_file_line_and_column(capsys, tmp_path, body, line, needles):
    path = tmp_path / "bad.csv"
    path.write_text(body, encoding="utf-8")
    status, out, err = ssdlab(capsys, "stats", str(path))
    assert (status, out) == (1, "")
    assert_clean_error(err, f"ssdlab: error: {path}:{line}: ", *needles)
    with pytest.raises(WorkloadError, match=f"^{path}:{line}: "):
        stats_log.summarize(path)


def test_usage_errors(capsys, tmp_path, run_log):
    log, _ = run_log
    status, _, err = ssdlab(capsys, "stats", str(tmp_path / "missing.csv"))
    assert status == 2
    assert_clean_error(err, "missing.csv: no such file")
    for size in ("1000", "0", "-4096"):
        status, _, err = ssdlab(capsys, "stats", str(log), "--page-size", size)
        assert status == 2
        assert_clean_error(err, "--page-size", "positive multiple of 512", size)
    status, _, err = ssdlab(capsys, "stats", str(log), "--output", str(tmp_path / "no/x.txt"))
    assert status == 2
    assert_clean_error(err, "no such directory")


def test_page_size_option_changes_the_write_amplification(capsys, run_log):
    log, _ = run_log
    status, out, _ = ssdlab(capsys, "stats", str(log), "--output-format", "json")
    assert status == 0
    base = json.loads(out)
    status, out, _ = ssdlab(
        capsys, "stats", str(log), "--output-format", "json", "--page-size", "512"
    )
    assert status == 0
    small = json.loads(out)
    assert small["page_size_bytes"] == 512
    assert small["write_amplification"] == pytest.approx(base["write_amplification"] / 8)
    assert small["total"] == base["total"]
