"""Helpers of the sweep tests: spec texts, and a Dask scheduler and workers as processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from support import RANDRW_JOB, TINY_OVERRIDES

BIN = Path(sys.executable).parent

#: A tiny-device spec around the randrw job: 2 x 2 = 4 runs of milliseconds each.
TINY_SPEC = """\
name = "tiny"
description = "tiny device, randrw job"
config = "tlc"
set = [{overrides}]
precondition = false

[workloads.randrw]
job = "randrw.fio"

[axes]
"geometry.blocks_per_plane" = [48, 64]
seed = [1, 2]

[report]
x = "geometry.blocks_per_plane"
metrics = ["waf", "read.iops", "write.p99_us"]
""".format(overrides=", ".join(f'"{o}"' for o in TINY_OVERRIDES))

#: The demo's device and hot/cold workload: 8 runs of about a second, long enough to kill a
#: worker or the sweep in the middle of one.
SLOW_SPEC = """\
name = "slow"
config = "tlc"
set = [
    "geometry.channels=4", "geometry.chips_per_channel=2", "geometry.dies_per_chip=1",
    "geometry.planes_per_die=1", "geometry.blocks_per_plane=128",
    "geometry.pages_per_block=96", "geometry.page_size_bytes=4096", "placement.handles=2",
]

[workloads.hotcold]
builtin = "hotcold"
write_passes = 8.0

[axes]
"geometry.over_provisioning" = [0.2, 0.3]
hints = [false, true]
seed = [1, 2]
"""


def write_spec(folder: Path, text: str, name: str = "spec.toml") -> Path:
    (folder / "randrw.fio").write_text(RANDRW_JOB, encoding="utf-8")
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(
    *args: str | os.PathLike[str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run the ``ssdlab`` command line of this environment."""
    return subprocess.run(
        [str(BIN / "ssdlab"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class DaskProcesses:
    """A ``dask scheduler`` and ``dask worker`` processes, as a cluster's would be."""

    folder: Path
    scheduler: subprocess.Popen | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)
    address: str = ""
    logs: list[IO[str]] = field(default_factory=list)

    def start(self, n_workers: int) -> None:
        file = self.folder / "scheduler.json"
        self.scheduler = self._spawn(
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            file,
        )
        wait_for(file.exists, 60, "the scheduler file")
        self.address = json.loads(file.read_text())["address"]
        for _ in range(n_workers):
            self.workers.append(
                self._spawn(
                    "worker",
                    self.address,
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--no-dashboard",
                    "--host",
                    "127.0.0.1",
                )
            )
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            client.wait_for_workers(n_workers, timeout=60)

    def _spawn(self, *args: str | os.PathLike[str]) -> subprocess.Popen:
        log = open(self.folder / f"dask-{args[0]}-{len(self.workers)}.log", "w")  # noqa: SIM115
        self.logs.append(log)
        return subprocess.Popen(
            [str(BIN / "dask"), *map(str, args)], stdout=log, stderr=subprocess.STDOUT
        )

    def stop(self) -> None:
        for process in [*self.workers, self.scheduler]:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.workers, self.scheduler]:
            if process is not None:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for log in self.logs:
            log.close()
