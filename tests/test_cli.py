"""The ``ssdlab`` command line, in-process through ``main`` and as ``python -m ssdlab``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ssdlab
from ssdlab import _core
from ssdlab.cli import main
from support import PRESET, set_args

NINE_PRESETS = [
    "flexecc",
    "melded-16x4",
    "melded-8x8",
    "mlc",
    "noftl",
    "qlc",
    "seassd",
    "slc",
    "tlc",
]
PERCENTILE_KEYS = [
    f"{p:f}" for p in (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)
]
DIRECTION_KEYS = {
    "io_bytes",
    "io_kbytes",
    "bw_bytes",
    "bw",
    "iops",
    "runtime",
    "runtime_ns",
    "total_ios",
    "slat_ns",
    "clat_ns",
    "lat_ns",
}
LAT_KEYS = {"min", "max", "mean", "stddev", "N"}
SSD_KEYS = {
    "waf",
    "host_bytes_written",
    "media_bytes_written",
    "flash_pages_programmed",
    "gc",
    "erases",
    "energy_j",
    "ecc",
    "placement",
    "sim_time_ns",
    "seed",
    "config_hash",
}
FIO_REFERENCE = (
    Path(__file__).resolve().parents[2] / "shared" / "reference" / "fio-3.33-nbd-randrw.json"
)


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def run_json(capsys, job: Path, *extra: str) -> dict:
    status, out, err = run_cli(
        capsys, "run", PRESET, str(job), *set_args(), "--output-format", "json", "--quiet", *extra
    )
    assert status == 0, err
    return json.loads(out)


def run_summary(capsys, job: Path, *extra: str) -> str:
    """The normal output of the same run as ``run_json(capsys, job, *extra)``."""
    status, out, err = run_cli(capsys, "run", PRESET, str(job), *set_args(), *extra, "--quiet")
    assert status == 0, err
    return out


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ssdlab", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


def assert_clean_error(stderr: str, *needles: str) -> None:
    """One `ssdlab: error:` message that names what is wrong, and no traceback."""
    assert "Traceback" not in stderr
    assert stderr.startswith("ssdlab: error: "), stderr
    assert stderr.count("\n") == 1, "one line"
    for needle in needles:
        assert needle in stderr, f"{needle!r} not in {stderr!r}"


# -- presets, version ----------------------------------------------------------------------------


def test_presets_lists_the_nine_presets_aligned(capsys):
    status, out, _ = run_cli(capsys, "presets")
    assert status == 0
    lines = out.splitlines()
    names = [line.split()[0] for line in lines]
    assert set(NINE_PRESETS) <= set(names)
    assert names == sorted(names)
    width = max(len(name) for name in names)
    for line, name in zip(lines, names, strict=True):
        assert line[width : width + 2] == "  ", "descriptions start in one column"
        assert line[width + 2 :].strip(), f"{name} has a description"


def test_module_entry_point_and_version():
    done = run_module("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"ssdlab {ssdlab.__version__}"


# -- run: the JSON layout ------------------------------------------------------------------------


def test_run_json_has_fio_layout_and_ssd_section(capsys, randrw_job):
    report = run_json(capsys, randrw_job, "--seed", "1")
    assert list(report) == ["ssdlab version", "seed", "config_hash", "jobs", "ssd"]
    assert report["seed"] == 1
    (job,) = report["jobs"]
    assert job["jobname"] == "mixed"
    assert {"read", "write", "trim", "ssd_job"} <= set(job)
    for direction in ("read", "write", "trim"):
        assert set(job[direction]) >= DIRECTION_KEYS, direction
        for lat in ("slat_ns", "clat_ns", "lat_ns"):
            assert set(job[direction][lat]) >= LAT_KEYS
    assert set(report["ssd"]) >= SSD_KEYS
    assert {"invocations", "pages_programmed", "time_ns"} <= set(report["ssd"]["gc"])
    assert {"min", "mean", "max", "stddev"} <= set(report["ssd"]["erases"])
    assert report["ssd"]["config_hash"] == report["config_hash"]


def test_run_json_numbers_are_consistent(capsys, randrw_job):
    (job,) = run_json(capsys, randrw_job)["jobs"]
    read, write = job["read"], job["write"]
    assert read["total_ios"] + write["total_ios"] == 3000
    assert read["total_ios"] / 3000 == pytest.approx(0.7, abs=0.05)  # rwmixread=70
    for stats in (read, write):
        runtime_ns = stats["runtime_ns"]
        assert runtime_ns > 0
        assert stats["io_bytes"] == stats["total_ios"] * 4096
        assert stats["io_kbytes"] == stats["io_bytes"] // 1024
        assert stats["bw_bytes"] == pytest.approx(
            stats["io_bytes"] * 1e9 / runtime_ns, rel=1e-6, abs=1
        )
        assert stats["iops"] == pytest.approx(stats["total_ios"] * 1e9 / runtime_ns, rel=1e-6)
        assert stats["bw"] == pytest.approx(stats["bw_bytes"] / 1024, rel=1e-3, abs=1)
        assert stats["runtime"] == pytest.approx(runtime_ns / 1e6, abs=1)
        clat = stats["clat_ns"]
        assert clat["N"] == stats["total_ios"]
        assert 0 < clat["min"] <= clat["mean"] <= clat["max"]
        assert list(clat["percentile"]) == PERCENTILE_KEYS
        values = list(clat["percentile"].values())
        assert values == sorted(values)
        assert clat["min"] <= values[0]
        assert values[-1] <= clat["max"] * 1.01  # percentiles are bucket bounds
        assert stats["lat_ns"]["mean"] >= clat["mean"]
    assert job["trim"]["total_ios"] == 0
    assert job["trim"]["iops"] == 0


@pytest.mark.skipif(not FIO_REFERENCE.exists(), reason="../shared/reference is not beside the repo")
def test_json_keys_are_named_as_fio_names_them(capsys, randrw_job):
    """The keys checked above are fio 3.33's own (runtime_ns is our addition)."""
    text = FIO_REFERENCE.read_text(encoding="utf-8")
    fio_job = json.loads(text[text.index("{") :])["jobs"][0]  # fio's nbd engine prints a line first
    for direction in ("read", "write"):
        assert DIRECTION_KEYS - {"runtime_ns"} <= set(fio_job[direction])
        assert set(fio_job[direction]["clat_ns"]) >= LAT_KEYS
        assert list(fio_job[direction]["clat_ns"]["percentile"]) == PERCENTILE_KEYS
    ours = run_json(capsys, randrw_job)["jobs"][0]
    assert list(ours["read"]["clat_ns"]["percentile"]) == PERCENTILE_KEYS
    # Flushes are fio's syncs: a job with none reports the section exactly as fio does.
    assert ours["sync"] == fio_job["sync"]


