"""`NativeFlash`: the flash of a :class:`~ssdlab.Device` without its FTL (NoFTL).

A host storage manager (a database's, say) that does its own mapping, garbage collection and
wear levelling drives the flash through this: read a page, program a page with its out-of-band
(OOB) area, read the OOB alone, erase a block. Every call is timed in the device's simulated
time on the device's own dies and channels: it is issued at ``at_ns`` (the device's clock when
``None``; never earlier than the clock, which moves to it) and returns its completion time.
Calls on different dies overlap, calls on one die serialise, and channel transfers contend as
they do for block requests.

Addresses are flat integers. Block ``b`` lies on die ``n = b % dies`` counted round the
channels first (channel ``n % channels``, die ``n // channels`` within it), and the blocks of
a die alternate over its planes, so consecutive block numbers lie on different channels, then
dies: striping by block number uses the device's parallelism (:meth:`NativeFlash.locate`).
Page ``p`` is page ``p % pages_per_block`` of block ``p // pages_per_block``.

NAND's rules are enforced: a page is programmed once between erases, the pages of a block in
order, and an erase past the endurance (``cell.endurance_cycles``) fails and makes the block
bad; a violation raises :class:`~ssdlab.NandRuleError` naming the address and the rule. An
erased page reads as ``0xFF`` bytes, and the OOB bytes a program leaves out stay ``0xFF``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ssdlab import _core

_U64_MAX = 2**64 - 1
_U32_MAX = 2**32 - 1


def _int(name: str, value: object, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if not 0 <= value <= high:
        raise ValueError(f"{name}: expected an integer in 0 .. {high}, got {value}")
    return int(value)


def _at(at_ns: int | None) -> int | None:
    return None if at_ns is None else _int("at_ns", at_ns, _U64_MAX)


def _bytes(name: str, value: object) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise ValueError(f"{name}: expected bytes, got {type(value).__name__}")
    return bytes(value)


class NativeFlash:
    """The native flash interface of a device; get it with :meth:`ssdlab.Device.native`.

    After that call the device's block interface refuses requests (the flash has one owner).
    Device statistics (:meth:`ssdlab.Device.stats`) count native operations too.
    """

    __slots__ = ("_handle", "geometry")

    def __init__(self, handle: _core.NativeFlash) -> None:
        self._handle = handle
        #: channels, dies_per_channel, planes_per_die, blocks_per_plane, pages_per_block,
        #: page_bytes, oob_bytes, endurance, dies, total_blocks, total_pages.
        self.geometry: dict[str, int] = handle.geometry

    def __repr__(self) -> str:
        g = self.geometry
        return (
            f"NativeFlash(blocks={g['total_blocks']}, pages_per_block={g['pages_per_block']}, "
            f"page_bytes={g['page_bytes']}, oob_bytes={g['oob_bytes']})"
        )

    @property
    def stores_data(self) -> bool:
        """Whether page data is kept (the device was made with ``store_data=True``); the OOB
        is always kept."""
        return self._handle.stores_data

    def locate(self, block: int) -> tuple[int, int, int, int]:
        """``(channel, die within the channel, plane within the die, block within the plane)``."""
        return self._handle.locate(_int("block", block, _U32_MAX))

    def program(self, page: int, data: bytes, oob: bytes = b"", at_ns: int | None = None) -> int:
        """Program ``page`` with ``data`` (exactly ``page_bytes``) and ``oob`` (at most
        ``oob_bytes``). Returns when the program ends, in ns."""
        return self._handle.program(
            _int("page", page, _U64_MAX), _bytes("data", data), _bytes("oob", oob), _at(at_ns)
        )

    def read(self, page: int, at_ns: int | None = None) -> tuple[bytes, bytes, int]:
        """``(data, oob, done_ns)``: the page's data and its whole OOB area (``oob_bytes``).
        Needs a device that stores data (else :class:`~ssdlab.DeviceError`)."""
        return self._handle.read(_int("page", page, _U64_MAX), _at(at_ns))

    def read_oob(self, page: int, at_ns: int | None = None) -> tuple[bytes, int]:
        """``(oob, done_ns)``: the page's OOB area alone (array time, a tiny transfer)."""
        return self._handle.read_oob(_int("page", page, _U64_MAX), _at(at_ns))

    def erase(self, block: int, at_ns: int | None = None) -> int:
        """Erase ``block``. Returns when the erase ends. An erase of a block that has reached
        its endurance fails with :class:`~ssdlab.NandRuleError` and the block becomes bad."""
        return self._handle.erase(_int("block", block, _U32_MAX), _at(at_ns))

    def erase_count(self, block: int) -> int:
        return self._handle.erase_count(_int("block", block, _U32_MAX))

    def erase_counts(self) -> list[int]:
        """Erase count of every block, by block number."""
        return self._handle.erase_counts()

    def bad_blocks(self) -> list[int]:
        """Blocks that wore out, ascending."""
        return self._handle.bad_blocks()

    def is_erased(self, page: int) -> bool:
        return self._handle.is_erased(_int("page", page, _U64_MAX))

    def next_page(self, block: int) -> int:
        """Index within ``block`` of its next programmable page (``pages_per_block`` when
        full)."""
        return self._handle.next_page(_int("block", block, _U32_MAX))

    def counters(self) -> dict[str, Any]:
        """reads, programs, erases, oob_reads, rule_violations, worn_out_blocks,
        busy_ns_per_die (device die order: channel-major) and now_ns."""
        return self._handle.counters()
