"""SQLite on a simulated device: SQL results, layout, time, trims, errors, hints, crashes,
PEP 249."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

import ssdlab
import ssdlab.sqlite as sq
from ssdlab.sqlite.freelist import FreelistTracker
from ssdlab.sqlite.sea import DYN, STAT, SeaHinter
from ssdlab.sqlite.store import _STORES
from support import PRESET, TINY_OVERRIDES, PowerCut

#: The statements both VFSs run; their query results must agree.
SCRIPT = [
    ("CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT, n REAL)", ()),
    ("CREATE INDEX kv_v ON kv (v)", ()),
    *[("INSERT INTO kv (v, n) VALUES (?, ?)", (f"value-{i % 97}" * 3, i / 7)) for i in range(1500)],
    ("UPDATE kv SET n = n * 2 WHERE k % 3 = 0", ()),
    ("DELETE FROM kv WHERE k % 5 = 0", ()),
    ("CREATE TABLE big (b BLOB)", ()),
    *[("INSERT INTO big VALUES (zeroblob(?))", (3000 + i,)) for i in range(200)],
    ("DELETE FROM big WHERE rowid % 2 = 0", ()),
]
QUERIES = [
    "SELECT count(*), sum(n), min(v), max(v) FROM kv",
    "SELECT v, count(*) FROM kv GROUP BY v ORDER BY v LIMIT 20",
    "SELECT k, v FROM kv WHERE v = 'value-5value-5value-5' ORDER BY k",
    "SELECT count(*), sum(length(b)) FROM big",
]


#: The seassd preset's cells on 2 dies x 2 planes (the TPC-C coupling benchmark's device).
SEASSD_SMALL = {
    "geometry.channels": 2,
    "geometry.chips_per_channel": 1,
    "geometry.blocks_per_plane": 160,
    "geometry.pages_per_block": 32,
}


def tiny_device(*extra: str, cls: type[ssdlab.Device] = ssdlab.Device) -> ssdlab.Device:
    return cls(PRESET, overrides=[*TINY_OVERRIDES, *extra], store_data=True)


@pytest.fixture
def device() -> ssdlab.Device:
    return tiny_device()


def run_script(execute: Any) -> None:
    for sql, params in SCRIPT:
        execute(sql, params)


# -- SQL round trips --------------------------------------------------------------------------


def test_query_results_match_the_default_vfs_on_tmpfs(device: ssdlab.Device, tmp_path: Path):
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() else tmp_path
    reference_path = base / f"ssdlab-vfs-reference-{id(tmp_path)}.db"
    reference = apsw.Connection(str(reference_path))
    try:
        reference.execute("PRAGMA journal_mode = WAL")
        reference.execute("BEGIN")
        run_script(lambda sql, params: reference.execute(sql, params))
        reference.execute("COMMIT")
        expected = [list(reference.execute(q)) for q in QUERIES]
    finally:
        reference.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{reference_path}{suffix}").unlink(missing_ok=True)

    con = sq.connect(device, "bench.db", cpu="zero")
    run_script(con.execute)
    con.commit()
    assert [con.execute(q).fetchall() for q in QUERIES] == expected
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()
    # Everything is on the device: a new connection reads it back.
    again = sq.connect(device, "bench.db", cpu="zero")
    assert [again.execute(q).fetchall() for q in QUERIES] == expected
    assert again.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    again.close()


def test_two_databases_share_one_device_in_separate_extents(device: ssdlab.Device):
    a = sq.connect(device, "a.db", cpu="zero")
    b = sq.connect(device, "b.db", cpu="zero")
    for con, word in ((a, "alpha"), (b, "beta")):
        con.execute("CREATE TABLE t (x)")
        con.executemany("INSERT INTO t VALUES (?)", [(word,)] * 50)
        con.commit()
    assert a.execute("SELECT DISTINCT x FROM t").fetchall() == [("alpha",)]
    assert b.execute("SELECT DISTINCT x FROM t").fetchall() == [("beta",)]
    files = _STORES[device].files
    assert not set(files["/a.db"].extents) & set(files["/b.db"].extents)
    a.close()
    b.close()


def test_a_second_connection_to_a_wal_database_is_refused_until_the_first_closes(device):
    first = sq.connect(device, "one.db", cpu="zero")
    with pytest.raises(sq.OperationalError, match="locked"):
        sq.connect(device, "one.db", cpu="zero")
    first.close()
    sq.connect(device, "one.db", cpu="zero").close()


def test_rollback_journal_mode_lets_connections_share_a_database(device: ssdlab.Device):
    a = sq.connect(device, "shared.db", cpu="zero", journal_mode="delete")
    b = sq.connect(device, "shared.db", cpu="zero", journal_mode="delete")
    a.execute("CREATE TABLE t (x)")
    a.execute("INSERT INTO t VALUES (1)")
    a.commit()
    assert b.execute("SELECT x FROM t").fetchall() == [(1,)]
    assert a.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    a.close()
    b.close()


@pytest.mark.parametrize(
    ("option", "value"), [("extent_bytes", 64 << 10), ("crash_tracking", True),
                          ("sea_recent_checkpoints", 5)]
)  # fmt: skip
def test_connections_on_one_device_must_agree_on_its_layout(device, option: str, value: Any):
    first = sq.connect(device, "a.db", cpu="zero")
    with pytest.raises(ValueError, match=option):
        sq.connect(device, "b.db", cpu="zero", **{option: value})
    first.close()


def test_a_device_without_stored_data_is_refused():
    with pytest.raises(ValueError, match="store_data"):
        sq.connect(ssdlab.Device(PRESET, overrides=list(TINY_OVERRIDES)), "x.db")


def test_a_preset_name_builds_a_device_with_data(tmp_path: Path):
    con = sq.connect(PRESET, "p.db", overrides=list(TINY_OVERRIDES), cpu="zero")
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES ('kept')")
    con.commit()
    assert con.execute("SELECT x FROM t").fetchone() == ("kept",)
    con.close()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("cpu", "fast"),
        ("cpu_factor", -1),
        ("page_size", 3000),
        ("journal_mode", "memory"),
        ("synchronous", "extra"),
        ("sea_recent_checkpoints", -1),
        ("extent_bytes", 1000),
    ],
)
def test_bad_options_name_themselves(device: ssdlab.Device, option: str, value: Any):
    with pytest.raises(ValueError, match=option):
        sq.connect(device, "bad.db", **{option: value})


# -- simulated time ---------------------------------------------------------------------------


def test_the_clock_advances_with_io_and_not_with_host_time_under_cpu_zero(device):
    con = sq.connect(device, "t.db", cpu="zero")
    start = con.clock_ns()
    con.execute("CREATE TABLE t (x)")
    con.commit()
    after_io = con.clock_ns()
    assert after_io > start
    time.sleep(0.02)
    con.execute("SELECT 1").fetchall()  # no I/O: the page cache holds everything
    assert con.clock_ns() == after_io
    con.close()


def test_cpu_wall_adds_the_host_time_between_ios(device: ssdlab.Device):
    con = sq.connect(device, "w.db", cpu="wall", cpu_factor=2.0)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    before = con.clock_ns()
    time.sleep(0.02)
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    # 20 ms of host time, doubled, lands on the clock before the commit's I/O.
    assert con.clock_ns() - before >= 40_000_000
    con.close()


# -- layout and deallocation ------------------------------------------------------------------


def test_a_checkpoint_that_truncates_the_wal_trims_it(device: ssdlab.Device):
    con = sq.connect(device, "ck.db", cpu="zero")
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [("y" * 500,)] * 500)
    con.commit()
    wal = _STORES[device].files["/ck.db-wal"]
    assert wal.size > 0
    trims = con.stats()["connection"]["trims"]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    assert wal.size == 0
    assert wal.extents == []
    assert con.stats()["connection"]["trims"] > trims
    con.close()


def test_a_wal_restart_trims_the_checkpointed_frames(device: ssdlab.Device):
    con = sq.connect(device, "rs.db", cpu="zero", wal_limit_bytes=64 << 10)
    con.execute("CREATE TABLE t (x)")
    for round_ in range(6):
        con.executemany("INSERT INTO t VALUES (?)", [("z" * 400,)] * 100)
        con.commit()
        if round_ == 2:
            trims_mid = con.stats()["connection"]["trims"]
    assert con.stats()["connection"]["trims"] > trims_mid
    con.close()


def test_freed_database_pages_are_trimmed(device: ssdlab.Device):
    con = sq.connect(device, "fl.db", cpu="zero")
    con.execute("CREATE TABLE keep (x)")
    con.execute("CREATE TABLE gone (b BLOB)")
    con.executemany("INSERT INTO gone VALUES (zeroblob(?))", [(3500,)] * 200)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    before = con.stats()["connection"]["trim_bytes"]
    con.execute("DROP TABLE gone")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    free = con.execute("PRAGMA freelist_count").fetchone()[0]
    assert free > 100
    tracker = _STORES[device].files["/fl.db"].freelist
    assert tracker.free_count == free
    # Every leaf is trimmed (trunk pages hold the list and stay).
    assert len(tracker.free_leaves) >= free - 2
    assert con.stats()["connection"]["trim_bytes"] - before >= len(tracker.free_leaves) * 4096
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    # Reusing the free pages reads and writes them as usual.
    con.execute("CREATE TABLE again (b BLOB)")
    con.executemany("INSERT INTO again VALUES (zeroblob(?))", [(3500,)] * 150)
    con.commit()
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()


def test_freed_pages_wait_for_the_rollback_journal_commit_point(device: ssdlab.Device):
    con = sq.connect(device, "rj.db", cpu="zero", journal_mode="delete")
    con.execute("CREATE TABLE gone (b BLOB)")
    con.executemany("INSERT INTO gone VALUES (zeroblob(?))", [(3500,)] * 100)
    con.commit()
    store = _STORES[device]
    before = store.counters().trim_bytes
    con.execute("DROP TABLE gone")
    con.commit()  # the journal is deleted: its commit point
    free = con.execute("PRAGMA freelist_count").fetchone()[0]
    assert free > 90
    assert store.counters().trim_bytes - before >= (free - 2) * 4096
    assert store.files["/rj.db"].pending_leaf_trims == set()
    assert "/rj.db-journal" not in store.files
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()


def test_temporary_files_live_on_the_device_and_go_when_closed(device: ssdlab.Device):
    con = sq.connect(device, "tmp.db", cpu="zero", cache_bytes=16 << 10)
    con.execute("PRAGMA temp_store = FILE").fetchall()
    con.execute("CREATE TEMP TABLE scratch (b BLOB)")
    con.execute("PRAGMA temp.cache_size = 4").fetchall()  # spill to the file at once
    con.executemany("INSERT INTO scratch VALUES (zeroblob(?))", [(2000,)] * 200)
    store = _STORES[device]
    temp = [name for name in store.files if name.startswith("/.temp-")]
    assert temp
    assert max(store.files[name].size for name in temp) > 100_000
    assert con.execute("SELECT count(*) FROM scratch").fetchone() == (200,)
    con.close()
    assert not [name for name in store.files if name.startswith("/.temp-")]


def test_vacuum_truncates_and_trims_the_database(device: ssdlab.Device):
    con = sq.connect(device, "vac.db", cpu="zero")
    con.execute("CREATE TABLE t (b BLOB)")
    con.executemany("INSERT INTO t VALUES (zeroblob(?))", [(3000,)] * 300)
    con.commit()
    con.execute("DELETE FROM t")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    size = _STORES[device].files["/vac.db"].size
    con.execute("VACUUM").fetchall()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    assert _STORES[device].files["/vac.db"].size < size
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()


def test_deleting_a_database_file_trims_its_extents(device: ssdlab.Device):
    con = sq.connect(device, "del.db", cpu="zero", journal_mode="delete")
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [("q" * 300,)] * 300)
    con.commit()
    store = _STORES[device]
    free = store.allocator.free
    trims = store.counters().trims
    con.close()
    store.vfs = store.vfs or None
    from ssdlab.sqlite.vfs import DeviceVfs

    vfs = DeviceVfs(store)
    vfs.xDelete("/del.db", False)
    vfs.unregister()
    assert store.allocator.free > free
    assert store.counters().trims > trims


# -- errors -----------------------------------------------------------------------------------


def test_a_full_device_gives_sqlite_full_and_keeps_what_was_committed():
    dev = tiny_device()
    con = sq.connect(dev, "full.db", cpu="zero")
    con.execute("CREATE TABLE t (b BLOB)")
    con.commit()
    committed = 0

    def fill() -> None:
        nonlocal committed
        for _ in range(100):
            con.executemany("INSERT INTO t VALUES (zeroblob(?))", [(60_000,)] * 20)
            con.commit()
            committed += 20

    with pytest.raises(sq.OperationalError) as raised:
        fill()
    assert raised.value.sqlite_errorname == "SQLITE_FULL"
    assert "full" in str(raised.value)
    assert con.stats()["connection"]["full_errors"] >= 1
    con.rollback()
    assert committed > 0
    assert con.execute("SELECT count(*) FROM t").fetchone() == (committed,)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()
    again = sq.connect(dev, "full.db", cpu="zero")
    assert again.execute("SELECT count(*) FROM t").fetchone() == (committed,)
    assert again.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    again.close()


class FaultyHandle:
    """A device handle whose reads of device bytes [low, high) come back uncorrectable once
    ``armed``, as the device reports a page that failed ECC."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self.armed = False
        self.low = self.high = 0

    def submit_quick(self, op: str, offset: int, length: int, data: Any, hint: Any) -> Any:
        read, uncorrectable = self._handle.submit_quick(op, offset, length, data, hint)
        if op == "read" and self.armed and offset < self.high and offset + length > self.low:
            uncorrectable = True
        return read, uncorrectable

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def test_a_device_that_fails_ecc_on_every_read_gives_io_errors_not_a_crash():
    # At this RBER without retries every page read fails ECC (see tests/test_device.py).
    noisy = tiny_device("ecc.rber_base=0.05", "ecc.max_read_retries=0")
    with pytest.raises(sq.OperationalError) as raised:
        sq.connect(noisy, "ecc.db", cpu="zero")
    assert raised.value.sqlite_errorname == "SQLITE_IOERR_READ"
    assert "uncorrectable" in str(raised.value)