def test_same_seed_identical_json_different_seed_different_latency(capsys, randrw_job):
    def run(seed: str) -> tuple[int, str, str]:
        args = ("--output-format", "json", "--quiet", "--seed", seed)
        return run_cli(capsys, "run", PRESET, str(randrw_job), *set_args(), *args)

    first, again = run("11"), run("11")
    assert first[0] == again[0] == 0
    assert first[1] == again[1]
    one = json.loads(first[1])["jobs"][0]
    other = run_json(capsys, randrw_job, "--seed", "12")["jobs"][0]
    assert (one["read"]["clat_ns"]["mean"], one["write"]["clat_ns"]["mean"]) != (
        other["read"]["clat_ns"]["mean"],
        other["write"]["clat_ns"]["mean"],
    )


def test_output_file_gets_the_json(capsys, randrw_job, tmp_path):
    target = tmp_path / "out.json"
    status, out, _ = run_cli(
        capsys,
        "run",
        PRESET,
        str(randrw_job),
        *set_args(),
        "--output-format",
        "json",
        "--output",
        str(target),
        "--quiet",
    )
    assert status == 0
    assert out == ""
    report = json.loads(target.read_text(encoding="utf-8"))
    assert report["jobs"][0]["jobname"] == "mixed"


def test_normal_output_is_a_readable_summary(capsys, randrw_job):
    out = run_summary(capsys, randrw_job)
    for needle in (
        "mixed:",
        "read: IOPS=",
        "write: IOPS=",
        "clat percentiles (usec)",
        "99.99th=",
        "SSD:",
        "WAF=",
        "GC:",
        "erases",
        "energy=",
        "sim time=",
    ):
        assert needle in out, needle
    assert "trim: IOPS" not in out


