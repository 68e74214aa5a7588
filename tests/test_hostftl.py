"""NoFTL's host FTL (ssdlab.sqlite.hostftl): SQLite on native flash, GC that knows what the
engine freed, wear levelling, dies in parallel, and the page map rebuilt from OOB after a
power loss at random points."""

from __future__ import annotations

import random

import pytest

import ssdlab
import ssdlab.sqlite
from ssdlab import oltp
from ssdlab.db import OltpSettings, run_oltp
from ssdlab.oltp import tpcb, tpcc
from ssdlab.sqlite.hostftl import OOB, HostFtl
from ssdlab.sqlite.store import _STORES
from ssdlab.sqlite.vfs import DeviceVfs
from support import PowerCut


def native_device(*, blocks: int = 48, dies: int = 1, seed: int = 0) -> ssdlab.Device:
    """The noftl preset's timing on ``dies`` single-plane dies of ``blocks`` blocks each."""
    return ssdlab.Device(
        "noftl",
        seed=seed,
        store_data=True,
        overrides={
            "geometry.channels": dies,
            "geometry.chips_per_channel": 1,
            "geometry.planes_per_die": 1,
            "geometry.blocks_per_plane": blocks,
            "geometry.over_provisioning": 0.25,
        },
    )


OPTIONS = {
    "backend": "native",
    "cpu": "zero",
    "hints": False,
    "cache_bytes": 1 << 18,
    "wal_limit_bytes": 1 << 17,
    "extent_bytes": 1 << 18,
}


def test_tpcb_on_native_flash_collects_garbage_and_stays_consistent() -> None:
    dev = native_device(blocks=40, dies=2)
    con = ssdlab.sqlite.connect(dev, "bank.db", **OPTIONS)
    wl = oltp.load("tpcb", con, seed=1, branches=4, population=0.01)
    oltp.run(wl, con, clock=con.clock_ns, seed=2, transactions=3000)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert tpcb.check_consistency(con, transactions=3000) == []
    stats = con.stats()["host_ftl"]
    assert stats["gc_runs"] > 0
    assert stats["erases"] > 0
    # What SQLite freed (checkpointed WAL frames, freelist pages) was trimmed and is never
    # copied: GC finds most victims empty.
    assert stats["trimmed_pages"] > stats["host_page_writes"] / 4
    assert stats["waf"] < 1.5
    con.close()


