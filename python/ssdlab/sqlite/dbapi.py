"""PEP 249 (DB-API 2.0) connections and cursors over APSW, on a device's VFS.

Transactions follow the standard library's ``sqlite3`` (its legacy, default mode): a
transaction is begun implicitly (``BEGIN``) before an INSERT, UPDATE, DELETE or REPLACE when
none is open, and lasts until :meth:`Connection.commit` or :meth:`Connection.rollback`; other
statements (SELECT, DDL, PRAGMA) run as they are, inside the open transaction if there is one.
Closing a connection with a transaction open rolls it back.

Every call into SQLite marks the connection as the device's active host, so the VFS charges
its I/O (and CPU time) to this connection; calls on one device take turns under the store's
lock. SQLite errors become the PEP 249 exceptions below, carrying ``sqlite_errorcode`` and
``sqlite_errorname`` as the standard library's do.
"""

from __future__ import annotations

import contextlib
import gc
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import apsw

from ssdlab.sqlite.store import DeviceStore, Host


class Warning(Exception):
    """PEP 249 ``Warning`` (the name the standard requires, shadowing the builtin here)."""


class Error(Exception):
    """Base of every PEP 249 error; ``sqlite_errorcode``/``sqlite_errorname`` are set for
    errors SQLite reported."""

    sqlite_errorcode: int | None = None
    sqlite_errorname: str | None = None


class InterfaceError(Error):
    """Misuse of the interface: a closed connection or cursor."""


class DatabaseError(Error):
    """An error of the database."""


class DataError(DatabaseError):
    """A value out of range or of the wrong type."""


class OperationalError(DatabaseError):
    """The database's operation failed: I/O error, disk full, locked, SQL syntax."""


class IntegrityError(DatabaseError):
    """A constraint failed."""


class InternalError(DatabaseError):
    """SQLite's internal error."""


class ProgrammingError(DatabaseError):
    """Wrong use of SQL: bad parameters, a statement on a finished cursor."""


class NotSupportedError(DatabaseError):
    """A feature SQLite does not have."""


_MAPPING: tuple[tuple[type[BaseException], type[Error]], ...] = (
    (apsw.ConstraintError, IntegrityError),
    (apsw.MismatchError, DataError),
    (apsw.TooBigError, DataError),
    (apsw.RangeError, DataError),
    (apsw.BindingsError, ProgrammingError),
    (apsw.ExecutionCompleteError, ProgrammingError),
    (apsw.CursorClosedError, InterfaceError),
    (apsw.ConnectionClosedError, InterfaceError),
    (apsw.InternalError, InternalError),
    (apsw.CorruptError, DatabaseError),
    (apsw.NotADBError, DatabaseError),
    (apsw.Error, OperationalError),
)


def _translate(error: BaseException) -> Error:
    for apsw_type, ours in _MAPPING:
        if isinstance(error, apsw_type):
            translated = ours(*error.args)
            code = getattr(error, "extendedresult", None)
            if code is not None:
                translated.sqlite_errorcode = code
                translated.sqlite_errorname = apsw.mapping_result_codes.get(
                    code, apsw.mapping_extended_result_codes.get(code)
                )
            return translated
    return Error(str(error))


#: A statement that begins a transaction implicitly (leading comments skipped).
_DML = re.compile(
    r"^\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*(insert|update|delete|replace)\b", re.I | re.S
)
#: Per statement text seen: (is DML, may return rows). A workload repeats a few hundred
#: texts, and the match cost more than the rest of a short statement's bookkeeping.
_KINDS_SEEN: dict[str, tuple[bool, bool]] = {}
_KINDS_SEEN_MAX = 4096

# Bound once: Connection._call runs them around every call into SQLite.
_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable


def _statement_kind(sql: str) -> tuple[bool, bool]:
    known = _KINDS_SEEN.get(sql)
    if known is None:
        dml = _DML.match(sql) is not None
        known = (dml, not dml or "returning" in sql.lower())
        if len(_KINDS_SEEN) < _KINDS_SEEN_MAX:
            _KINDS_SEEN[sql] = known
    return known