def test_normal_output_shows_die_utilisation_and_sub_unit_writes(capsys, tmp_path):
    """The default output says what the JSON says about the dies and the mapping units."""
    job = tmp_path / "seq1k.fio"
    job.write_text("[seq1k]\nrw=write\nbs=1k\nsize=1m\n", encoding="utf-8")
    pages = ("--set", "geometry.page_size_bytes=16384")
    ssd = run_json(capsys, job, *pages)["ssd"]
    # Sequential 1 KiB writes merge into their 4 KiB units in the page being filled.
    assert ssd["buffer_merged_units"] > 0
    out = run_summary(capsys, job, *pages)
    assert (
        f"mapping units of {ssd['mapping_unit_bytes']} B: "
        f"merged in the write buffer={ssd['buffer_merged_units']}, "
        f"padded={ssd['padded_units']}, read-modify-write reads={ssd['flash']['rmw_reads']}, "
        f"read from the controller={ssd['flash']['controller_reads']}"
    ) in out
    assert f"dies: utilisation={ssd['die_utilisation']:.3f} " in out
    assert 0 < ssd["channel_utilisation"] < 1
    assert f"channels: utilisation={ssd['channel_utilisation']:.3f}, " in out
    assert f"scheduler={ssd['scheduler']}" in out
    assert (
        f"moves from the controller={ssd['flash']['gc_controller_reads']}, "
        "programs that waited for their block's erase="
        f"{ssd['flash']['programs_awaiting_erase']}"
    ) in out


def test_fio_fdatasync_flushes_are_reported_as_fio_reports_syncs(capsys, tmp_path):
    """``fdatasync=1`` follows each write with a flush; the JSON has fio's ``sync`` section and
    the summary its sync lines. Written through, each write waits for its page's program and
    the flush after it finds nothing to do; with a write-back buffer the write is done once its
    data is in the controller and the flush waits for the program instead."""
    job = tmp_path / "wal.fio"
    job.write_text("[wal]\nrw=write\nbs=4k\nsize=1m\nfdatasync=1\n", encoding="utf-8")
    through = run_json(capsys, job)["jobs"][0]
    buffered_args = ("--set", "controller.write_buffer_pages=64")
    buffered = run_json(capsys, job, *buffered_args)["jobs"][0]
    for report in (through, buffered):
        sync = report["sync"]
        assert sync["total_ios"] == 255  # after each of the 256 writes but the last
        assert report["write"]["total_ios"] == 256
        lat = sync["lat_ns"]
        assert set(lat) >= LAT_KEYS | {"percentile"}
        assert set(lat["percentile"]) == set(PERCENTILE_KEYS)
        assert lat["N"] == 255
    # The preset's program is 700 µs: the write waits for it, or the flush does.
    assert through["write"]["clat_ns"]["min"] > 700_000
    assert through["sync"]["lat_ns"]["max"] < 10_000
    assert buffered["write"]["clat_ns"]["max"] < 10_000
    lat = buffered["sync"]["lat_ns"]
    assert 700_000 < lat["min"] <= lat["mean"] <= lat["max"] < 2_000_000
    # Power-loss protection: accepted data is durable, so a flush has nothing to wait for.
    protected = run_json(capsys, job, "--set", "controller.power_loss_protection=true")
    assert protected["jobs"][0]["sync"]["lat_ns"]["max"] == 0
    assert protected["ssd"]["padded_units"] == 0
    out = run_summary(capsys, job, *buffered_args)
    assert "  sync: 255 flushes\n" in out
    assert f"    sync (usec): min={lat['min'] / 1e3:.2f}, max={lat['max'] / 1e3:.2f}, " in out
    assert "    sync percentiles (usec): 50th=" in out
    # Jobs that flush nothing print no sync lines, and report a zero count.
    plain = tmp_path / "plain.fio"
    plain.write_text("[plain]\nrw=write\nbs=4k\nsize=1m\n", encoding="utf-8")
    assert run_json(capsys, plain)["jobs"][0]["sync"] == {
        "total_ios": 0,
        "lat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
    }
    assert "sync" not in run_summary(capsys, plain)