def test_an_uncorrectable_read_fails_that_query_and_the_engine_carries_on():
    dev = tiny_device()
    faulty = dev._handle = FaultyHandle(dev._handle)
    con = sq.connect(dev, "ecc.db", cpu="zero", cache_bytes=64 << 10)
    con.execute("CREATE TABLE small (x)")
    con.execute("INSERT INTO small VALUES ('fine')")
    con.execute("CREATE TABLE big (b BLOB)")
    con.executemany("INSERT INTO big VALUES (zeroblob(?))", [(3000,)] * 200)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    store = _STORES[dev]
    base = store.files["/ecc.db"].extents[0] * store.extent_bytes
    faulty.low, faulty.high, faulty.armed = base + 3 * 4096, base + store.extent_bytes, True
    with pytest.raises(sq.OperationalError) as raised:
        con.execute("SELECT sum(length(b)) FROM big").fetchall()
    assert raised.value.sqlite_errorname == "SQLITE_IOERR_READ"
    assert con.stats()["connection"]["read_errors"] >= 1
    assert con.execute("SELECT x FROM small").fetchall() == [("fine",)]
    faulty.armed = False
    assert con.execute("SELECT count(*) FROM big").fetchone() == (200,)
    con.close()


# -- hints ------------------------------------------------------------------------------------


