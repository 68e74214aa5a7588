"""The APSW VFS: SQLite's file calls, mapped onto a :class:`~ssdlab.sqlite.store.DeviceStore`.

One VFS is registered per device (named ``ssdlab-<n>``) while connections use it. Names are a
flat namespace per device: ``/bench.db``, ``/bench.db-wal``, ``/bench.db-journal``; temporary
files get ``/.temp-<n>`` and disappear when closed. Every method is a few lines over the store,
which does the work; this module adds only what SQLite's interface asks: open flags, locks
between handles, and the file controls.

Locks follow SQLite's protocol (SHARED, RESERVED, PENDING, EXCLUSIVE) between the handles of
this process; a conflicting request raises ``BusyError``. The files have no shared-memory
methods (APSW's Python files cannot provide them), so WAL mode needs ``locking_mode=EXCLUSIVE``,
which keeps the WAL index in the connection's heap: one connection per database at a time.
"""

from __future__ import annotations

import itertools
from time import perf_counter_ns
from typing import Any

import apsw

from ssdlab._core import CompiledFile
from ssdlab._core import Device as NativeDevice
from ssdlab._core import HostFtl as CompiledHostFtl
from ssdlab.errors import DeviceError
from ssdlab.sqlite.sea import DYN, STAT
from ssdlab.sqlite.store import (
    LOG_BUFFER_BYTES,
    ROLE_MAIN,
    ROLE_WAL,
    DeviceStore,
    StoredFile,
    _sqlite_error,
    device_error_as_sqlite,
)

_LOCK_NONE, _LOCK_SHARED, _LOCK_RESERVED, _LOCK_PENDING, _LOCK_EXCLUSIVE = range(5)

_OPEN_DELETEONCLOSE = 0x8
_IOCAP_POWERSAFE_OVERWRITE = 0x1000

_FCNTL_CKPT_DONE = 37

_names = itertools.count()


class DeviceVfs(apsw.VFS):
    """The VFS of one device store."""

    def __init__(self, store: DeviceStore) -> None:
        self.store = store
        self.vfs_name = f"ssdlab-{next(_names)}"
        self._temp = itertools.count()
        super().__init__(self.vfs_name, base="")

    def xOpen(self, name: Any, flags: list[int]) -> DeviceFile:
        if name is None:
            path = f"/.temp-{next(self._temp)}"
        else:
            path = name if isinstance(name, str) else name.filename()
        flags[1] = flags[0]
        store = self.store
        with store.lock:
            if store.active_is_dead():
                # A connection that lost its power opens nothing real: a dead handle.
                dead = DeviceFile(store, StoredFile(path, "other"), False)
                dead.generation = -1
                return dead
            stored = store.files.get(path)
            if stored is None and not flags[0] & apsw.SQLITE_OPEN_CREATE:
                raise _sqlite_error(apsw.SQLITE_CANTOPEN, f"{path}: no such file")
            stored = store.open_file(path, flags[0])
        file = DeviceFile(store, stored, bool(flags[0] & _OPEN_DELETEONCLOSE))
        target = self._compiled_target(stored) if self.compiled and DeviceFile.fast else None
        if target is not None:
            return CompiledFile(
                file, store, target, DYN, STAT, device_error_as_sqlite, LOG_BUFFER_BYTES
            )
        return file

    #: Main database and WAL files get the compiled file object (off: every handle is a
    #: Python DeviceFile, the reference the tests compare it with).
    compiled = True

    def _compiled_target(self, stored: StoredFile) -> Any:
        """Where a compiled handle of a file sends its requests -- the device's block interface
        or the host FTL of a native store -- or None when the handle stays in Python: not a
        main database or WAL file, a store with crash tracking (its undo records are kept in
        Python), or a device handle a test wrapped."""
        store = self.store
        if stored.role not in (ROLE_MAIN, ROLE_WAL):
            return None
        if type(store) is DeviceStore:
            if store.crash_tracking or type(store._handle) is not NativeDevice:
                return None
            return store._handle
        ftl = getattr(store, "ftl", None)
        return ftl if type(ftl) is CompiledHostFtl else None

    def xDelete(self, filename: str, syncdir: bool) -> None:
        with self.store.lock:
            if self.store.active_is_dead():
                return  # a connection closing after a crash deletes nothing (its WAL stays)
            try:
                self.store.delete_file(filename)
            except DeviceError as error:
                raise device_error_as_sqlite(error, filename) from error

    def xAccess(self, pathname: str, flags: int) -> bool:
        return pathname in self.store.files

    def xFullPathname(self, name: str) -> str:
        return name if name.startswith("/") else "/" + name


