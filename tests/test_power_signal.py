"""``ssdlab serve`` cuts the power on SIGUSR1: a client writing and flushing through two
signals reads back every write a flush acknowledged, and the summary reports each loss."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from support import TINY_OVERRIDES
from test_serve import FLUSH, MiniClient, ServeProcess, short_dir  # noqa: F401

WRITES = 240
FLUSH_EVERY = 6


@pytest.mark.parametrize("ftl", ["page_map", "dftl"])
def test_sigusr1_cuts_the_power_and_every_flushed_write_reads_back(
    short_dir: Path,  # noqa: F811
    ftl: str,
) -> None:
    out = short_dir / "summary.json"
    server = ServeProcess(
        short_dir / "s",
        "--clock", "virtual", "--output-format", "json", "--output", str(out),
        overrides=(*TINY_OVERRIDES, f"ftl.kind={ftl}"),
    )  # fmt: skip
    client = MiniClient(str(server.sock))
    flushed = 0
    for i in range(WRITES):
        if i in (WRITES // 3, 2 * WRITES // 3):
            server.proc.send_signal(signal.SIGUSR1)
            # Delivery waits for the kernel to run one of the server's threads: on a loaded
            # machine two signals sent close together could arrive as one.
            time.sleep(0.2)
        assert client.write(i * 4096, bytes([i % 251 + 1]) * 4096) == 0
        if (i + 1) % FLUSH_EVERY == 0:
            assert client.request(FLUSH, 0, 0) == 0
            flushed = i + 1
    for i in range(flushed):
        assert client.read(i * 4096, 4096) == bytes([i % 251 + 1]) * 4096, f"page {i}"
    client.close()
    status, _, err = server.stop()
    assert status == 0, err
    losses = json.loads(out.read_text())["emulator"]["power_losses"]
    assert [loss["trigger"] for loss in losses] == ["signal", "signal"], losses
    assert all(loss["recovered"] and loss["recovery_ns"] > 0 for loss in losses), losses
    assert losses[0]["at_ns"] < losses[1]["at_ns"]
    # The second recovery found at least the first third's flushed pages in flash.
    assert losses[1]["mapped_units"] >= WRITES // 3, losses