class FakeSeaDevice:
    """Records the hints a :class:`SeaHinter` sends."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def sea_predict_many(self, ranges: list[tuple[int, int]]) -> None:
        self.calls.extend(("predict", offset, length) for offset, length in ranges)

    def sea_settings(self, *, wal_bytes: int, cache_bytes: int) -> None:
        self.calls.append(("settings", wal_bytes, cache_bytes))


def test_sea_rule_a_page_is_dyn_when_written_within_the_last_n_checkpoints():
    hinter = SeaHinter(FakeSeaDevice(), recent_checkpoints=2)
    assert hinter.database_write("/d", 5) is STAT  # first write
    assert hinter.database_write("/d", 5) is DYN  # again in the same checkpoint
    hinter.checkpoint("/d")
    hinter.checkpoint("/d")
    assert hinter.database_write("/d", 5) is DYN  # written 2 checkpoints ago
    for _ in range(3):
        hinter.checkpoint("/d")
    assert hinter.database_write("/d", 5) is STAT  # 3 checkpoints ago: too old
    assert hinter.database_write("/other", 5) is STAT  # per database
    assert hinter.log_write() is DYN
    assert (hinter.counters.dyn, hinter.counters.stat) == (3, 3)


def test_sea_rule_zero_recent_checkpoints_means_only_the_current_one():
    hinter = SeaHinter(FakeSeaDevice(), recent_checkpoints=0)
    hinter.database_write("/d", 1)
    assert hinter.database_write("/d", 1) is DYN
    hinter.checkpoint("/d")
    assert hinter.database_write("/d", 1) is STAT


def test_sea_predictions_and_settings_go_to_the_device_and_are_counted():
    fake = FakeSeaDevice()
    hinter = SeaHinter(fake)
    hinter.settings(wal_bytes=4 << 20, cache_bytes=2 << 20)
    hinter.predict(8192, 4096)
    hinter.predict(16384, 4096)
    assert fake.calls == [("settings", 4 << 20, 2 << 20)]  # predictions wait for the next I/O
    hinter.send_predictions()
    assert fake.calls[1:] == [("predict", 8192, 4096), ("predict", 16384, 4096)]
    assert (hinter.counters.settings, hinter.counters.predictions) == (1, 2)
    hinter.send_predictions()
    assert len(fake.calls) == 3  # nothing more was queued
    assert hinter.counters.predictions == 2


def test_sea_hinter_stops_when_the_device_refuses_sea_hints():
    class Refusing(FakeSeaDevice):
        def sea_settings(self, *, wal_bytes: int, cache_bytes: int) -> None:
            raise ssdlab.DeviceError("sea hints need two distinct placement handles")

    fake = Refusing()
    hinter = SeaHinter(fake)
    hinter.settings(wal_bytes=1, cache_bytes=1)
    hinter.predict(0, 4096)
    assert "placement handles" in hinter.refused
    assert fake.calls == []
    assert (hinter.counters.settings, hinter.counters.predictions) == (0, 0)


def test_sea_hinter_without_device_support_sends_nothing():
    hinter = SeaHinter(object())
    hinter.settings(wal_bytes=1, cache_bytes=1)
    hinter.predict(0, 4096)
    assert (hinter.counters.settings, hinter.counters.predictions) == (0, 0)
    assert not hinter.can_predict


class RecordingHandle:
    """Wraps a device's native handle and records every request's (op, offset, length, hint)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self.requests: list[tuple[str, int, int, Any]] = []

    def submit_quick(self, op: str, offset: int, length: int, data: Any, hint: Any) -> Any:
        self.requests.append((op, offset, length, hint.as_dict() if hint is not None else None))
        return self._handle.submit_quick(op, offset, length, data, hint)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


