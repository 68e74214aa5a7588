"""TLS and persistent images of ``ssdlab serve``, with real clients.

nbdinfo, nbdcopy (libnbd) and qemu-io (qemu's GnuTLS client) connect over ``nbds+unix://`` and
``nbds://127.0.0.1`` with X.509 certificates made here by the ``openssl`` command, and with a
PSK file; a plain client is refused by ``--tls=require``; bad credential files and a plain
export off loopback are clear errors. ``--image`` keeps what qemu-io wrote across a restart.
``ssdlab.Server`` gets the same through its parameters, checked with Python's ``ssl`` client.
A missing client or ``openssl`` command skips the tests that need it (``make test-deps``
installs them). Every server listens on a Unix socket or on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import random
import secrets
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ssdlab
from nbd_support import MIB, NbdServer, require_emulator, run, tool
from ssdlab.cli import format_emulator
from support import PRESET, TINY_OVERRIDES, connect

StartServer = Callable[..., NbdServer]

#: ``ssdlab serve`` itself, for the runs that must fail before serving.
SERVE = [sys.executable, "-m", "ssdlab", "serve"]
#: Seconds a command that should fail at once may take.
QUICK_S = 60


@pytest.fixture(autouse=True)
def _emulator_only() -> None:
    require_emulator("TLS and --image are ssdlab serve's flags")


def openssl(*args: str, cwd: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is missing (Debian package openssl): no certificates")
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def certificates(tmp_path: Path) -> Path:
    """A CA and a server certificate for localhost and 127.0.0.1, in the layout qemu's
    ``tls-creds-x509`` and libnbd's ``tls-certificates`` read: ca-cert.pem, server-*.pem."""
    d = tmp_path / "pki"
    d.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl(
        "req", "-x509", *ec, "-keyout", "ca-key.pem", "-out", "ca-cert.pem", "-days", "2",
        "-subj", "/CN=ssdlab test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d,
    )  # fmt: skip
    openssl(
        "req", *ec, "-keyout", "server-key.pem", "-out", "server.csr", "-subj", "/CN=localhost",
        cwd=d,
    )  # fmt: skip
    (d / "server.ext").write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        "extendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n",
        encoding="utf-8",
    )
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca-cert.pem", "-CAkey", "ca-key.pem",
        "-CAcreateserial", "-out", "server-cert.pem", "-days", "2", "-extfile", "server.ext",
        cwd=d,
    )  # fmt: skip
    return d


@pytest.fixture
def psk_dir(tmp_path: Path) -> Path:
    """A directory with ``keys.psk`` (qemu's ``tls-creds-psk`` looks for that name)."""
    d = tmp_path / "psk"
    d.mkdir()
    (d / "keys.psk").write_text(f"alice:{secrets.token_hex(32)}\n", encoding="utf-8")
    return d


def x509_args(pki: Path) -> tuple[str, ...]:
    return ("--tls-cert", str(pki / "server-cert.pem"), "--tls-key", str(pki / "server-key.pem"))


def tls_uri(server: NbdServer, query: str, user: str = "") -> str:
    """libnbd's URI of the default export over TLS (``user@`` names the PSK identity)."""
    if server.socket_path is not None:
        return f"nbds+unix://{user}{'@' if user else ''}/?socket={server.socket_path}&{query}"
    return f"nbds://{user}{'@' if user else ''}127.0.0.1:{server.port}/?{query}"


def qemu_tls_io(server: NbdServer, creds: str, *commands: str) -> str:
    """qemu-io through qemu's NBD driver with TLS credentials ``creds`` (a --object value)."""
    if server.socket_path is not None:
        where = f"server.type=unix,server.path={server.socket_path}"
    else:
        where = f"server.type=inet,server.host=127.0.0.1,server.port={server.port}"
    argv = [tool("qemu-io"), "--object", f"{creds},id=tls0,endpoint=client", "--image-opts"]
    # Over a Unix socket qemu has no host name to check the certificate against: give it.
    argv.append(f"driver=nbd,{where},export=ssdlab,tls-creds=tls0,tls-hostname=localhost")
    out = run([*argv, *qemu_commands(*commands)], server=server)
    text = out.stdout + out.stderr
    bad = [line for line in text.splitlines() if "failed" in line.lower() or "error" in line]
    assert not bad, text
    return text


