"""``ssdlab serve`` and ``ssdlab.Server`` without external clients: a small NBD client written
here (fixed newstyle, NBD_OPT_EXPORT_NAME, simple replies) checks data, errors, shutdown and the
summary. The real clients (fio, qemu-io, nbdcopy, nbdfuse) are in test_nbd_clients.py."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ssdlab
from ssdlab.cli import main
from support import TINY_OVERRIDES, connect, set_args

REQUEST_MAGIC = 0x25609513
REPLY_MAGIC = 0x67446698
READ, WRITE, DISC, FLUSH, TRIM = 0, 1, 2, 3, 4
EPERM, EINVAL, ENOSPC = 1, 22, 28


class MiniClient:
    """Just enough NBD to talk to the server from a test."""

    def __init__(self, address: str | tuple[str, int]) -> None:
        self.sock = connect(address)
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
    assert summary["ssd"]["host_bytes_written"] == len(data)
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


@pytest.mark.parametrize(
    ("method", "first", "then"),
    [
        ("__init__", "original(self, *args, **kwargs)", "signal_self()"),
        ("serve_forever", "signal_self()", "return original(self, *args, **kwargs)"),
    ],
    ids=["as-construction-ends", "as-serving-begins"],
)
def test_a_sigterm_between_bind_and_serving_leaves_no_socket_file(
    short_dir: Path, method: str, first: str, then: str
) -> None:
    # The socket file exists once the server is built; a script that waits for it may signal
    # before the server serves. The signal is sent exactly there: as the constructor ends
    # (the start is interrupted) or as serving begins (a clean stop with an empty summary).
    sock = short_dir / "s"
    script = textwrap.dedent(f"""\
        import os, signal, sys
        import ssdlab.serve
        from ssdlab.cli import main
        original = ssdlab.serve.Server.{method}
        def signal_self():
            assert os.path.exists({str(sock)!r})
            os.kill(os.getpid(), signal.SIGTERM)
        def signalled(self, *args, **kwargs):
            {first}
            {then}
        ssdlab.serve.Server.{method} = signalled
        sys.exit(main(sys.argv[1:]))
    """)
    command = [
        sys.executable, "-c", script, "serve", "slc", *set_args(), "--socket", str(sock),
        "--clock", "virtual", "--output-format", "json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr
    if method == "__init__":
        assert (done.returncode, done.stderr) == (130, "ssdlab: interrupted\n")
    else:
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["emulator"]["connections"] == 0
    assert not sock.exists(), "the socket file outlived a signal before serving"


# -- shutdown summary, hostnames, restarts, a failing stats log -------------------------------

#: 2 dies x 256 blocks x 64 pages of 4 KiB: 96 MiB logical, room for 32 MiB requests.
ROOMY_OVERRIDES = (
    *(o for o in TINY_OVERRIDES if not o.startswith(("geometry.blocks", "geometry.pages"))),
    "geometry.blocks_per_plane=256",
    "geometry.pages_per_block=64",
)


class ServeProcess:
    """``ssdlab serve`` as a subprocess on a Unix socket; stopped with SIGTERM."""

    def __init__(self, sock: Path, *args: str, overrides: tuple[str, ...] = TINY_OVERRIDES):
        self.sock = sock
        command = [sys.executable, "-m", "ssdlab", "serve", "slc", *set_args(overrides)]
        command += ["--socket", str(sock), *args]
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 30
        while not sock.exists():
            if self.proc.poll() is not None:
                _, err = self.proc.communicate()
                raise AssertionError(f"server exited: {err}")
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)

    def rss_bytes(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(kib) * 1024

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM; returns (status, stdout, stderr)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return self.proc.returncode, out, err


@pytest.mark.parametrize("clock", ["realtime", "virtual"])
def test_cli_prints_the_normal_summary_at_shutdown(short_dir: Path, clock: str) -> None:
    server = ServeProcess(short_dir / "s", "--clock", clock)
    client = MiniClient(str(server.sock))
    assert client.write(0, b"\x5a" * 8192) == 0
    assert client.read(0, 8192) == b"\x5a" * 8192
    client.close()
    status, out, err = server.stop()
    assert status == 0, err
    assert "Traceback" not in err
    assert "Emulator:" in out
    assert f"clock={clock}, connections=1, requests=3" in out
    assert "closed by the server: evicted=0" in out
    if clock == "realtime":
        assert "compensation)" in out
        assert "deadline misses=" in out
        # Two gaps: before the read and before the disconnect.
        assert re.search(r"client gaps \(reply to next request\): p25=[0-9.]+us, p50=", out), out


def test_hostnames_resolve_for_bind() -> None:
    with ssdlab.Server(
        "slc", port=0, host="localhost", clock="virtual", overrides=TINY_OVERRIDES
    ) as server:
        # IPv4 is preferred when the name has both kinds of address.
        assert server.uri.startswith("nbd://127.0.0.1:")
        port = int(server.uri.rsplit(":", 1)[1].split("/")[0])
        client = MiniClient(("127.0.0.1", port))
        assert client.write(0, b"y" * 4096) == 0
        client.close()


def test_a_host_that_does_not_resolve_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "slc", "--port", "0", "--bind", "no-such-host.invalid"]) == 2
    err = capsys.readouterr().err
    assert "ssdlab: error: host 'no-such-host.invalid' does not resolve" in err.replace('"', "'")
    assert "Traceback" not in err


def test_start_after_stop_raises_a_clear_error(short_dir: Path) -> None:
    server = ssdlab.Server(
        "slc", socket=short_dir / "s", clock="virtual", overrides=TINY_OVERRIDES
    ).start()
    first = server.stop()
    assert server.stop() == first, "stopping twice returns the same summary"
    with pytest.raises(ssdlab.SsdlabError, match="create a new Server"):
        server.start()
    # A new server on the same socket serves again.
    with ssdlab.Server("slc", socket=short_dir / "s", clock="virtual", overrides=TINY_OVERRIDES):
        MiniClient(str(short_dir / "s")).close()


def test_a_server_dropped_unstarted_takes_its_socket_file_with_it(short_dir: Path) -> None:
    sock = short_dir / "s"
    server = ssdlab.Server("slc", socket=sock, clock="virtual", overrides=TINY_OVERRIDES)
    assert sock.is_socket()
    del server
    gc.collect()
    assert not sock.exists(), "an unstarted server's socket file outlived it"
    # A file that is no longer the server's (replaced meanwhile) is left alone.
    server = ssdlab.Server("slc", socket=sock, clock="virtual", overrides=TINY_OVERRIDES)
    sock.unlink()
    sock.write_text("someone else's")
    del server
    gc.collect()
    assert sock.read_text() == "someone else's"


def test_a_stats_log_that_cannot_be_written_is_reported_at_once(short_dir: Path) -> None:
    server = ServeProcess(short_dir / "s", "--clock", "virtual", "--stats-log", "/dev/full")
    client = MiniClient(str(server.sock))
    assert client.write(0, bytes(4096)) == 0
    # Reported while still serving, not only at the end.
    assert server.proc.stderr is not None
    os.set_blocking(server.proc.stderr.fileno(), False)
    seen = ""
    deadline = time.monotonic() + 10
    while "warning: writing the request log" not in seen:
        assert time.monotonic() < deadline, f"no warning on stderr: {seen!r}"
        seen += server.proc.stderr.read() or ""
        time.sleep(0.05)
    assert "No space left on device" in seen
    assert client.read(0, 4096) == bytes(4096), "still serving"
    client.close()
    os.set_blocking(server.proc.stderr.fileno(), True)
    status, out, err = server.stop()
    assert status == 0, seen + err
    assert "Emulator:" in out
    assert "stats log: not written completely (No space left on device" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-connections", "0"], "--max-connections must be at least 1"),
        (["--max-in-flight", "-3"], "--max-in-flight must be at least 1"),
        (["--handshake-timeout", "nan"], "--handshake-timeout must be a positive"),
        (["--stall-timeout", "0"], "--stall-timeout must be a positive"),
        (["--idle-timeout", "-1"], "--idle-timeout must be >= 0"),
        (["--max-buffered-mib", "0.5"], "--max-buffered-mib must be at least 1"),
        (["--max-connections", "100000"], "max_connections: expected 1..=16384"),
    ],
)
def test_bad_limits_are_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "slc", "--socket", "/tmp/ssdlab-unused.sock", *args]) == 2
    assert message in capsys.readouterr().err


def test_limits_are_flags_with_their_defaults_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    defaults = ssdlab.Server.default_limits()
    assert "--max-connections N connections served at once" in text
    assert f"(default {defaults['max_connections']})" in text
    assert "(default 64)" in text  # --max-buffered-mib, and --max-handshakes
    assert "(default 10)" in text
    assert "(default 60)" in text


def test_limits_are_reported_in_the_summary(short_dir: Path) -> None:
    with ssdlab.Server(
        "slc",
        socket=short_dir / "s",
        clock="virtual",
        overrides=TINY_OVERRIDES,
        max_connections=3,
        idle_timeout_s=30,
        max_buffered_bytes=2 << 20,
    ) as server:
        MiniClient(str(short_dir / "s")).close()
    limits = server.summary["emulator"]["limits"]
    assert limits["max_connections"] == 3
    assert limits["idle_timeout_s"] == 30
    assert limits["max_buffered_bytes"] == 2 << 20
    assert limits["max_handshakes"] == ssdlab.Server.default_limits()["max_handshakes"]


# -- memory under attack ----------------------------------------------------------------------

MIB = 1 << 20
MAX_REQUEST = 32 * MIB


def _header(command: int, cookie: int, offset: int, length: int) -> bytes:
    return struct.pack(">IHHQQI", REQUEST_MAGIC, 0, command, cookie, offset, length)


def test_rss_stays_bounded_under_unread_replies_and_missing_payloads(short_dir: Path) -> None:
    """The issue's attacks against ``ssdlab serve`` (real-time clock, default limits): three
    clients pipeline 300 READs of 32 MiB and never read a reply, forty send a 32 MiB WRITE
    header without its payload. RSS stays below 256 MiB plus the per-connection budgets of the
    clients that can hold replies, and a well-behaved client keeps its data."""
    budget = ssdlab.Server.default_limits()["max_buffered_bytes"]
    server = ServeProcess(short_dir / "s", overrides=ROOMY_OVERRIDES)
    attackers: list[socket.socket] = []
    try:
        baseline = server.rss_bytes()
        readers = [MiniClient(str(server.sock)) for _ in range(3)]
        for r in readers:
            r.sock.sendall(b"".join(_header(READ, i, 0, MAX_REQUEST) for i in range(300)))
        for i in range(40):
            w = MiniClient(str(server.sock))
            w.sock.sendall(_header(WRITE, i, 0, MAX_REQUEST))
            attackers.append(w.sock)
        good = MiniClient(str(server.sock))
        peak = 0
        deadline = time.monotonic() + 3
        round_ = 0
        while time.monotonic() < deadline:
            data = os.urandom(4096)
            assert good.write(round_ % 64 * 4096, data) == 0
            assert good.read(round_ % 64 * 4096, 4096) == data
            peak = max(peak, server.rss_bytes())
            round_ += 1
            time.sleep(0.02)
        good.close()
        bound = 256 * MIB + 3 * budget
        print(f"RSS: {baseline / MIB:.0f} MiB at start, {peak / MIB:.0f} MiB peak under attack")
        assert peak < bound, f"RSS {peak / MIB:.0f} MiB >= {bound / MIB:.0f} MiB"
        attackers += [r.sock for r in readers]
    finally:
        for s in attackers:
            s.close()
        status, _, err = server.stop()
    assert status == 0, err


def test_idle_and_silent_connections_at_the_default_caps_do_not_lock_clients_out(
    short_dir: Path,
) -> None:
    """256 idle clients in transmission and 70 that never negotiate (more than both default
    caps): a new well-behaved client is served, and RSS stays bounded."""
    defaults = ssdlab.Server.default_limits()
    server = ServeProcess(short_dir / "s", "--clock", "virtual")
    idle: list[MiniClient] = []
    silent: list[socket.socket] = []
    try:
        idle = [MiniClient(str(server.sock)) for _ in range(defaults["max_connections"])]
        for _ in range(defaults["max_handshakes"] + 6):
            silent.append(connect(str(server.sock)))
        for round_ in range(3):
            good = MiniClient(str(server.sock))
            data = os.urandom(8192)
            assert good.write(round_ * 8192, data) == 0
            assert good.read(round_ * 8192, 8192) == data
            good.close()
        rss = server.rss_bytes()
        print(
            f"RSS with {len(idle)} idle and {len(silent)} silent connections: {rss / MIB:.0f} MiB"
        )
        assert rss < 256 * MIB
    finally:
        for c in idle:
            c.sock.close()
        for s in silent:
            s.close()
        status, out, err = server.stop()
    assert status == 0, err
    assert "evicted=1" in out or "evicted=2" in out or "evicted=3" in out


def test_serve_refuses_a_device_larger_than_memory_before_building_it(tmp_path):
    """A geometry that validates but whose tables exceed the memory the process may use (here a
    4 GiB address-space limit) is a clear error (exit status 2) naming the geometry, not an abort
    on allocation."""
    import resource
    import subprocess
    import sys

    def limit_address_space() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ssdlab",
            "serve",
            "slc",
            "--set",
            "geometry.blocks_per_plane=524288",
            "--socket",
            str(tmp_path / "s.sock"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=limit_address_space,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("ssdlab: error:"), proc.stderr
    assert "geometry" in proc.stderr
    assert "Traceback" not in proc.stderr