class SeaRecordingDevice(ssdlab.Device):
    """A device that takes SEA prediction and settings hints and records them."""

    def sea_predict_many(self, ranges: list[tuple[int, int]]) -> None:
        self.sea_calls.extend(("predict", offset, length) for offset, length in ranges)

    def sea_settings(self, *, wal_bytes: int, cache_bytes: int) -> None:
        self.sea_calls.append(("settings", wal_bytes, cache_bytes))


def recording_device(cls: type[ssdlab.Device] = SeaRecordingDevice) -> Any:
    dev = tiny_device(cls=cls)
    dev.sea_calls = []
    dev._handle = RecordingHandle(dev._handle)
    return dev


def test_hints_through_the_vfs_classify_predict_and_configure():
    dev = recording_device()
    con = sq.connect(dev, "h.db", cpu="zero", wal_limit_bytes=1 << 20, cache_bytes=1 << 20)
    assert dev.sea_calls == [("settings", 1 << 20, 1 << 20)]
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [("h" * 200,)] * 200)
    con.commit()
    store = _STORES[dev]
    wal = store.files["/h.db-wal"]
    main = store.files["/h.db"]
    wal_ranges = [(e * store.extent_bytes, (e + 1) * store.extent_bytes) for e in wal.extents]
    writes = [r for r in dev._handle.requests if r[0] == "write"]
    wal_writes = [r for r in writes if any(lo <= r[1] < hi for lo, hi in wal_ranges)]
    assert wal_writes
    assert all(r[3] == DYN.as_dict() for r in wal_writes)
    # Each WAL frame predicts its page's range in the main database file.
    predictions = [c for c in dev.sea_calls if c[0] == "predict"]
    assert predictions
    main_base = main.extents[0] * store.extent_bytes
    assert all(c[2] == 4096 and (c[1] - main_base) % 4096 == 0 for c in predictions)
    # The checkpoint writes database pages: new pages stat, rewritten within 2 checkpoints dyn.
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    con.execute("UPDATE t SET x = 'again'")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    main_lo = main.extents[0] * store.extent_bytes
    main_writes = [
        r for r in dev._handle.requests
        if r[0] == "write" and main_lo <= r[1] < main_lo + store.extent_bytes
    ]  # fmt: skip
    classes = [r[3]["sea_class"] for r in main_writes]
    assert "stat" in classes
    assert "dyn" in classes
    counts = con.stats()["hints"]
    predictions = [c for c in dev.sea_calls if c[0] == "predict"]
    assert counts["predictions"] == len(predictions)
    assert counts["settings"] == 1
    con.close()


