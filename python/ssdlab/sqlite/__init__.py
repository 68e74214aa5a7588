"""Real SQLite whose every file lives on a simulated SSD: a PEP 249 module.

::

    import ssdlab
    import ssdlab.sqlite

    dev = ssdlab.Device("tlc", store_data=True)
    con = ssdlab.sqlite.connect(dev, "bench.db")          # WAL, synchronous=FULL, hints on
    con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    start = con.clock_ns()
    con.executemany("INSERT INTO t (v) VALUES (?)", [("x",)] * 1000)
    con.commit()
    print(con.clock_ns() - start, con.stats()["connection"])

SQLite is APSW's copy (the standard library's ``sqlite3`` here cannot load extensions, and a
VFS registered in one SQLite copy is invisible to another), driven through a Python VFS
(:mod:`ssdlab.sqlite.vfs`) that turns each file access into device requests.

**Layout on the device.** The device's logical space is cut into extents (``extent_bytes``,
1 MiB by default) shared by all files of all databases on that device and handed out on demand,
lowest free extent first. A file is a list of extents plus a size: file byte ``x`` lives at
device byte ``extents[x // extent_bytes] * extent_bytes + x % extent_bytes``. Reads and writes
are split at extent boundaries into device requests (a log's contiguous writes, e.g. a WAL
frame's header and page, are gathered into one request until the log is synced or read); reading
unwritten space returns zeros, and a read past the end of the file returns what there is, zero-
filled, as SQLITE_IOERR_SHORT_READ (which SQLite expects). Truncating or deleting a file trims
the freed 4 KiB units and returns whole extents to the free list. When no extent is free a write
fails with SQLITE_FULL. A read the device reports ``uncorrectable`` fails with
SQLITE_IOERR_READ; other pages read normally. Files are named ``/<name>``, ``/<name>-wal``,
``/<name>-journal``; SQLite's temporary files and statement journals are on the device too,
deleted when closed. ``xSync`` is a device flush.

**Time.** SQLite's I/O is synchronous, so requests go one at a time at the device clock. Before
each I/O the host's CPU time since the previous one returned is added: ``cpu="wall"`` advances
the clock by that wall time times ``cpu_factor`` (everything the host did: SQLite, the VFS's own
Python and the application's code), ``cpu="zero"`` adds nothing. ``cpu="realtime"`` runs the
device in real time, as the NoFTL paper's emulator did: each request is issued at the wall
time it is made and returns when the wall clock reaches its simulated completion, so the
simulated clock follows the wall clock and the host's own time (the simulation's included)
counts as it passes. :meth:`Connection.clock_ns` is the simulated time.

**Checkpoints.** The connection checkpoints the WAL once more than ``wal_limit_bytes`` were
written to it since its last checkpoint (after the call that wrote them, with no transaction
open) rather than SQLite inside COMMIT, so that a checkpoint that fails (device full) never
reports a successful commit as failed.

**Deallocation.** WAL: when SQLite restarts the WAL (a new header over an old log, which SQLite
does only once every frame is checkpointed) the old frames are trimmed; when it truncates or
deletes the WAL, the freed space is. Main database: the freelist (header bytes 32-39 and the
trunk pages) is followed through the pages SQLite writes; at each sync of the database, leaf
pages that became free are trimmed (with a rollback journal, at the commit point: when the
journal is deleted or truncated).

**NoFTL** (``backend="native"``): the device's flash is handed to the host
(:meth:`ssdlab.Device.native`) and the store maps database pages straight onto flash pages,
collects garbage and levels wear itself, knowing what SQLite freed; the page map is rebuilt
from the pages' out-of-band areas after :func:`crash` (:mod:`ssdlab.sqlite.hostftl`).

**Hints** (``hints=True``): see :mod:`ssdlab.sqlite.sea`: WAL/journal/temp writes ``dyn``,
database pages ``dyn`` if written within the last ``sea_recent_checkpoints`` checkpoints,
prediction hints for each WAL frame's page, a settings hint at open.

**Concurrency.** Several databases and connections may share one device. The files have no
shared-memory methods, so in WAL mode (the default) a connection holds its database with
``locking_mode=EXCLUSIVE``: a second connection to the same database gets "database is locked"
until the first closes. ``journal_mode="delete"`` (or truncate/persist) lets connections share a
database under ordinary locking. ``threadsafety`` is 1: threads may share the module, not
connections.

**Durability.** ``synchronous="full"`` (the default) syncs the WAL at every commit, so a
committed transaction survives :func:`crash`; ``"normal"`` syncs only at checkpoints (faster;
the last transactions may be lost in a crash, never corrupted).
"""

from __future__ import annotations

from typing import Any

import apsw

from ssdlab.sqlite.dbapi import (
    Connection,
    Cursor,
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
)
from ssdlab.sqlite.store import EXTENT_BYTES, Host, store_for

apilevel = "2.0"
threadsafety = 1
paramstyle = "qmark"

