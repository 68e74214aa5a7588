"""Which pages of a main database file are free, read from what SQLite writes to it.

The database header (page 1) holds the freelist's first trunk page at bytes 32-35 and its total
page count at 36-39, big endian (SQLite's file format, section 1.3.8). A trunk page holds the
next trunk's number (bytes 0-3), a leaf count L (4-7) and L leaf page numbers. Leaf pages hold
nothing SQLite will read back, so their device space can be trimmed; trunk pages hold the list
and stay.

The tracker sees every page written to the file (and page 1 and wanted trunk pages when they are
read, so a reopened database is known too). SQLite writes page 1 before the trunk pages of a
checkpoint, so the chain is walked when the file is synced, when every page of the change is
there: :meth:`resolve` returns the leaves that became free since the last walk.
"""

from __future__ import annotations

import struct

_U32 = struct.Struct(">I")
_HEADER_FREELIST = struct.Struct(">II")

#: Bytes of the database header SQLite writes at the start of page 1.
HEADER_BYTES = 100

#: Pages kept between walks at most (64 MiB of 4 KiB pages). Without syncs (synchronous=OFF)
#: there are no walks; past this the tracker forgets and trims nothing until the next walk.
MAX_RECENT_PAGES = 16384


class FreelistTracker:
    """The free leaf pages of one main database file."""

    def __init__(self) -> None:
        self.page_size = 0
        self.first_trunk = 0
        self.free_count = 0
        self.wal_mode = False
        #: Leaf pages free at the last walk (already trimmed or queued for it).
        self.free_leaves: set[int] = set()
        #: Parsed trunk pages of the last walk: page -> (next trunk, leaves).
        self._trunks: dict[int, tuple[int, tuple[int, ...]]] = {}
        #: Pages seen since the last walk (only the parts a trunk page could use).
        self._recent: dict[int, bytes] = {}
        self._wanted: set[int] = set()
        self._overflowed = False

    def observe_header(self, data: bytes) -> None:
        """Page 1 (or at least its first 100 bytes) was written or read."""
        if len(data) < HEADER_BYTES or data[:16] != b"SQLite format 3\x00":
            return
        raw_size = (data[16] << 8) | data[17]
        self.page_size = 65536 if raw_size == 1 else raw_size
        self.wal_mode = data[18] == 2
        self.first_trunk, self.free_count = _HEADER_FREELIST.unpack_from(data, 32)

    def observe_page(self, page_number: int, data: bytes, *, written: bool) -> None:
        """A whole page was written (or read). Pages read are kept only when a walk needs them."""
        if page_number == 1:
            self.observe_header(data)
        if written or page_number in self._wanted:
            if len(self._recent) >= MAX_RECENT_PAGES:
                self._recent.clear()
                self._overflowed = True
            self._recent[page_number] = data

    def resolve(self) -> list[int]:
        """Walk the chain and return the leaves newly free since the last walk, sorted.

        A trunk page whose content the tracker never saw ends the walk: the leaves found so far
        are certainly free, the rest are left alone (wanted on their next read or write).
        """
        leaves: set[int] = set()
        trunks: dict[int, tuple[int, tuple[int, ...]]] = {}
        self._wanted.clear()
        if self._overflowed:
            # Some pages written since the last walk were not kept: a trunk known from before
            # may be stale. Start over from what the next walk sees.
            self._overflowed = False
            self._recent.clear()
            self._trunks = {}
            return []
        per_trunk = self.page_size // 4 - 2 if self.page_size else 0
        trunk = self.first_trunk
        remaining = self.free_count
        while trunk and remaining > 0 and trunk not in trunks:
            parsed = self._parse_trunk(trunk, per_trunk)
            if parsed is None:
                self._wanted.add(trunk)
                break
            trunks[trunk] = parsed
            next_trunk, trunk_leaves = parsed
            leaves.update(trunk_leaves)
            remaining -= 1 + len(trunk_leaves)
            trunk = next_trunk
        self._trunks = trunks
        self._recent.clear()
        newly_free = sorted(leaves - self.free_leaves)
        self.free_leaves = leaves
        return newly_free

    def _parse_trunk(self, page_number: int, per_trunk: int) -> tuple[int, tuple[int, ...]] | None:
        data = self._recent.get(page_number)
        if data is None:
            return self._trunks.get(page_number)
        next_trunk, count = _HEADER_FREELIST.unpack_from(data, 0)
        if count > per_trunk or 8 + 4 * count > len(data):
            return None  # not a trunk page after all: the file is not what the header says
        leaves = struct.unpack_from(f">{count}I", data, 8)
        return next_trunk, tuple(leaf for leaf in leaves if leaf > 1)

    def forget_pages_from(self, first_page: int) -> None:
        """The file was truncated: pages from ``first_page`` on no longer exist."""
        self.free_leaves = {page for page in self.free_leaves if page < first_page}