@pytest.mark.parametrize(
    ("hints", "classified", "predicted", "settings"),
    [
        ("classify", True, False, False),
        ("classify+predict", True, True, False),
        ({"predict", "settings"}, False, True, True),
        ("all", True, True, True),
        ("none", False, False, False),
    ],
)
def test_hint_kinds_can_be_sent_alone_for_an_ablation(
    hints: Any, classified: bool, predicted: bool, settings: bool
):
    dev = recording_device()
    con = sq.connect(dev, "ab.db", cpu="zero", hints=hints)
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [("a" * 300,)] * 100)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    sent = {r[3]["sea_class"] for r in dev._handle.requests if r[3]}
    assert bool(sent) is classified
    assert any(c[0] == "predict" for c in dev.sea_calls) is predicted
    assert any(c[0] == "settings" for c in dev.sea_calls) is settings
    con.close()


def test_unknown_hint_kinds_are_refused(device: ssdlab.Device):
    with pytest.raises(ValueError, match="hints"):
        sq.connect(device, "x.db", hints="classify+guess")


def test_a_commit_reaches_the_wal_as_one_write_then_a_flush():
    dev = recording_device(ssdlab.Device)
    con = sq.connect(dev, "log.db", cpu="zero")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    requests = dev._handle.requests
    requests.clear()
    con.executemany("INSERT INTO t VALUES (zeroblob(3000))", [()] * 10)  # ~10 frames
    con.commit()
    ops = [r[0] for r in requests]
    assert ops == ["write", "flush"]
    assert requests[0][2] > 10 * 4096  # frame headers and pages in one request
    con.close()


def test_without_hints_nothing_is_sent():
    dev = recording_device()
    con = sq.connect(dev, "n.db", cpu="zero", hints=False)
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [("n",)] * 100)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    assert dev.sea_calls == []
    assert all(r[3] is None for r in dev._handle.requests)
    assert con.stats()["hints"] == {"dyn": 0, "stat": 0, "predictions": 0, "settings": 0}
    con.close()


# -- the freelist parser ----------------------------------------------------------------------


def _header(first_trunk: int, count: int, page_size: int = 4096) -> bytes:
    header = bytearray(page_size)
    header[:16] = b"SQLite format 3\x00"
    header[16:18] = page_size.to_bytes(2, "big")
    header[18] = header[19] = 2
    header[32:36] = first_trunk.to_bytes(4, "big")
    header[36:40] = count.to_bytes(4, "big")
    return bytes(header)


def _trunk(next_trunk: int, leaves: list[int], page_size: int = 4096) -> bytes:
    page = bytearray(page_size)
    page[0:4] = next_trunk.to_bytes(4, "big")
    page[4:8] = len(leaves).to_bytes(4, "big")
    for i, leaf in enumerate(leaves):
        page[8 + 4 * i : 12 + 4 * i] = leaf.to_bytes(4, "big")
    return bytes(page)


def test_freelist_tracker_follows_trunks_written_after_the_header():
    tracker = FreelistTracker()
    tracker.observe_page(1, _header(10, 6), written=True)
    tracker.observe_page(10, _trunk(20, [11, 12]), written=True)
    tracker.observe_page(20, _trunk(0, [21, 22]), written=True)
    assert tracker.resolve() == [11, 12, 21, 22]
    # Next sync: page 12 reused, 30 freed; trunk 20 unchanged (not rewritten).
    tracker.observe_page(1, _header(10, 6), written=True)
    tracker.observe_page(10, _trunk(20, [11, 30]), written=True)
    assert tracker.resolve() == [30]
    assert tracker.free_leaves == {11, 21, 22, 30}


