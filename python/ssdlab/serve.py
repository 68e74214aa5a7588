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
went out).
"""

from __future__ import annotations

import json
import os
import signal
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
        tls: str | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_psk: str | os.PathLike[str] | None = None,
        insecure: bool = False,
        image: str | os.PathLike[str] | None = None,
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
            tls=tls,
            tls_cert=_path(tls_cert),
            tls_key=_path(tls_key),
            tls_psk=_path(tls_psk),
            insecure=insecure,
            image=_path(image),
        )

    @property
    def uri(self) -> str:
        """The export's NBD URI, e.g. ``nbd+unix:///ssdlab?socket=/tmp/ssd.sock``."""
        return self._handle.uri

    def start(self) -> Server:
        """Serve on a background thread."""
        self._handle.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop (held replies are delivered first), flush the statistics; returns the summary."""
        self.summary = json.loads(self._handle.stop())
        return self.summary

    def serve_forever(self) -> dict[str, Any]:
        """Serve until SIGINT or SIGTERM, then stop cleanly and return the summary."""

        def terminate(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt

        # SIGINT too: a server started in the background of a script inherits SIGINT ignored.
        previous = {
            signum: signal.signal(signum, terminate) for signum in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            self._handle.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self.stop()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _path(path: str | os.PathLike[str] | None) -> str | None:
    return os.fspath(path) if path is not None else None
