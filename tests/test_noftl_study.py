"""`ssdlab reproduce noftl --scale quick`: the fio study (a), the database study (b) with its
slowdown table, the DFTL sensitivity study (c) and (b) in real time, as the test suite runs
them."""

from __future__ import annotations

import time

import pandas as pd

import ssdlab
from sweep_support import run_cli


def test_reproduce_noftl_quick(tmp_path):
    started = time.monotonic()
    result = run_cli("reproduce", "noftl", "--scale", "quick", "--workers", "2", cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert elapsed < 60
    # What a user sees on the terminal carries no library warnings (compacting the parts of a
    # sweep whose runs differ in columns used to print pandas' PerformanceWarning).
    assert "Warning" not in result.stderr, result.stderr
    out = tmp_path / "reproduce-noftl-quick"

    # (a) fio on the fresh emulator layout: a 4 KiB random write at QD 1 costs the program time
    # (250 us, plus the page's transfer), never GC; a read the read time (50 us, plus transfer).
    fio = ssdlab.load_results(out)
    assert (fio["status"] == "ok").all()
    page_map = fio[fio["ftl.kind"] == "page_map"].set_index("workload")
    for workload in ("randwrite", "seqwrite"):
        row = page_map.loc[workload]
        assert 250 <= row["write.clat_mean_us"] < 280
        assert row["write.p99_us"] < 1.02 * row["write.clat_mean_us"]
    for workload in ("randread", "seqread"):
        assert 50 <= page_map.loc[workload, "read.clat_mean_us"] < 80
    # DFTL caching 2 % of the mappings misses on nearly every random read of the filled
    # device, and a miss reads a translation page first: about twice the page map's latency.
    dftl = fio[fio["ftl.kind"] == "dftl"].set_index(["workload", "ftl.dftl_cached_fraction"])
    two_percent = dftl.loc[("randread", 0.02), "read.clat_mean_us"]
    assert 1.8 < two_percent / page_map.loc["randread", "read.clat_mean_us"] < 2.2
    assert (
        dftl.loc[("randwrite", 0.02), "write.clat_mean_us"]
        > page_map.loc["randwrite", "write.clat_mean_us"]
    )

    table = pd.read_csv(out / "report" / "fio.csv")
    assert set(table["ftl"]) == {"page_map", "dftl 2 %", "dftl 15 %", "dftl 35 %"}
    assert "randread IOPS / mean / p99 µs" in result.stdout

    # (b) the databases: every workload on both backends, integrity checked by the runs.
    db = ssdlab.load_results(out / "noftl-db")
    assert (db["status"] == "ok").all(), db[db["status"] != "ok"]["error"].tolist()
    assert set(db["backend"]) == {"native", "block"}
    assert set(db["oltp.workload"]) == {"tpcb", "tpcc", "tpch"}
    assert (db["oltp.transactions_per_s"] > 0).all()
    slowdown = pd.read_csv(out / "noftl-db" / "report" / "slowdown.csv")
    assert set(slowdown.columns) >= {"page_map slowdown mean", "dftl 35 % slowdown mean"}
    assert set(slowdown["measure"]) >= {"transactions/s", "Q1 seconds", "Q14 seconds"}
    assert "slowdown vs" in result.stdout
    assert (out / "noftl-db" / "report" / "slowdown.png").stat().st_size > 5_000
    # Every database workload is slower on DFTL at 2 % than on native flash.
    assert (slowdown["dftl 2 % slowdown mean"] > 1.2).all()

    # (c) the sensitivity: a scan of the cached table per eviction costs the device CPU more
    # as the cache grows; the LRU list does not.
    sens = ssdlab.load_results(out / "noftl-dftl")
    assert (sens["status"] == "ok").all()
    reads = sens[sens["workload"] == "randread"].set_index(
        ["ftl.dftl_victim_search", "ftl.dftl_cached_fraction"]
    )
    assert reads.loc[("scan", 0.35), "dftl.cpu_ns"] > 10 * reads.loc[("lru", 0.35), "dftl.cpu_ns"]
    assert (
        reads.loc[("scan", 0.35), "read.clat_mean_us"]
        > reads.loc[("lru", 0.35), "read.clat_mean_us"]
    )

    # (b) in real time: the device paced to the wall clock, as the paper's emulator ran. The
    # simulated clock follows the wall clock, real time only adds the host's time, and DFTL at
    # 2 % stays far slower than NoFTL.
    rt = ssdlab.load_results(out / "noftl-realtime")
    assert (rt["status"] == "ok").all(), rt[rt["status"] != "ok"]["error"].tolist()
    assert set(rt["clock"]) == {"virtual", "realtime"}
    paced = rt[rt["clock"] == "realtime"]
    assert (paced["oltp.clock"] == "realtime").all()
    gap = (paced["oltp.elapsed_ns"] - paced["oltp.wall_time_ns"]).abs()
    assert (gap <= 0.05 * paced["oltp.wall_time_ns"]).all()
    key = ["workload", "backend", "ftl.kind", "ftl.dftl_cached_fraction"]
    virtual = rt[rt["clock"] == "virtual"].set_index(key)["oltp.transactions_per_s"]
    real = paced.set_index(key)["oltp.transactions_per_s"]
    assert (real <= 1.05 * virtual.loc[real.index]).all()
    realtime = pd.read_csv(out / "noftl-realtime" / "report" / "realtime.csv")
    assert set(realtime["clock"]) == {"virtual", "realtime"}
    assert (realtime["dftl 2 % slowdown"] > 1.5).all()
    assert "realtime / virtual" in result.stdout
