"""The NBD emulator: a simulated, data-driven SSD exported over NBD for real tools.

::

    with ssdlab.Server("noftl", socket="/tmp/ssd.sock", clock="realtime") as server:
        subprocess.run(["fio", "--ioengine=nbd", f"--uri={server.uri}", ...])
    print(server.summary["jobs"][0]["write"]["clat_ns"]["mean"])

``clock="realtime"`` holds every reply until the wall-clock instant the model says the request
completes, so clients measure the modelled latency; ``clock="virtual"`` replies as fast as it
can and reports simulated time. In real time, replies leave early by the client's own share of
a round trip (reply delivery, its processing, its next request's delivery), measured per
connection from the gaps between a reply and the next request (or fixed by
``compensation_ns``; 0 turns it off), so that what the client measures is the model's latency.

With ``tls_cert``/``tls_key`` (X.509, PEM) or ``tls_psk`` (a ``username:hexkey`` file, as
nbdkit and qemu use) clients must upgrade with NBD's STARTTLS (``tls="require"``, the default
then; ``"on"`` lets plain clients in too) and the URI is ``nbds://`` or ``nbds+unix://``. A TCP
``host`` other than loopback needs TLS required, or ``insecure=True``.

Without ``image`` the export's data lives only as long as the server. With ``image=PATH`` it
persists in a sparse file of the export's size (created if missing): writes go through to it, a
FLUSH or FUA write makes them durable, and the next server started with the same image begins
with the same contents.

The summary has fio's job layout (simulated latencies), the ``ssd`` section of ``ssdlab run``
and an ``emulator`` section (connections, error replies, deadline misses and how late replies
went out, the limits, connections the server closed, peak buffered bytes, TLS and the image).

Limits keep hostile or broken clients from taking the server down (defaults from
``Server.default_limits()``): per connection, ``max_requests_in_flight`` and
``max_buffered_bytes`` (input and replies held; beyond them the server stops reading the
client's socket); ``max_connections`` in transmission (a new one evicts the connection quiet
longest) and ``max_handshakes`` still negotiating (the oldest is closed); ``handshake_timeout_s``
for the whole handshake, ``stall_timeout_s`` for a connection waiting on its client (the rest of
a request, or room for replies it does not read) and ``idle_timeout_s`` (``None`` or 0: never)
for one with nothing outstanding. The limits apply to TLS connections alike: the handshake
timeout covers the TLS handshake, and buffered bytes are counted after decryption.

A server serves once: ``start()`` after ``stop()`` raises ``SsdlabError``.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType, TracebackType
from typing import Any

from ssdlab import _core
from ssdlab.config import Overrides, parse_overrides, resolve

CLOCKS = ("realtime", "virtual")
TLS_MODES = ("off", "on", "require")


class Server:
    """An NBD export of a simulated SSD (Unix socket or TCP on 127.0.0.1 by default)."""

    def __init__(
        self,
        config: str | os.PathLike[str],
        *,
        socket: str | os.PathLike[str] | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        clock: str = "realtime",
        seed: int = 0,
        overrides: Overrides = None,
        stats_log: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        export_name: str = "ssdlab",
        miss_threshold_ns: int = 10_000,
        compensation_ns: int | None = None,
        max_connections: int | None = None,
        max_handshakes: int | None = None,
        handshake_timeout_s: float | None = None,
        idle_timeout_s: float | None = None,
        stall_timeout_s: float | None = None,
        max_requests_in_flight: int | None = None,
        max_buffered_bytes: int | None = None,
        tls: str | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_psk: str | os.PathLike[str] | None = None,
        insecure: bool = False,
        image: str | os.PathLike[str] | None = None,
        power_loss_at_ns: int | None = None,
        power_loss_on_signal: bool = False,
    ) -> None:
        if (socket is None) == (port is None):
            raise ValueError("give exactly one of socket= and port=")
        if clock not in CLOCKS:
            raise ValueError(f"clock: expected one of {', '.join(CLOCKS)}, got {clock!r}")
        if tls is not None and tls not in TLS_MODES:
            raise ValueError(f"tls: expected one of {', '.join(TLS_MODES)}, got {tls!r}")
        toml_text, source_name = resolve(config)
        self.clock = clock
        self.summary: dict[str, Any] | None = None
        self._handle = _core.Server(
            toml_text,
            source_name,
            parse_overrides(overrides),
            seed,
            socket=os.fspath(socket) if socket is not None else None,
            port=port,
            host=host,
            clock=clock,
            stats_log=os.fspath(stats_log) if stats_log is not None else None,
            read_only=read_only,
            export_name=export_name,
            miss_threshold_ns=miss_threshold_ns,
            compensation_ns=compensation_ns,
            max_connections=max_connections,
            max_handshakes=max_handshakes,
            handshake_timeout_s=handshake_timeout_s,
            idle_timeout_s=idle_timeout_s,
            stall_timeout_s=stall_timeout_s,
            max_requests_in_flight=max_requests_in_flight,
            max_buffered_bytes=max_buffered_bytes,
            tls=tls,
            tls_cert=_path(tls_cert),
            tls_key=_path(tls_key),
            tls_psk=_path(tls_psk),
            insecure=insecure,
            image=_path(image),
            power_loss_at_ns=power_loss_at_ns,
            power_loss_on_signal=power_loss_on_signal,
        )

    @staticmethod
    def default_limits() -> dict[str, float]:
        """The limits used when a keyword is not given (``idle_timeout_s`` 0: none)."""
        return dict(_core.Server.default_limits())

    @property
    def uri(self) -> str:
        """The export's NBD URI, e.g. ``nbd+unix:///ssdlab?socket=/tmp/ssd.sock``."""
        return self._handle.uri

    def take_warnings(self) -> list[str]:
        """Warnings raised while serving since the last call (e.g. the stats log failed)."""
        return self._handle.take_warnings()

    def start(self) -> Server:
        """Serve on a background thread; raises ``SsdlabError`` once stopped."""
        self._handle.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop (held replies are delivered first), flush the statistics; returns the summary."""
        self.summary = self._handle.stop()
        return self.summary

    def serve_forever(self, on_warning: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Serve until SIGINT or SIGTERM, then stop cleanly and return the summary.

        Warnings go to ``on_warning`` as they happen (default: a line on stderr).
        """
        report = on_warning or _print_warning
        with interrupt_on_signals(), suppress(KeyboardInterrupt):
            self._handle.serve_forever(report)
        summary = self.stop()
        for message in self.take_warnings():
            report(message)
        return summary

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` inside the block (handlers restored after).

    SIGINT too: a server started in the background of a script inherits SIGINT ignored.
    """

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {
        signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _print_warning(message: str) -> None:
    print(f"ssdlab serve: warning: {message}", file=sys.stderr, flush=True)


def _path(path: str | os.PathLike[str] | None) -> str | None:
    return os.fspath(path) if path is not None else None
