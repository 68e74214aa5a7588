"""NoFTL's storage manager: SQLite's pages mapped straight onto native flash by the host.

NoFTL (Hardock, Petrov, Gottstein, Buchmann; VLDB 2013 demo) removes the SSD's FTL: the flash
exposes read page, program page and erase block (:class:`ssdlab.NativeFlash`), and the
database's storage manager maps its pages to flash pages, collects garbage and levels wear,
using what it knows. Here that storage manager is the SQLite coupling's store
(:class:`HostFtlStore`, a :class:`~ssdlab.sqlite.store.DeviceStore` whose device requests go
to a :class:`HostFtl` instead of a block interface), selected by ``connect(..., backend="native")``.

**Space.** The store keeps its extent layout (files are lists of extents of a logical page
space, as a tablespace is a list of extents), but the logical space is the host FTL's own:
``logical_pages`` flash pages' worth: by default as many as the device's block interface
exports (its configured over-provisioning becomes the host's spare space, so both are compared
on equal terms), or the usable blocks less ``spare_fraction`` of them; never fewer spare blocks
than GC's reserve and the open blocks. A logical page is a
flash page: the database page size is the flash page size. A write goes out of place to the
next free page of an open block; the old copy becomes invalid.

**What the engine knows.** Everything the store deallocates is dead at once and never copied
by GC: pages that joined SQLite's freelist (at the checkpoint's sync), WAL frames behind a
restarted or truncated WAL, journals and deleted or truncated files -- the store's trims.

**Streams and dies.** Writes of the main database, of the logs (WAL, rollback journal), of
temporary files and of GC go to different open blocks (one per stream and die), so data of one
lifetime shares a block. A stream's pages go round-robin over the dies: the pages of one
request (a commit's gathered WAL frames, a checkpoint's run of pages) are programmed on
different dies at once, and the request waits for the last. Reads of several pages overlap
likewise.

**GC and wear.** When the free blocks fall to ``gc_free_blocks``, GC runs before the write
(the host waits for it, a foreground collection): a victim is chosen among the closed blocks
by the host's own valid counts, greedy (fewest valid pages) or cost-benefit (LFS: age x (1 - u)
/ 2u, age in sequence numbers since the block closed), its valid pages are read and programmed
into the GC stream's open block on the victim's die, and it is erased. Free blocks are handed
out least-worn first, per die (dynamic wear levelling as erase-count-aware allocation); when
the most-erased block runs ``wear_gap`` erases ahead of the least-erased block holding data,
that cold block is the next victim (static wear levelling: its long-lived data moves onto a
worn block). A block whose erase fails at the endurance limit is retired.

**Recovery.** Each programmed page's out-of-band area holds (file id, page within the file,
sequence number) -- 16 bytes, ``OOB``. The page map lives in host RAM only. After a power loss
(:meth:`HostFtl.power_loss`, called by :func:`ssdlab.sqlite.crash`) the map, the valid counts
and the open blocks are gone; :meth:`HostFtl.recover` reads the OOB of every programmed page
(issued together, so the dies scan in parallel), keeps for each (file, page) the copy with the
highest sequence number, and rebuilds the map through the store's catalog -- files, their ids
and extents, sizes and the sequence number of each deallocation, which the store keeps as
durable metadata (as it already keeps file sizes). A copy older than its page's deallocation,
or of a file that no longer exists, is dead. Partly written blocks are closed, not reopened.
The scan's simulated time is in ``recoveries``.
"""

from __future__ import annotations

import struct
from typing import Any

from ssdlab import _core
from ssdlab.sqlite.freelist import FreelistTracker
from ssdlab.sqlite.store import (
    EXTENT_BYTES,
    ROLE_JOURNAL,
    ROLE_MAIN,
    ROLE_OTHER,
    ROLE_WAL,
    TRIM_ALIGN,
    DeviceStore,
    ExtentAllocator,
    IoCounters,
    StoredFile,
    require_stored_data,
)

#: OOB layout: file id (u32), page within the file (u32), sequence number (u64), little-endian.
OOB = struct.Struct("<IIQ")
#: The file id of a page not owned by any file (never written by the store).
NO_FILE = 0xFFFF_FFFF