def test_freelist_tracker_stops_at_a_trunk_it_never_saw():
    tracker = FreelistTracker()
    tracker.observe_page(1, _header(10, 5), written=True)
    tracker.observe_page(10, _trunk(20, [11, 12]), written=True)
    assert tracker.resolve() == [11, 12]
    tracker.observe_page(20, _trunk(0, [21]), written=False)  # wanted: kept when read
    tracker.observe_page(1, _header(10, 5), written=True)
    assert tracker.resolve() == [21]


# -- crashes ----------------------------------------------------------------------------------

CRASH_OPTIONS: dict[str, Any] = {"cpu": "zero", "crash_tracking": True}


def crash_setup(
    seed: int, name: str, columns: str, wal_limit_bytes: int, **extra: Any
) -> tuple[Any, ...]:
    """A seeded generator, a device and a connection to a new table ``t (columns)``;
    ``auto_vacuum`` in ``extra`` is set before the table is created."""
    print(f"crash test seed {seed}, {extra}")
    dev = tiny_device()
    auto_vacuum = extra.pop("auto_vacuum", None)
    options = {**CRASH_OPTIONS, "wal_limit_bytes": wal_limit_bytes, **extra}
    con = sq.connect(dev, name, **options)
    if auto_vacuum:
        con.execute(f"PRAGMA auto_vacuum = {auto_vacuum}").fetchall()
    con.execute(f"CREATE TABLE t ({columns})")
    con.commit()
    return random.Random(seed), dev, con, options


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_crash_at_a_random_point_keeps_every_committed_transaction(seed: int):
    columns = "k INTEGER PRIMARY KEY, v BLOB"
    rng, dev, con, options = crash_setup(seed, "crash.db", columns, 96 << 10)
    committed: dict[int, int] = {}
    crash_after = rng.randrange(5, 60)
    for txn in range(crash_after):
        keys = [rng.randrange(400) for _ in range(rng.randrange(1, 12))]
        for key in keys:
            con.execute("INSERT OR REPLACE INTO t VALUES (?, zeroblob(?))", (key, 100 + txn))
        if rng.random() < 0.8:
            con.commit()
            for key in keys:
                committed[key] = 100 + txn
        else:
            con.rollback()
        if rng.random() < 0.1:
            con.execute("DELETE FROM t WHERE k % 7 = ?", (txn % 7,))
            con.commit()
            committed = {k: v for k, v in committed.items() if k % 7 != txn % 7}
    # Crash in the middle of an uncommitted transaction with unsynced writes in flight.
    con.executemany(
        "INSERT OR REPLACE INTO t VALUES (?, zeroblob(5000))", [(k,) for k in range(50)]
    )
    sq.crash(dev)
    with pytest.raises(sq.Error):
        con.execute("SELECT count(*) FROM t").fetchall()
    con.close()
    after = sq.connect(dev, "crash.db", **options)
    assert after.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    rows = dict(after.execute("SELECT k, length(v) FROM t").fetchall())
    assert rows == committed
    after.close()


@pytest.mark.parametrize(
    "mode",
    [{}, {"journal_mode": "delete"}, {"auto_vacuum": "FULL"},
     {"journal_mode": "truncate", "auto_vacuum": "FULL"}],
    ids=["wal", "delete", "wal-autovacuum", "truncate-autovacuum"],
)  # fmt: skip
@pytest.mark.parametrize("seed", range(6))
def test_a_power_cut_at_a_random_write_keeps_every_committed_transaction(
    seed: int, mode: dict[str, str]
):
    """The crash strikes at the N-th device write of any SQLite call: mid-commit,
    mid-checkpoint, mid-WAL-restart, while pages are freed and trimmed or the file shrinks. A
    transaction whose commit returned must survive; the one being committed when the power went
    may or may not."""
    columns = "k INTEGER PRIMARY KEY, v INTEGER, pad BLOB"
    rng, dev, con, options = crash_setup(seed, "cut.db", columns, 64 << 10, **mode)
    committed: dict[int, int] = {}
    in_doubt: dict[int, int] = {}
    with PowerCut(_STORES[dev], rng.randrange(1, 1500)) as cut:
        try:
            for txn in range(10_000):
                changes = {rng.randrange(300): txn for _ in range(rng.randrange(1, 10))}
                for key, value in changes.items():
                    con.execute(
                        "INSERT OR REPLACE INTO t VALUES (?, ?, zeroblob(?))",
                        (key, value, 200 + 3 * key),
                    )
                in_doubt = {**committed, **changes}
                if rng.random() < 0.15:  # free pages: trims, with auto_vacuum a shorter file
                    low = rng.randrange(300)
                    con.execute("DELETE FROM t WHERE k BETWEEN ? AND ?", (low, low + 60))
                    in_doubt = {k: v for k, v in in_doubt.items() if not low <= k <= low + 60}
                con.commit()
                committed = in_doubt
        except sq.OperationalError:
            pass
    assert cut.happened, "the workload ended before the power cut"
    con.close()
    after = sq.connect(dev, "cut.db", **options)
    assert after.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    rows = dict(after.execute("SELECT k, v FROM t").fetchall())
    assert rows in (committed, in_doubt)
    after.close()