def test_fio_sync_makes_each_write_done_once_its_data_is_on_flash(capsys, tmp_path):
    """``sync=1`` (a device opened ``O_SYNC``: the kernel sends FUA writes): each write is done
    once its data is on flash, as the write and a flush issued with it would be, and fio counts
    no syncs. With 16 KiB pages a 4 KiB write that does not fill its page is staged in the
    controller and done once its data is in; a synchronous one pads and programs its page."""
    pages = ("--set", "geometry.page_size_bytes=16384")
    job = tmp_path / "osync.fio"
    body = "[wal]\nrw=write\nbs=4k\nsize=256k\n"
    job.write_text(body + "sync=1\n", encoding="utf-8")
    synced = run_json(capsys, job, *pages)
    wal = synced["jobs"][0]
    assert wal["write"]["total_ios"] == 64
    assert wal["sync"]["total_ios"] == 0
    assert wal["sync"]["lat_ns"]["N"] == 0
    assert wal["write"]["clat_ns"]["min"] > 700_000  # the preset's program
    assert synced["ssd"]["waf"] == 4.0  # each page holds one write, padded
    job.write_text(body, encoding="utf-8")
    plain = run_json(capsys, job, *pages)["jobs"][0]
    assert plain["write"]["clat_ns"]["percentile"]["50.000000"] < 10_000
    # fdatasync=1 at depth 1: a write, then its flush; the FUA write takes both together.
    job.write_text(body + "fdatasync=1\n", encoding="utf-8")
    flushed = run_json(capsys, job, *pages)["jobs"][0]
    both = flushed["write"]["clat_ns"]["mean"] * 64 + flushed["sync"]["lat_ns"]["mean"] * 63
    assert abs(wal["write"]["clat_ns"]["mean"] * 64 - both) < wal["write"]["clat_ns"]["max"]
    # With power-loss protection accepted data is durable: a synchronous write is a write.
    job.write_text(body + "sync=dsync\n", encoding="utf-8")
    protected = run_json(capsys, job, *pages, "--set", "controller.power_loss_protection=true")
    assert protected["jobs"][0]["write"]["clat_ns"] == plain["write"]["clat_ns"]
    assert protected["ssd"]["padded_units"] == 0
    # A drive with its write cache off: every write is such a write, and flushes find nothing.
    job.write_text(body + "fdatasync=1\n", encoding="utf-8")
    uncached = run_json(capsys, job, *pages, "--set", "controller.volatile_write_cache=false")
    assert uncached["jobs"][0]["write"]["clat_ns"] == wal["write"]["clat_ns"]
    assert uncached["jobs"][0]["sync"]["lat_ns"]["max"] == 0