def qemu_commands(*commands: str) -> list[str]:
    return [arg for command in commands for arg in ("-c", command)]


def nbdinfo(server: NbdServer, uri: str) -> dict[str, object]:
    out = run([tool("nbdinfo"), "--json", uri], server=server)
    info: dict[str, object] = json.loads(out.stdout)
    return info


# --- TLS with certificates ---------------------------------------------------------------------


@pytest.mark.parametrize("tcp", [False, True], ids=["unix", "tcp"])
def test_x509_clients(nbd_server: StartServer, certificates: Path, tcp: bool) -> None:
    server = nbd_server(small=True, tcp=tcp, extra_args=x509_args(certificates))
    uri = tls_uri(server, f"tls-certificates={certificates}")
    info = nbdinfo(server, uri)
    assert info["TLS"] is True
    creds = f"tls-creds-x509,dir={certificates}"
    qemu_tls_io(server, creds, "write -P 0xab 0 1M", "aio_write -P 0x5a 4M 64k", "aio_flush")
    qemu_tls_io(server, creds, "read -P 0xab 0 1M", "read -P 0x5a 4M 64k")
    # nbdcopy runs several connections with many requests in flight, all inside TLS.
    data = random.Random(9).randbytes(8 * MIB)
    source = server.workdir / "source.bin"
    source.write_bytes(data)
    run([tool("nbdcopy"), str(source), uri], server=server)
    copy = server.workdir / "copy.bin"
    run([tool("nbdcopy"), uri, str(copy)], server=server)
    assert copy.read_bytes()[: len(data)] == data
    summary = server.stop()
    assert summary is not None
    assert summary["emulator"]["tls"] == {"mode": "require", "credentials": "x509"}
    # Read after the stop: the line is printed just after the socket starts listening.
    assert (server.announced_uri() or "").startswith("nbds")


def test_require_refuses_a_plain_client(nbd_server: StartServer, certificates: Path) -> None:
    server = nbd_server(small=True, extra_args=x509_args(certificates))
    plain = run([tool("nbdinfo"), server.uri()], server=server, check=False)
    assert plain.returncode != 0
    # A client that trusts another CA fails its handshake (qemu checks the chain; libnbd 1.14
    # does not over a Unix socket); the server goes on.
    other = certificates.parent / "other-ca"
    other.mkdir()
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca-key.pem", "-out", "ca-cert.pem", "-days", "2", "-subj", "/CN=other",
        cwd=other,
    )  # fmt: skip
    opts = f"driver=nbd,server.type=unix,server.path={server.socket_path},export=ssdlab"
    untrusted = run(
        [
            tool("qemu-io"),
            "--object",
            f"tls-creds-x509,id=tls0,endpoint=client,dir={other}",
            "--image-opts",
            f"{opts},tls-creds=tls0,tls-hostname=localhost",
            "-c",
            "read 0 4k",
        ],
        server=server,
        check=False,
    )
    assert untrusted.returncode != 0
    assert nbdinfo(server, tls_uri(server, f"tls-certificates={certificates}"))["TLS"] is True


def test_tls_on_serves_plain_and_tls_clients(nbd_server: StartServer, certificates: Path) -> None:
    server = nbd_server(small=True, extra_args=(*x509_args(certificates), "--tls=on"))
    assert nbdinfo(server, server.uri())["TLS"] is False
    assert nbdinfo(server, tls_uri(server, f"tls-certificates={certificates}"))["TLS"] is True


# --- TLS with pre-shared keys ------------------------------------------------------------------


