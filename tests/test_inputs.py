"""Every input a clear error: bad arguments, configurations and command lines give ssdlab's own
exceptions (or ``ssdlab: error:`` from the CLI), never an abort or a foreign traceback; and the
per-request log and time series stay bounded."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ssdlab
from ssdlab.cli import main
from ssdlab.errors import ConfigError, DeviceError, SsdlabError
from support import PRESET

#: A geometry whose mapping tables need about 17 GiB: more than the 4 GiB address space the
#: subprocess tests allow, so the memory check must refuse it before allocating anything.
HUGE_GEOMETRY = "geometry.blocks_per_plane=524288"


# -- the Python API ------------------------------------------------------------------------------


def test_a_huge_read_is_refused_before_its_buffer_is_allocated(make_device):
    dev = make_device(store_data=True)
    with pytest.raises(DeviceError, match="past the device's end"):
        dev.read(0, 2**40)
    with pytest.raises(DeviceError, match="past the device's end"):
        dev.read(2**64 - 1, 1)
    # The interpreter is alive and the device still works.
    dev.write(0, data=b"x" * 4096)
    assert dev.read(0, 4096).data == b"x" * 4096


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda d: d.read(-1, 4096), "offset"),
        (lambda d: d.read(0, -4096), "length"),
        (lambda d: d.write(2**64, 1), "offset"),
        (lambda d: d.read(0.5, 4096), "offset"),
        (lambda d: d.precondition(float("nan")), "random_overwrite_passes"),
        (lambda d: d.run_arrays([1], [-4096], [4096]), "offsets"),
        (lambda d: d.run_arrays([1], [0], [4096], queue_depth=0), "queue_depth"),
        (lambda d: d.run_arrays([1], [0], [4096], placement=[-2]), "placement"),
        (lambda d: d.run_trace("x.csv", "msr", time_scale=float("nan")), "time_scale"),
        (lambda d: d.run_trace("x.csv", "msr", queue_depth=2**40), "queue_depth"),
        (
            lambda d: d.run_trace("x.csv", "msr", closed_loop=True, shared_clock=True),
            "shared_clock",
        ),
    ],
)
def test_bad_arguments_name_the_argument(make_device, call, message):
    with pytest.raises(ValueError, match=message):
        call(make_device())


def test_bad_seed_is_a_value_error(tiny_overrides):
    for seed in (-1, 2**64):
        with pytest.raises(ValueError, match="seed"):
            ssdlab.Device(PRESET, seed=seed, overrides=tiny_overrides)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("energy.read_nj=nan", "energy.read_nj"),
        ("energy.read_nj=-1", "energy.read_nj"),
        ("energy.idle_w=inf", "energy.idle_w"),
        ("geometry.pages_per_block=1", "geometry.pages_per_block"),
    ],
)
def test_bad_values_are_config_errors_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        ssdlab.Device("slc", overrides=[override])


@pytest.mark.parametrize(
    "overrides",
    [
        ["geometry.channels=2\nchannels=4"],
        ["geometry.channels=2\n"],
        {"name": "a\tb"},
        [("geometry.channels", "2\r")],
        ["geometry.chan\x00nels=2"],
    ],
)
def test_control_characters_in_overrides_are_refused(tiny_overrides, overrides):
    with pytest.raises(ConfigError, match="control character"):
        ssdlab.Device(PRESET, overrides=overrides)


def test_the_core_refuses_control_characters_too(tiny_overrides):
    # The check in parse_overrides is a convenience; the core is the authority.
    text = ssdlab._core.preset_toml(PRESET)
    pairs = [tuple(item.split("=", 1)) for item in tiny_overrides]
    with pytest.raises(ConfigError, match="control character"):
        ssdlab._core.Device(text, PRESET, [*pairs, ("geometry.channels", "1\n")], 0, False)


def _run_limited(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter limited to 4 GiB of address space."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
        check=False,
    )


def test_a_device_larger_than_memory_is_a_config_error_not_an_abort():
    done = _run_limited(
        f"""
        import ssdlab
        try:
            ssdlab.Device("slc", overrides=["{HUGE_GEOMETRY}"])
        except ssdlab.ConfigError as err:
            print("refused:", err)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout
    for part in ("key 'geometry'", "524288 blocks", "MiB", "memory available"):
        assert part in done.stdout, done.stdout