def test_fio_end_fsync_closes_each_writing_job_with_one_flush(capsys, tmp_path):
    """``end_fsync`` flushes once a writing job's requests are done: fio reports its latency in
    ``sync.lat_ns`` and does not count it in ``sync.total_ios``. Beside a reader, in a
    time-based job and with ``fsync`` too."""
    job = tmp_path / "end.fio"
    job.write_text(
        "[global]\nbs=4k\nsize=1m\niodepth=8\n"
        "[writer]\nrw=randwrite\nnumber_ios=301\nend_fsync=1\n"
        "[reader]\nrw=randread\nnumber_ios=300\nend_fsync=1\n"
        "[timed]\nstonewall\nrw=write\ntime_based\nruntime=20ms\nfsync=16\n"
        "fsync_on_close=1\n",
        encoding="utf-8",
    )
    buffered = ("--set", "geometry.page_size_bytes=16384")
    writer, reader, timed = run_json(capsys, job, *buffered)["jobs"]
    assert writer["sync"]["total_ios"] == 0
    assert writer["sync"]["lat_ns"]["N"] == 1
    assert writer["sync"]["lat_ns"]["max"] > 0  # it programs the page its last write began
    assert reader["sync"] == {
        "total_ios": 0,
        "lat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
    }
    writes = timed["write"]["total_ios"]
    assert timed["sync"]["total_ios"] in (writes // 16, (writes - 1) // 16)
    assert timed["sync"]["lat_ns"]["N"] == timed["sync"]["total_ios"] + 1
    rated = tmp_path / "rated.fio"
    rated.write_text("[r]\nrw=write\nrate_iops=1000\nend_fsync=1\n", encoding="utf-8")
    status, _, err = run_cli(capsys, "run", PRESET, str(rated), *set_args(), "--quiet")
    assert status != 0
    assert_clean_error(err, "end_fsync", "rated.fio:4")


def test_normal_output_says_waf_is_undefined_without_host_writes(capsys, tmp_path):
    """A job that writes nothing has no WAF, even when the device programs pages (DFTL's
    translation write-backs of trims here): the summary says so rather than print 0."""
    job = tmp_path / "trims.fio"
    job.write_text("[trims]\nrw=randtrim\nbs=4k\nnumber_ios=2000\n", encoding="utf-8")
    dftl = (
        "--set",
        "ftl.kind=dftl",
        "--set",
        "geometry.page_size_bytes=4096",
        "--set",
        "ftl.dftl_cached_fraction=0.01",
        "--precondition",
    )
    ssd = run_json(capsys, job, *dftl)["ssd"]
    assert ssd["host_bytes_written"] == 0
    assert ssd["flash_pages_programmed"] > 0
    out = run_summary(capsys, job, *dftl)
    assert (
        f"WAF=n/a (no host writes; media bytes programmed: {ssd['media_bytes_written']:,}; "
        f"flash pages programmed={ssd['flash_pages_programmed']})"
    ) in out


def test_precondition_then_run(capsys, randrw_job):
    report = run_json(capsys, randrw_job, "--precondition")
    assert report["ssd"]["host_bytes_written"] == report["jobs"][0]["write"]["io_bytes"]


def test_trace_run_closed_loop(capsys, msr_trace):
    status, out, err = run_cli(
        capsys,
        "run",
        PRESET,
        "--trace",
        str(msr_trace),
        "--trace-format",
        "msr",
        "--closed-loop",
        "--queue-depth",
        "4",
        *set_args(),
        "--output-format",
        "json",
        "--quiet",
    )
    assert status == 0, err
    job = json.loads(out)["jobs"][0]
    assert (job["read"]["total_ios"], job["write"]["total_ios"]) == (10, 30)


def test_quiet_subprocess_writes_nothing_to_stderr(randrw_job):
    done = run_module("run", PRESET, str(randrw_job), *set_args(), "--quiet")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "WAF=" in done.stdout


# -- run: errors ---------------------------------------------------------------------------------


def test_bad_config_key_exits_2_naming_the_key(capsys, randrw_job):
    status, _, err = run_cli(
        capsys, "run", PRESET, str(randrw_job), *set_args(), "--set", "geometry.no_such_key=3"
    )
    assert status == 2
    assert_clean_error(err, "geometry.no_such_key")


def test_bad_set_item_exits_2(capsys, randrw_job):
    status, _, err = run_cli(capsys, "run", PRESET, str(randrw_job), "--set", "geometry.channels")
    assert status == 2
    assert_clean_error(err, "geometry.channels", "key=value")


def test_unknown_preset_exits_2_listing_presets(capsys, randrw_job):
    status, _, err = run_cli(capsys, "run", "no-such-preset", str(randrw_job))
    assert status == 2
    assert_clean_error(err, "no-such-preset", "tlc", "qlc")


def test_bad_trace_line_in_subprocess(write_file):
    good = "128166372003061629,hm,0,Write,0,4096,1331\n"
    trace = write_file("broken.csv", good * 3 + "128166372003061729,hm,0,Scribble,0,4096,1\n")
    done = run_module("run", PRESET, "--trace", str(trace), "--trace-format", "msr", *set_args())
    assert done.returncode != 0
    assert_clean_error(done.stderr, f"{trace.name}:4")


def test_unsupported_fio_option_names_option_and_line(capsys, write_file):
    job = write_file("zoned.fio", "[global]\nbs=4k\nsize=1m\nzonemode=zbd\n\n[j]\nrw=write\n")
    status, _, err = run_cli(capsys, "run", PRESET, str(job), *set_args())
    assert status != 0
    assert_clean_error(err, "zonemode", f"{job.name}:4")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "exactly one of JOB or --trace"),
        (["JOB", "--trace", "TRACE", "--trace-format", "msr"], "exactly one of JOB or --trace"),
        (["--trace", "TRACE"], "--trace-format"),
        (["missing.fio"], "missing.fio: no such file"),
    ],
)
def test_usage_errors_exit_2(capsys, randrw_job, msr_trace, args, needle):
    args = [{"JOB": str(randrw_job), "TRACE": str(msr_trace)}.get(a, a) for a in args]
    status, out, err = run_cli(capsys, "run", PRESET, *args)
    assert status == 2
    assert out == ""
    assert_clean_error(err, needle)