STREAMS = ("db", "log", "temp", "gc")
GC_POLICIES = ("greedy", "cost_benefit")

#: Static wear levelling: when the most-erased block is this many erases ahead of the least-
#: erased block holding data, GC takes that cold block next, so its data moves to a worn block
#: and the little-worn block joins the free pool.
DEFAULT_WEAR_GAP = 16

#: The stream each file role writes to.
_STREAM_OF_ROLE = {ROLE_MAIN: "db", ROLE_WAL: "log", ROLE_JOURNAL: "log"}


def HostFtl(
    device: Any,
    *,
    gc_policy: str = "greedy",
    spare_fraction: float | None = None,
    gc_free_blocks: int | None = None,
    wear_gap: int = DEFAULT_WEAR_GAP,
) -> _core.HostFtl:
    """The host's page map over ``device``'s native flash (see the module's description),
    compiled (crate ``ssdlab-sqlite``, ``hostftl.rs``): it takes the flash over.

    Its methods: ``submit(op, offset, length, data, hint)`` as a device's quick path (the
    clock moves to the completion); ``read(offset, length, at_ns)`` -> ``(data, done_ns)`` and
    ``write(offset, data, at_ns)`` -> ``done_ns`` without moving the clock; ``trim``; the owner
    table the store keeps (``set_extent_pages``, ``set_owner(extent, file_id, index, stream)``,
    ``clear_owner``; ``own_all(file_id, stream)`` for pages outside every extent, an FTL used
    bare); ``power_loss()``; ``recover(catalog)`` with the store's catalog (file id ->
    (extents, pages per extent, size in pages)); ``stats()``; ``counters`` as attributes.
    """
    # Checked here, before device.native() claims the flash, so that a bad option leaves the
    # device as it was (the compiled class checks the ranges again, for its Rust callers).
    if isinstance(wear_gap, bool) or not isinstance(wear_gap, int) or wear_gap < 1:
        raise ValueError(f"wear_gap: expected an integer >= 1, got {wear_gap!r}")
    if gc_policy not in GC_POLICIES:
        raise ValueError(f"gc_policy: expected one of {', '.join(GC_POLICIES)}, got {gc_policy!r}")
    if spare_fraction is not None and (
        isinstance(spare_fraction, bool)
        or not isinstance(spare_fraction, (int, float))
        or not 0 < spare_fraction < 0.9
    ):
        raise ValueError(f"spare_fraction: expected a number in (0, 0.9), got {spare_fraction!r}")
    if gc_free_blocks is not None and (
        isinstance(gc_free_blocks, bool)
        or not isinstance(gc_free_blocks, int)
        or gc_free_blocks < 0
    ):
        raise ValueError(f"gc_free_blocks: expected an integer >= 0, got {gc_free_blocks!r}")
    device.native()  # claims the flash, with the front end's checks and messages
    return _core.HostFtl(
        device._handle,
        device.logical_bytes,
        gc_policy,
        None if spare_fraction is None else float(spare_fraction),
        gc_free_blocks,
        wear_gap,
    )


