"""The files of one device: extents of its logical space, timed I/O, trims, crash simulation.

A :class:`DeviceStore` owns everything SQLite keeps on one :class:`ssdlab.Device`: an
:class:`ExtentAllocator` over the device's logical space shared by every file, the files
(:class:`StoredFile`: extents, size, lock state, crash bookkeeping), the SEA-SSD hinter and the
counters. The VFS (:mod:`ssdlab.sqlite.vfs`) is a thin adapter from SQLite's calls to the
methods here.

Time: SQLite's I/O is synchronous, so each request is submitted alone at the device clock.
Before an I/O, the host's CPU time since the previous I/O returned is added by the connection's
model (:class:`Host`): ``cpu="wall"`` advances the clock by the wall time that passed times
``cpu_factor``; ``cpu="zero"`` adds nothing. The time the device simulation itself takes is
never counted as host time. ``cpu="realtime"`` paces the device to wall time instead, as a
real-time emulator does (:class:`RealtimePacer`): each request is issued at the wall time it
is made and returns when the wall clock reaches its completion, so everything the host does,
the simulation's own cost included, takes the time it really takes. ``RealtimePacer`` is
compiled (its arithmetic is ``ssdlab-sqlite``'s ``realtime.rs``): the store's ``_send`` and the
VFS's compiled handles pace every request of a realtime host with it. Its last part of a wait is
spun, not slept: a sleep overshoots by about 100 us at the median (longer than a flash read) and
by milliseconds at the tail, and the overshoot would count as host time.
"""

from __future__ import annotations

import heapq
import struct
import threading
import weakref
from time import perf_counter_ns
from typing import Any

import apsw

from ssdlab._core import CompiledHint, FileState, IoCounters, RealtimePacer
from ssdlab.errors import DeviceError
from ssdlab.sqlite.freelist import FreelistTracker
from ssdlab.sqlite.sea import DYN, STAT, HintCounters, SeaHinter

#: Default extent: the unit in which files take the device's logical space.
EXTENT_BYTES = 1 << 20

#: Trims cover whole 4 KiB units (the FTL's default mapping unit); partial units are left.
TRIM_ALIGN = 4096

#: A log's contiguous writes are gathered up to this many bytes before they go to the device.
LOG_BUFFER_BYTES = 1 << 20

WAL_HEADER_BYTES = 32
WAL_FRAME_HEADER_BYTES = 24

# SQLite's open flags (sqlite3.h), for a file's role.
OPEN_MAIN_DB = 0x100
OPEN_MAIN_JOURNAL = 0x800
OPEN_WAL = 0x80000

ROLE_MAIN = "main"
ROLE_WAL = "wal"
ROLE_JOURNAL = "journal"
ROLE_OTHER = "other"
_LOGS = (ROLE_WAL, ROLE_JOURNAL)

_U32 = struct.Struct(">I")


def _sqlite_error(code: int, message: str) -> Exception:
    """An exception APSW turns into SQLite result ``code`` (e.g. SQLITE_FULL)."""
    error = apsw.exception_for(code)
    error.args = (message,)
    return error


# IoCounters (reads, read_bytes, writes, write_bytes, trims, trim_bytes, syncs, short_reads,
# read_errors, full_errors, io_calls, vfs_ns, device_ns; ``as_dict()`` adds vfs_ns_per_io) is
# compiled: the VFS's compiled file object counts in the same object. ``vfs_ns`` is the wall
# time spent in the VFS's I/O methods outside the device simulation (``device_ns``): the
# coupling's cost per I/O is ``vfs_ns / io_calls``.


#: The host CPU-time models (:class:`Host`).
CPU_MODELS = ("zero", "wall", "realtime")


