"""Shared fixtures: tiny devices that simulate in milliseconds, and small workload files.

Every test here drives the real native module (``ssdlab._core``); build it with ``make build``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import ssdlab
from support import PRESET, RANDRW_JOB, TINY_OVERRIDES, TWO_JOBS


@pytest.fixture
def tiny_overrides() -> list[str]:
    return list(TINY_OVERRIDES)


@pytest.fixture
def make_device(tiny_overrides: list[str]) -> Callable[..., ssdlab.Device]:
    """Build a tiny device: ``make_device(seed=1, store_data=True, extra=["k=v"])``."""

    def make(
        preset: str = PRESET,
        *,
        seed: int = 0,
        store_data: bool = False,
        extra: tuple[str, ...] | list[str] = (),
    ) -> ssdlab.Device:
        return ssdlab.Device(
            preset, seed=seed, overrides=[*tiny_overrides, *extra], store_data=store_data
        )

    return make


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write ``text`` to ``tmp_path / name`` and return the path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def randrw_job(write_file: Callable[[str, str], Path]) -> Path:
    return write_file("randrw.fio", RANDRW_JOB)


@pytest.fixture
def two_jobs(write_file: Callable[[str, str], Path]) -> Path:
    return write_file("two.fio", TWO_JOBS)


@pytest.fixture
def msr_trace(write_file: Callable[[str, str], Path]) -> Path:
    """An MSR Cambridge trace of 40 requests (FILETIME stamps 10 µs apart) in the first MiB."""
    start = 128166372003061629
    lines = []
    for i in range(40):
        kind = "Write" if i % 4 else "Read"
        lines.append(f"{start + 100 * i},hm,0,{kind},{(i * 7 % 256) * 4096},4096,1331")
    return write_file("msr.csv", "\n".join(lines) + "\n")