def test_argparse_errors_exit_2_without_traceback(capsys):
    status, _, err = run_cli(capsys, "run", PRESET, "x.fio", "--output-format", "yaml")
    assert status == 2
    assert "invalid choice" in err
    assert "Traceback" not in err


def test_time_scale_must_be_positive(capsys, msr_trace):
    status, _, err = run_cli(
        capsys,
        "run",
        PRESET,
        "--trace",
        str(msr_trace),
        "--trace-format",
        "msr",
        "--time-scale",
        "-1",
    )
    assert status == 2
    assert_clean_error(err, "--time-scale")


def test_output_into_a_missing_directory_fails_before_the_run(capsys, randrw_job, tmp_path):
    target = tmp_path / "nowhere" / "out.json"
    status, _, err = run_cli(capsys, "run", PRESET, str(randrw_job), "--output", str(target))
    assert status == 2
    assert_clean_error(err, "no such directory")


def test_request_log_and_time_series_files(capsys, randrw_job, tmp_path):
    log_path, series_path = tmp_path / "requests.csv", tmp_path / "series.json"
    report = run_json(
        capsys, randrw_job, "--request-log", str(log_path), "--time-series", str(series_path)
    )
    (job,) = report["jobs"]
    total = job["read"]["total_ios"] + job["write"]["total_ios"]
    lines = log_path.read_text().splitlines()
    assert lines[0].split(",") == [
        "request", "op", "logical_sector", "size_bytes", "duration_ns", "flash_reads",
        "flash_writes", "oob_reads", "oob_writes", "erases", "physical_sector",
        "flash_duration_ns", "queue_ns", "service_ns", "translation_reads",
        "translation_writes", "mapping_hits", "mapping_misses", "device_cpu_ns",
    ]  # fmt: skip
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) == total
    assert [int(r[0]) for r in rows] == list(range(1, total + 1))
    writes = [r for r in rows if r[1] == "write"]
    assert writes
    assert all(int(r[3]) == 4096 and int(r[6]) >= 1 for r in writes)
    assert all(int(r[4]) > 0 for r in rows)
    # Queueing and service time split each duration.
    assert all(int(r[12]) + int(r[13]) == int(r[4]) for r in rows)
    # Flash programs in the log add up to what the device counted.
    assert sum(int(r[6]) for r in rows) == report["ssd"]["flash"]["programs"]
    series = json.loads(series_path.read_text())
    assert sum(row["reads"] + row["writes"] for row in series) == total
    assert sum(row["host_bytes_written"] for row in series) == report["ssd"]["host_bytes_written"]
    # One write amplification: each interval's is its media bytes over its host bytes.
    for row in series:
        if row["host_bytes_written"]:
            media = row["flash_pages_programmed"] * report["ssd"]["media_bytes_written"]
            media //= report["ssd"]["flash_pages_programmed"]
            assert row["waf"] == pytest.approx(media / row["host_bytes_written"])
    starts = [row["start_ns"] for row in series]
    assert starts == sorted(starts)


def test_normal_output_gives_gc_die_time_and_its_share_of_the_busy_dies(capsys, tmp_path):
    """GC time is summed over dies: the summary gives its split and its share of busy time."""
    job = tmp_path / "overwrite.fio"
    job.write_text("[overwrite]\nrw=randwrite\nbs=4k\nnumber_ios=3000\n", encoding="utf-8")
    ssd = run_json(capsys, job, "--precondition")["ssd"]
    gc = ssd["gc"]
    assert gc["time_ns"] > 0
    assert 0 < gc["share_of_die_busy"] < 1
    assert gc["foreground_time_ns"] + gc["background_time_ns"] == gc["time_ns"]
    out = run_summary(capsys, job, "--precondition")
    assert (
        f"GC die time={gc['time_ns'] / 1e6:.3f}ms summed over dies "
        f"(foreground {gc['foreground_time_ns'] / 1e6:.3f}ms, "
        f"background {gc['background_time_ns'] / 1e6:.3f}ms): "
        f"{gc['share_of_die_busy']:.1%} of the dies' busy time"
    ) in out
    assert f"({gc['background_invocations']} in the background)" in out