@contextmanager
def _quiet_vfs_errors() -> Iterator[None]:
    """Around a close: SQLite checkpoints the WAL and gives up quietly when that fails (the
    device full: the WAL stays, nothing is lost), and APSW then reports the VFS's exception as
    unraisable. Those reports are dropped here; any other unraisable goes to the usual hook."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, apsw.Error):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


class Connection:
    """A PEP 249 connection to a database on a simulated device (see :func:`connect`)."""

    def __init__(self, store: DeviceStore, device: Any, host: Host, raw: apsw.Connection) -> None:
        self._store = store
        self._device = device  # keeps the device (held weakly by the store) alive
        self._host = host
        self._raw = raw
        self._generation = store.generation
        self.closed = False
        #: Checkpoints run by the connection: WAL file name and size limit (0: none).
        self._wal_name = ""
        self._wal_limit_bytes = 0
        self.checkpoint_errors = 0
        # PEP 249 optional extension: the exceptions as attributes.
        for exc in (
            Warning, Error, InterfaceError, DatabaseError, DataError, OperationalError,
            IntegrityError, InternalError, ProgrammingError, NotSupportedError,
        ):  # fmt: skip
            setattr(self, exc.__name__, exc)

    # -- running SQLite ----------------------------------------------------------------------

    def _call(self, function: Any, *args: Any) -> Any:
        """Run ``function(*args)`` against SQLite with this connection's I/O accounted to it."""
        if self.closed:
            raise InterfaceError("cannot operate on a closed connection")
        store = self._store
        if store.generation != self._generation:
            self._check_alive()
        # No cycle collection while SQLite runs: a collection inside a VFS call could free a
        # dropped cursor held in a reference cycle and finalize its statement there, entering
        # SQLite in the middle of its own I/O (seen: "database disk image is malformed" when a
        # workload's session objects, cyclic, held cursors). Collections wait for the return.
        collecting = _gc_isenabled()
        with store.lock:
            previous = store.active
            store.active = self._host
            if collecting:
                _gc_disable()
            try:
                result = function(*args)
                # A crash during the call: the host never saw it return (no acknowledgement).
                if store.generation != self._generation:
                    self._check_alive()
                if self._wal_limit_bytes:
                    wal = store.files.get(self._wal_name)
                    if wal is not None and wal.written_since_checkpoint > self._wal_limit_bytes:
                        self._checkpoint(wal)
                return result
            except apsw.Error as error:
                raise _translate(error) from error
            finally:
                store.active = previous
                if collecting:
                    _gc_enable()

    def _check_alive(self) -> None:
        if self._store.generation != self._generation:
            raise OperationalError(
                "the device crashed (simulated) after this connection opened: close it and "
                "open a new one"
            )

    def _checkpoint(self, wal: Any) -> None:
        """Checkpoint the WAL once more than its limit was written to it since the last
        checkpoint and no transaction is open (SQLite's auto-checkpoint counts frames alike).

        The connection does this between calls instead of SQLite's auto-checkpoint inside
        COMMIT: a checkpoint that fails (the device full) would turn a commit that succeeded
        into an error there. A failed checkpoint here loses nothing (the WAL keeps every frame)
        and is counted in ``checkpoint_errors``."""
        if not self._raw.get_autocommit():
            return
        try:
            for _ in self._raw.execute("PRAGMA wal_checkpoint(PASSIVE)"):
                pass
        except apsw.Error:
            self.checkpoint_errors += 1
        else:
            wal.written_since_checkpoint = 0

    @property
    def in_transaction(self) -> bool:
        return not self._call(self._raw.get_autocommit)

    # -- PEP 249 -----------------------------------------------------------------------------

    def cursor(self) -> Cursor:
        if self.closed:
            raise InterfaceError("cannot operate on a closed connection")
        return Cursor(self)

    def commit(self) -> None:
        if self.in_transaction:
            self._call(lambda: self._raw.execute("COMMIT").close())

    def rollback(self) -> None:
        if self.in_transaction:
            self._call(lambda: self._raw.execute("ROLLBACK").close())

    def close(self) -> None:
        """Close the connection (a transaction still open is rolled back). Safe to repeat.

        SQLite checkpoints the WAL on close; a failure there (the device full) leaves the WAL
        for the next connection and is counted in ``checkpoint_errors``, not raised."""
        if self.closed:
            return
        store = self._store
        collecting = gc.isenabled()  # see _call
        with store.lock:
            previous = store.active
            store.active = self._host
            if collecting:
                gc.disable()
            try:
                with _quiet_vfs_errors():
                    self._raw.close(True)
            except apsw.Error:
                # Closing checkpoints the WAL; if that fails (the device full) the WAL stays
                # and the next connection reads it: nothing is lost, the close still happened.
                self.checkpoint_errors += 1
            finally:
                store.active = previous
                if collecting:
                    gc.enable()
                self.closed = True
                store.retire(self._host)
                store.release_vfs()

    def __del__(self) -> None:
        # Close through this object, so the VFS knows whose close it is (after a crash, a dead
        # connection's close must not delete the WAL the next connection recovers from).
        with contextlib.suppress(Exception):
            self.close()

    def execute(self, sql: str, parameters: Any = ()) -> Cursor:
        """A new cursor that has executed ``sql`` (the standard library's shortcut)."""
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> Cursor:
        return self.cursor().executemany(sql, seq_of_parameters)

    def executescript(self, sql: str) -> Cursor:
        """Run several statements; an open transaction is committed first, as the standard
        library does."""
        self.commit()
        cursor = self.cursor()
        self._call(lambda: list(self._raw.execute(sql)))
        return cursor

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Like the standard library: commit on success, roll back on an exception (the
        connection stays open)."""
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    # -- ssdlab ------------------------------------------------------------------------------

    def clock_ns(self) -> int:
        """The device's simulated time now, in ns (measure latency in simulated time with it)."""
        return self._store._handle.now

    def leave_realtime(self) -> None:
        """Stop pacing the device to the wall clock (``cpu="realtime"``): later I/O runs in
        simulated time with no host time added, e.g. a check after the measured part of a run.
        The pacing's counters stay in :meth:`stats`."""
        host = self._host
        if host.pacer is not None:
            host.paced, host.pacer = host.pacer, None
            host.cpu_wall = False

    def stats(self) -> dict[str, Any]:
        """This connection's I/O counters, and the VFS's totals and hints on this device."""
        return {
            "connection": self._host.counters.as_dict(),
            "vfs": self._store.counters().as_dict(),
            "hints": self._store.hint_counters().as_dict(),
            "hints_refused": self._store.hinter.refused,
            "crash_restore_writes": self._store.crash_restore_writes,
            "checkpoint_errors": self.checkpoint_errors,
            "extents": {"total": self._store.allocator.total, "free": self._store.allocator.free},
            **({"host_ftl": self._store.ftl.stats()} if hasattr(self._store, "ftl") else {}),
            **({"realtime": self._pacing()} if self._host.paced is not None else {}),
        }

    def _pacing(self) -> dict[str, int]:
        """A real-time connection's pacing: requests paced and the wall time the host spent
        waiting for their completions (the rest of the run's wall time is the host's own)."""
        pacer = self._host.paced
        assert pacer is not None
        return {"requests": pacer.requests, "waited_ns": pacer.waited_ns}

    @property
    def raw(self) -> apsw.Connection:
        """The underlying APSW connection (its calls bypass the I/O accounting of :meth:`_call`
        only in which connection they are charged to)."""
        return self._raw


