"""``ssdlab serve`` and ``ssdlab.Server`` without external clients: a small NBD client written
here (fixed newstyle, NBD_OPT_EXPORT_NAME, simple replies) checks data, errors, shutdown and the
summary. The real clients (fio, qemu-io, nbdcopy, nbdfuse) are in test_nbd_clients.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ssdlab
from ssdlab.cli import main
from support import TINY_OVERRIDES, set_args

REQUEST_MAGIC = 0x25609513
REPLY_MAGIC = 0x67446698
READ, WRITE, DISC, FLUSH, TRIM = 0, 1, 2, 3, 4
EPERM, EINVAL, ENOSPC = 1, 22, 28


class MiniClient:
    """Just enough NBD to talk to the server from a test."""

    def __init__(self, address: str | tuple[str, int]) -> None:
        family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(address)
        greeting = self._recv(18)
        assert greeting[:16] == b"NBDMAGICIHAVEOPT"
        self.sock.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
        self.sock.sendall(struct.pack(">QII", 0x49484156454F5054, 1, 0))  # EXPORT_NAME ""
        self.size, self.flags = struct.unpack(">QH", self._recv(10))

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("server closed the connection")
            data += chunk
        return data

    def request(self, command: int, offset: int, length: int, payload: bytes = b"") -> int:
        self.sock.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, command, 7, offset, length))
        self.sock.sendall(payload)
        magic, error, cookie = struct.unpack(">IIQ", self._recv(16))
        assert (magic, cookie) == (REPLY_MAGIC, 7)
        return error

    def write(self, offset: int, data: bytes) -> int:
        return self.request(WRITE, offset, len(data), data)

    def read(self, offset: int, length: int) -> bytes:
        error = self.request(READ, offset, length)
        assert error == 0, f"read error {error}"
        return self._recv(length)

    def close(self) -> None:
        self.sock.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, DISC, 0, 0, 0))
        self.sock.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: Unix socket paths are limited to 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="ssdlab-", dir="/tmp") as d:
        yield Path(d)


def test_server_round_trips_data_and_reports_what_it_served(short_dir: Path) -> None:
    sock = str(short_dir / "s")
    log = short_dir / "requests.csv"
    data = os.urandom(64 * 1024)
    with ssdlab.Server(
        "slc", socket=sock, clock="virtual", overrides=TINY_OVERRIDES, stats_log=log
    ) as server:
        assert server.uri == f"nbd+unix:///ssdlab?socket={sock}"
        client = MiniClient(sock)
        assert client.write(4096, data) == 0
        assert client.read(4096, len(data)) == data
        assert client.read(1 << 20, 4096) == bytes(4096)  # never written: zeros
        assert client.request(FLUSH, 0, 0) == 0
        assert client.write(client.size - 512, bytes(1024)) == ENOSPC
        assert client.request(READ, client.size, 512) == EINVAL
        client.close()
    summary = server.summary
    assert summary is not None
    job = summary["jobs"][0]
    assert job["write"]["total_ios"] == 1
    assert job["write"]["io_bytes"] == len(data)
    assert job["read"]["total_ios"] == 2
    emulator = summary["emulator"]
    assert emulator["clock"] == "virtual"
    assert emulator["error_replies"] == 2
    assert emulator["flushes"] == 1
    assert summary["ssd"]["host_pages_written"] == 16
    rows = log.read_text().splitlines()
    assert rows[0].startswith("request,op,logical_sector,size_bytes,duration_ns")
    assert [r.split(",")[1] for r in rows[1:]] == ["write", "read", "read", "flush"]
    # 16 pages programmed by the write, each with its OOB.
    assert rows[1].split(",")[6:9] == ["16", "0", "16"]


def test_read_only_server_refuses_writes(short_dir: Path) -> None:
    sock = str(short_dir / "s")
    with ssdlab.Server(
        "slc", socket=sock, clock="virtual", overrides=TINY_OVERRIDES, read_only=True
    ):
        client = MiniClient(sock)
        assert client.flags & 2, "NBD_FLAG_READ_ONLY"
        assert client.write(0, bytes(4096)) == EPERM
        assert client.request(TRIM, 0, 4096) == EPERM
        assert client.read(0, 4096) == bytes(4096)
        client.close()


def test_tcp_binds_to_loopback_by_default() -> None:
    with ssdlab.Server("slc", port=0, clock="virtual", overrides=TINY_OVERRIDES) as server:
        assert server.uri.startswith("nbd://127.0.0.1:")
        port = int(server.uri.rsplit(":", 1)[1].split("/")[0])
        client = MiniClient(("127.0.0.1", port))
        assert client.write(0, b"x" * 4096) == 0
        assert client.read(0, 4096) == b"x" * 4096
        client.close()


def test_realtime_replies_are_never_earlier_than_the_model_minus_compensation(
    short_dir: Path,
) -> None:
    sock = str(short_dir / "s")
    with ssdlab.Server(
        "slc", socket=sock, clock="realtime", overrides=TINY_OVERRIDES, compensation_ns=0
    ) as server:
        client = MiniClient(sock)
        started = time.perf_counter_ns()
        assert client.write(0, bytes(4096)) == 0
        elapsed = time.perf_counter_ns() - started
        client.close()
    modelled = server.summary["jobs"][0]["write"]["clat_ns"]["min"]
    assert modelled > 100_000
    assert elapsed >= modelled
    assert server.summary["emulator"]["compensation"] == {"mode": "fixed", "mean_ns": 0.0}


def test_a_live_socket_is_not_taken_over(short_dir: Path) -> None:
    sock = str(short_dir / "s")
    with (
        ssdlab.Server("slc", socket=sock, clock="virtual", overrides=TINY_OVERRIDES),
        pytest.raises(ssdlab.SsdlabError, match="in use by a running server"),
    ):
        ssdlab.Server("slc", socket=sock, overrides=TINY_OVERRIDES)
    # A stale socket file left behind is replaced.
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(sock)
    stale.close()
    with ssdlab.Server("slc", socket=sock, clock="virtual", overrides=TINY_OVERRIDES):
        MiniClient(sock).close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "--port must be in 0..65535"),
        (["--socket", "/nonexistent-dir/s"], "no such directory"),
        (["--socket", "/tmp/x.sock", "--compensate", "soon"], "--compensate"),
        (["--socket", "/tmp/x.sock", "--set", "geometry.channels=0"], "geometry.channels"),
    ],
)
def test_bad_serve_arguments_are_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "slc", *args]) == 2
    assert message in capsys.readouterr().err


def test_cli_serves_until_sigterm_and_writes_the_summary(short_dir: Path) -> None:
    sock = short_dir / "s"
    out = short_dir / "summary.json"
    log = short_dir / "log.csv"
    command = [
        sys.executable, "-m", "ssdlab", "serve", "slc", *set_args(), "--socket", str(sock),
        "--clock", "virtual", "--output-format", "json", "--output", str(out),
        "--stats-log", str(log),
    ]  # fmt: skip
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as proc:
        try:
            deadline = time.monotonic() + 30
            while not sock.exists():
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.05)
            client = MiniClient(str(sock))
            assert client.write(0, b"\x5a" * 8192) == 0
            # SIGTERM while the client is still connected: a clean stop all the same.
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
            client.sock.close()
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.stderr is not None
        assert "listening on nbd+unix:///ssdlab?socket=" in proc.stderr.read()
    summary = json.loads(out.read_text())
    assert summary["jobs"][0]["write"]["total_ios"] == 1
    assert summary["emulator"]["connections"] == 1
    assert len(log.read_text().splitlines()) == 2
    assert not sock.exists(), "the socket file is removed on shutdown"