class DeviceFile:
    """One open handle of a stored file."""

    def __init__(self, store: DeviceStore, stored: StoredFile, delete_on_close: bool) -> None:
        self.store = store
        self.stored = stored
        self.delete_on_close = delete_on_close
        self.generation = store.generation
        self.level = _LOCK_NONE
        self.closed = False

    def _dead(self) -> bool:
        """Whether this handle was opened before a simulated crash (or closed): such a handle
        is a process that lost its power; it reads zeros and its writes go nowhere, quietly, so
        that closing its connection raises nothing SQLite would have to swallow."""
        return self.generation != self.store.generation or self.closed

    def _io(self, method: Any, *args: Any) -> Any:
        """Run a store I/O method on this file; a request the device refuses (past its end)
        becomes SQLite's I/O error naming the file."""
        try:
            return method(self.stored, *args)
        except DeviceError as error:
            raise device_error_as_sqlite(error, self.stored.name) from error

    #: The inlined common cases of xRead and xWrite (off: every call takes DeviceStore's
    #: general path, the reference the tests compare them with).
    fast = True

    # Reads and writes are _io on a live handle, inline: SQLite calls them most often.
    def xRead(self, amount: int, offset: int) -> bytes:
        store = self.store
        if self.generation != store.generation or self.closed:
            return b""
        stored = self.stored
        extent = store.extent_bytes
        within = offset % extent
        # The common read: whole, inside one extent, no log writes waiting, no host-time
        # model (what DeviceStore.read does for it, without its general checks).
        if (
            self.fast
            and not stored.log_length
            and 0 < amount <= stored.size - offset
            and within + amount <= extent
        ):
            host = store.active or store.idle_host
            if not host.cpu_wall:
                start = perf_counter_ns()
                hinter = store.hinter
                try:
                    if hinter.pending_predictions:
                        hinter.send_predictions()
                    device_offset = stored.extents[offset // extent] * extent + within
                    data, failed = store._submit("read", device_offset, amount, None, None)
                except DeviceError as error:
                    raise device_error_as_sqlite(error, stored.name) from error
                after = perf_counter_ns()
                counters = host.counters
                counters.device_ns += after - start
                counters.reads += 1
                counters.read_bytes += amount
                if stored.freelist is not None:
                    store._observe_main_read(stored, data, offset)
                end = perf_counter_ns()
                counters.io_calls += 1
                counters.vfs_ns += end - after
                host.last_wall_ns = end
                if failed:
                    counters.read_errors += 1
                    raise _sqlite_error(
                        apsw.SQLITE_IOERR_READ,
                        f"{stored.name}: the device reported {amount} bytes at offset {offset} "
                        "uncorrectable",
                    )
                return data
        try:
            return self.store.read(self.stored, amount, offset)
        except DeviceError as error:
            raise device_error_as_sqlite(error, self.stored.name) from error

    def _read_error(self, amount: int, offset: int) -> Exception:
        """An uncorrectable read on the compiled path: counted, and SQLite's read error."""
        host = self.store.active or self.store.idle_host
        host.counters.read_errors += 1
        return _sqlite_error(
            apsw.SQLITE_IOERR_READ,
            f"{self.stored.name}: the device reported {amount} bytes at offset {offset} "
            "uncorrectable",
        )

    def xWrite(self, data: Any, offset: int) -> None:
        store = self.store
        if self.generation != store.generation or self.closed:
            return
        stored = self.stored
        # Half of all writes: a WAL frame's page right after its header, gathered in the log
        # buffer (what DeviceStore.write does for it, without its general checks; a page is
        # never observed, only headers are).
        length = len(data)
        gathered = stored.log_length
        if (
            self.fast
            and gathered
            and length == stored.wal_page_size
            and offset == stored.log_offset + gathered
            and gathered + length <= LOG_BUFFER_BYTES
            and stored.mirror is None
            and offset + length <= len(stored.extents) * store.extent_bytes
        ):
            start = perf_counter_ns()
            host = store.active or store.idle_host
            if not host.cpu_wall:
                if host.hints:
                    store.hinter.counters.dyn += 1
                stored.log_buffer[gathered : gathered + length] = data
                stored.log_length = gathered + length
                stored.written_since_checkpoint += length
                if offset + length > stored.size:
                    stored.size = offset + length
                counters = host.counters
                end = perf_counter_ns()
                counters.io_calls += 1
                counters.vfs_ns += end - start
                host.last_wall_ns = end
                return
        try:
            self.store.write(self.stored, bytes(data), offset)
        except DeviceError as error:
            raise device_error_as_sqlite(error, self.stored.name) from error

    def xTruncate(self, newsize: int) -> None:
        if not self._dead():
            self._io(self.store.truncate, newsize)

    def xSync(self, flags: int) -> None:
        if not self._dead():
            self._io(self.store.sync)

    def xFileSize(self) -> int:
        return 0 if self._dead() else self.stored.size

    def xLock(self, level: int) -> None:
        if self._dead():
            return
        stored = self.stored
        if level <= self.level:
            return
        if level == _LOCK_SHARED:
            if stored.exclusive is not None or stored.pending is not None:
                raise _sqlite_error(apsw.SQLITE_BUSY, f"{stored.name}: locked")
            stored.shared += 1
        elif level == _LOCK_RESERVED:
            if stored.reserved is not None and stored.reserved is not self:
                raise _sqlite_error(apsw.SQLITE_BUSY, f"{stored.name}: locked")
            stored.reserved = self
        else:  # EXCLUSIVE (SQLite asks PENDING of itself only through EXCLUSIVE)
            if stored.pending is not None and stored.pending is not self:
                raise _sqlite_error(apsw.SQLITE_BUSY, f"{stored.name}: locked")
            stored.pending = self
            if stored.shared > 1:
                raise _sqlite_error(apsw.SQLITE_BUSY, f"{stored.name}: readers hold it")
            stored.exclusive = self
            level = _LOCK_EXCLUSIVE
        self.level = level

    def xUnlock(self, level: int) -> None:
        if self.generation != self.store.generation:
            return
        stored = self.stored
        if level >= self.level and stored.pending is not self:
            return
        for attribute in ("exclusive", "pending", "reserved"):
            if getattr(stored, attribute) is self:
                setattr(stored, attribute, None)
        if level == _LOCK_NONE and self.level >= _LOCK_SHARED:
            stored.shared -= 1
        self.level = min(level, self.level)

    def xCheckReservedLock(self) -> bool:
        if self._dead():
            return False
        stored = self.stored
        return any(
            holder is not None and holder is not self
            for holder in (stored.reserved, stored.pending, stored.exclusive)
        )

    def xFileControl(self, op: int, ptr: int) -> bool:
        return False

    def xSectorSize(self) -> int:
        return 4096

    def xDeviceCharacteristics(self) -> int:
        # A write not synced is lost whole or kept whole, never torn into its neighbours.
        return _IOCAP_POWERSAFE_OVERWRITE

    def xClose(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.generation != self.store.generation:
            return
        if self.level > _LOCK_NONE:
            self.xUnlock(_LOCK_NONE)
        if self.delete_on_close:
            with self.store.lock:
                if self.store.files.get(self.stored.name) is self.stored:
                    self.store.delete_file(self.stored.name)
