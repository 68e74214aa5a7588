"""DFTL and power loss from Python: options, errors naming the key, recovery, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ssdlab

SMALL = {"geometry.blocks_per_plane": 48, "geometry.over_provisioning": 0.3}


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("ftl.kind", "foo", "ftl.kind"),
        ("ftl.dftl_victim_search", "foo", "ftl.dftl_victim_search"),
        ("ftl.dftl_cached_fraction", 0, "ftl.dftl_cached_fraction"),
        ("ftl.dftl_cached_fraction", 1.5, "ftl.dftl_cached_fraction"),
    ],
)
def test_bad_dftl_options_name_the_key(key: str, value: object, expected: str) -> None:
    with pytest.raises(ssdlab.ConfigError, match=expected):
        ssdlab.Device("noftl", overrides={**SMALL, "ftl.kind": "dftl", key: value})


def test_dftl_counts_and_flushed_data_survive_a_power_loss() -> None:
    dev = ssdlab.Device(
        "noftl",
        store_data=True,
        overrides={**SMALL, "ftl.kind": "dftl", "ftl.dftl_cached_fraction": 0.1},
    )
    for page in range(0, 2000, 7):
        dev.write(page * 4096, data=page.to_bytes(4, "little") * 1024)
    dev.flush()
    dftl = dev.stats()["dftl"]
    assert dftl["misses"] > 0
    assert dftl["lookups"] == len(range(0, 2000, 7))
    dev.power_loss()
    with pytest.raises(ssdlab.DeviceError, match="recover"):
        dev.read(0, 4096)
    report = dev.recover()
    assert report["oob_pages_read"] > 0
    assert report["duration_ns"] > 0
    assert report["mapped_units"] == len(range(0, 2000, 7))
    for page in range(0, 2000, 7):
        assert dev.read(page * 4096, 4096).data == page.to_bytes(4, "little") * 1024


def test_cli_runs_a_fio_job_on_dftl(tmp_path: Path) -> None:
    job = tmp_path / "rr.fio"
    job.write_text("[rr]\nrw=randread\nbs=4k\nsize=8m\nnumber_ios=2000\niodepth=1\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ssdlab",
            "run",
            "noftl",
            str(job),
            "--set",
            "ftl.kind=dftl",
            "--set",
            "ftl.dftl_cached_fraction=0.15",
            "--set",
            "geometry.blocks_per_plane=64",
            "--set",
            "geometry.over_provisioning=0.3",
            "--output-format",
            "json",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["ssd"]["dftl"]["lookups"] > 0