#: Defaults: SQLite's own cache (about 2 MB) and WAL auto-checkpoint (1000 pages of 4 KiB).
DEFAULT_CACHE_BYTES = 2 << 20
DEFAULT_WAL_LIMIT_BYTES = 4 << 20

_JOURNAL_MODES = ("wal", "delete", "truncate", "persist")

#: Where the files live: the device's block interface (its FTL), or its native flash driven
#: by the store's host FTL (NoFTL).
BACKENDS = ("block", "native")

#: The kinds of SEA-SSD hint a connection may send (``hints=``), for ablations.
HINT_KINDS = ("classify", "predict", "settings")


def parse_hints(hints: Any) -> frozenset[str]:
    """``hints=`` as the set of kinds sent: True or ``"all"`` is every kind, False, None or
    ``"none"`` none, else a ``"+"``-separated string or an iterable of :data:`HINT_KINDS`
    (``"classify+predict"``)."""
    if hints is True or hints == "all":
        return frozenset(HINT_KINDS)
    if hints is False or hints is None or hints == "none":
        return frozenset()
    if isinstance(hints, str):
        kinds = hints.split("+")
    else:
        try:
            kinds = list(hints)
        except TypeError:
            kinds = [hints]
    unknown = [kind for kind in kinds if kind not in HINT_KINDS]
    if unknown:
        raise ValueError(
            "hints: expected True, False, 'all', 'none' or a '+'-separated list of "
            f"{', '.join(HINT_KINDS)}; got {hints!r}"
        )
    return frozenset(kinds)


_SYNCHRONOUS = ("full", "normal", "off")