def test_crash_needs_tracking(device: ssdlab.Device):
    con = sq.connect(device, "nt.db", cpu="zero")
    with pytest.raises(ValueError, match="crash_tracking"):
        sq.crash(device)
    con.close()


# -- PEP 249 ----------------------------------------------------------------------------------


def test_module_globals_and_exception_hierarchy():
    assert (sq.apilevel, sq.threadsafety, sq.paramstyle) == ("2.0", 1, "qmark")
    assert issubclass(sq.Error, Exception)
    assert issubclass(sq.Warning, Exception)
    for name in (
        "InterfaceError", "DatabaseError",
    ):  # fmt: skip
        assert issubclass(getattr(sq, name), sq.Error)
    for name in (
        "DataError", "OperationalError", "IntegrityError", "InternalError",
        "ProgrammingError", "NotSupportedError",
    ):  # fmt: skip
        assert issubclass(getattr(sq, name), sq.DatabaseError)


def test_cursor_surface(device: ssdlab.Device):
    con = sq.connect(device, "pep.db", cpu="zero")
    cur = con.cursor()
    cur.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT UNIQUE)")
    assert cur.description is None
    assert cur.rowcount == -1
    cur.execute("INSERT INTO t (v) VALUES (?)", ("a",))
    assert cur.rowcount == 1
    assert cur.lastrowid == 1
    assert con.in_transaction
    cur.executemany("INSERT INTO t (v) VALUES (?)", [("b",), ("c",), ("d",)])
    assert cur.rowcount == 3
    con.commit()
    assert not con.in_transaction
    cur.execute("SELECT k, v FROM t ORDER BY k")
    assert [d[0] for d in cur.description] == ["k", "v"]
    assert cur.fetchone() == (1, "a")
    cur.arraysize = 2
    assert cur.fetchmany() == [(2, "b"), (3, "c")]
    assert cur.fetchall() == [(4, "d")]
    assert cur.fetchone() is None
    cur.execute("SELECT k, v FROM t LIMIT 0")  # no rows: the columns are still described
    assert [d[0] for d in cur.description] == ["k", "v"]
    assert cur.fetchall() == []
    cur.execute("UPDATE t SET v = v || '!' WHERE k > 2")
    assert cur.rowcount == 2
    assert cur.description is None
    cur.execute("UPDATE t SET v = v || '?' WHERE k = 1 RETURNING k, v")  # DML with rows
    assert [d[0] for d in cur.description] == ["k", "v"]
    assert cur.fetchall() == [(1, "a?")]
    con.rollback()
    assert con.execute("SELECT v FROM t WHERE k = 3").fetchone() == ("c",)
    with pytest.raises(sq.IntegrityError):
        con.execute("INSERT INTO t (v) VALUES ('a')")
    con.rollback()
    with pytest.raises(sq.OperationalError):
        con.execute("SELEKT 1")
    with pytest.raises(sq.ProgrammingError):
        con.execute("SELECT ?", (1, 2))
    cur.close()
    with pytest.raises(sq.InterfaceError):
        cur.execute("SELECT 1")
    con.executescript("CREATE TABLE s (x); INSERT INTO s VALUES (1); INSERT INTO s VALUES (2);")
    assert not con.in_transaction
    assert con.executemany("INSERT INTO s VALUES (?)", [(3,), (4,)]).rowcount == 2
    con.rollback()
    assert con.execute("SELECT sum(x) FROM s").fetchone() == (3,)
    assert list(con.execute("SELECT x FROM s ORDER BY x")) == [(1,), (2,)]
    with con:
        con.execute("INSERT INTO t (v) VALUES ('ctx')")
    assert con.execute("SELECT count(*) FROM t WHERE v = 'ctx'").fetchone() == (1,)
    con.close()
    con.close()
    with pytest.raises(sq.InterfaceError):
        con.execute("SELECT 1")


def test_counters_cover_every_io(device: ssdlab.Device):
    con = sq.connect(device, "cnt.db", cpu="zero")
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [("c" * 100,)] * 300)
    con.commit()
    stats = con.stats()["connection"]
    assert stats["writes"] > 0
    assert stats["syncs"] > 0
    assert stats["write_bytes"] > 0
    assert stats["io_calls"] >= stats["syncs"]
    assert stats["vfs_ns_per_io"] > 0
    con.close()


# -- the OLTP workloads on the device ---------------------------------------------------------


def test_oltp_workloads_run_on_the_device_and_stay_consistent():
    from ssdlab import oltp
    from ssdlab.oltp import tpcc

    dev = tiny_device()
    con = sq.connect(dev, "tpcc.db", cpu="zero")
    wl = oltp.load("tpcc", con, seed=1, warehouses=1, population=0.005)
    result = oltp.run(wl, con, clock=con.clock_ns, seed=2, transactions=60)
    assert result.committed > 0
    assert tpcc.check_consistency(con) == []
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()
    sb = sq.connect(dev, "sb.db", cpu="zero")
    wl = oltp.load("sysbench", sb, seed=1, tables=1, table_size=200)
    result = oltp.run(wl, sb, clock=sb.clock_ns, seed=2, transactions=40)
    assert (result.committed, result.aborted) == (40, 0)
    assert oltp.content_digest(sb, ["sbtest1"])
    sb.close()