def test_wear_levelling_keeps_erase_counts_within_the_gap() -> None:
    """A hot page rewritten over and over beside cold data that never changes: without static
    wear levelling the blocks holding the cold data would never be erased."""
    dev = native_device(blocks=40)
    ftl = HostFtl(dev, wear_gap=4)
    ftl.own_all(1, "db")
    page = ftl.page_bytes
    ftl.write(0, bytes(ftl.logical_pages // 2 * page), dev.now)  # cold
    hot = (ftl.logical_pages - 1) * page
    for step in range(40 * ftl.pages_per_block * 12):
        ftl.write(hot, step.to_bytes(8, "little") * (page // 8), dev.now)
    counts = dev.native().erase_counts()
    assert max(counts) >= 10
    assert max(counts) - min(counts) <= 4 + 2
    assert ftl.counters.wear_moves > 0
    # The cold data survived its moves.
    assert ftl.read(0, page, dev.now)[0] == bytes(page)


def test_each_page_carries_its_file_page_and_sequence_in_oob() -> None:
    dev = native_device()
    con = ssdlab.sqlite.connect(dev, "t.db", **OPTIONS)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    store = _STORES[dev]
    ftl = store.ftl
    flash = dev.native()
    seen = set()
    for lpage, ppage in enumerate(ftl.l2p):
        if ppage < 0:
            continue
        oob, _ = flash.read_oob(ppage)
        file_id, file_page, seq = OOB.unpack_from(bytes(oob), 0)
        assert file_id in store.file_ids.values()
        assert 0 < seq <= ftl.seq
        assert store._owner(lpage)[:2] == (file_id, file_page)
        seen.add(file_id)
    assert seen  # the database and its WAL
    con.close()


def test_pages_of_one_request_are_programmed_on_different_dies_at_once() -> None:
    one, four = native_device(dies=1), native_device(dies=4)
    times = []
    for dev in (one, four):
        ftl = HostFtl(dev)
        ftl.own_all(1, "db")
        start = dev.now
        ftl.submit("write", 0, 4 * ftl.page_bytes, bytes(4 * ftl.page_bytes), None)
        times.append(dev.now - start)
    program_ns = 250_000
    assert times[0] >= 4 * program_ns  # one die: four programs in a row
    assert program_ns <= times[1] < 1.5 * program_ns  # four dies: together


def test_dead_pages_are_never_copied() -> None:
    dev = native_device(blocks=40)
    ftl = HostFtl(dev)
    ftl.own_all(7, "db")
    page = ftl.page_bytes
    span = ftl.logical_pages // 2 * page
    for _ in range(6):  # write half the space, then free it all, again and again
        ftl.write(0, bytes(span), dev.now)
        ftl.trim(0, span)
    assert ftl.counters.gc_runs > 0
    assert ftl.counters.gc_page_copies == 0
    assert ftl.mapped == 0


@pytest.mark.parametrize("policy", ["greedy", "cost_benefit"])
def test_gc_keeps_live_data_under_random_overwrites(policy: str) -> None:
    """Random page overwrites over 90 % of the space: every page reads back its last write."""
    dev = native_device(blocks=40)
    ftl = HostFtl(dev, gc_policy=policy)
    ftl.own_all(3, "db")
    rng = random.Random(policy)
    pages = int(ftl.logical_pages * 0.9)
    last = {}
    for step in range(6 * ftl.logical_pages):
        lpage = rng.randrange(pages)
        data = step.to_bytes(8, "little") * (ftl.page_bytes // 8)
        ftl.write(lpage * ftl.page_bytes, data, dev.now)
        last[lpage] = data
    assert ftl.counters.gc_page_copies > 0
    for lpage, data in last.items():
        assert ftl.read(lpage * ftl.page_bytes, ftl.page_bytes, dev.now)[0] == data
    # The rebuilt map finds the same data after a power loss.
    ftl.power_loss()
    report = ftl.recover({3: (list(range(ftl.logical_pages)), 1, ftl.logical_pages)})
    assert report["live_pages"] == len(last)
    assert report["scan_ns"] > 0
    for lpage, data in last.items():
        assert ftl.read(lpage * ftl.page_bytes, ftl.page_bytes, dev.now)[0] == data


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_power_cut_on_native_flash_keeps_every_committed_transaction(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TPC-C on the host FTL until the power fails at a random write (mid-commit,
    mid-checkpoint, during GC); the page map is rebuilt from OOB, the database is intact and
    every New-Order whose commit returned is there."""
    monkeypatch.setattr(DeviceVfs, "compiled", False)  # the cut counts Python-path writes
    rng = random.Random(seed)
    dev = native_device(blocks=40, dies=2, seed=seed)
    con = ssdlab.sqlite.connect(dev, "tpcc.db", **OPTIONS)
    wl = oltp.load("tpcc", con, seed=1, warehouses=1, population=0.005)

    def orders(connection: object) -> int:
        return connection.execute("SELECT sum(d_next_o_id) FROM district").fetchone()[0]

    committed = orders(con)
    with PowerCut(_STORES[dev], rng.randrange(2_000, 12_000)) as cut:
        try:
            for txn in range(100_000):
                oltp.run(wl, con, clock=con.clock_ns, seed=seed * 1_000_003 + txn, transactions=1)
                committed = orders(con)
        except ssdlab.sqlite.Error:
            pass
    assert cut.happened, "the run ended before the power cut"
    con.close()
    recoveries = _STORES[dev].ftl.counters.recoveries
    assert len(recoveries) == 1
    assert recoveries[0]["scan_ns"] > 0
    assert recoveries[0]["scanned_pages"] >= recoveries[0]["live_pages"] > 0
    after = ssdlab.sqlite.connect(dev, "tpcc.db", **OPTIONS)
    assert after.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert tpcc.check_consistency(after) == []
    assert orders(after) in (committed, committed + 1)
    # And it carries on.
    oltp.run(wl, after, clock=after.clock_ns, seed=seed, transactions=50)
    assert tpcc.check_consistency(after) == []
    after.close()


def test_db_run_on_native_flash() -> None:
    result = run_oltp(
        native_device(blocks=64),
        OltpSettings(
            workload="tpcb",
            params={"branches": 2, "population": 0.01},
            transactions=300,
            backend="native",
            hints=frozenset(),
        ),
    )
    o, ssd = result["oltp"], result["ssd"]
    assert o["backend"] == "native"
    assert o["committed"] == 300
    assert o["transactions_per_s"] > 0
    assert ssd["backend"] == "native"
    assert ssd["waf"] >= 1.0
    assert ssd["host_ftl"]["host_page_writes"] > 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"backend": "nvme"}, "backend: expected 'block' or 'native'"),
        ({"hints": "classify"}, "hints: SEA-SSD hints go to a device's FTL"),
        ({"page_size": 8192}, "page_size: with backend='native' a database page is a flash"),
        ({"host_gc_policy": "lru"}, "gc_policy: expected one of greedy, cost_benefit"),
    ],
)
def test_bad_native_options_name_the_option(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ssdlab.sqlite.connect(native_device(), "x.db", **(OPTIONS | change))


def test_crash_returns_the_recovery_report() -> None:
    dev = native_device()
    con = ssdlab.sqlite.connect(dev, "r.db", **OPTIONS)
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(500)])
    con.commit()
    before = dev.now
    report = ssdlab.sqlite.crash(dev)
    con.close()
    assert report["live_pages"] > 0
    # One OOB read per programmed page, on one die: at least the read time each.
    assert report["scan_ns"] >= 50_000 * report["scanned_pages"]
    assert dev.now >= before + report["scan_ns"]
    after = ssdlab.sqlite.connect(dev, "r.db", **OPTIONS)
    assert after.execute("SELECT COUNT(*) FROM t").fetchone() == (500,)
    after.close()


def test_one_device_cannot_mix_backends() -> None:
    dev = native_device()
    ssdlab.sqlite.connect(dev, "a.db", **OPTIONS).close()
    with pytest.raises(ValueError, match="backend: the device's SQLite files already use"):
        ssdlab.sqlite.connect(dev, "b.db", **(OPTIONS | {"backend": "block"}))


def test_log_tails_kept_in_ram_merge_appends_and_never_go_stale() -> None:
    dev = native_device()
    ftl = HostFtl(dev)
    ftl.own_all(2, "log")
    page = ftl.page_bytes
    ftl.write(0, b"a" * 100, dev.now)  # a log's first bytes: the page is read (unwritten)
    ftl.write(100, b"b" * 100, dev.now)  # an append: merged with the tail in RAM
    assert ftl.counters.tail_hits == 1
    assert ftl.read(0, 200, dev.now)[0] == b"a" * 100 + b"b" * 100
    ftl.write(0, b"c" * page, dev.now)  # the whole page rewritten: the kept tail is stale
    ftl.write(page - 10, b"d" * 20, dev.now)
    assert ftl.read(0, page + 10, dev.now)[0] == b"c" * (page - 10) + b"d" * 20
    ftl.trim(0, 2 * page)
    ftl.write(page + 10, b"e", dev.now)  # trimmed: zeros, not the kept tail
    assert ftl.read(page, 11, dev.now)[0] == bytes(10) + b"e"


@pytest.mark.parametrize("seed", [4, 5])
def test_a_power_cut_during_tpcb_keeps_every_committed_transaction(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TPC-B on the host FTL until a random write loses the power: after recovery from OOB
    the balances agree and the history holds every committed transaction (and perhaps the one
    whose commit was under way)."""
    monkeypatch.setattr(DeviceVfs, "compiled", False)  # the cut counts Python-path writes
    rng = random.Random(seed)
    dev = native_device(blocks=40, dies=2, seed=seed)
    con = ssdlab.sqlite.connect(dev, "bank.db", **OPTIONS)
    wl = oltp.load("tpcb", con, seed=1, branches=2, population=0.01)
    committed = 0
    with PowerCut(_STORES[dev], rng.randrange(3_000, 15_000)) as cut:
        try:
            for txn in range(100_000):
                oltp.run(wl, con, clock=con.clock_ns, seed=seed * 1_000_003 + txn, transactions=1)
                committed += 1
        except ssdlab.sqlite.Error:
            pass
    assert cut.happened, "the run ended before the power cut"
    con.close()
    after = ssdlab.sqlite.connect(dev, "bank.db", **OPTIONS)
    assert after.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert tpcb.check_consistency(after) == []
    (rows,) = after.execute("SELECT COUNT(*) FROM pgbench_history").fetchone()
    assert rows in (committed, committed + 1)
    after.close()


def test_native_runs_are_deterministic_with_zero_cpu_time() -> None:
    settings = OltpSettings(
        workload="tpcc",
        params={"warehouses": 1, "population": 0.005},
        transactions=100,
        backend="native",
        hints=frozenset(),
    )
    first, second = (run_oltp(native_device(blocks=40, dies=2), settings) for _ in range(2))
    for key in ("transactions_per_s", "elapsed_ns", "device_write_bytes", "device_read_bytes"):
        assert first["oltp"][key] == second["oltp"][key]
    assert first["ssd"]["host_ftl"] == second["ssd"]["host_ftl"]


def test_the_backend_axis_of_a_sweep_spec(tmp_path) -> None:
    from ssdlab.spec import load as load_spec

    spec = tmp_path / "s.toml"
    base = (
        'name = "s"\nconfig = "noftl"\nset = ["geometry.blocks_per_plane=64"]\n'
        '[workloads.B]\nbuiltin = "tpcb"\nbranches = 1\ntransactions = 10\n'
        '[workloads.J]\njob = "j.fio"\n'
    )
    (tmp_path / "j.fio").write_text("[j]\nrw=randread\nbs=4k\nsize=1m\n")
    spec.write_text(base + '[axes]\nworkload = ["B"]\nbackend = ["native", "block"]\n')
    runs = load_spec(spec).runs
    assert [r.backend for r in runs] == ["native", "block"]
    assert runs[0].key != runs[1].key
    assert runs[0].task()["backend"] == "native"
    spec.write_text(base + '[axes]\nworkload = ["J"]\nbackend = ["native"]\n')
    with pytest.raises(ssdlab.ConfigError, match="runs on the block interface only"):
        load_spec(spec)
    spec.write_text(base + '[axes]\nworkload = ["B"]\nbackend = ["nvme"]\n')
    with pytest.raises(ssdlab.ConfigError, match="axis 'backend': expected block or native"):
        load_spec(spec)


def test_streams_never_share_a_block() -> None:
    """The database's pages and the WAL's go to open blocks of their own, so a block written
    by the host holds data of one lifetime class (GC's own blocks take the survivors of every
    stream's victims)."""
    dev = native_device(blocks=40, dies=2)
    con = ssdlab.sqlite.connect(dev, "s.db", **OPTIONS)
    wl = oltp.load("tpcb", con, seed=1, branches=2, population=0.01)
    oltp.run(wl, con, clock=con.clock_ns, seed=2, transactions=4000)
    assert con.stats()["host_ftl"]["gc_runs"] > 0
    store = _STORES[dev]
    roles = {store.file_ids[name]: stored.role for name, stored in store.files.items()}
    flash = dev.native()
    ppb = store.ftl.pages_per_block
    mixed = 0
    seen = set()
    for block in range(store.ftl.total_blocks):
        if store.ftl.block_stream.get(block) == "gc":
            continue
        kinds = set()
        for index in range(flash.next_page(block)):
            file_id = OOB.unpack_from(flash.read_oob(block * ppb + index)[0], 0)[0]
            if file_id in roles:
                kinds.add(roles[file_id])
        mixed += len(kinds) > 1
        seen |= kinds
    assert seen == {"main", "wal"}
    assert mixed == 0
    con.close()
