"""`ssdlab reproduce noftl --scale quick`: the fio study (a), the database study (b) with its
slowdown table, and the DFTL sensitivity study (c), as the test suite runs them."""

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

    # (b) the databases: every workload on both backends, integrity checked by the runs.
    db = ssdlab.load_results(out / "noftl-db")
    assert (db["status"] == "ok").all(), db[db["status"] != "ok"]["error"].tolist()
    assert set(db["backend"]) == {"native", "block"}
    assert set(db["oltp.workload"]) == {"tpcb", "tpcc", "tpch"}
    assert (db["oltp.transactions_per_s"] > 0).all()
    slowdown = pd.read_csv(out / "noftl-db" / "report" / "slowdown.csv")
    assert set(slowdown["measure"]) >= {"transactions/s", "Q1 seconds", "Q14 seconds"}
    assert "slowdown vs" in result.stdout
    assert (out / "noftl-db" / "report" / "slowdown.png").stat().st_size > 5_000
