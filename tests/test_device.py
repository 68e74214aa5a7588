"""The Python API: single requests, data, determinism, errors, runs and their results."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import ssdlab
from ssdlab import _core
from ssdlab.hints import Hint
from support import PRESET

KIB4 = 4096


# -- single requests -----------------------------------------------------------------------------


def test_requests_complete_with_positive_latency_and_advance_the_clock(make_device):
    dev = make_device()
    assert dev.now == 0
    for op in (
        lambda: dev.write(0, KIB4),
        lambda: dev.read(0, KIB4),
        lambda: dev.trim(0, KIB4),
        lambda: dev.write(8 * KIB4, 4 * KIB4),
        lambda: dev.flush(),
    ):
        before = dev.now
        done = op()
        assert isinstance(done, ssdlab.Completion)
        assert done.submit_ns >= before
        assert done.complete_ns == done.submit_ns + done.latency_ns
        assert dev.now >= done.complete_ns
    assert dev.write(0, KIB4).latency_ns > 0
    assert dev.read(0, KIB4).latency_ns > 0


def test_a_fua_write_is_done_once_its_page_is_on_flash(make_device):
    """``fua=True``: a 4 KiB write into a 16 KiB page is staged and done once its data is in;
    with Force Unit Access it takes what the write and a flush issued with it take."""
    pages = ["geometry.page_size_bytes=16384"]
    plain = make_device(extra=pages)
    staged = plain.write(0, KIB4).latency_ns
    flush = plain.flush().latency_ns
    assert flush > 100 * staged
    dev = make_device(extra=pages)
    assert dev.write(0, KIB4, fua=True).latency_ns == staged + flush
    assert dev.stats()["padded_units"] == 3
    assert dev.flush().latency_ns == 0
    with pytest.raises(ValueError, match="fua: only a write"):
        dev.submit("read", 0, KIB4, fua=True)


def test_advance_to_moves_the_clock_forward_only_and_requests_issue_there(make_device):
    dev = make_device()
    dev.advance_to(1_000_000)
    assert dev.now == 1_000_000
    dev.advance_to(10)
    assert dev.now == 1_000_000
    assert dev.write(0, KIB4).submit_ns == 1_000_000
    with pytest.raises(ValueError, match="time_ns"):
        dev.advance_to(-1)


def test_reset_measurements_zeroes_clock_and_stats_but_keeps_data(make_device):
    dev = make_device(store_data=True)
    dev.write(0, data=b"x" * KIB4)
    assert dev.now > 0
    assert dev.stats()["host_bytes_written"] == KIB4
    dev.reset_measurements()
    assert dev.now == 0
    assert dev.stats()["host_bytes_written"] == 0
    assert dev.read(0, KIB4).data == b"x" * KIB4


def _script(dev: ssdlab.Device) -> list[ssdlab.Completion]:
    rng = np.random.default_rng(5)
    pages = dev.logical_bytes // KIB4
    out = []
    for page in rng.integers(0, pages, 300).tolist():
        out.append(dev.write(page * KIB4, KIB4))
        out.append(dev.read(((page * 7) % pages) * KIB4, KIB4))
    return out


def test_same_seed_same_requests_give_identical_completions_and_stats(make_device):
    a, b = make_device(seed=3), make_device(seed=3)
    assert _script(a) == _script(b)
    assert a.stats() == b.stats()
    assert a.now == b.now


def test_data_round_trips_at_unaligned_offsets(make_device):
    dev = make_device(store_data=True)
    rng = np.random.default_rng(1)
    base = rng.integers(0, 256, 3 * KIB4, dtype=np.uint8).tobytes()
    patch = rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()
    dev.write(0, data=base)
    dev.write(1000, data=patch)  # crosses a page boundary at both ends of the first page
    expected = base[:1000] + patch + base[6000:]
    assert dev.read(0, 3 * KIB4).data == expected
    assert dev.read(1000, 5000).data == patch
    assert dev.read(999, 3).data == expected[999:1002]


def test_reads_carry_no_data_unless_the_device_stores_it(make_device):
    dev = make_device()
    dev.write(0, KIB4)
    assert dev.read(0, KIB4).data is None


def test_write_length_must_match_data(make_device):
    dev = make_device(store_data=True)
    with pytest.raises(ValueError, match="len"):
        dev.write(0, 10, data=b"abc")
    with pytest.raises(ValueError, match="length"):
        dev.write(0)


@pytest.mark.parametrize(
    ("op", "where"),
    [("write", "end"), ("read", "end"), ("trim", "end"), ("write", "straddle"), ("read", "far")],
)
def test_requests_past_the_end_raise_device_error(make_device, op, where):
    dev = make_device()
    offset = {
        "end": dev.logical_bytes,
        "straddle": dev.logical_bytes - 512,
        "far": dev.logical_bytes * 4,
    }[where]
    with pytest.raises(ssdlab.DeviceError):
        dev.submit(op, offset, KIB4)


def test_bad_op_is_refused_before_the_core(make_device):
    with pytest.raises(ValueError, match="op"):
        make_device().submit("erase", 0, KIB4)


def test_an_uncorrectable_read_says_so(make_device):
    # Every codeword of a fresh page sees ~800 bit errors at this RBER, far beyond what LDPC
    # corrects, and no retries are allowed: the read must fail ECC and report it.
    noisy = make_device(extra=["ecc.rber_base=0.05", "ecc.max_read_retries=0"])
    noisy.write(0, KIB4)
    done = noisy.read(0, KIB4)
    assert done.uncorrectable is True
    assert noisy.stats()["ecc"]["uncorrectable_pages"] == 1
    clean = make_device()
    clean.write(0, KIB4)
    assert clean.read(0, KIB4).uncorrectable is False
    assert clean.write(0, KIB4).uncorrectable is False


# -- hints ---------------------------------------------------------------------------------------


def test_hint_to_dict_keeps_only_what_is_set():
    assert Hint().to_dict() == {}
    assert Hint(write_life="short", stream=3, flush_read=True).to_dict() == {
        "write_life": "short",
        "stream": 3,
        "flush_read": True,
    }


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"write_life": "forever"}, "write_life"),
        ({"stream": -1}, "stream"),
        ({"stream": True}, "stream"),
        ({"placement_id": 1.5}, "placement_id"),
        ({"placement_id": 2**40}, "placement_id"),
        ({"sea_class": "hot"}, "sea_class"),
        ({"read_group": "a"}, "read_group"),
        ({"reliability": "maybe"}, "reliability"),
        ({"flush_read": 1}, "flush_read"),
    ],
)
def test_bad_hints_name_their_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Hint(**kwargs)


def test_dict_hints_are_validated_like_hints(make_device):
    dev = make_device()
    with pytest.raises(ValueError, match="bogus"):
        dev.write(0, KIB4, hint={"bogus": 1})
    with pytest.raises(ValueError, match="write_life"):
        dev.write(0, KIB4, hint={"write_life": "forever"})


@pytest.mark.parametrize(
    "hint",
    [
        Hint(write_life="extreme"),
        Hint(stream=1),
        Hint(placement_id=0),
        Hint(sea_class="dyn"),
        Hint(read_group=7),
        Hint(reliability="clean"),
        {"reliability": "dirty", "write_life": "short"},
    ],
)
def test_the_device_accepts_every_hint_kind(make_device, hint):
    dev = make_device(extra=["placement.handles=2"])
    assert dev.write(0, KIB4, hint=hint).latency_ns > 0
    assert dev.read(0, KIB4, hint=Hint(flush_read=True)).latency_ns > 0


# -- configuration -------------------------------------------------------------------------------


def test_exceptions_are_the_native_ones_and_share_a_base():
    for name in ("ConfigError", "WorkloadError", "DeviceError"):
        cls = getattr(ssdlab, name)
        assert cls is getattr(_core, name)
        assert issubclass(cls, ssdlab.SsdlabError)
    assert ssdlab.SsdlabError is _core.SsdlabError


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ssdlab.ConfigError, match="no-such-preset") as err:
        ssdlab.Device("no-such-preset")
    assert "tlc" in str(err.value)


def test_missing_config_file_is_a_config_error(tmp_path):
    with pytest.raises(ssdlab.ConfigError, match=r"nothere\.toml"):
        ssdlab.Device(str(tmp_path / "nothere.toml"))


def test_bad_key_and_bad_value_name_the_key(tiny_overrides):
    with pytest.raises(ssdlab.ConfigError, match=r"geometry\.no_such_key"):
        ssdlab.Device("tlc", overrides=[*tiny_overrides, "geometry.no_such_key=1"])
    with pytest.raises(ssdlab.ConfigError, match=r"geometry\.channels"):
        ssdlab.Device("tlc", overrides=[*tiny_overrides, "geometry.channels=0"])


def test_override_items_must_be_key_value():
    with pytest.raises(ssdlab.ConfigError, match=r"geometry\.channels"):
        ssdlab.Device("tlc", overrides=["geometry.channels"])


def test_toml_file_preset_and_override_forms_agree(tmp_path, tiny_overrides):
    path = tmp_path / "mine.toml"
    path.write_text(_core.preset_toml("tlc"), encoding="utf-8")
    as_dict = dict(item.split("=", 1) for item in tiny_overrides)
    hashes = {
        ssdlab.Device("tlc", overrides=tiny_overrides).config_hash,
        ssdlab.Device(str(path), overrides=tiny_overrides).config_hash,
        ssdlab.Device("tlc", overrides=as_dict).config_hash,
    }
    assert len(hashes) == 1
    bigger = ssdlab.Device("tlc", overrides=[*tiny_overrides, "geometry.blocks_per_plane=64"])
    assert bigger.config_hash not in hashes
    assert bigger.logical_bytes > ssdlab.Device("tlc", overrides=tiny_overrides).logical_bytes


def test_config_reflects_overrides(make_device):
    dev = make_device()
    assert dev.page_size == 4096
    config = dev.config
    assert config["geometry"]["channels"] == 1
    assert config["geometry"]["pages_per_block"] == 48
    assert dev.config_hash == dev.stats()["config_hash"]


def test_presets_are_sorted_pairs():
    presets = ssdlab.presets()
    names = [name for name, _ in presets]
    assert names == sorted(names)
    assert all(isinstance(desc, str) and desc for _, desc in presets)
    with pytest.raises(ssdlab.ConfigError):
        _core.preset_toml("no-such-preset")


# -- statistics and runs -------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["greedy", "cost_benefit", "fifo"])
def test_the_report_spells_choices_as_the_config_does(make_device, policy):
    dev = make_device(extra=[f"ftl.gc_policy={policy}"])
    config, stats = dev.config, dev.stats()
    assert stats["gc"]["policy"] == config["ftl"]["gc_policy"] == policy
    assert stats["ftl"] == config["ftl"]["kind"]
    # What the report says can be given back to the configuration.
    assert make_device(extra=[f"ftl.gc_policy={stats['gc']['policy']}"]).config == config


def test_waf_is_media_bytes_over_host_bytes(make_device):
    dev = make_device()
    for page in range(100):
        dev.write(page * KIB4, KIB4)
    dev.flush()
    ssd = dev.stats()
    assert ssd["host_bytes_written"] == 100 * KIB4
    assert ssd["flash_pages_programmed"] >= 100
    assert ssd["media_bytes_written"] == ssd["flash_pages_programmed"] * dev.page_size
    assert ssd["waf"] == pytest.approx(ssd["media_bytes_written"] / ssd["host_bytes_written"])
    # The same number per placement handle and in total.
    assert ssd["placement"]["total"]["waf"] == pytest.approx(ssd["waf"])
    assert ssd["placement"]["handles"][0]["waf"] == pytest.approx(ssd["waf"])
    assert ssd["seed"] == dev.seed


def test_precondition_fills_then_resets_the_statistics(make_device):
    dev = make_device()
    report = dev.precondition(1.0)
    units = dev.logical_bytes // dev.stats()["mapping_unit_bytes"]
    assert report["units_written"] >= units
    assert report["waf_last_window"] >= 1.0
    ssd = dev.stats()
    assert ssd["host_bytes_written"] == 0
    assert ssd["gc"]["invocations"] == 0


def test_placement_ids_past_the_last_handle_are_refused(make_device):
    dev = make_device(extra=["placement.handles=2"])
    with pytest.raises(ssdlab.DeviceError, match="placement id 2 is out of range"):
        dev.write(0, KIB4, hint=Hint(placement_id=2))
    with pytest.raises(ssdlab.DeviceError, match="stream 5 is out of range"):
        dev.write(0, KIB4, hint=Hint(stream=5))


def test_run_arrays_counts_every_request(make_device):
    dev = make_device(extra=["placement.handles=2"])
    rng = np.random.default_rng(2)
    n = 4000
    ops = rng.choice([0, 1, 2], n, p=[0.3, 0.6, 0.1])
    offsets = rng.integers(0, dev.logical_bytes // KIB4, n) * KIB4
    lengths = np.full(n, KIB4)
    placement = np.where(ops == 1, rng.integers(0, 2, n), -1)
    result = dev.run_arrays(ops, offsets, lengths, placement=placement, queue_depth=8, name="cols")
    (job,) = result.jobs
    assert job.name == "cols"
    for code, direction in enumerate(("read", "write", "trim")):
        count = int((ops == code).sum())
        assert job[direction]["total_ios"] == count
        assert job[direction]["io_bytes"] == count * KIB4
    assert result.ssd["host_bytes_written"] == int((ops == 1).sum()) * KIB4


def test_run_arrays_checks_its_columns(make_device):
    dev = make_device()
    with pytest.raises(ValueError, match="length"):
        dev.run_arrays([1, 1], [0], [KIB4, KIB4])
    with pytest.raises(ValueError, match="ops"):
        dev.run_arrays([3], [0], [KIB4])
    with pytest.raises(ValueError, match="offsets"):
        dev.run_arrays([1], [0.5], [KIB4])
    # A placement id column is checked by the hint vocabulary, with its message.
    with pytest.raises(
        ValueError, match=r"^placement\[1\]: hint 'placement_id' expects an integer 0-65535"
    ):
        dev.run_arrays([1, 1], [0, KIB4], [KIB4, KIB4], placement=[-1, 70_000])


def test_run_job_runs_each_job_in_order(make_device, two_jobs):
    dev = make_device()
    result = dev.run_job(two_jobs, progress=False)
    assert [job.name for job in result.jobs] == ["fill", "reread"]
    fill, reread = result.jobs
    assert fill.write["io_bytes"] == 2 * 2**20
    assert fill.read["total_ios"] == 0
    assert reread.read["total_ios"] == 500
    assert reread.write["total_ios"] == 0


def test_run_result_layout_round_trips(make_device, randrw_job):
    dev = make_device(seed=9)
    result = dev.run_job(randrw_job, progress=False)
    report = json.loads(result.to_json())
    assert report == result.to_dict()
    assert list(report) == ["ssdlab version", "seed", "config_hash", "jobs", "ssd"]
    assert report["ssdlab version"] == ssdlab.__version__
    assert report["seed"] == 9 == report["ssd"]["seed"]
    assert report["config_hash"] == dev.config_hash == report["ssd"]["config_hash"]
    assert report["jobs"][0]["jobname"] == "mixed"


def test_a_progress_bar_does_not_change_results(make_device, randrw_job):
    quiet = make_device(seed=4).run_job(randrw_job, progress=False)
    shown = make_device(seed=4).run_job(randrw_job, progress=True)
    assert quiet.to_dict() == shown.to_dict()


def test_trace_replay_counts_requests(make_device, msr_trace):
    result = make_device().run_trace(msr_trace, "msr", closed_loop=True, queue_depth=4)
    (job,) = result.jobs
    assert job.read["total_ios"] == 10
    assert job.write["total_ios"] == 30


def test_trace_format_is_checked(make_device, msr_trace):
    with pytest.raises(ValueError, match="fmt"):
        make_device().run_trace(msr_trace, "iotta")


def test_bad_trace_line_names_file_and_line(make_device, write_file):
    good = "128166372003061629,hm,0,Write,0,4096,1331\n"
    path = write_file("bad.csv", good * 2 + "128166372003061729,hm,0,Write,zero,4096,1331\n")
    with pytest.raises(ssdlab.WorkloadError, match=rf"{path.name}:3"):
        make_device().run_trace(path, "msr")


def test_time_series_rows_are_dicts(tiny_overrides, randrw_job):
    dev = ssdlab.Device(PRESET, overrides=tiny_overrides, time_series=True)
    dev.run_job(randrw_job, progress=False)
    rows = dev.time_series()
    assert isinstance(rows, list)
    assert rows, "a run of a few thousand requests produces at least one interval"
    assert all(isinstance(row, dict) for row in rows)
    assert {row["interval_ns"] for row in rows} == {10_000_000}
    assert sum(row["reads"] + row["writes"] for row in rows) == 3000


def test_time_series_is_kept_only_when_asked_for(make_device, randrw_job):
    dev = make_device()
    dev.run_job(randrw_job, progress=False)
    assert dev.time_series() == []


def test_job_names_reads_sections(two_jobs):
    assert _core.job_names(os.fspath(two_jobs)) == ["fill", "reread"]