# -- against the device's SEA-SSD side and its untimed reads (once the core has them) ---------

needs_sea = pytest.mark.skipif(
    not hasattr(ssdlab.Device, "sea_predict"), reason="Device.sea_predict is not built yet"
)
needs_peek = pytest.mark.skipif(
    not hasattr(ssdlab.Device, "peek"), reason="Device.peek is not built yet"
)


@needs_sea
def test_hints_reach_a_sea_device():
    dev = ssdlab.Device("seassd", overrides=list(TINY_OVERRIDES), store_data=True)
    con = sq.connect(dev, "sea.db", cpu="zero", wal_limit_bytes=256 << 10, cache_bytes=512 << 10)
    con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    for round_ in range(20):
        con.executemany(
            "INSERT OR REPLACE INTO t VALUES (?, zeroblob(300))",
            [(k,) for k in range(round_ * 7, round_ * 7 + 150)],
        )
        con.commit()
    hints = con.stats()["hints"]
    sea = dev.stats()["sea"]
    assert sea["settings"]["received"] == 1
    assert (sea["settings"]["wal_bytes"], sea["settings"]["cache_bytes"]) == (256 << 10, 512 << 10)
    assert hints["predictions"] > 0
    assert sea["predictions"]["received_units"] == hints["predictions"]  # one 4 KiB unit each
    assert hints["dyn"] > 0
    assert hints["stat"] > 0
    con.close()


def test_a_generic_device_refuses_sea_hints_and_the_database_works_on():
    dev = tiny_device()  # one placement handle: no dyn/stat segments
    con = sq.connect(dev, "g.db", cpu="zero")
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [(1,)] * 100)
    con.commit()
    stats = con.stats()
    assert "placement.handles" in stats["hints_refused"]
    assert (stats["hints"]["settings"], stats["hints"]["predictions"]) == (0, 0)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (100,)
    con.close()


@needs_peek
def test_the_device_holds_exactly_what_the_vfs_wrote():
    dev = tiny_device()
    con = sq.connect(dev, "peek.db", cpu="zero", crash_tracking=True, wal_limit_bytes=64 << 10)
    run_script(con.execute)
    con.commit()
    store = _STORES[dev]
    reads = store.counters().reads
    for stored in store.files.values():
        extent = store.extent_bytes
        content = b"".join(dev.peek(e * extent, extent) for e in stored.extents)[: stored.size]
        assert content == bytes(stored.mirror), stored.name
    assert store.counters().reads == reads  # untimed, uncounted
    con.close()


@pytest.mark.parametrize("crash_tracking", [False, True])
def test_the_fast_paths_send_what_the_general_path_sends(monkeypatch, crash_tracking: bool):
    # Three paths, one flag apart: DeviceFile.fast off (every read and write takes
    # DeviceStore's general path); on, with DeviceVfs.compiled off (common reads and WAL frame
    # pages inlined in Python's xRead / xWrite); on with compiled (main database and WAL
    # handles are ssdlab._core.CompiledFile: page reads, page writes, WAL frames and WAL syncs
    # in Rust). Device, hints, counters and the query results must agree (crash tracking keeps
    # writes on the general path and every handle in Python).
    from ssdlab import oltp
    from ssdlab.sqlite import vfs

    compiled_handles = []

    def counting_compiled_file(*args: Any) -> Any:
        compiled_handles.append(args[0].stored.name)
        return CompiledFile(*args)

    from ssdlab._core import CompiledFile

    monkeypatch.setattr(vfs, "CompiledFile", counting_compiled_file)
    results = []
    for fast, compiled in ((False, False), (True, False), (True, True)):
        monkeypatch.setattr(vfs.DeviceFile, "fast", fast)
        monkeypatch.setattr(vfs.DeviceVfs, "compiled", compiled)
        dev = ssdlab.Device("seassd", store_data=True, seed=1, overrides=SEASSD_SMALL)
        conn = sq.connect(dev, "t.db", hints=True, cpu="zero", crash_tracking=crash_tracking)
        wl = oltp.load("tpcc", conn, seed=1, warehouses=1, population=0.02)
        oltp.run(wl, conn, clock=conn.clock_ns, seed=2, transactions=60)
        stats = conn.stats()
        counters = {k: v for k, v in stats["connection"].items() if "ns" not in k}
        digest = oltp.content_digest(conn, ("stock", "orders", "order_line", "customer"))
        results.append((conn.clock_ns(), counters, stats["hints"], dev.stats(), digest))
        conn.close()
    assert results[0][1]["io_calls"] > 1000
    assert results[0][1]["reads"] > 100
    assert results[0][2]["predictions"] > 100
    assert results[0] == results[1]
    assert results[0] == results[2]
    if crash_tracking:
        assert compiled_handles == []
    else:
        assert set(compiled_handles) == {"/t.db", "/t.db-wal"}
