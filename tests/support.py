"""Constants and helpers the tests share (imported as ``support``; fixtures are in conftest)."""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path
from types import ModuleType

#: Shrinks any preset to 2 dies x 48 blocks x 48 pages of 4 KiB (18 MiB of flash, 25% spare:
#: enough for two placement handles). 48 pages per
#: block is a multiple of 2, 3 and 4, so MLC, TLC and QLC wordlines fit.
TINY_OVERRIDES = (
    "geometry.channels=1",
    "geometry.chips_per_channel=1",
    "geometry.dies_per_chip=2",
    "geometry.planes_per_die=1",
    "geometry.blocks_per_plane=48",
    "geometry.pages_per_block=48",
    "geometry.page_size_bytes=4096",
    "geometry.over_provisioning=0.25",
)

PRESET = "tlc"

#: A mixed random job of a few thousand 4 KiB requests inside the tiny device.
RANDRW_JOB = """\
; a small mixed job for tests
[global]
rw=randrw
rwmixread=70
bs=4k
size=4m
iodepth=8
number_ios=3000

[mixed]
"""

#: Two jobs run one after the other (stonewall): a sequential fill, then random reads of it.
TWO_JOBS = """\
[global]
bs=4k
size=2m
iodepth=4

[fill]
rw=write

[reread]
stonewall
rw=randread
number_ios=500
"""


def set_args(overrides: tuple[str, ...] = TINY_OVERRIDES) -> list[str]:
    """The overrides as ``--set`` arguments for the CLI."""
    return [arg for item in overrides for arg in ("--set", item)]


def load_bench(name: str) -> ModuleType:
    """Import ``benches/<name>.py`` (not a package) as module ``name``."""
    path = Path(__file__).resolve().parent.parent / "benches" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class PowerCut:
    """Cuts the power of a SQLite store (``ssdlab.sqlite.store.DeviceStore``) at its
    ``writes``-th device write: that write and every later one vanish, as everything not
    synced does (``store.crash()``). Use as a context manager; ``happened`` says whether it
    struck before the block ended. It counts the writes that take the store's Python path, so
    the store's handles must not be compiled: connect with ``DeviceVfs.compiled`` off."""

    def __init__(self, store: object, writes: int) -> None:
        vfs = store.vfs  # type: ignore[attr-defined]
        compiled = (
            vfs is not None
            and vfs.compiled
            and any(
                vfs._compiled_target(stored) is not None
                for stored in store.files.values()  # type: ignore[attr-defined]
            )
        )
        if compiled:
            raise AssertionError(
                "PowerCut: this store's handles are compiled and write without the Python "
                "path it counts; connect with DeviceVfs.compiled = False"
            )
        self.store = store
        self.left = writes
        self._write = store.write  # type: ignore[attr-defined]

    @property
    def happened(self) -> bool:
        return self.left <= 0

    def _write_until_the_cut(self, stored: object, data: bytes, offset: int) -> None:
        self.left -= 1
        if self.left == 0:
            self.store.crash()  # type: ignore[attr-defined]
            return
        self._write(stored, data, offset)

    def __enter__(self) -> PowerCut:
        self.store.write = self._write_until_the_cut  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.write = self._write  # type: ignore[attr-defined]


def connect(address: str | tuple[str, int], timeout: float = 10) -> socket.socket:
    """A stream socket connected to a Unix socket path or a (host, port), with a timeout. It is
    closed again if the connection fails: left open, its warning would fail whichever test
    runs next (warnings are errors)."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
    except OSError:
        sock.close()
        raise
    return sock