class Host:
    """One connection's host: its CPU-time model, whether it sends hints, and its counters."""

    __slots__ = (
        "counters",
        "cpu_factor",
        "cpu_wall",
        "generation",
        "hints",
        "last_wall_ns",
        "paced",
        "pacer",
        "predict",
    )  # fmt: skip

    def __init__(
        self,
        *,
        cpu: str = "zero",
        cpu_factor: float = 1.0,
        hints: bool = False,
        predict: bool | None = None,
    ):
        if cpu not in CPU_MODELS:
            raise ValueError(f"cpu: expected 'wall', 'zero' or 'realtime', got {cpu!r}")
        if isinstance(cpu_factor, bool) or not isinstance(cpu_factor, (int, float)):
            raise ValueError(f"cpu_factor: expected a finite number >= 0, got {cpu_factor!r}")
        if not 0 <= cpu_factor < float("inf"):
            raise ValueError(f"cpu_factor: expected a finite number >= 0, got {cpu_factor!r}")
        #: Paces the device to wall time (``cpu="realtime"``); None in simulated time.
        self.pacer = RealtimePacer() if cpu == "realtime" else None
        #: The pacer, kept after the pacing stops (its counters).
        self.paced = self.pacer
        # A paced host takes the general I/O paths of the Python handles (their inlined ones skip
        # host time); the compiled handles pace their requests themselves.
        self.cpu_wall = (cpu == "wall" and cpu_factor > 0) or self.pacer is not None
        self.cpu_factor = float(cpu_factor)
        #: Classification hints on writes; prediction hints for WAL frames (default: with them).
        self.hints = hints
        self.predict = hints if predict is None else predict
        self.counters = IoCounters()
        self.last_wall_ns = perf_counter_ns()
        #: The store's crash generation when the connection opened (set by the store).
        self.generation = 0


class ExtentAllocator:
    """Fixed-size extents of the device's logical space, lowest free extent first (so a run
    is deterministic and files pack at the start of the device)."""

    def __init__(self, capacity_bytes: int, extent_bytes: int) -> None:
        self.extent_bytes = extent_bytes
        self.total = capacity_bytes // extent_bytes
        self._free = list(range(self.total))  # sorted: already a heap

    @property
    def free(self) -> int:
        return len(self._free)

    def take(self, count: int) -> list[int] | None:
        """``count`` extents, or None (and nothing taken) when fewer are free."""
        if count > len(self._free):
            return None
        return [heapq.heappop(self._free) for _ in range(count)]

    def give(self, extents: list[int]) -> None:
        for extent in extents:
            heapq.heappush(self._free, extent)


class StoredFile(FileState):
    """One file: its extents (file extent i is device extent ``extents[i]``) and size, its lock
    state across handles, and what a crash would undo. The fields the I/O path reads (name,
    role, size, extents, freelist, the WAL page size and the log buffer) are
    :class:`~ssdlab._core.FileState`'s, which the VFS's compiled file object reads directly."""

    def __init__(self, name: str, role: str) -> None:
        super().__init__()
        self.name = name
        self.role = role
        self.extents: list[int] = []
        self.size = 0
        # Locks (SQLite's protocol, between handles of this process).
        self.shared = 0
        self.reserved: object | None = None
        self.pending: object | None = None
        self.exclusive: object | None = None
        # Main database files: the freelist and the leaves waiting for the journal's commit.
        self.freelist = FreelistTracker() if role == ROLE_MAIN else None
        self.pending_leaf_trims: set[int] = set()
        # WAL files: page size from the WAL header (0 until seen).
        self.wal_page_size = 0
        # Crash bookkeeping: size at the last sync, and (offset, old bytes) of later writes.
        self.synced_size = 0
        self.undo: list[tuple[int, bytes]] = []
        self.mirror: bytearray | None = None
        # Logs (WAL, rollback journal): contiguous writes not yet submitted (see write()),
        # the first log_length bytes of a buffer made once at the log's first write and kept:
        # growing a bytearray per commit and freeing it made most of the run's page faults.
        self.log_buffer = bytearray()
        self.log_length = 0
        self.log_offset = 0
        #: WAL bytes written since the connection last checkpointed (its trigger).
        self.written_since_checkpoint = 0


def require_stored_data(device: Any) -> None:
    """Refuse a device that keeps no data: SQLite must read back what it wrote."""
    if not getattr(device, "store_data", False):
        raise ValueError(
            "device: expected an ssdlab.Device built with store_data=True "
            "(SQLite must read back what it wrote)"
        )