def test_a_fio_rate_paces_the_job_and_the_summary_shows_the_wait_for_a_slot(capsys, tmp_path):
    """fio's rate_iops runs the job open loop: at the rate while the device keeps up; beyond
    it, requests wait at the host for a queue slot (slat), which the summary then shows."""
    slow = tmp_path / "slow.fio"
    slow.write_text(
        "[slow]\nrw=randwrite\nbs=4k\nnumber_ios=400\niodepth=16\nrate_iops=2000\n", "utf-8"
    )
    write = run_json(capsys, slow)["jobs"][0]["write"]
    assert write["iops"] == pytest.approx(2000, rel=0.01)
    assert write["slat_ns"]["mean"] == 0
    assert "slat (usec)" not in run_summary(capsys, slow)

    fast = tmp_path / "fast.fio"
    fast.write_text(
        "[fast]\nrw=randwrite\nbs=4k\nnumber_ios=400\nrate_iops=10000000\n", encoding="utf-8"
    )
    write = run_json(capsys, fast)["jobs"][0]["write"]
    assert write["iops"] < 1_000_000
    assert write["slat_ns"]["mean"] > 100 * write["clat_ns"]["mean"]
    assert write["lat_ns"]["mean"] == pytest.approx(
        write["slat_ns"]["mean"] + write["clat_ns"]["mean"]
    )
    out = run_summary(capsys, fast)
    assert "    slat (usec): min=" in out
    assert "     lat (usec): min=" in out


def test_a_fio_think_time_pauses_after_each_io(capsys, tmp_path):
    """thinktime at QD 1: each read, then the pause; IOPS is one over their sum."""
    job = tmp_path / "think.fio"
    job.write_text("[think]\nrw=randread\nbs=4k\nnumber_ios=300\nthinktime=1000\n", "utf-8")
    read = run_json(capsys, job)["jobs"][0]["read"]
    per_io_s = read["clat_ns"]["mean"] / 1e9 + 1e-3
    # 300 reads and the 299 pauses between them.
    assert read["iops"] == pytest.approx(300 / (300 * per_io_s - 1e-3), rel=1e-3)


def test_traces_on_a_shared_clock_keep_their_offsets(capsys, msr_trace, tmp_path):
    """--shared-clock: traces side by side are timed from the earliest first request of all,
    so one recorded a second later starts a second into the run (by default each starts at
    once, from its own first request)."""
    later = tmp_path / "later.csv"
    moved = []
    for line in msr_trace.read_text("utf-8").splitlines():
        fields = line.split(",")
        fields[0] = str(int(fields[0]) + 10_000_000)  # FILETIME: 100 ns units, so 1 s later
        fields[4] = str(int(fields[4]) + (1 << 20))
        moved.append(",".join(fields))
    later.write_text("\n".join(moved) + "\n", "utf-8")

    def span(*extra: str) -> int:
        status, out, err = run_cli(
            capsys, "run", PRESET, "--trace", str(msr_trace), "--trace", str(later),
            "--trace-format", "msr", *set_args(), "--output-format", "json", "--quiet", *extra,
        )  # fmt: skip
        assert status == 0, err
        jobs = json.loads(out)["jobs"]
        assert [j["write"]["total_ios"] for j in jobs] == [30, 30]
        return jobs[0]["ssd_job"]["sim_time_ns"]

    assert span() < 1_000_000_000
    assert span("--shared-clock") > 1_000_000_000
    for bad, message in [
        (("--trace", str(msr_trace), "--trace-format", "msr", "--shared-clock", "--closed-loop"),
         "--closed-loop ignores them"),
        ((str(msr_trace), "--shared-clock"), "apply to --trace only"),
    ]:  # fmt: skip
        status, _, err = run_cli(capsys, "run", PRESET, *bad)
        assert status == 2
        assert message in err