def test_a_read_larger_than_memory_is_refused_not_killed():
    done = _run_limited(
        """
        import ssdlab
        dev = ssdlab.Device("tlc", store_data=True)  # 96 GB of logical space
        try:
            dev.read(0, dev.logical_bytes)
        except ssdlab.DeviceError as err:
            print("refused:", err)
        print(len(dev.read(0, 1 << 20).data))
        """
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout
    assert "memory available" in done.stdout
    assert done.stdout.split()[-1] == str(1 << 20)


def test_a_device_larger_than_memory_from_the_cli(randrw_job):
    done = _run_limited(
        f"""
        import sys
        from ssdlab.cli import main
        sys.exit(main(["run", "slc", "{randrw_job}", "--quiet", "--set", "{HUGE_GEOMETRY}"]))
        """
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("ssdlab: error:")
    assert "Traceback" not in done.stderr
    assert "needs about" in done.stderr


# -- threads -------------------------------------------------------------------------------------


def test_a_device_shared_between_threads_takes_turns(make_device):
    """One thread runs a long job while another queries and submits: no crash, no foreign
    exception; the other thread's calls complete during the run, and a direct request during
    the run is refused with a DeviceError that says why."""
    dev = make_device()
    n = 200_000
    rng = np.random.default_rng(5)
    pages = dev.logical_bytes // 4096
    offsets = rng.integers(0, pages, n) * 4096
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["run"] = dev.run_arrays(np.ones(n, dtype=np.int64), offsets, np.full(n, 4096))
        except BaseException as err:  # reported below, not lost in the thread
            result["error"] = err

    runner = threading.Thread(target=run)
    runner.start()
    seen_during_run = 0
    refusals = []
    while runner.is_alive():
        assert dev.now >= 0
        dev.stats()
        try:
            dev.read(0, 4096)
        except DeviceError as err:
            refusals.append(str(err))
        except SsdlabError as err:  # any other refusal must still be one of ours
            pytest.fail(f"unexpected {type(err).__name__}: {err}")
        seen_during_run += 1
    runner.join()
    assert "error" not in result, result.get("error")
    assert result["run"].jobs[0].write["total_ios"] == n
    assert seen_during_run > 0
    assert all("run is in progress" in message for message in refusals)
    # Two threads both stepping one run share it: every request is completed once.
    dev.run_arrays([1], [0], [4096])
    assert dev.read(0, 4096).latency_ns > 0


def test_two_threads_running_jobs_on_one_device(make_device, randrw_job):
    dev = make_device()
    outcomes: list[object] = []

    def run() -> None:
        try:
            outcomes.append(dev.run_job(randrw_job, progress=False))
        except SsdlabError as err:
            outcomes.append(err)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Either both ran one after the other, or the second was refused while the first ran.
    assert len(outcomes) == 2
    for outcome in outcomes:
        assert isinstance(outcome, (ssdlab.RunResult, SsdlabError)), outcome
    errors = [o for o in outcomes if isinstance(o, SsdlabError)]
    assert all("in progress" in str(e) or "no run" in str(e) for e in errors), errors


# -- bounded logs --------------------------------------------------------------------------------


def test_request_log_streams_to_its_file(tiny_overrides, tmp_path):
    dev = ssdlab.Device(PRESET, overrides=[*tiny_overrides, "stats.request_log=true"])
    n = 150_000  # a little over two steps of the run
    rng = np.random.default_rng(1)
    offsets = rng.integers(0, dev.logical_bytes // 4096, n) * 4096
    path = tmp_path / "log.csv"
    with open(path, "w", encoding="utf-8") as log:
        log.write(dev.request_log_header())
        dev.run_arrays(np.ones(n, dtype=np.int64), offsets, np.full(n, 4096), request_log=log)
    # The device kept nothing: every row went to the file, in order.
    assert dev.request_log_csv().splitlines()[1:] == []
    lines = path.read_text().splitlines()
    assert lines[0].startswith("request,op,")
    assert [int(line.split(",", 1)[0]) for line in lines[1:]] == list(range(1, n + 1))


def test_request_log_needs_the_log_turned_on(make_device, tmp_path):
    with (
        open(tmp_path / "log.csv", "w", encoding="utf-8") as log,
        pytest.raises(ValueError, match=r"stats\.request_log"),
    ):
        make_device().run_arrays([1], [0], [4096], request_log=log)


def test_two_requests_a_week_apart_keep_two_rows(tiny_overrides, write_file):
    week_ns = 7 * 24 * 3600 * 10**9
    # MSR: Windows filetime (100 ns), host, disk, type, offset, size, response time.
    trace = write_file(
        "week.csv",
        f"0,h,0,Write,0,4096,0\n{week_ns // 100},h,0,Write,4096,4096,0\n",
    )
    dev = ssdlab.Device(PRESET, overrides=tiny_overrides, time_series=True)
    dev.run_trace(trace, "msr", progress=False)
    rows = dev.time_series()
    assert len(rows) == 2
    assert rows[1]["start_ns"] >= week_ns - 10_000_000


# -- the command line ----------------------------------------------------------------------------

JOB = """\
[j]
rw=randwrite
bs=4k
size=1m
number_ios=50
"""


def _bad_command_lines(tmp_path) -> list[list[str]]:
    job = tmp_path / "job.fio"
    job.write_text(JOB, encoding="utf-8")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 8)
    bad_job = tmp_path / "bad.fio"
    bad_job.write_text("[j]\nrw=sideways\nbs=4k\n", encoding="utf-8")
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[geometry\nchannels = 2\n", encoding="utf-8")
    empty_trace = tmp_path / "empty.csv"
    empty_trace.write_text("", encoding="utf-8")
    directory = str(tmp_path)
    j = str(job)
    tiny = ["--set", "geometry.blocks_per_plane=64", "--set", "geometry.over_provisioning=0.25"]
    return [
        # configurations
        ["run", "nosuchpreset", j],
        ["run", str(bad_toml), j],
        ["run", directory + "/", j],
        ["run", str(garbage) + ".toml", j],
        ["run", PRESET, j, "--set", "geometry.channels=2\nchannels=4"],
        ["run", PRESET, j, "--set", "geometry.channels"],
        ["run", PRESET, j, "--set", "=3"],
        ["run", PRESET, j, "--set", "geometry..channels=3"],
        ["run", PRESET, j, "--set", "geometry=3"],
        ["run", PRESET, j, "--set", "energy.read_nj=nan"],
        ["run", PRESET, j, "--set", "energy.read_nj=-1"],
        ["run", PRESET, j, "--set", "geometry.channels=-1"],
        ["run", PRESET, j, "--set", "geometry.channels=99999999999"],
        ["run", PRESET, j, "--set", "geometry.page_size_bytes=0"],
        ["run", "slc", j, "--set", "geometry.pages_per_block=1"],
        ["run", PRESET, j, "--set", "cell.type=pentalevel"],
        ["run", PRESET, j, "--set", "stats.interval_ns=-5"],
        ["run", PRESET, j, "--set", "placement.handles=100000"],
        # workloads
        ["run", PRESET, directory],
        ["run", PRESET, str(garbage), *tiny],
        ["run", PRESET, str(bad_job), *tiny],
        ["run", PRESET, "--trace", str(garbage), "--trace-format", "msr", *tiny],
        ["run", PRESET, "--trace", str(garbage), "--trace-format", "blkparse", *tiny],
        ["run", PRESET, "--trace", j],
        ["run", PRESET, j, "--trace", j, "--trace-format", "msr"],
        # numbers
        ["run", PRESET, j, "--seed", "-1"],
        ["run", PRESET, j, "--seed", str(2**64)],
        ["run", PRESET, j, "--seed", "x"],
        ["run", PRESET, "--trace", j, "--trace-format", "msr", "--time-scale", "nan"],
        ["run", PRESET, "--trace", j, "--trace-format", "msr", "--time-scale", "inf"],
        ["run", PRESET, "--trace", j, "--trace-format", "msr", "--time-scale", "-1"],
        ["run", PRESET, "--trace", j, "--trace-format", "msr", "--queue-depth", "0"],
        ["run", PRESET, "--trace", j, "--trace-format", "msr", "--queue-depth", str(2**40)],
        # output files
        ["run", PRESET, j, "--output", directory + "/no/such/dir/out"],
        ["run", PRESET, j, "--output", directory, *tiny],
        ["run", PRESET, j, "--request-log", "/proc/version", *tiny],
        ["run", PRESET, j, "--request-log", directory, *tiny],
        ["run", PRESET, j, "--time-series", directory, *tiny],
        # stats
        ["stats", str(garbage)],
        ["stats", directory],
        ["stats", str(tmp_path / "missing.csv")],
        ["stats", str(empty_trace), "--page-size", "0"],
        ["stats", str(empty_trace), "--page-size", "-4096"],
        ["stats", str(empty_trace), "--page-size", str(2**70)],
        ["stats", j, "--output", directory],
        # presets, demo
        ["presets", "extra"],
        ["demo", "--scale", "nan"],
        ["demo", "--scale", "inf"],
        ["demo", "--scale", "0"],
        ["demo", "--scale", "1e12"],
        ["demo", "--seed", "-1"],
        ["demo", "--quiet", "--scale", "x"],
        # the command itself
        [],
        ["nosuchcommand"],
    ]


def test_no_command_line_gives_a_traceback(capsys, tmp_path):
    """A sweep of bad command lines: each fails with ``ssdlab: error:`` (or argparse's usage
    message) and status 1 or 2, and nothing escapes ``main`` as an exception."""
    failures = []
    for argv in _bad_command_lines(tmp_path):
        try:
            status = main(argv)
        except BaseException as err:  # the failure being tested for
            capsys.readouterr()
            failures.append(f"{argv}: raised {type(err).__name__}: {err}")
            continue
        _, err = capsys.readouterr()
        if status not in (1, 2) or not err.startswith(("ssdlab: error:", "usage:")):
            failures.append(f"{argv}: status {status}, stderr {err[:300]!r}")
    assert not failures, "\n".join(failures)


def _peak_rss_kb_of_replay(trace, overrides) -> int:
    """Peak RSS of a fresh interpreter that replays ``trace`` with the time series on."""
    code = f"""
        import ssdlab
        dev = ssdlab.Device({PRESET!r}, overrides={list(overrides)!r}, time_series=True)
        dev.run_trace({str(trace)!r}, "msr", progress=False)
        assert len(dev.time_series()) <= 4096
        # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec.
        with open("/proc/self/status") as status:
            print(next(line for line in status if line.startswith("VmHWM:")).split()[1])
        """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_trace_replay_memory_does_not_grow_with_the_trace(tiny_overrides, tmp_path):
    """Two traces over the same week of simulated time, one 20 times longer: the same peak
    memory (the time series used to keep a row per 10 ms: 60 million rows for a week)."""
    week_ticks = 7 * 24 * 3600 * 10**7  # MSR timestamps are in 100 ns ticks
    pages = 3000  # inside the tiny device (14.4 MiB)
    rng = np.random.default_rng(3)
    rss = []
    for n in (20_000, 400_000):
        ticks = np.sort(rng.integers(0, week_ticks, n))
        offsets = rng.integers(0, pages, n) * 4096
        kinds = np.where(rng.random(n) < 0.3, "Write", "Read")
        path = tmp_path / f"trace-{n}.csv"
        path.write_text(
            "".join(
                f"{t},h,0,{k},{o},4096,0\n" for t, k, o in zip(ticks, kinds, offsets, strict=True)
            ),
            encoding="utf-8",
        )
        rss.append(_peak_rss_kb_of_replay(path, tiny_overrides))
    small, large = rss
    assert large <= small * 1.1 + 4096, f"peak RSS {small} kB for 20k lines, {large} kB for 400k"
