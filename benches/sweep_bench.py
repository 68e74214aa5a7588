"""Sweep benchmark: what two Dask workers buy over one, and what the sweep machinery costs.

A sweep of 16 runs of about one second each (the ``hints`` study's ``small`` device at 20 %
over-provisioning, hinted, seeds 1..16, 3.5 host write passes) is run twice in one sitting into
fresh output directories: with ``--workers 1`` and with ``--workers 2``.

1. Speed-up: wall time with one worker / wall time with two. Target on the 2-core reference
   machine: >= 1.7.
2. Machinery overhead, from the one-worker sweep: its wall time minus the time the worker spent
   simulating (the runs' own ``wall_s``), over the simulated time. This is everything the sweep
   adds -- reading and checking the spec, hashing, starting and stopping the local cluster,
   shipping tasks and results, writing JSON and Parquet, compaction. Target: <= 5 %. It is also
   shown without the cluster's start and stop (paid once per sweep, not per run). Python's
   imports (Dask, pandas, pyarrow: about a second) are done before either sweep is timed.

Run with ``make bench`` (or ``python benches/sweep_bench.py [--runs N] [--passes P]``); the test
suite runs it tiny (``tests/test_sweep_bench.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

SPEC = """\
name = "bench"
description = "sweep benchmark: {runs} runs of the hints study's small device"
config = "tlc"
set = [{overrides}]
precondition = true

[workloads.hotcold]
builtin = "hotcold"
write_passes = {passes}

[axes]
"geometry.over_provisioning" = [0.2]
hints = [true]
seed = [{seeds}]
"""


@dataclass(frozen=True)
class Measurement:
    workers: int
    runs: int
    wall_s: float
    simulated_s: float  # the runs' own wall times, summed
    cluster_s: float  # starting and stopping the local cluster, once per sweep

    @property
    def overhead(self) -> float:
        """What the sweep adds, as a fraction of the simulation time (one worker only)."""
        return (self.wall_s - self.simulated_s) / self.simulated_s

    @property
    def per_run_overhead(self) -> float:
        """What the sweep adds per run besides starting and stopping the cluster (hashing,
        shipping the task and its result, JSON and Parquet), as a fraction of a run."""
        return (self.wall_s - self.cluster_s - self.simulated_s) / self.simulated_s


def bench_spec(folder: Path, runs: int, passes: float) -> Path:
    from ssdlab import spec as spec_mod

    hints = resources.files("ssdlab") / "specs" / "hints.toml"
    study = spec_mod.load(str(hints), scale="small")
    overrides = ", ".join(
        f'"{k}={v}"' for k, v in study.overrides if k != "geometry.over_provisioning"
    )
    path = folder / "bench.toml"
    path.write_text(
        SPEC.format(
            runs=runs,
            overrides=overrides,
            passes=passes,
            seeds=", ".join(str(s) for s in range(1, runs + 1)),
        ),
        encoding="utf-8",
    )
    return path


def measure(spec: Path, out: Path, workers: int) -> Measurement:
    from ssdlab.sweeps import run_sweep

    started = time.perf_counter()
    outcome = run_sweep(spec, out=out, workers=workers, progress=False)
    wall = time.perf_counter() - started
    if outcome.failed or outcome.ran != outcome.total:
        raise SystemExit(f"benchmark sweep incomplete: {outcome.ran} ran, {outcome.failed} failed")
    return Measurement(
        workers=workers,
        runs=outcome.total,
        wall_s=wall,
        simulated_s=float(outcome.results["wall_s"].sum()),
        cluster_s=outcome.cluster_start_s + outcome.cluster_stop_s,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16, help="runs per sweep (default 16)")
    parser.add_argument(
        "--passes", type=float, default=3.5, help="host write passes per run (default 3.5: ~1 s)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    # Imported before the clock starts, so that the first sweep does not pay for the second.
    import distributed  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import ssdlab.sweeps  # noqa: F401

    with tempfile.TemporaryDirectory(prefix="ssdlab-sweep-bench-") as tmp:
        folder = Path(tmp)
        spec = bench_spec(folder, args.runs, args.passes)
        one = measure(spec, folder / "one", 1)
        two = measure(spec, folder / "two", 2)
    speedup = one.wall_s / two.wall_s
    print(f"sweep of {one.runs} runs, {one.simulated_s / one.runs:.2f} s each on average:")
    print(f"  --workers 1: {one.wall_s:6.2f} s wall")
    print(f"  --workers 2: {two.wall_s:6.2f} s wall")
    print(f"  speed-up: {speedup:.2f}x (target >= 1.7)")
    print(
        f"  machinery overhead (one worker): {one.wall_s - one.simulated_s:.2f} s over "
        f"{one.simulated_s:.2f} s of simulation = {100 * one.overhead:.1f} % (target <= 5 %)"
    )
    print(
        f"    of which starting and stopping the cluster: {one.cluster_s:.2f} s; the rest, per "
        f"run: {1000 * (one.wall_s - one.cluster_s - one.simulated_s) / one.runs:.0f} ms = "
        f"{100 * one.per_run_overhead:.1f} % of a run"
    )
    if args.json:
        figures = {"one": asdict(one), "two": asdict(two), "speedup": speedup}
        figures["overhead"] = one.overhead
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