class Cursor:
    """A PEP 249 cursor."""

    arraysize: int

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.arraysize = 1
        self._raw = connection._raw.cursor()
        # The columns of each statement as it starts: APSW has no description once a statement
        # finished at its first step (a SELECT with no rows), the standard library does.
        # The trace writes into a list the cursor holds, never into the cursor itself: a
        # cursor -> APSW cursor -> trace -> cursor cycle is freed only by Python's cycle
        # collector, which may run inside a VFS call and finalize the statement there,
        # re-entering SQLite in the middle of its own I/O (a database was corrupted so).
        columns: list[tuple[tuple[str, Any], ...]] = [()]
        self._columns = columns

        def capture_columns(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            columns[0] = cursor.get_description()
            return True

        self._capture_columns = capture_columns
        self._rows: Iterator[Any] | None = None
        self._described_columns: tuple[tuple[str, Any], ...] = ()
        self._description: tuple[tuple[Any, ...], ...] | None = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.closed = False

    def _check(self) -> None:
        if self.closed:
            raise InterfaceError("cannot operate on a closed cursor")

    @property
    def description(self) -> tuple[tuple[Any, ...], ...] | None:
        # Built when asked for: most statements of a workload never look at it.
        if self._description is None and self._described_columns:
            self._description = tuple(
                (name, None, None, None, None, None, None) for name, _ in self._described_columns
            )
        return self._description

    def execute(self, sql: str, parameters: Any = ()) -> Cursor:
        if self.closed:
            raise InterfaceError("cannot operate on a closed cursor")
        self.connection._call(self._execute, sql, parameters, *_statement_kind(sql))
        return self

    def _execute(self, sql: str, parameters: Any, dml: bool, rows: bool) -> None:
        raw = self.connection._raw
        if dml:
            if raw.get_autocommit():
                raw.execute("BEGIN")
            before = raw.total_changes()
        self._columns[0] = ()
        # Columns are caught as a statement starts, and only for one that can return rows
        # (DML without RETURNING has no description, and the trace costs a Python call).
        self._raw.exec_trace = self._capture_columns if rows else None
        self._rows = iter(self._raw.execute(sql, parameters))
        # The columns of the statement as it started (a later statement of the same text
        # would replace them while the rows are read).
        self._described_columns = self._columns[0]
        self._description = None
        if dml:
            self.rowcount = raw.total_changes() - before
            self.lastrowid = raw.last_insert_rowid()
        else:
            self.rowcount = -1

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> Cursor:
        self._check()
        connection = self.connection
        raw = connection._raw
        parameters = list(seq_of_parameters)
        dml = _statement_kind(sql)[0]

        def run() -> None:
            if dml and raw.get_autocommit():
                raw.execute("BEGIN")
            before = raw.total_changes()
            self._raw.exec_trace = None  # no description after executemany
            if parameters:
                for _ in self._raw.executemany(sql, parameters):
                    pass
            self._rows = iter(())
            self._described_columns = ()
            self._description = None
            self.rowcount = raw.total_changes() - before if dml else -1
            if dml:
                self.lastrowid = raw.last_insert_rowid()

        connection._call(run)
        return self

    def _next(self) -> Any:
        if self._rows is None:
            raise ProgrammingError("no statement executed on this cursor")
        return next(self._rows, None)

    def fetchone(self) -> tuple[Any, ...] | None:
        self._check()
        return self.connection._call(self._next)

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        self._check()
        count = self.arraysize if size is None else size

        def take() -> list[tuple[Any, ...]]:
            rows = []
            for _ in range(count):
                row = self._next()
                if row is None:
                    break
                rows.append(row)
            return rows

        return self.connection._call(take)

    def fetchall(self) -> list[tuple[Any, ...]]:
        self._check()

        def take() -> list[tuple[Any, ...]]:
            if self._rows is None:
                raise ProgrammingError("no statement executed on this cursor")
            return list(self._rows)

        return self.connection._call(take)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while (row := self.fetchone()) is not None:
            yield row

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._rows = None
            if not self.connection.closed:
                self.connection._call(self._raw.close)

    def setinputsizes(self, sizes: Sequence[Any]) -> None:
        """PEP 249: does nothing."""

    def setoutputsize(self, size: int, column: int | None = None) -> None:
        """PEP 249: does nothing."""
