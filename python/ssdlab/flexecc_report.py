"""The FlexECC study's own table: why FlexECC's gain in mean SSD response time is what it is.

FlexECC saves one thing per request: a clean page read decodes with CRC instead of BCH
(``bch_decode_clean_ns - crc_decode_ns`` per CRC read, exactly: a closed-form test checks it on
one read). Per workload at RBER 0 without the scrubber, the table gives what the cache sends
the SSD (reads' share of its requests, the read hit ratio, CRC reads' share of the reads), the
change that saving alone predicts for the mean SSD response and the mean SSD read response
(the saving times the CRC reads, over all-BCH's total), the measured changes, and what else
moved (GC time, write amplification, die and disk utilisation): a small gain is explained by
few CRC reads among many writes, a gap between predicted and measured by GC (two regions, two
open blocks, more moves) or queueing; a disk utilisation near 1 says the disk, not the SSD, sets
the application's response time. Written to
``report/gain.csv`` too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import tomllib

from ssdlab.config import resolve
from ssdlab.report import REPORT_DIR
from ssdlab.store import load_results, read_meta

MODE, RBER, SCRUB = "flexecc.mode", "ecc.rber_base", "cache.scrub_pages_per_s"
KINDS = ("cache.dirty_writes", "cache.clean_writes", "cache.host_reads", "cache.flush_reads")


def codec_saving_ns(config: str) -> float:
    """BCH's clean decode less CRC's decode in ``config``'s [flexecc] table (ns)."""
    text, _ = resolve(config)
    table = tomllib.loads(text).get("flexecc", {})
    return float(table.get("bch_decode_clean_ns", 5000) - table.get("crc_decode_ns", 800))


def gain_rows(results: pd.DataFrame, saving_ns: float) -> list[dict[str, Any]]:
    """One row per workload with both modes at RBER 0 without the scrubber (see the module)."""
    ok = results[(results["status"] == "ok") & (results[RBER] == 0)]
    if SCRUB in ok:
        ok = ok[ok[SCRUB] == 0]
    rows = []
    for workload in dict.fromkeys(ok["workload"]):
        mine = ok[ok["workload"] == workload]
        base = mine[mine[MODE] == "all_bch"]
        flex = mine[mine[MODE] == "flex"]
        if base.empty or flex.empty:
            continue
        b, f = base.mean(numeric_only=True), flex.mean(numeric_only=True)
        requests = sum(b[k] for k in KINDS)
        reads = b["cache.host_reads"] + b["cache.flush_reads"]
        flex_reads = f["flexecc.crc_reads"] + f["flexecc.bch_reads"]
        saved = f["flexecc.crc_reads"] * saving_ns
        end = b["cache.end_ns"]
        rows.append(
            {
                "workload": workload,
                "ssd_requests": requests,
                "read_share": reads / requests if requests else math.nan,
                "read_hit_ratio": b["cache.read_hit_ratio"],
                "crc_read_share": f["flexecc.crc_reads"] / flex_reads if flex_reads else math.nan,
                "predicted_change": -saved / (b["cache.mean_ssd_response_ns"] * requests),
                "measured_change": _change(b, f, "cache.mean_ssd_response_ns"),
                "predicted_read_change": -saved / (b["cache.mean_ssd_read_response_ns"] * reads)
                if reads
                else math.nan,
                "measured_read_change": _change(b, f, "cache.mean_ssd_read_response_ns"),
                "gc_time_change": _change(b, f, "gc.time_ns"),
                "waf_all_bch": b["waf"],
                "waf_flex": f["waf"],
                "die_utilisation": f["die_utilisation"],
                "disk_utilisation": b["cache.disk.busy_ns"] / end if end else math.nan,
            }
        )
    return rows


def _change(base: pd.Series, flex: pd.Series, key: str) -> float:
    return (flex[key] - base[key]) / base[key] if base[key] else math.nan


def write_gain_table(out_dir: str | Path) -> str:
    """The table (markdown) for the study in ``out_dir``, also as ``report/gain.csv``; ""
    when the results have no RBER-0 point with both modes."""
    out = Path(out_dir)
    results = load_results(out)
    if results.empty or MODE not in results:
        return ""
    config = read_meta(out).get("config") or "flexecc"
    saving = codec_saving_ns(config)
    rows = gain_rows(results, saving)
    if not rows:
        return ""
    target = out / REPORT_DIR
    target.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(target / "gain.csv", index=False)
    pct = "{:+.1%}".format
    lines = [
        f"Why the gain is what it is (RBER 0, scrubber off): each CRC read saves "
        f"{saving / 1000:g} µs of decode; predicted = that saving x the CRC reads over "
        "all-BCH's total SSD time.",
        "",
        "| workload | SSD requests | reads | read hits | CRC share of reads | SSD response: "
        "predicted | measured | SSD read response: predicted | measured | GC time | WAF | "
        "die util. | disk util. |",
        "|---|" + "---:|" * 12,
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['ssd_requests']:,.0f} | {r['read_share']:.1%} | "
            f"{r['read_hit_ratio']:.1%} | {r['crc_read_share']:.1%} | "
            f"{pct(r['predicted_change'])} | {pct(r['measured_change'])} | "
            f"{pct(r['predicted_read_change'])} | {pct(r['measured_read_change'])} | "
            f"{_maybe(r['gc_time_change'])} | {r['waf_all_bch']:.2f} → {r['waf_flex']:.2f} | "
            f"{r['die_utilisation']:.3f} | "
            f"{r['disk_utilisation']:.2f} |"
        )
    return "\n".join(lines)


def _maybe(value: float) -> str:
    return "" if math.isnan(value) else f"{value:+.1%}"