class HostFtlStore(DeviceStore):
    """The SQLite store of a device whose flash the host drives natively: the same files,
    extents, freelist and WAL tracking as :class:`DeviceStore`, with every device request
    served by a :class:`HostFtl` (see the module's description)."""

    def __init__(
        self,
        device: Any,
        *,
        gc_policy: str = "greedy",
        spare_fraction: float | None = None,
        extent_bytes: int = EXTENT_BYTES,
        crash_tracking: bool = False,
        sea_recent_checkpoints: int = 2,
    ) -> None:
        require_stored_data(device)  # before the host FTL takes the flash over
        ftl = HostFtl(device, gc_policy=gc_policy, spare_fraction=spare_fraction)
        if ftl.page_bytes != TRIM_ALIGN or extent_bytes % ftl.page_bytes:
            raise ValueError(
                f"backend: the host FTL maps 4 KiB database pages onto flash pages; this flash has "
                f"{ftl.page_bytes}-byte pages"
            )
        super().__init__(
            device,
            extent_bytes=extent_bytes,
            crash_tracking=False,
            sea_recent_checkpoints=sea_recent_checkpoints,
        )
        # A power loss needs no copy of the files here: what survives is what is on flash. The
        # option is kept only so that every connection on the device agrees on it.
        self.crash_tracking = crash_tracking
        self.ftl = ftl
        self._submit = ftl.submit
        self.allocator = ExtentAllocator(ftl.logical_pages * ftl.page_bytes, extent_bytes)
        if self.allocator.total == 0:
            raise ValueError(f"extent_bytes: {extent_bytes} is larger than the host FTL's space")
        self.extent_pages = extent_bytes // ftl.page_bytes
        # Whose page a write is: the host FTL keeps the owner of each extent (file id, index in
        # the file's extents, stream), set here as files grow and shrink.
        ftl.set_extent_pages(self.extent_pages)
        self.file_ids: dict[str, int] = {}
        self._next_file_id = 0

    # -- the catalog: file ids, extents, sizes --------------------------------------------------

    def open_file(self, name: str, flags: int) -> StoredFile:
        stored = super().open_file(name, flags)
        stored.mirror = None
        if name not in self.file_ids:
            # Ids are never reused, so a page of a deleted file can never pass for a new one's.
            self.file_ids[name] = self._next_file_id
            self._next_file_id += 1
        return stored

    def delete_file(self, name: str) -> None:
        super().delete_file(name)
        self.file_ids.pop(name, None)

    def _grow(self, stored: StoredFile, end_offset: int, counters: IoCounters) -> None:
        before = len(stored.extents)
        super()._grow(stored, end_offset, counters)
        file_id = self.file_ids[stored.name]
        stream = _STREAM_OF_ROLE.get(stored.role, "temp")
        for index in range(before, len(stored.extents)):
            self.ftl.set_owner(stored.extents[index], file_id, index, stream)

    def _release(self, stored: StoredFile, new_size: int) -> None:
        keep = -(-new_size // self.extent_bytes)
        gone = stored.extents[keep:]
        super()._release(stored, new_size)
        for extent in gone:
            self.ftl.clear_owner(extent)

    def _owner(self, lpage: int) -> tuple[int, int, str]:
        """(file id, page within the file, stream) of a logical page."""
        return self.ftl.owner(lpage)

    def _catalog(self) -> dict[int, tuple[list[int], int, int]]:
        page_bytes = self.ftl.page_bytes
        return {
            self.file_ids[name]: (
                list(stored.extents),
                self.extent_pages,
                -(-stored.size // page_bytes),
            )
            for name, stored in self.files.items()
        }

    # -- power loss -----------------------------------------------------------------------------

    def crash(self) -> dict[str, int]:  # type: ignore[override]
        """A power loss: the host's RAM is gone -- the page map (rebuilt from OOB), gathered log
        writes not yet submitted, temporary files, open handles. What was programmed stays on
        flash: the host FTL has no volatile write cache. Each file is then cut to the size it
        had at its last sync, as :meth:`DeviceStore.crash` does. Returns the recovery's
        report."""
        with self.lock:
            self.generation += 1
            self.active = None
            self.ftl.power_loss()
            report = self.ftl.recover(self._catalog())
            for name, stored in list(self.files.items()):
                stored.log_length = 0  # gathered log writes never reached the flash
                stored.shared = 0
                stored.reserved = stored.pending = stored.exclusive = None
                if stored.role == ROLE_OTHER:
                    self.files.pop(name)
                    self.file_ids.pop(name, None)
                    self._release(stored, 0)
                    continue
                stored.undo.clear()
                if stored.synced_size < stored.size:
                    stored.size = stored.synced_size
                    if stored.mirror is not None:
                        del stored.mirror[stored.size :]
                    self._release(stored, stored.size)
                stored.pending_leaf_trims.clear()
                if stored.freelist is not None:
                    stored.freelist = FreelistTracker()
                stored.wal_page_size = 0
        return report