def test_fio_jobs_run_side_by_side_until_a_stonewall(capsys, tmp_path):
    """fio's run groups: numjobs clones and the job beside them share the device; a stonewall
    job starts once they are done. Each job is reported on its own, in file order."""
    job = tmp_path / "groups.fio"
    job.write_text(
        "[global]\nbs=4k\nsize=1m\n"
        "[writer]\nrw=write\nnumjobs=2\noffset_increment=1m\niodepth=4\n"
        "[reader]\nrw=randread\nnumber_ios=200\n"
        "[after]\nstonewall\nrw=randread\noffset=1m\nnumber_ios=100\n",
        "utf-8",
    )
    assert _core.job_groups(str(job)) == [[0, 1, 2], [3]]
    report = run_json(capsys, job)
    names = [j["jobname"] for j in report["jobs"]]
    assert names == ["writer", "writer", "reader", "after"]
    for clone in report["jobs"][:2]:
        assert clone["write"]["io_bytes"] == 1 << 20
    assert report["jobs"][2]["read"]["total_ios"] == 200
    # Side by side: the group's jobs start together and the group ends with its last job, so
    # they share one simulated span; the reader's own work ended well before the writers'.
    spans = [j["ssd_job"]["sim_time_ns"] for j in report["jobs"]]
    assert spans[0] == spans[1] == spans[2]
    runtimes = [j["job_runtime"] for j in report["jobs"]]
    assert runtimes[2] < max(runtimes[:2])
    after = report["jobs"][3]["read"]
    assert after["total_ios"] == 100
    # Its reads all find the second writer's data (an unwritten page is read in about 1 us).
    assert after["clat_ns"]["min"] > 10_000
    out = run_summary(capsys, job)
    assert out.count("writer: (") == 2
    assert "reader: (" in out
    assert "after: (" in out


def test_the_example_job_files_parse_into_their_groups():
    examples = Path(__file__).resolve().parent.parent / "examples"
    assert _core.job_groups(str(examples / "randrw.fio")) == [[0]]
    beside = str(examples / "reader_beside_writer.fio")
    assert _core.job_names(beside) == ["warm", "reader", "writer"]
    assert _core.job_groups(beside) == [[0], [1, 2]]
    assert _core.job_names(str(examples / "fdatasync.fio")) == ["wal"]
    assert _core.job_names(str(examples / "osync.fio")) == ["wal"]


def test_group_reporting_reports_the_clones_as_one_job(capsys, tmp_path):
    job = tmp_path / "clones.fio"
    job.write_text(
        "[global]\ngroup_reporting\nbs=4k\nsize=1m\n[clones]\nrw=randread\nnumjobs=4\n"
        "number_ios=50\noffset_increment=1m\n",
        "utf-8",
    )
    assert _core.job_reports(str(job)) == [0, 0, 0, 0]
    (merged,) = run_json(capsys, job)["jobs"]
    assert merged["jobname"] == "clones"
    assert merged["read"]["total_ios"] == 200
    assert merged["read"]["clat_ns"]["N"] == 200
    out = run_summary(capsys, job)
    assert out.count("clones: (") == 1


def test_traces_side_by_side_are_one_job_each(capsys, msr_trace, tmp_path):
    """Repeated --trace: each trace an I/O flow of its own, all replayed at once."""
    # A second flow: the same 40 requests' times, its writes moved to the second MiB.
    lines = msr_trace.read_text("utf-8").splitlines()
    other = tmp_path / "other.csv"
    moved = []
    for line in lines:
        fields = line.split(",")
        fields[4] = str(int(fields[4]) + (1 << 20))
        moved.append(",".join(fields))
    other.write_text("\n".join(moved) + "\n", "utf-8")

    def run(*traces: Path) -> dict:
        args = [a for t in traces for a in ("--trace", str(t))]
        status, out, err = run_cli(
            capsys, "run", PRESET, *args, "--trace-format", "msr", *set_args(),
            "--output-format", "json", "--quiet",
        )  # fmt: skip
        assert status == 0, err
        return json.loads(out)

    alone = run(msr_trace)
    both = run(msr_trace, other)
    assert [j["jobname"] for j in both["jobs"]] == ["msr.csv", "other.csv"]
    for job in both["jobs"]:
        assert (job["read"]["total_ios"], job["write"]["total_ios"]) == (10, 30)
    # The flows run at once: they share one simulated span, longer than one flow's alone (this
    # small device is busy with one flow's writes, so two take about twice as long).
    spans = [j["ssd_job"]["sim_time_ns"] for j in both["jobs"]]
    assert spans[0] == spans[1] > alone["jobs"][0]["ssd_job"]["sim_time_ns"]
    # Sharing never makes a request faster than alone.
    assert (
        both["jobs"][0]["write"]["clat_ns"]["mean"] >= alone["jobs"][0]["write"]["clat_ns"]["mean"]
    )
    status, _, err = run_cli(
        capsys, "run", PRESET, "--trace", str(msr_trace), "--trace", str(tmp_path / "none.csv"),
        "--trace-format", "msr",
    )  # fmt: skip
    assert status == 2
    assert "none.csv: no such file" in err