def _positive_int(name: str, value: Any, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    return value


def connect(
    device: Any,
    name: str,
    *,
    hints: Any = True,
    cpu: str = "wall",
    cpu_factor: float = 1.0,
    page_size: int = 4096,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    wal_limit_bytes: int = DEFAULT_WAL_LIMIT_BYTES,
    journal_mode: str = "wal",
    synchronous: str = "full",
    sea_recent_checkpoints: int = 2,
    extent_bytes: int = EXTENT_BYTES,
    crash_tracking: bool = False,
    seed: int = 0,
    overrides: Any = None,
    backend: str = "block",
    host_gc_policy: str = "greedy",
) -> Connection:
    """Open (creating it if needed) database ``name`` on ``device``.

    Args:
        device: an :class:`ssdlab.Device` built with ``store_data=True``, or a preset name
            (a device is then built with ``seed``, ``overrides`` and ``store_data=True``).
        name: the database's file name on the device (``"bench.db"``).
        hints: which SEA-SSD hints to send: True (all: classification, prediction, settings),
            False (none), or some of them for an ablation, as ``"classify+predict"`` or
            ``{"classify", "predict"}`` (see :data:`HINT_KINDS`).
        cpu: host CPU-time model between I/Os: ``"wall"``, ``"zero"`` or ``"realtime"`` (the
            device paced to the wall clock; ``cpu_factor`` is then unused).
        cpu_factor: scale of the wall time under ``cpu="wall"``.
        page_size: SQLite page size of a new database (a power of two, 512 .. 65536).
        cache_bytes: SQLite's page cache (``PRAGMA cache_size``).
        wal_limit_bytes: the WAL bytes written after which the connection checkpoints (after
            the call that wrote them, when no transaction is open), and the size to which
            SQLite truncates the WAL afterwards (``journal_size_limit``).
        journal_mode: ``"wal"`` (default), ``"delete"``, ``"truncate"`` or ``"persist"``.
        synchronous: ``"full"`` (default), ``"normal"`` or ``"off"``.
        sea_recent_checkpoints: a page rewritten within this many checkpoints is ``dyn``.
        extent_bytes: allocation unit of the device's space (fixed per device).
        crash_tracking: keep what :func:`crash` needs (fixed per device; costs a copy of the
            files in memory). Not needed with ``backend="native"``, whose recovery reads the
            flash.
        backend: ``"block"`` (default): the files live on the device's block interface and
            its FTL; ``"native"``: NoFTL, the device's flash is driven natively and the store's
            host FTL maps database pages onto flash pages (:mod:`ssdlab.sqlite.hostftl`; the
            page size must be the flash page size, and no SEA-SSD hints are sent: ``hints``
            other than the default is an error). Fixed per device.
        host_gc_policy: the host FTL's GC victim choice, ``"greedy"`` or ``"cost_benefit"``.

    Raises:
        ValueError: a bad argument, or a device without ``store_data``.
        OperationalError: SQLite could not open the database (e.g. it is locked).
    """
    if isinstance(device, str):
        from ssdlab.device import Device

        device = Device(device, seed=seed, overrides=overrides, store_data=True)
    elif overrides is not None:
        raise ValueError("overrides: only for a preset name; the device is already built")
    if not isinstance(name, str) or not name.strip("/") or "\x00" in name:
        raise ValueError(f"name: expected a non-empty file name, got {name!r}")
    _positive_int("page_size", page_size, 512)
    if page_size & (page_size - 1) or page_size > 65536:
        raise ValueError(f"page_size: expected a power of two in 512 .. 65536, got {page_size}")
    _positive_int("cache_bytes", cache_bytes, 1024)
    _positive_int("wal_limit_bytes", wal_limit_bytes, page_size + 24)
    if journal_mode not in _JOURNAL_MODES:
        raise ValueError(
            f"journal_mode: expected one of {', '.join(_JOURNAL_MODES)}, got {journal_mode!r}"
        )
    if synchronous not in _SYNCHRONOUS:
        raise ValueError(
            f"synchronous: expected one of {', '.join(_SYNCHRONOUS)}, got {synchronous!r}"
        )
    kinds = parse_hints(hints)
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected 'block' or 'native', got {backend!r}")
    if backend == "native":
        if hints is not True and kinds:
            raise ValueError(
                "hints: SEA-SSD hints go to a device's FTL; with backend='native' the host "
                "places its pages itself (give hints=False)"
            )
        kinds = frozenset()
    host = Host(
        cpu=cpu,
        cpu_factor=cpu_factor,
        hints="classify" in kinds,
        predict="predict" in kinds,
    )
    store = store_for(
        device,
        extent_bytes=extent_bytes,
        crash_tracking=crash_tracking,
        sea_recent_checkpoints=sea_recent_checkpoints,
        backend=backend,
        host_ftl={"gc_policy": host_gc_policy},
    )
    if backend == "native" and page_size != store.ftl.page_bytes:
        raise ValueError(
            f"page_size: with backend='native' a database page is a flash page "
            f"({store.ftl.page_bytes} bytes), got {page_size}"
        )
    vfs_name = store.acquire_vfs()
    store.adopt(host)
    path = "/" + name.lstrip("/")
    try:
        with store.lock:
            store.active = host
            try:
                raw = apsw.Connection(
                    path,
                    flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE,
                    vfs=vfs_name,
                )
            finally:
                store.active = None
    except apsw.Error as error:
        store.retire(host)
        store.release_vfs()
        from ssdlab.sqlite.dbapi import _translate

        raise _translate(error) from error
    connection = Connection(store, device, host, raw)
    # Without shared memory SQLite opens a WAL only in exclusive locking mode, which must be
    # set before the first access to the file.
    pragmas = ["PRAGMA locking_mode = EXCLUSIVE"] if journal_mode == "wal" else []
    pragmas += [
        f"PRAGMA page_size = {page_size}",
        f"PRAGMA cache_size = -{max(1, cache_bytes // 1024)}",
        f"PRAGMA synchronous = {synchronous.upper()}",
    ]
    if journal_mode == "wal":
        pragmas += ["PRAGMA journal_mode = WAL"]
    else:
        pragmas += [f"PRAGMA journal_mode = {journal_mode.upper()}"]
    pragmas += [
        # The connection checkpoints by itself (see Connection._checkpoint).
        "PRAGMA wal_autocheckpoint = 0",
        f"PRAGMA journal_size_limit = {wal_limit_bytes}",
    ]
    try:
        for pragma in pragmas:
            connection._call(lambda sql=pragma: list(raw.execute(sql)))
        if journal_mode == "wal":
            # EXCLUSIVE takes effect at the first access: take it now, so a second connection
            # fails at connect rather than at its first statement.
            connection._call(lambda: list(raw.execute("SELECT count(*) FROM sqlite_schema")))
    except Error:
        connection.close()
        raise
    connection._wal_name = path + "-wal"
    connection._wal_limit_bytes = wal_limit_bytes
    if "settings" in kinds:
        store.hinter.settings(wal_bytes=wal_limit_bytes, cache_bytes=cache_bytes)
    return connection


def crash(device: Any) -> dict[str, int] | None:
    """Simulate a power cut on ``device``: every write its SQLite files did not sync is lost
    (see :meth:`ssdlab.sqlite.store.DeviceStore.crash`). Connections open on it are dead
    afterwards (close them; their calls fail); open new ones to recover. Needs the device's
    connections to have been opened with ``crash_tracking=True``, except on native flash
    (``backend="native"``), where what was programmed survives and the host FTL rebuilds its
    page map from the pages' OOB: the call then returns that recovery's report (pages scanned,
    live pages, the scan's simulated ns, free blocks)."""
    from ssdlab.sqlite.store import _STORES

    store = _STORES.get(device)
    if store is None:
        raise ValueError("device: no SQLite files were opened on it")
    return store.crash()


__all__ = [
    "BACKENDS",
    "HINT_KINDS",
    "Connection",
    "Cursor",
    "DataError",
    "DatabaseError",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "Warning",
    "apilevel",
    "connect",
    "crash",
    "paramstyle",
    "parse_hints",
    "threadsafety",
]