class DeviceStore:
    """Everything the SQLite VFS keeps on one device. Build it with :func:`store_for`.

    ``crash_tracking`` keeps, per file, a copy of its current content and the old bytes of every
    write since the file's last sync, so :meth:`crash` can put back exactly the synced state.
    """

    def __init__(
        self,
        device: Any,
        *,
        extent_bytes: int = EXTENT_BYTES,
        crash_tracking: bool = False,
        sea_recent_checkpoints: int = 2,
    ) -> None:
        require_stored_data(device)
        if isinstance(extent_bytes, bool) or not isinstance(extent_bytes, int):
            raise ValueError(f"extent_bytes: expected an integer, got {extent_bytes!r}")
        if extent_bytes < TRIM_ALIGN or extent_bytes % TRIM_ALIGN:
            raise ValueError(
                f"extent_bytes: expected a positive multiple of {TRIM_ALIGN}, got {extent_bytes}"
            )
        # The store is kept per device in a weak mapping, so it holds the device weakly; open
        # connections hold it strongly. The native handle is what the hot path calls.
        self.device = weakref.proxy(device)
        self._handle = device._handle
        self._submit = device._handle.submit_quick
        self.extent_bytes = extent_bytes
        self.allocator = ExtentAllocator(device.logical_bytes, extent_bytes)
        if self.allocator.total == 0:
            raise ValueError(
                f"extent_bytes: {extent_bytes} is larger than the device "
                f"({device.logical_bytes} logical bytes)"
            )
        self.files: dict[str, StoredFile] = {}
        self.crash_tracking = crash_tracking
        self.hinter = SeaHinter(self.device, recent_checkpoints=sea_recent_checkpoints)
        self.idle_host = Host()
        self.active: Host | None = None
        self.hosts: set[Host] = set()
        self.closed_counters = IoCounters()
        self.generation = 0
        self.lock = threading.RLock()
        self.crash_restore_writes = 0
        self.vfs: Any = None
        self.connections = 0

    # -- the VFS's registration --------------------------------------------------------------

    def acquire_vfs(self) -> str:
        """Register the device's VFS if no connection uses it yet; return its name."""
        from ssdlab.sqlite.vfs import DeviceVfs

        with self.lock:
            if self.vfs is None:
                self.vfs = DeviceVfs(self)
            self.connections += 1
            return self.vfs.vfs_name

    def release_vfs(self) -> None:
        """A connection closed; the last one unregisters the VFS (the files stay)."""
        with self.lock:
            self.connections -= 1
            if self.connections <= 0 and self.vfs is not None:
                self.connections = 0
                self.vfs.unregister()
                self.vfs = None

    # -- accounting --------------------------------------------------------------------------

    def counters(self) -> IoCounters:
        """I/O of every connection on this device, closed ones included."""
        total = IoCounters()
        total.add(self.closed_counters)
        total.add(self.idle_host.counters)
        for host in list(self.hosts):
            total.add(host.counters)
        return total

    def hint_counters(self) -> HintCounters:
        return self.hinter.counters

    def adopt(self, host: Host) -> None:
        """A connection opens: count its I/O in the VFS's totals from now on."""
        host.generation = self.generation
        self.hosts.add(host)

    def retire(self, host: Host) -> None:
        """A connection closed: keep its counts in the VFS's totals."""
        if host in self.hosts:
            self.closed_counters.add(host.counters)
            self.hosts.discard(host)

    # -- files -------------------------------------------------------------------------------

    def open_file(self, name: str, flags: int) -> StoredFile:
        stored = self.files.get(name)
        if stored is None:
            if flags & OPEN_MAIN_DB:
                role = ROLE_MAIN
            elif flags & OPEN_WAL:
                role = ROLE_WAL
            elif flags & OPEN_MAIN_JOURNAL:
                role = ROLE_JOURNAL
            else:
                role = ROLE_OTHER
            stored = StoredFile(name, role)
            if self.crash_tracking:
                stored.mirror = bytearray()
            self.files[name] = stored
        return stored

    def delete_file(self, name: str) -> None:
        stored = self.files.pop(name, None)
        if stored is None:
            raise _sqlite_error(apsw.SQLITE_IOERR_DELETE_NOENT, f"{name}: no such file")
        stored.log_length = 0  # never reaches the device: the file is gone
        self._release(stored, 0)
        if stored.role == ROLE_MAIN:
            self.hinter.forget(name)
        if stored.role == ROLE_JOURNAL:
            self._journal_committed(name)

    # -- timed I/O ---------------------------------------------------------------------------

    def _host(self) -> Host:
        return self.active or self.idle_host

    def active_is_dead(self) -> bool:
        """Whether the call under way comes from a connection opened before a crash."""
        active = self.active
        return active is not None and active.generation != self.generation

    def _send(self, op: str, offset: int, length: int, data: Any, hint: Any) -> Any:
        """Every request to the device goes through here: queued SEA predictions go first,
        so the device learns of them before anything that could start GC."""
        if self.hinter.pending_predictions:
            self.hinter.send_predictions()
        pacer = (self.active or self.idle_host).pacer
        if pacer is None:
            return self._submit(op, offset, length, data, hint)
        pacer.issue(self._handle)
        result = self._submit(op, offset, length, data, hint)
        pacer.complete(self._handle)
        return result

    def _think(self, host: Host, start_ns: int) -> None:
        """Add the host's CPU time since its previous I/O returned to the device clock (a paced
        host's passes on its own: see :class:`RealtimePacer`)."""
        if host.cpu_wall and host.pacer is None:
            delta = int((start_ns - host.last_wall_ns) * host.cpu_factor)
            if delta > 0:
                if self.hinter.pending_predictions:
                    self.hinter.send_predictions()
                handle = self._handle
                handle.advance_to(handle.now + delta)

    def read(self, stored: StoredFile, amount: int, offset: int) -> bytes:
        start = perf_counter_ns()
        host = self._host()
        counters = host.counters
        device_before = counters.device_ns
        if host.cpu_wall:
            self._think(host, start)
        if stored.log_length:
            self._flush_log(stored, counters)
        available = stored.size - offset
        length = amount if amount <= available else max(available, 0)
        failed = False
        data = b""
        extent = self.extent_bytes
        index, within = divmod(offset, extent)
        if 0 < length <= extent - within:  # the common case: inside one extent, one request
            before = perf_counter_ns()
            data, failed = self._send(
                "read", stored.extents[index] * extent + within, length, None, None
            )
            counters.device_ns += perf_counter_ns() - before
            counters.reads += 1
            counters.read_bytes += length
        elif length > 0:
            pieces = []
            for device_offset, piece in self._ranges(stored, offset, length):
                before = perf_counter_ns()
                read, uncorrectable = self._send("read", device_offset, piece, None, None)
                counters.device_ns += perf_counter_ns() - before
                counters.reads += 1
                counters.read_bytes += piece
                failed = failed or uncorrectable
                pieces.append(read)
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        if stored.freelist is not None and length > 0:
            self._observe_main_read(stored, data, offset)
        end = perf_counter_ns()
        counters.io_calls += 1
        counters.vfs_ns += end - start - (counters.device_ns - device_before)
        host.last_wall_ns = end
        if failed:
            counters.read_errors += 1
            raise _sqlite_error(
                apsw.SQLITE_IOERR_READ,
                f"{stored.name}: the device reported {length} bytes at offset {offset} "
                "uncorrectable",
            )
        if length < amount:
            counters.short_reads += 1
        return data  # APSW zero-fills a short read and returns SQLITE_IOERR_SHORT_READ

    def write(self, stored: StoredFile, data: bytes, offset: int) -> None:
        """Write ``data`` at ``offset``. A database or temporary file's write is submitted at
        once. A log's (WAL, rollback journal) contiguous writes are gathered and submitted as
        one request when the log is synced, read, truncated, written elsewhere or holds
        ``LOG_BUFFER_BYTES``, as a storage engine's log buffer does: SQLite writes a WAL frame
        as a 24-byte header and a page, and submitting each alone would cost the device a
        read-modify-write of a flash unit for every header."""
        start = perf_counter_ns()
        host = self.active or self.idle_host
        counters = host.counters
        device_before = counters.device_ns
        length = len(data)
        end_offset = offset + length
        extent = self.extent_bytes
        if end_offset > len(stored.extents) * extent:
            self._grow(stored, end_offset, counters)
        if stored.mirror is not None:
            self._record_undo(stored, data, offset)
        if host.cpu_wall:
            self._think(host, start)
        if stored.role in _LOGS:
            gathered = stored.log_length
            if gathered and (
                offset != stored.log_offset + gathered or gathered + length > LOG_BUFFER_BYTES
            ):
                self._flush_log(stored, counters)
                gathered = 0
            # What _classify does for a log, inline (this runs for every WAL frame, twice):
            # WAL headers and frame headers are observed, after the flush since a new header
            # may trim; a frame's page (exactly one page, never at a frame's start) is not.
            if stored.role == ROLE_WAL and length != stored.wal_page_size:
                self._observe_wal_write(stored, data, offset, host)
            if host.hints:
                self.hinter.counters.dyn += 1
            if not gathered:
                stored.log_offset = offset
                if not stored.log_buffer:
                    stored.log_buffer = bytearray(LOG_BUFFER_BYTES)
            # In place within the buffer; a single write larger than it extends it.
            stored.log_buffer[gathered : gathered + length] = data
            stored.log_length = gathered + length
            stored.written_since_checkpoint += length
        else:
            hint = self._classify(stored, data, offset, host)
            index, within = divmod(offset, extent)
            if within + length <= extent:  # the common case: inside one extent, one request
                before = perf_counter_ns()
                self._send("write", stored.extents[index] * extent + within, length, data, hint)
                counters.device_ns += perf_counter_ns() - before
                counters.writes += 1
            else:
                self._submit_pieces(stored, offset, data, hint, counters)
            counters.write_bytes += length
        if end_offset > stored.size:
            stored.size = end_offset
        end = perf_counter_ns()
        counters.io_calls += 1
        counters.vfs_ns += end - start - (counters.device_ns - device_before)
        host.last_wall_ns = end

    def _submit_pieces(
        self, stored: StoredFile, offset: int, data: bytes, hint: Any, counters: IoCounters
    ) -> None:
        for device_offset, piece, part in self._pieces(stored, offset, data):
            before = perf_counter_ns()
            self._send("write", device_offset, piece, part, hint)
            counters.device_ns += perf_counter_ns() - before
            counters.writes += 1

    def _flush_log(self, stored: StoredFile, counters: IoCounters) -> None:
        """Submit a log's gathered writes (every log write is ``dyn`` under hints)."""
        with memoryview(stored.log_buffer) as view:
            data = bytes(view[: stored.log_length])
        stored.log_length = 0
        hint = DYN if self._host().hints else None
        self._submit_pieces(stored, stored.log_offset, data, hint, counters)
        counters.write_bytes += len(data)

    def sync(self, stored: StoredFile) -> None:
        start = perf_counter_ns()
        host = self._host()
        counters = host.counters
        device_before = counters.device_ns
        self._think(host, start)
        if stored.log_length:
            self._flush_log(stored, counters)
        before = perf_counter_ns()
        self._send("flush", 0, 0, None, None)
        counters.device_ns += perf_counter_ns() - before
        counters.syncs += 1
        stored.undo.clear()
        stored.synced_size = stored.size
        if stored.freelist is not None:
            self._main_synced(stored, host)
        end = perf_counter_ns()
        counters.io_calls += 1
        counters.vfs_ns += end - start - (counters.device_ns - device_before)
        host.last_wall_ns = end

    def truncate(self, stored: StoredFile, new_size: int) -> None:
        if stored.log_length:
            self._flush_log(stored, self._host().counters)
        if new_size < stored.size:
            if stored.mirror is not None:
                del stored.mirror[new_size:]
                # What a crash would restore past the new end is gone with it.
                stored.undo = [
                    (offset, old[: new_size - offset])
                    for offset, old in stored.undo
                    if offset < new_size
                ]
            if stored.freelist is not None and stored.freelist.page_size:
                page_size = stored.freelist.page_size
                stored.freelist.forget_pages_from(-(-new_size // page_size) + 1)
            stored.size = new_size
            self._release(stored, new_size)
            if stored.role == ROLE_JOURNAL and new_size == 0:
                self._journal_committed(stored.name)
        elif new_size > stored.size:
            self._grow(stored, new_size, self._host().counters)
            if stored.mirror is not None:
                stored.mirror.extend(bytes(new_size - len(stored.mirror)))
            stored.size = new_size
        # Size changes are durable at once (a journaling file system's metadata): SQLite only
        # shrinks a file after syncing what made the tail unneeded.
        stored.synced_size = stored.size

    # -- extents -----------------------------------------------------------------------------

    def _grow(self, stored: StoredFile, end_offset: int, counters: IoCounters) -> None:
        extent = self.extent_bytes
        need = -(-end_offset // extent) - len(stored.extents)
        if need <= 0:
            return
        taken = self.allocator.take(need)
        if taken is None:
            counters.full_errors += 1
            raise _sqlite_error(
                apsw.SQLITE_FULL,
                f"{stored.name}: the device is full ({need} more extents of {extent} bytes "
                f"needed, {self.allocator.free} free of {self.allocator.total})",
            )
        stored.extents.extend(taken)

    def _ranges(self, stored: StoredFile, offset: int, length: int):
        """(device offset, length) pieces of a file range, split at extent boundaries."""
        extent = self.extent_bytes
        extents = stored.extents
        while length > 0:
            index, within = divmod(offset, extent)
            piece = min(length, extent - within)
            yield extents[index] * extent + within, piece
            offset += piece
            length -= piece

    def _pieces(self, stored: StoredFile, offset: int, data: bytes):
        """(device offset, length, bytes) pieces of a write."""
        extent = self.extent_bytes
        index, within = divmod(offset, extent)
        if within + len(data) <= extent:  # the common case: inside one extent
            yield stored.extents[index] * extent + within, len(data), data
            return
        done = 0
        for device_offset, piece in self._ranges(stored, offset, len(data)):
            yield device_offset, piece, data[done : done + piece]
            done += piece

    def _release(self, stored: StoredFile, new_size: int) -> None:
        """Trim the file's space past ``new_size`` and give whole extents back."""
        extent = self.extent_bytes
        keep = -(-new_size // extent)
        start = -(-new_size // TRIM_ALIGN) * TRIM_ALIGN
        self._trim_file_range(stored, start, len(stored.extents) * extent)
        freed = stored.extents[keep:]
        del stored.extents[keep:]
        self.allocator.give(freed)

    def _trim_file_range(self, stored: StoredFile, start: int, end: int) -> None:
        """Trim the whole 4 KiB units of file bytes [start, end), merging device-contiguous
        extents into one request."""
        start = -(-start // TRIM_ALIGN) * TRIM_ALIGN
        end = min(end, len(stored.extents) * self.extent_bytes) // TRIM_ALIGN * TRIM_ALIGN
        if end <= start:
            return
        mirror = stored.mirror
        if mirror is not None and start < len(mirror):
            # Trimmed space reads as zeros: the crash bookkeeping must agree.
            stop = min(end, len(mirror))
            mirror[start:stop] = bytes(stop - start)
        counters = self._host().counters
        run_start = run_end = -1
        for device_offset, piece in self._ranges(stored, start, end - start):
            if device_offset == run_end:
                run_end += piece
                continue
            if run_end > run_start:
                self._trim(run_start, run_end - run_start, counters)
            run_start, run_end = device_offset, device_offset + piece
        if run_end > run_start:
            self._trim(run_start, run_end - run_start, counters)

    def _trim(self, device_offset: int, length: int, counters: IoCounters) -> None:
        before = perf_counter_ns()
        self._send("trim", device_offset, length, None, None)
        counters.device_ns += perf_counter_ns() - before
        counters.trims += 1
        counters.trim_bytes += length

    # -- what SQLite's writes say ------------------------------------------------------------

    def _classify(
        self, stored: StoredFile, data: bytes, offset: int, host: Host
    ) -> CompiledHint | None:
        """Observe a write (freelist, WAL frames) and return its hint (None without hints)."""
        role = stored.role
        if role == ROLE_MAIN:
            tracker = stored.freelist
            assert tracker is not None
            if offset == 0:
                tracker.observe_header(data)
            page_size = tracker.page_size
            if page_size and len(data) == page_size and offset % page_size == 0:
                page_number = offset // page_size + 1
                tracker.observe_page(page_number, data, written=True)
                if host.hints:
                    return self.hinter.database_write(stored.name, page_number)
                return None
            return self._stat_hint(host)
        if role == ROLE_WAL:
            self._observe_wal_write(stored, data, offset, host)
        if host.hints:
            return self.hinter.log_write()
        return None

    def _stat_hint(self, host: Host) -> CompiledHint | None:
        """A main-database write that is not one whole page (never seen from SQLite's pager,
        which writes whole pages): classified ``stat``, as a page outside the recent set."""
        if not host.hints:
            return None
        self.hinter.counters.stat += 1
        return STAT

    def _observe_wal_write(self, stored: StoredFile, data: bytes, offset: int, host: Host) -> None:
        if offset == 0 and len(data) >= WAL_HEADER_BYTES:
            stored.wal_page_size = _U32.unpack_from(data, 8)[0]
            if stored.size > TRIM_ALIGN:
                # A new WAL header over an old WAL: SQLite restarts the log only once every
                # frame has been checkpointed, so everything after the header's unit is dead.
                self._trim_file_range(stored, TRIM_ALIGN, stored.size)
            return
        page_size = stored.wal_page_size
        if not (host.predict and page_size and self.hinter.can_predict):
            return
        frame = WAL_FRAME_HEADER_BYTES + page_size
        if len(data) >= WAL_FRAME_HEADER_BYTES and (offset - WAL_HEADER_BYTES) % frame == 0:
            page_number = _U32.unpack_from(data, 0)[0]
            main = self.files.get(stored.name[: -len("-wal")])
            if main is None or page_number == 0:
                return
            file_offset = (page_number - 1) * page_size
            if file_offset + page_size <= len(main.extents) * self.extent_bytes:
                index, within = divmod(file_offset, self.extent_bytes)
                device_offset = main.extents[index] * self.extent_bytes + within
                self.hinter.predict(device_offset, page_size)

    def _observe_main_read(self, stored: StoredFile, data: bytes, offset: int) -> None:
        tracker = stored.freelist
        assert tracker is not None
        if offset == 0:
            tracker.observe_header(data)
        page_size = tracker.page_size
        if page_size and len(data) == page_size and offset % page_size == 0:
            tracker.observe_page(offset // page_size + 1, data, written=False)

    def _main_synced(self, stored: StoredFile, host: Host) -> None:
        """A sync of a main database ends a checkpoint (WAL) or a commit (rollback journal)."""
        if host.hints:
            self.hinter.checkpoint(stored.name)
        tracker = stored.freelist
        assert tracker is not None
        newly_free = tracker.resolve()
        if tracker.wal_mode:
            self._trim_pages(stored, newly_free)
        else:
            # With a rollback journal the commit point comes later (the journal's deletion or
            # truncation); until then a rollback may need the old content of these pages.
            stored.pending_leaf_trims.update(newly_free)

    def _journal_committed(self, journal_name: str) -> None:
        main = self.files.get(journal_name[: -len("-journal")])
        if main is not None and main.pending_leaf_trims:
            free = main.freelist.free_leaves if main.freelist is not None else set()
            pages = sorted(main.pending_leaf_trims & free)
            main.pending_leaf_trims = set()
            self._trim_pages(main, pages)

    def _trim_pages(self, stored: StoredFile, pages: list[int]) -> None:
        tracker = stored.freelist
        if not pages or tracker is None or not tracker.page_size:
            return
        page_size = tracker.page_size
        run_first = run_last = -2
        for page in [*pages, -4]:
            if page == run_last + 1:
                run_last = page
                continue
            if run_first > 0:
                start = (run_first - 1) * page_size
                end = min(run_last * page_size, stored.size)
                self._trim_file_range(stored, start, end)
            run_first = run_last = page

    # -- crashes -----------------------------------------------------------------------------

    def _record_undo(self, stored: StoredFile, data: bytes, offset: int) -> None:
        mirror = stored.mirror
        assert mirror is not None
        end = offset + len(data)
        old_end = min(end, len(mirror))
        if offset < old_end:
            stored.undo.append((offset, bytes(mirror[offset:old_end])))
        if len(mirror) < offset:
            mirror.extend(bytes(offset - len(mirror)))
        mirror[offset:end] = data

    def crash(self) -> None:
        """Lose everything not synced, as a power cut would.

        Every handle open now is dead afterwards (its calls fail; its close does nothing). Each
        file gets back the content and size it had at its last sync: the old bytes of later
        writes are written back (as device writes, counted in ``crash_restore_writes``) and
        space past the synced size is trimmed. Temporary files are gone.
        """
        if not self.crash_tracking:
            raise ValueError(
                "crash: the device's files were opened without crash_tracking=True, so what "
                "was not synced is unknown"
            )
        with self.lock:
            self.generation += 1
            self.active = None
            for name, stored in list(self.files.items()):
                stored.log_length = 0  # gathered log writes never reached the device
                stored.shared = 0
                stored.reserved = stored.pending = stored.exclusive = None
                if stored.role == ROLE_OTHER:
                    self.files.pop(name)
                    self._release(stored, 0)
                    continue
                for offset, old in reversed(stored.undo):
                    self._restore(stored, old, offset)
                stored.undo.clear()
                if stored.synced_size < stored.size:
                    stored.size = stored.synced_size
                    assert stored.mirror is not None
                    del stored.mirror[stored.size :]
                    self._release(stored, stored.size)
                stored.pending_leaf_trims.clear()
                if stored.freelist is not None:
                    stored.freelist = FreelistTracker()
                stored.wal_page_size = 0

    def _restore(self, stored: StoredFile, old: bytes, offset: int) -> None:
        assert stored.mirror is not None
        stored.mirror[offset : offset + len(old)] = old
        for device_offset, piece, part in self._pieces(stored, offset, old):
            self._send("write", device_offset, piece, part, None)
            self.crash_restore_writes += 1


_STORES: weakref.WeakKeyDictionary[Any, DeviceStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def store_for(device: Any, **options: Any) -> DeviceStore:
    """The one store of ``device`` (built on first use with ``options``; later calls must not
    ask for a different ``extent_bytes``, ``crash_tracking``, ``sea_recent_checkpoints`` or
    ``backend``). ``backend="native"`` builds the store of :mod:`ssdlab.sqlite.hostftl`
    (options for it in ``host_ftl``) on the device's native flash."""
    backend = options.pop("backend", "block")
    host_options = options.pop("host_ftl", None) or {}
    with _STORES_LOCK:
        store = _STORES.get(device)
        if store is None:
            if backend == "native":
                from ssdlab.sqlite.hostftl import HostFtlStore

                store = HostFtlStore(device, **host_options, **options)
            else:
                store = DeviceStore(device, **options)
            _STORES[device] = store
            return store
    if (backend == "native") != hasattr(store, "ftl"):
        current = "native" if hasattr(store, "ftl") else "block"
        raise ValueError(
            f"backend: the device's SQLite files already use backend={current!r}; every "
            f"connection on one device must agree (got {backend!r})"
        )
    current = {
        "extent_bytes": store.extent_bytes,
        "crash_tracking": store.crash_tracking,
        "sea_recent_checkpoints": store.hinter.recent_checkpoints,
    }
    for key, value in current.items():
        if key in options and options[key] != value:
            raise ValueError(
                f"{key}: the device's SQLite files already use {key}={value!r}; "
                f"every connection on one device must agree (got {options[key]!r})"
            )
    return store


def device_error_as_sqlite(error: DeviceError, name: str) -> Exception:
    """A device refusal during I/O as SQLite's I/O error, naming the file."""
    return _sqlite_error(apsw.SQLITE_IOERR, f"{name}: the device refused a request: {error}")
