"""Sweeps: specs checked before any run, real Dask (a LocalCluster, and a scheduler and workers
as separate processes), the Parquet store with resume, and the reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import ssdlab
from ssdlab import reproduce
from ssdlab import spec as spec_mod
from ssdlab.sweeps import run_sweep
from sweep_support import (
    BIN,
    SLOW_SPEC,
    TINY_SPEC,
    DaskProcesses,
    run_cli,
    wait_for,
    write_spec,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: An MSR trace whose third line does not parse: runs of it fail while they run.
BROKEN_TRACE = (
    "128166372003061629,hm,0,Write,0,4096,1331\n"
    "128166372003061729,hm,0,Read,0,4096,1331\n"
    "128166372003061829,hm,0,Write,not-a-number,4096,1331\n"
)


def _spec_with_broken_workload(folder: Path) -> Path:
    (folder / "broken.csv").write_text(BROKEN_TRACE, encoding="utf-8")
    text = TINY_SPEC.replace(
        '[axes]\n"geometry.blocks_per_plane" = [48, 64]',
        '[workloads.broken]\ntrace = "broken.csv"\nformat = "msr"\n\n'
        '[axes]\n"geometry.blocks_per_plane" = [48, 64]',
    ).replace("seed = [1, 2]", "seed = [1]")
    return write_spec(folder, text)


def _parts(out: Path) -> list[Path]:
    return sorted((out / "results").glob("*.parquet"))


def _rows(out: Path) -> int:
    return sum(pq.read_metadata(part).num_rows for part in _parts(out))


# -- specs: expansion, keys and bad input, before any run ----------------------------------------


def test_axes_expand_as_a_product_or_zipped(tmp_path):
    spec = spec_mod.load(write_spec(tmp_path, TINY_SPEC))
    assert len(spec.runs) == 4
    assert {(r.point["geometry.blocks_per_plane"], r.seed) for r in spec.runs} == {
        (48, 1),
        (48, 2),
        (64, 1),
        (64, 2),
    }
    assert len({r.key for r in spec.runs}) == 4
    zipped = TINY_SPEC.replace('config = "tlc"', 'config = "tlc"\nzip = true')
    spec = spec_mod.load(write_spec(tmp_path, zipped))
    assert [(r.point["geometry.blocks_per_plane"], r.seed) for r in spec.runs] == [(48, 1), (64, 2)]


def test_shipped_specs_are_valid():
    root = Path(__file__).resolve().parent.parent
    example = spec_mod.load(root / "examples" / "sweep.toml")
    assert len(example.runs) == 32
    assert len(spec_mod.load(root / "examples" / "sweep.toml", scale="quick").runs) == 16
    sizes = {scale: len(reproduce.load("hints", scale).runs) for scale in reproduce.SCALES}
    assert sizes == {"quick": 6, "small": 42, "paper": 100}


def test_run_keys_follow_what_determines_a_run(tmp_path):
    base = spec_mod.load(write_spec(tmp_path, TINY_SPEC))
    # Comments, the description and the report do not change a run.
    same = TINY_SPEC.replace('metrics = ["waf"', '# plots\nmetrics = ["energy_j", "waf"')
    same = spec_mod.load(write_spec(tmp_path, same.replace("randrw job", "another text")))
    assert [r.key for r in same.runs] == [r.key for r in base.runs]
    assert same.digest == base.digest
    # Another seed value: only the runs with that seed change.
    other = spec_mod.load(write_spec(tmp_path, TINY_SPEC.replace("seed = [1, 2]", "seed = [1, 3]")))
    kept = {r.key for r in base.runs} & {r.key for r in other.runs}
    assert kept == {r.key for r in base.runs if r.seed == 1}
    assert other.digest != base.digest
    # The job file's content is part of the key, not its name.
    (tmp_path / "randrw.fio").write_text(
        (tmp_path / "randrw.fio").read_text().replace("3000", "2000")
    )
    changed = spec_mod.load(tmp_path / "spec.toml")
    assert not {r.key for r in changed.runs} & {r.key for r in base.runs}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # An unknown key: named, with the valid keys, as --set does.
        (
            '"geometry.blocks_per_plane" = [48, 64]',
            '"geometry.blocks_per_plan" = [48, 64]',
            ["spec.toml:11:", "geometry.blocks_per_plan", "expected one of", "blocks_per_plane"],
        ),
        # A value the core refuses.
        (
            "[48, 64]",
            "[48, 0]",
            ["spec.toml:11:", "'geometry.blocks_per_plane', value 0", "positive integer"],
        ),
        ("seed = [1, 2]", 'seed = [1, "two"]', ["spec.toml:12:", "axis 'seed'"]),
        ("seed = [1, 2]", "seed = [1, 2]\nhints = [0, 1]", ["spec.toml:13:", "axis 'hints'"]),
        ('set = ["', 'set = ["geometry.chanels=2", "', ["spec.toml:4:", "geometry.chanels"]),
        (
            'config = "tlc"',
            'config = "tlc"\nzip = [["seed", "nope"]]',
            ["spec.toml:4:", "zip: 'nope' is not an axis"],
        ),
    ],
)
def test_bad_spec_is_refused_before_any_run(tmp_path, old, new, expected):
    path = write_spec(tmp_path, TINY_SPEC.replace(old, new, 1))
    out = tmp_path / "out"
    result = run_cli("sweep", path, "--out", out, "--quiet", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    for part in expected:
        assert part in result.stderr, result.stderr
    assert not out.exists()  # nothing started


def test_two_points_that_are_the_same_run_are_refused(tmp_path):
    text = TINY_SPEC.replace(
        '[workloads.randrw]\njob = "randrw.fio"',
        '[workloads.randrw]\njob = "randrw.fio"\n\n[workloads.again]\njob = "randrw.fio"',
    )
    with pytest.raises(spec_mod.SpecError, match="are the same run"):
        spec_mod.load(write_spec(tmp_path, text))


def test_results_cross_from_rust_as_dicts(make_device, randrw_job):
    device = make_device()
    handle = device._handle
    assert isinstance(handle.config, dict)
    assert isinstance(handle.ssd_stats(), dict)
    handle.start_job(str(randrw_job), 0)
    while not handle.step(1 << 20)[0]:
        pass
    job = handle.finish_job()
    assert isinstance(job, dict)
    assert isinstance(job["read"]["clat_ns"]["percentile"], dict)
    assert job["read"]["total_ios"] + job["write"]["total_ios"] == 3000


# -- a local cluster -------------------------------------------------------------------------------


def test_local_sweep_records_failures_resumes_and_reports(tmp_path):
    path = _spec_with_broken_workload(tmp_path)
    out = tmp_path / "out"
    first = run_cli("sweep", path, "--out", out, "--workers", "2", cwd=tmp_path)
    # The trace's runs fail while they run; the others finish; the exit status says so.
    assert first.returncode == 1, first.stderr
    assert "4 runs, 4 run now, 0 already done, 2 failed" in first.stderr
    frame = ssdlab.load_results(out)
    assert len(frame) == 4
    assert frame["run_key"].is_unique
    failed = frame[frame["status"] == "failed"]
    assert set(failed["workload"]) == {"broken"}
    assert failed["error"].str.contains("WorkloadError").all()
    assert failed["error"].str.contains("broken.csv:3").all(), failed["error"].tolist()
    ok = frame[frame["status"] == "ok"]
    assert (ok["read.ios"] + ok["write.ios"] == 3000).all()
    assert (ok["waf"] >= 1).all()
    assert ok["config_hash"].str.len().eq(16).all()
    for key in frame["run_key"]:
        document = json.loads((out / "runs" / f"{key}.json").read_text())
        assert document["sweep"]["run_key"] == key
        if key in set(ok["run_key"]):
            assert document["jobs"][0]["jobname"] == "mixed"
            assert document["ssd"]["waf"] == pytest.approx(ok.set_index("run_key").at[key, "waf"])
        else:
            assert "broken.csv:3" in document["error"]

    # Again: the finished runs are skipped, the failed ones tried again.
    second = run_cli("sweep", path, "--out", out, "--workers", "2", cwd=tmp_path)
    assert second.returncode == 1
    assert "4 runs, 2 run now, 2 already done, 2 failed" in second.stderr
    again = ssdlab.load_results(out)
    assert len(again) == 4
    assert again["run_key"].is_unique
    assert len(_parts(out)) == 1
    kept = again.set_index("run_key").loc[ok["run_key"], "invocation"]
    assert (kept == ok.set_index("run_key")["invocation"]).all()

    report = run_cli("report", out, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "| geometry.blocks_per_plane |" in report.stdout
    for name in ("waf.png", "read.iops.png", "write.p99_us.png"):
        assert (out / "report" / name).read_bytes().startswith(PNG_SIGNATURE)
    assert "2 failed, left out" in (out / "report" / "report.md").read_text()


def test_directory_of_another_spec_is_refused_unless_forced(tmp_path):
    path = write_spec(tmp_path, TINY_SPEC.replace("seed = [1, 2]", "seed = [1]"))
    out = tmp_path / "out"
    outcome = run_sweep(path, out=out, workers=1, progress=False)
    assert (outcome.ran, outcome.failed) == (2, 0)
    other = write_spec(tmp_path, TINY_SPEC.replace("seed = [1, 2]", "seed = [5]"), "other.toml")
    refused = run_cli("sweep", other, "--out", out, "--quiet", cwd=tmp_path)
    assert refused.returncode == 2
    assert "holds the results of another spec ('tiny')" in refused.stderr
    assert "--force" in refused.stderr
    forced = run_sweep(other, out=out, workers=1, force=True, progress=False)
    assert (forced.ran, forced.skipped) == (2, 0)
    assert set(ssdlab.load_results(out)["seed"]) == {5}


def test_corrupt_parquet_is_reported_and_its_runs_recomputed(tmp_path):
    path = write_spec(tmp_path, TINY_SPEC)
    out = tmp_path / "out"
    first = run_sweep(path, out=out, workers=2, progress=False)
    assert first.ran == 4
    (part,) = _parts(out)
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])  # truncated
    with pytest.warns(RuntimeWarning, match=part.name):
        assert ssdlab.load_results(out).empty
    problems: list[str] = []
    second = run_sweep(path, out=out, workers=2, progress=True, on_problem=problems.append)
    assert len(problems) == 1
    assert part.name in problems[0]
    assert "recomputed" in problems[0]
    assert (second.ran, second.skipped) == (4, 0)
    frame = ssdlab.load_results(out)
    assert len(frame) == 4
    assert frame["run_key"].is_unique
    assert (frame["status"] == "ok").all()
    # The same runs give the same results, bit for bit.
    before = first.results.set_index("run_key").sort_index()
    after = frame.set_index("run_key").sort_index()
    pd.testing.assert_series_equal(before["write.iops"], after["write.iops"])
    assert (out / "results" / f"{part.name}.corrupt").exists()


def test_sweep_api_returns_a_dataframe_with_axes_and_statistics(tmp_path, capsys):
    path = write_spec(tmp_path, TINY_SPEC)
    frame = ssdlab.sweep(path, out=tmp_path / "out", workers=2, progress=True)
    assert isinstance(frame, pd.DataFrame)
    assert len(frame) == 4
    for column in ("run_key", "geometry.blocks_per_plane", "seed", "hints", "workload", "wall_s"):
        assert column in frame
    for column in ("waf", "read.p99_us", "erases.mean", "energy_j", "die_utilisation"):
        assert frame[column].notna().all(), column
    assert "4/4" in capsys.readouterr().err  # the progress bar's done/total
    table = pq.read_table(_parts(tmp_path / "out")[0])
    assert table.num_rows == 4


# -- a scheduler and workers as separate processes -------------------------------------------------


@pytest.fixture
def dask_processes(tmp_path):
    processes = DaskProcesses(tmp_path)
    try:
        processes.start(n_workers=2)
        yield processes
    finally:
        processes.stop()


@pytest.mark.slow
def test_killed_worker_and_killed_sweep_lose_only_their_runs(tmp_path, dask_processes):
    path = write_spec(tmp_path, SLOW_SPEC)
    out = tmp_path / "out"
    runs = out / "runs"
    with (
        open(tmp_path / "sweep.log", "w") as log,
        subprocess.Popen(
            [BIN / "ssdlab", "sweep", path, "--out", out, "--dask", dask_processes.address],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        ) as sweep,
    ):
        try:
            wait_for(lambda: len(list(runs.glob("*.json"))) >= 2, 90, "two finished runs")
            dask_processes.workers[1].send_signal(signal.SIGKILL)  # mid-run: runs take ~0.5 s
            # Once rows are in the store, kill the sweep itself.
            wait_for(lambda: _rows(out) >= 3, 90, "three rows in the store")
            sweep.send_signal(signal.SIGKILL)
        finally:
            sweep.kill()
    done_before = ssdlab.load_results(out)
    assert len(done_before) >= 3
    assert (done_before["status"] == "ok").all()
    assert len(done_before) < 8

    resumed = run_cli("sweep", path, "--out", out, "--dask", dask_processes.address, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    n_done = len(done_before)
    assert f"8 runs, {8 - n_done} run now, {n_done} already done, 0 failed" in resumed.stderr
    frame = ssdlab.load_results(out)
    assert len(frame) == 8
    assert frame["run_key"].is_unique
    assert (frame["status"] == "ok").all()
    assert len(_parts(out)) == 1
    assert pq.read_table(_parts(out)[0]).num_rows == 8
    # The runs finished before the kills were not run again.
    kept = frame.set_index("run_key").loc[done_before["run_key"]]
    assert (kept["invocation"].to_numpy() == done_before["invocation"].to_numpy()).all()
    assert (kept["finished_at"].to_numpy() == done_before["finished_at"].to_numpy()).all()
    assert frame["worker"].nunique() >= 1


def test_unreachable_scheduler_is_an_error_within_the_timeout(tmp_path):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = write_spec(tmp_path, TINY_SPEC)
    started = time.monotonic()
    result = run_cli(
        "sweep",
        path,
        "--out",
        tmp_path / "out",
        "--dask",
        f"tcp://127.0.0.1:{port}",
        "--connect-timeout",
        "2",
        cwd=tmp_path,
        timeout=60,
    )
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port} within 2 s" in result.stderr
    assert "Traceback" not in result.stderr


# -- reproduce ------------------------------------------------------------------------------------


def test_reproduce_list_names_the_studies(tmp_path):
    result = run_cli("reproduce", "--list", cwd=tmp_path)
    assert result.returncode == 0
    assert "\nhints  Placement hints vs over-provisioning" in result.stdout
    assert result.stdout.startswith("flexecc  FlexECC:")
    unknown = run_cli("reproduce", "nope", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "no study 'nope'" in unknown.stderr


def test_reproduce_hints_quick(tmp_path):
    started = time.monotonic()
    result = run_cli("reproduce", "hints", "--scale", "quick", "--workers", "2", cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert elapsed < 60
    out = tmp_path / "reproduce-hints-quick"
    frame = ssdlab.load_results(out)
    assert len(frame) == 6
    assert (frame["status"] == "ok").all()
    assert set(frame["geometry.over_provisioning"]) == {0.07, 0.28, 0.5}
    # Hints on and off are different runs of the same device: WAF falls with more spare space
    # either way, and the report's table shows both columns for every OP.
    for hints in (False, True):
        waf = frame[frame["hints"] == hints].sort_values("geometry.over_provisioning")["waf"]
        assert waf.is_monotonic_decreasing
        assert waf.iloc[0] > 2 * waf.iloc[-1]
    # The study's finding, deterministic for these seeds: with spare space to work with,
    # separating hot from cold data lowers write amplification and raises write IOPS.
    by_point = frame.set_index(["geometry.over_provisioning", "hints"])
    for op in (0.28, 0.5):
        assert by_point.at[(op, True), "waf"] < 0.97 * by_point.at[(op, False), "waf"]
        assert by_point.at[(op, True), "write.iops"] > by_point.at[(op, False), "write.iops"]
    header = next(line for line in result.stdout.splitlines() if line.startswith("| geometry"))
    for column in ("write amplification: hints=off", "hints=on", "write IOPS", "read p99"):
        assert column in header
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 0.")]
    assert [row.split("|")[1].strip() for row in rows] == ["0.07", "0.28", "0.5"]
    for name in ("waf.png", "write.iops.png", "read.p99_us.png", "report.md"):
        assert (out / "report" / name).exists()
    assert os.path.getsize(out / "report" / "waf.png") > 10_000


def test_reproduce_seassd_quick_runs_the_study_and_its_ablation(tmp_path):
    result = run_cli("reproduce", "seassd", "--scale", "quick", "--workers", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "reproduce-seassd-quick"
    frame = ssdlab.load_results(out)
    assert len(frame) == 8
    assert (frame["status"] == "ok").all()
    assert set(frame["workload"]) == {"T2", "S2"}
    assert (frame["oltp.committed"] + frame["oltp.aborted"] == 400).all()
    # The same database and transactions either way: the engine's I/O does not depend on
    # what the device does with the hints, only its timing does.
    for _, pair in frame.groupby(["workload", "geometry.over_provisioning"]):
        assert pair["oltp.device_write_bytes"].nunique() == 1
        assert pair["oltp.device_read_bytes"].nunique() == 1
    # The paper's claim, deterministic for this seed: sysbench's hinted device copies less in
    # GC and erases less, and where spare space is scarce it commits more transactions per
    # second (at 7 % OP: WAF 2.68 -> 2.02, 51 -> 66 transactions/s).
    s2 = frame[frame["workload"] == "S2"].set_index(["geometry.over_provisioning", "hints"])
    for op in (0.07, 0.33):
        hinted, plain = s2.loc[(op, True)], s2.loc[(op, False)]
        assert hinted["waf"] < 0.9 * plain["waf"]
        assert hinted["flash.erases"] < plain["flash.erases"]
    hinted, plain = s2.loc[(0.07, True)], s2.loc[(0.07, False)]
    assert hinted["oltp.transactions_per_s"] > 1.1 * plain["oltp.transactions_per_s"]
    ablation = ssdlab.load_results(out / "seassd-ablation")
    assert list(ablation.sort_values("hints")["hints"]) == sorted(
        ["none", "classify", "classify+predict", "all"]
    )
    assert "| hints |" in result.stdout
    for name in ("report.md", "results.csv", "waf.csv", "waf.png"):
        assert (out / "report" / name).exists()
        assert (out / "seassd-ablation" / "report" / name).exists()


def test_a_headline_metric_outside_the_reports_metrics_is_an_error(tmp_path):
    from ssdlab.report import ReportError, make_report

    out = tmp_path / "out"
    path = write_spec(tmp_path, TINY_SPEC.replace("seed = [1, 2]", "seed = [1]"))
    run_sweep(path, out=out, workers=1, progress=False)
    meta_path = out / "sweep.json"
    meta = json.loads(meta_path.read_text())
    meta["report"] = {**(meta.get("report") or {}), "metrics": ["waf"], "headline": ["read.iops"]}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ReportError, match=r"headline names 'read.iops'.*metrics \(waf"):
        make_report(out)
    meta["report"]["headline"] = ["waf"]
    meta_path.write_text(json.dumps(meta))
    assert make_report(out).headline_metrics[0] == "waf"


def test_flushes_become_sync_columns_of_the_store():
    """A report's ``sync`` sections (flushes, fio's syncs) flatten to ``sync.*`` columns: the
    count over all jobs, the latency of the job with most; none when nothing was flushed."""
    from ssdlab.store import flatten

    def job(flushes: int, mean_ns: float) -> dict:
        lat = {"min": 1_000, "max": 9_000, "mean": mean_ns, "stddev": 0.0, "N": flushes}
        lat["percentile"] = {"50.000000": 2_000, "99.000000": 8_000}
        return {"sync": {"total_ios": flushes, "lat_ns": lat}}

    row = flatten({"jobs": [job(3, 4_000.0), job(5, 6_000.0)]})
    assert row["sync.ios"] == 8
    assert (row["sync.lat_mean_us"], row["sync.lat_max_us"]) == (6.0, 9.0)
    assert (row["sync.p50_us"], row["sync.p99_us"]) == (2.0, 8.0)
    empty = flatten({"jobs": [{"sync": {"total_ios": 0, "lat_ns": {}}}]})
    assert empty["sync.ios"] == 0
    assert empty["sync.lat_mean_us"] is None