def test_psk_clients(nbd_server: StartServer, psk_dir: Path) -> None:
    keys = psk_dir / "keys.psk"
    server = nbd_server(small=True, clock="realtime", extra_args=("--tls-psk", str(keys)))
    assert nbdinfo(server, tls_uri(server, f"tls-psk-file={keys}", user="alice"))["TLS"] is True
    creds = f"tls-creds-psk,dir={psk_dir},username=alice"
    qemu_tls_io(server, creds, "write -P 0x77 1M 256k", "flush", "read -P 0x77 1M 256k")
    # Another key under the same name is refused.
    wrong = psk_dir.parent / "wrong"
    wrong.mkdir()
    (wrong / "keys.psk").write_text(f"alice:{secrets.token_hex(32)}\n", encoding="utf-8")
    refused = run(
        [tool("nbdinfo"), tls_uri(server, f"tls-psk-file={wrong / 'keys.psk'}", user="alice")],
        server=server,
        check=False,
    )
    assert refused.returncode != 0
    summary = server.stop()
    assert summary is not None
    assert summary["emulator"]["tls"]["credentials"] == "psk"
    assert summary["jobs"][0]["write"]["total_ios"] >= 1


# --- errors before serving ---------------------------------------------------------------------


def serve_error(tmp_path: Path, *args: str) -> str:
    """Run ``ssdlab serve`` expecting it to refuse at once; its one-line error."""
    done = subprocess.run(
        [*SERVE, "noftl", "--socket", str(tmp_path / "never.sock"), *args],
        capture_output=True,
        text=True,
        timeout=QUICK_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = (done.stderr.strip().splitlines() or [""])[-1]
    assert last.startswith("ssdlab: error: "), done.stderr
    return last


def test_bad_credentials_name_the_file(tmp_path: Path, certificates: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not PEM at all\n", encoding="utf-8")
    cert, key = certificates / "server-cert.pem", certificates / "server-key.pem"
    assert f"{junk}: no PEM certificate" in serve_error(
        tmp_path, "--tls-cert", str(junk), "--tls-key", str(key)
    )
    assert f"{junk}: no PEM private key" in serve_error(
        tmp_path, "--tls-cert", str(cert), "--tls-key", str(junk)
    )
    other = certificates / "ca-key.pem"
    assert f"{other}: the private key does not belong to the certificate in {cert}" in (
        serve_error(tmp_path, "--tls-cert", str(cert), "--tls-key", str(other))
    )
    missing = tmp_path / "missing.psk"
    assert f"{missing}: No such file" in serve_error(tmp_path, "--tls-psk", str(missing))
    assert f"{junk}: line 1: no ':'" in serve_error(tmp_path, "--tls-psk", str(junk))
    assert "--tls=require needs credentials" in serve_error(tmp_path, "--tls=require")


def test_plain_text_off_loopback_needs_insecure(tmp_path: Path) -> None:
    # Refused before any socket is bound: nothing listens off loopback during this test.
    done = subprocess.run(
        [*SERVE, "noftl", "--port", "0", "--bind", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=QUICK_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "without TLS" in done.stderr, done.stderr
    assert "--insecure" in done.stderr, done.stderr


# --- persistent image --------------------------------------------------------------------------


def test_image_persists_across_restarts(nbd_server: StartServer, tmp_path: Path) -> None:
    image = tmp_path / "export.img"
    args = ("--image", str(image))
    first = nbd_server(small=True, extra_args=args)
    commands = qemu_commands("write -P 0xab 0 1M", "write -P 0x5a 3M 64k", "discard 512k 256k")
    run([tool("qemu-io"), "-f", "raw", first.uri(), *commands], server=first)
    summary = first.stop()
    assert summary is not None
    assert summary["emulator"]["image"]["loaded_bytes"] == 0
    assert image.stat().st_size == first.export_size
    # Sparse: only what was written takes space.
    assert image.stat().st_blocks * 512 < 4 * MIB

    second = nbd_server(small=True, extra_args=args)
    commands = qemu_commands(
        "read -P 0xab 0 512k",
        "read -P 0 512k 256k",  # the discarded range
        "read -P 0xab 768k 256k",
        "read -P 0x5a 3M 64k",
        "read -P 0 4M 1M",  # never written
    )
    out = run([tool("qemu-io"), "-f", "raw", "-r", second.uri(), *commands], server=second)
    assert "Pattern verification failed" not in out.stdout + out.stderr
    summary = second.stop()
    assert summary is not None
    assert summary["emulator"]["image"]["loaded_bytes"] == 1 * MIB - 256 * 1024 + 64 * 1024
    # Rebuilding the device is not part of what was served.
    assert summary["jobs"][0]["write"]["total_ios"] == 0

    # A device of another size does not silently truncate or extend the image.
    error = serve_error(tmp_path, *args)
    assert f"{image}: the image is {first.export_size} bytes but the export is" in error


# --- the Python API, with Python's own TLS client ----------------------------------------------


class StartTlsClient:
    """Just enough NBD over STARTTLS (Python's ``ssl``): GO, then simple requests."""

    def __init__(self, path: str, ca: Path) -> None:
        raw = connect(path)
        self.sock: socket.socket = raw
        assert self._recv(18)[:8] == b"NBDMAGIC"
        raw.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
        self._option(5)  # STARTTLS
        assert self._reply()[1] == 1
        context = ssl.create_default_context(cafile=str(ca))
        self.sock = context.wrap_socket(raw, server_hostname="localhost")
        self._option(7, struct.pack(">IH", 0, 0))  # GO, default export, no info requests
        while (kind := self._reply()[1]) != 1:
            assert kind == 3, hex(kind)  # NBD_REP_INFO

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data

    def _option(self, option: int, data: bytes = b"") -> None:
        self.sock.sendall(struct.pack(">QII", 0x49484156454F5054, option, len(data)) + data)

    def _reply(self) -> tuple[int, int, bytes]:
        _, option, kind, length = struct.unpack(">QIII", self._recv(20))
        return option, kind, self._recv(length)

    def request(self, command: int, offset: int, length: int, payload: bytes = b"") -> bytes:
        self.sock.sendall(struct.pack(">IHHQQI", 0x25609513, 0, command, 1, offset, length))
        self.sock.sendall(payload)
        header = self._recv(16)
        assert struct.unpack(">I", header[4:8])[0] == 0, "error reply"
        return self._recv(length) if command == 0 else b""

    def close(self) -> None:
        self.sock.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 0, 0, 0))
        self.sock.close()


def test_python_server_with_tls_and_an_image(tmp_path: Path, certificates: Path) -> None:
    socket_path = Path(tempfile.mkdtemp(prefix="ssdtls-", dir="/tmp")) / "nbd.sock"
    image = tmp_path / "export.img"
    options: dict[str, Any] = {
        "overrides": list(TINY_OVERRIDES),
        "socket": socket_path,
        "clock": "virtual",
        "tls_cert": certificates / "server-cert.pem",
        "tls_key": certificates / "server-key.pem",
        "image": image,
    }
    data = random.Random(5).randbytes(64 * 1024)
    with ssdlab.Server(PRESET, **options) as server:
        assert server.uri.startswith("nbds+unix://")
        client = StartTlsClient(str(socket_path), certificates / "ca-cert.pem")
        client.request(1, 8192, len(data), data)  # WRITE
        client.request(3, 0, 0)  # FLUSH
        client.close()
    assert server.summary is not None
    assert server.summary["emulator"]["image"]["syncs"] >= 2  # the FLUSH and the shutdown
    with ssdlab.Server(PRESET, **options) as server:
        client = StartTlsClient(str(socket_path), certificates / "ca-cert.pem")
        assert client.request(0, 8192, len(data)) == data
        client.close()
    assert server.summary is not None
    assert server.summary["emulator"]["image"]["loaded_bytes"] == len(data)
    socket_path.parent.rmdir()


def test_python_server_argument_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tls: expected one of off, on, require"):
        ssdlab.Server(PRESET, overrides=list(TINY_OVERRIDES), port=0, tls="yes")
    with pytest.raises(ssdlab.ConfigError, match="--insecure"):
        ssdlab.Server(PRESET, overrides=list(TINY_OVERRIDES), port=0, host="0.0.0.0")
    with pytest.raises(ssdlab.ConfigError, match="--tls=on needs credentials"):
        ssdlab.Server(PRESET, overrides=list(TINY_OVERRIDES), port=0, tls="on")
    missing = tmp_path / "missing.img"
    with pytest.raises(ssdlab.ConfigError, match="does not exist, and a read-only export"):
        ssdlab.Server(PRESET, overrides=list(TINY_OVERRIDES), port=0, read_only=True, image=missing)


def test_python_server_tls_under_small_limits(tmp_path: Path, certificates: Path) -> None:
    """TLS and the limits together: pipelined requests in TLS records get correct replies
    under a 2-request, 1 MiB budget, and a client that stalls in the middle of the TLS
    handshake (a byte at a time) is closed by the handshake timeout."""
    socket_path = Path(tempfile.mkdtemp(prefix="ssdtls-", dir="/tmp")) / "nbd.sock"
    piece, pieces = 128 * 1024, 16
    data = random.Random(9).randbytes(piece * pieces)
    with ssdlab.Server(
        PRESET,
        overrides=list(TINY_OVERRIDES),
        socket=socket_path,
        clock="virtual",
        tls_cert=certificates / "server-cert.pem",
        tls_key=certificates / "server-key.pem",
        max_requests_in_flight=2,
        max_buffered_bytes=MIB,
        handshake_timeout_s=0.5,
    ) as server:
        client = StartTlsClient(str(socket_path), certificates / "ca-cert.pem")
        writes = b"".join(
            struct.pack(">IHHQQI", 0x25609513, 0, 1, i, i * piece, piece)
            + data[i * piece : (i + 1) * piece]
            for i in range(pieces)
        )
        client.sock.sendall(writes)
        cookies = []
        for _ in range(pieces):
            _, error, cookie = struct.unpack(">IIQ", client._recv(16))
            assert error == 0
            cookies.append(cookie)
        assert sorted(cookies) == list(range(pieces))
        reads = b"".join(
            struct.pack(">IHHQQI", 0x25609513, 0, 0, i, (pieces - 1 - i) * piece, piece)
            for i in range(pieces)
        )
        client.sock.sendall(reads)
        for _ in range(pieces):
            _, error, cookie = struct.unpack(">IIQ", client._recv(16))
            assert error == 0
            at = (pieces - 1 - cookie) * piece
            assert client._recv(piece) == data[at : at + piece], f"read {cookie}"
        client.close()

        # STARTTLS, then a TLS record header announcing 512 bytes and a byte every 100 ms.
        raw = connect(str(socket_path))
        assert raw.recv(18)[:8] == b"NBDMAGIC"
        raw.sendall(struct.pack(">I", 3) + struct.pack(">QII", 0x49484156454F5054, 5, 0))
        assert struct.unpack(">QIII", raw.recv(20))[2] == 1  # ACK
        started = time.monotonic()
        raw.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00]))
        closed_after = None
        while time.monotonic() - started < 5:
            time.sleep(0.1)
            try:
                raw.sendall(b"\x01")
            except OSError:  # EPIPE: the server closed the socket
                closed_after = time.monotonic() - started
                break
        raw.close()
        assert closed_after is not None, "the stalled TLS handshake is still open"
        assert 0.4 <= closed_after < 1.5, closed_after
    summary = server.summary
    assert summary is not None
    emulator = summary["emulator"]
    assert emulator["tls"]["mode"] == "require"
    assert emulator["closed_by_server"]["handshake_timeouts"] == 1
    assert emulator["limits"]["max_requests_in_flight"] == 2
    assert emulator["backpressure_waits"] > 0
    assert summary["jobs"][0]["read"]["total_ios"] == pieces
    # The normal output of ``ssdlab serve`` shows both.
    text = format_emulator(emulator)
    assert "handshake timeouts=1" in text
    assert "TLS require (x509 credentials)" in text
    socket_path.parent.rmdir()
