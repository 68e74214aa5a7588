"""Shared fixtures: tiny devices that simulate in milliseconds, and small workload files.

Every test here drives the real native module (``ssdlab._core``); build it with ``make build``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ssdlab
from nbd_support import NbdServer, ServerOptions, start_server
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


# --- NBD servers for tests/test_nbd_clients.py (see nbd_support.py) ---------------------------

NBD_SERVERS = pytest.StashKey[list[NbdServer]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "accuracy: a client's measured latency against the emulator's model"
    )


@pytest.fixture
def nbd_server(request: pytest.FixtureRequest) -> Iterator[Callable[..., NbdServer]]:
    """Start an NBD server: ``nbd_server(small=True, ...)`` (``ServerOptions``); stopped after
    the test, which may also call ``server.stop()`` itself to read the emulator's summary."""
    servers = request.node.stash.setdefault(NBD_SERVERS, [])
    with contextlib.ExitStack() as teardown:  # stops every server even if one stop fails

        def start(**options: Any) -> NbdServer:
            server = start_server(ServerOptions(**options))
            teardown.callback(server.close)
            servers.append(server)
            return server

        yield start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """A failed test shows the stderr of the NBD servers it started."""
    report: pytest.TestReport = yield
    if report.when == "call" and report.failed:
        for server in item.stash.get(NBD_SERVERS, []):
            report.sections.append((f"{server.name} stderr", server.stderr_text() or "(empty)"))
    return report
