"""Helpers for tests/test_nbd_clients.py: start an NBD server, drive real NBD clients against it.

The server under test is ``ssdlab serve``. ``SSDLAB_NBD_SERVER`` picks another one:

- unset or ``ssdlab``: ``python -m ssdlab serve`` with the interpreter running the tests;
- ``qemu-nbd``: qemu-nbd serving a sparse raw file, the reference the tests were validated
  against (it writes no emulator summary, so the tests of emulator statistics skip);
- anything else: a command line that takes ``ssdlab serve``'s arguments, for example
  ``SSDLAB_NBD_SERVER="/path/to/ssdlab serve"``.

Other knobs: ``SSDLAB_NBD_CONFIG`` (the device of ``ssdlab serve``, default ``noftl``),
``SSDLAB_NBD_CLOCK`` (``--clock`` for the tests that do not need one; unset leaves the server's
default) and ``SSDLAB_NBD_LOAD_SECONDS`` (the load test's duration, default 20; 600 or more for
a soak run).

Every subprocess has a timeout. A client that fails or hangs fails the test with its own output
and the tail of the server's stderr.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SERVER_ENV = "SSDLAB_NBD_SERVER"
CONFIG_ENV = "SSDLAB_NBD_CONFIG"
CLOCK_ENV = "SSDLAB_NBD_CLOCK"
LOAD_SECONDS_ENV = "SSDLAB_NBD_LOAD_SECONDS"

REFERENCE = "qemu-nbd"
DEFAULT_CONFIG = "noftl"

MIB = 1 << 20
#: The NBD protocol's largest request (and what both servers advertise as maximum block size).
NBD_MAX_REQUEST_BYTES = 32 * MIB
#: The size of qemu-nbd's sparse image, and of its image for ``small=True`` servers.
REFERENCE_IMAGE_BYTES = 1024 * MIB
REFERENCE_SMALL_IMAGE_BYTES = 96 * MIB
#: Shrinks the device of ``ssdlab serve`` for tests that read the whole export (nbdcopy):
#: ``noftl`` becomes 16 planes x 32 blocks x 256 KiB, about 100 MiB of logical space.
SMALL_DEVICE_SETS = ("geometry.blocks_per_plane=32", "geometry.over_provisioning=0.25")
#: qemu-nbd 10 on a raw file advertises no alignment (1), 4 KiB preferred, 32 MiB maximum.
REFERENCE_BLOCK_SIZES = (1, 4096, NBD_MAX_REQUEST_BYTES)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
#: Default timeout of a client run; fio runs get their runtime on top.
CLIENT_TIMEOUT_S = 120.0

#: Where each tool comes from, for the skip messages.
TOOL_PACKAGES = {
    "fio": "fio",
    "nbdinfo": "libnbd-bin",
    "nbdcopy": "libnbd-bin",
    "nbdfuse": "libnbd-bin (Debian 12) or nbdfuse",
    "fusermount3": "fuse3",
    "qemu-io": "qemu-utils",
    "qemu-nbd": "qemu-utils",
    "mkfs.ext4": "e2fsprogs",
    "e2fsck": "e2fsprogs",
    "mount": "mount",
    "umount": "mount",
    "losetup": "mount",
    "fstrim": "util-linux",
}

# The file-system tools live in sbin, which a non-root PATH may lack.
_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"]
)


# --- requirements -----------------------------------------------------------------------------


def tool(name: str) -> str:
    """The path of ``name``, or skip the test naming the package to install."""
    path = shutil.which(name, path=_SEARCH_PATH)
    if path is None:
        package = TOOL_PACKAGES.get(name, name)
        pytest.skip(
            f"{name} not installed: run scripts/install-test-deps.sh as root "
            f"(or apt-get install {package})"
        )
    return path


def require_root(why: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"needs root: {why}")


def require_fuse() -> None:
    if not os.path.exists("/dev/fuse"):
        pytest.skip("/dev/fuse is missing: no FUSE in this container")
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as err:
        pytest.skip(f"/dev/fuse cannot be opened: {err}")


def require_loop_devices() -> None:
    if not os.path.exists("/dev/loop-control"):
        pytest.skip("/dev/loop-control is missing: no loop devices in this container")
    found = subprocess.run(
        [tool("losetup"), "--find"], capture_output=True, text=True, timeout=30, check=False
    )
    if found.returncode != 0:
        pytest.skip(f"no free loop device (losetup --find: {found.stderr.strip()})")


def server_choice() -> str:
    return os.environ.get(SERVER_ENV, "").strip() or "ssdlab"


def is_reference() -> bool:
    return server_choice() == REFERENCE


def require_emulator(what: str) -> None:
    """Skip a test of emulator statistics when the server is the reference server."""
    if is_reference():
        pytest.skip(f"{what}: qemu-nbd (the reference server) writes no emulator summary")


def ssdlab_serve_command() -> list[str]:
    choice = server_choice()
    if choice == "ssdlab":
        return [sys.executable, "-m", "ssdlab", "serve"]
    return shlex.split(choice)


@functools.cache
def _serve_missing() -> str | None:
    """Why there is no ``ssdlab serve`` to test (the subcommand does not exist yet), or None.

    Only an unknown subcommand skips; a ``serve`` that exists but cannot start fails the tests.
    """
    if server_choice() != "ssdlab":
        return None
    command = [*ssdlab_serve_command(), "--help"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0 and "invalid choice: 'serve'" in done.stderr:
        return f"{shlex.join(command)}: {done.stderr.strip().splitlines()[-1]}"
    return None


# --- the server -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerOptions:
    """What a test asks of its server; the server kind maps each to its own flags."""

    #: ``ssdlab serve``'s CONFIG (preset or TOML); None: $SSDLAB_NBD_CONFIG or ``noftl``.
    config: str | None = None
    sets: tuple[str, ...] = ()
    seed: int = 0
    #: ``--clock``; None: $SSDLAB_NBD_CLOCK, or the server's default when that is unset too.
    clock: str | None = None
    read_only: bool = False
    #: A small export (about 100 MiB) for tests that read all of it.
    small: bool = False
    #: Listen on 127.0.0.1 (a free port) instead of a Unix socket.
    tcp: bool = False
    #: More ``ssdlab serve`` flags (limits, TLS credentials, ``--image``); tests that pass
    #: them need the emulator, not the reference server.
    extra_args: tuple[str, ...] = ()


@dataclass
class NbdServer:
    """One running server: its URIs, what it should advertise, and ``stop()``."""

    kind: str  # "ssdlab" or "qemu-nbd"
    options: ServerOptions
    command: list[str]
    workdir: Path
    socket_path: Path | None
    port: int | None
    export_names: tuple[str, ...]
    export_size: int
    #: (minimum, preferred, maximum) block sizes the server should advertise.
    block_sizes: tuple[int, int, int]
    summary_path: Path | None
    stderr_path: Path
    proc: subprocess.Popen[bytes] | None = None
    summary: dict[str, Any] | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def name(self) -> str:
        return f"{self.kind} server"

    def uri(self, export: str = "") -> str:
        if self.socket_path is not None:
            return f"nbd+unix:///{export}?socket={self.socket_path}"
        return f"nbd://127.0.0.1:{self.port}/{export}"

    @property
    def has_summary(self) -> bool:
        return self.summary_path is not None

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def stderr_tail(self, lines: int = 40) -> str:
        text = self.stderr_text().splitlines()[-lines:]
        return "\n".join(text) if text else "(empty)"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _connectable(self) -> bool:
        if self.socket_path is not None:
            family: int = socket.AF_UNIX
            address: Any = str(self.socket_path)
        else:
            family, address = socket.AF_INET, ("127.0.0.1", self.port)
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(address)
            except OSError:
                return False
        return True

    def _wait_ready(self) -> None:
        """Wait until the server's socket accepts connections."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.alive():
                status = self.proc.returncode if self.proc else None
                pytest.fail(
                    f"{self.name} exited with status {status} before accepting connections\n"
                    f"command: {shlex.join(self.command)}\n"
                    f"--- server stderr ---\n{self.stderr_tail()}",
                    pytrace=False,
                )
            if self._connectable():
                return
            time.sleep(0.02)
        pytest.fail(
            f"{self.name} not ready within {START_TIMEOUT_S:.0f} s\n"
            f"command: {shlex.join(self.command)}\n--- server stderr ---\n{self.stderr_tail()}",
            pytrace=False,
        )

    def announced_uri(self) -> str | None:
        """The URI of ssdlab's ``listening on URI ...`` line on stderr."""
        for line in self.stderr_text().splitlines():
            if "listening on " in line:
                words = line.split("listening on ", 1)[1].split()
                return words[0] if words else ""
        return None

    def stop(self) -> dict[str, Any] | None:
        """SIGINT, wait, kill if needed; return the emulator's JSON summary (None for qemu-nbd).

        A server that had already died, does not stop on SIGINT, exits non-zero or writes no
        summary fails the test.
        """
        if self._stopped:
            return self.summary
        self._stopped = True
        assert self.proc is not None
        problems = []
        if self.proc.poll() is not None:
            problems.append(f"it had exited with status {self.proc.returncode} before the stop")
        else:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
                problems.append(f"it did not stop within {STOP_TIMEOUT_S:.0f} s of SIGINT")
            else:
                if self.proc.returncode != 0:
                    problems.append(f"it exited with status {self.proc.returncode} on SIGINT")
        if self.summary_path is not None and not problems:
            try:
                self.summary = json.loads(self.summary_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                problems.append(f"its summary {self.summary_path} is unreadable: {err}")
        if problems:
            pytest.fail(
                f"{self.name}: {'; '.join(problems)}\ncommand: {shlex.join(self.command)}\n"
                f"--- server stderr ---\n{self.stderr_tail()}",
                pytrace=False,
            )
        return self.summary

    def close(self) -> None:
        """Teardown: stop (if the test did not) and remove the work directory."""
        try:
            if not self._stopped:
                self.stop()
        finally:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            shutil.rmtree(self.workdir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@functools.cache
def _ssdlab_geometry(config: str, sets: tuple[str, ...]) -> tuple[int, int]:
    """(logical bytes, mapping unit) of the device ``ssdlab serve CONFIG --set ...`` exports:
    the server advertises the FTL's mapping unit as its preferred block size."""
    import ssdlab

    device = ssdlab.Device(config, overrides=list(sets))
    return device.logical_bytes, device.stats()["mapping_unit_bytes"]


def start_server(options: ServerOptions) -> NbdServer:
    """Start the chosen server with ``options`` and wait until it accepts connections."""
    reference = is_reference()
    if reference:
        tool("qemu-nbd")
    elif (why := _serve_missing()) is not None:
        pytest.skip(
            f"ssdlab serve is not available ({why}); "
            f"set {SERVER_ENV}=qemu-nbd to run against the reference server"
        )
    # Unix socket paths must stay under 108 bytes: pytest's tmp_path can be longer.
    workdir = Path(tempfile.mkdtemp(prefix="ssdnbd-", dir="/tmp"))
    socket_path = None if options.tcp else workdir / "nbd.sock"
    port = _free_port() if options.tcp else None
    stderr_path = workdir / "server.stderr"
    if reference:
        size = REFERENCE_SMALL_IMAGE_BYTES if options.small else REFERENCE_IMAGE_BYTES
        image = workdir / "image.raw"
        with image.open("wb") as f:
            f.truncate(size)
        # --cache=unsafe: flushes (and the flush at exit) never wait for the disk.
        command = [tool("qemu-nbd"), "-f", "raw", "-t", "--shared=16", "--cache=unsafe"]
        command += ["-k", str(socket_path)] if socket_path else ["-b", "127.0.0.1", "-p", str(port)]
        if options.read_only:
            command.append("-r")
        command.append(str(image))
        server = NbdServer(
            kind=REFERENCE,
            options=options,
            command=command,
            workdir=workdir,
            socket_path=socket_path,
            port=port,
            export_names=("",),
            export_size=size,
            block_sizes=REFERENCE_BLOCK_SIZES,
            summary_path=None,
            stderr_path=stderr_path,
        )
    else:
        config = options.config or os.environ.get(CONFIG_ENV, "").strip() or DEFAULT_CONFIG
        sets = (*(SMALL_DEVICE_SETS if options.small else ()), *options.sets)
        clock = options.clock or os.environ.get(CLOCK_ENV, "").strip() or None
        summary_path = workdir / "summary.json"
        command = [*ssdlab_serve_command(), config]
        for assignment in sets:
            command += ["--set", assignment]
        command += ["--seed", str(options.seed)]
        command += ["--socket", str(socket_path)] if socket_path else ["--port", str(port)]
        if clock:
            command += ["--clock", clock]
        if options.read_only:
            command.append("--read-only")
        command += list(options.extra_args)
        # No --quiet: the "listening on" line is part of what the tests check.
        command += ["--output", str(summary_path), "--output-format", "json"]
        size, unit_bytes = _ssdlab_geometry(config, sets)
        server = NbdServer(
            kind="ssdlab",
            options=options,
            command=command,
            workdir=workdir,
            socket_path=socket_path,
            port=port,
            export_names=("", "ssdlab"),
            export_size=size,
            block_sizes=(512, unit_bytes, NBD_MAX_REQUEST_BYTES),
            summary_path=summary_path,
            stderr_path=stderr_path,
        )
    with stderr_path.open("wb") as err:
        server.proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=workdir
        )
    try:
        server._wait_ready()
    except BaseException:
        server._stopped = True  # the failure says why; close only cleans up
        server.close()
        raise
    return server


# --- running clients --------------------------------------------------------------------------


def _tail(text: str | bytes | None, lines: int = 30) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return "\n".join(text.strip().splitlines()[-lines:])


def run(
    command: Sequence[str],
    *,
    server: NbdServer | None = None,
    timeout: float = CLIENT_TIMEOUT_S,
    check: bool = True,
    input: bytes | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a client to completion; fail the test (with both sides' output) if it fails or hangs.

    It runs in ``cwd``, by default the server's scratch directory (fio leaves files behind).
    """
    command = list(command)
    server_part = f"\n--- {server.name} stderr ---\n{server.stderr_tail()}" if server else ""
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            timeout=timeout,
            check=False,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            cwd=cwd or (server.workdir if server else None),
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(
            f"{shlex.join(command)} still running after {timeout:.0f} s\n"
            f"--- stdout ---\n{_tail(err.stdout)}\n--- stderr ---\n{_tail(err.stderr)}"
            f"{server_part}",
            pytrace=False,
        )
    result = subprocess.CompletedProcess(
        command,
        done.returncode,
        done.stdout.decode("utf-8", errors="replace"),
        done.stderr.decode("utf-8", errors="replace"),
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"{shlex.join(command)} exited {result.returncode}\n"
            f"--- stdout ---\n{_tail(result.stdout)}\n--- stderr ---\n{_tail(result.stderr)}"
            f"{server_part}",
            pytrace=False,
        )
    return result


def qemu_io(server: NbdServer, *commands: str, read_only: bool = False) -> str:
    """Run qemu-io commands on the default export; fail on any error or pattern mismatch.

    qemu-io reports a pattern mismatch as "Pattern verification failed" and, depending on its
    version, may still exit 0: the output is checked too.
    """
    argv = [tool("qemu-io"), "-f", "raw"]
    if read_only:
        argv.append("-r")
    argv.append(server.uri())
    for command in commands:
        argv += ["-c", command]
    out = run(argv, server=server)
    text = out.stdout + out.stderr
    bad = [line for line in text.splitlines() if "failed" in line.lower() or "error" in line]
    assert not bad, f"{shlex.join(argv)}:\n{text}\n--- server stderr ---\n{server.stderr_tail()}"
    return text


def nbdinfo_json(server: NbdServer, export: str = "", *, listing: bool = False) -> dict[str, Any]:
    """``nbdinfo --json`` of one export, or with ``listing`` of ``--list`` (every export)."""
    flags = ["--list", "--json"] if listing else ["--json"]
    out = run([tool("nbdinfo"), *flags, server.uri(export)], server=server)
    info: dict[str, Any] = json.loads(out.stdout)
    return info


# --- fio --------------------------------------------------------------------------------------

OPS = ("read", "write", "trim")


def parse_fio_json(stdout: str) -> dict[str, Any]:
    """fio's JSON document, skipping what its nbd engine prints first.

    The nbd engine writes ``fio: connected to NBD server`` (once per job) to stdout before the
    JSON, so the document starts at the first line that is a lone ``{``.
    """
    lines = stdout.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == "{":
            doc, _ = json.JSONDecoder().raw_decode("".join(lines[i:]))
            return dict(doc)
    raise AssertionError(f"no JSON document in fio's output:\n{_tail(stdout)}")


@dataclass
class FioRun:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    doc: dict[str, Any]

    @property
    def jobs(self) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.doc["jobs"]
        return jobs

    def total_ios(self, op: str) -> int:
        return sum(int(job[op]["total_ios"]) for job in self.jobs)

    def io_bytes(self, op: str) -> int:
        return sum(int(job[op]["io_bytes"]) for job in self.jobs)


def run_fio(
    server: NbdServer, options: dict[str, str | int], *, name: str = "job", timeout: float = 0
) -> FioRun:
    """Run one fio job (``--name=name`` plus ``options``) with the nbd engine against ``server``.

    Fails the test if fio exits non-zero or reports an error in any job.
    """
    args = [tool("fio"), f"--name={name}", "--ioengine=nbd", f"--uri={server.uri()}"]
    args += [f"--{key}={value}" for key, value in options.items()]
    args.append("--output-format=json")
    runtime = int(options.get("runtime", 0)) + int(options.get("ramp_time", 0))
    out = run(args, server=server, timeout=timeout or CLIENT_TIMEOUT_S + runtime)
    fio = FioRun(args, out.returncode, out.stdout, out.stderr, parse_fio_json(out.stdout))
    errors = {job["jobname"]: job["error"] for job in fio.jobs if job["error"] != 0}
    assert not errors, (
        f"fio reported errors {errors}\n{shlex.join(args)}\n--- stderr ---\n{_tail(out.stderr)}"
        f"\n--- server stderr ---\n{server.stderr_tail()}"
    )
    return fio


def summary_totals(summary: dict[str, Any], op: str) -> tuple[int, int]:
    """(total_ios, io_bytes) of one direction over the emulator summary's jobs."""
    jobs = summary["jobs"]
    return (
        sum(int(job[op]["total_ios"]) for job in jobs),
        sum(int(job[op]["io_bytes"]) for job in jobs),
    )


# --- file system helpers ----------------------------------------------------------------------


def unmount_quietly(path: Path, *, fuse: bool = False) -> None:
    """Best-effort unmount for cleanup: normal, then lazy; never raises."""
    if not os.path.ismount(path):
        return
    attempts = [["fusermount3", "-u", str(path)], ["fusermount3", "-uz", str(path)]] if fuse else []
    attempts += [["umount", str(path)], ["umount", "-l", str(path)]]
    for attempt in attempts:
        exe = shutil.which(attempt[0], path=_SEARCH_PATH)
        if exe is None:
            continue
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([exe, *attempt[1:]], capture_output=True, timeout=30, check=False)
        if not os.path.ismount(path):
            return
