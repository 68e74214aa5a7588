"""ssdlab: a fast, deterministic NAND-flash SSD simulator with a Rust core.

The simulator (FTL, garbage collection, NAND timing, ECC, energy, statistics) is Rust, reached
through the private extension module ``ssdlab._core``; this package is the front end that
configures devices, drives runs and shapes their results::

    import ssdlab

    dev = ssdlab.Device("tlc", seed=1, overrides={"geometry.blocks_per_plane": 64})
    dev.precondition()
    done = dev.write(0, 4096, hint=ssdlab.Hint(placement_id=1))
    result = dev.run_job("randrw.fio")        # fio's JSON layout plus an "ssd" section
    print(result.jobs[0].write["iops"], result.ssd["waf"])

    frame = ssdlab.sweep("study.toml", workers=2)     # a grid of runs on Dask: a DataFrame
    frame = ssdlab.load_results("study-results")      # the store of a sweep, read back

(config, workload, seed) determine every result bit for bit, and every result carries the
configuration's hash, the seed and the version. The command line is ``ssdlab`` (see
``ssdlab --help``).
"""

from typing import Any

from ssdlab import _core
from ssdlab._core import __version__
from ssdlab.device import Completion, Device, JobResult, RunResult
from ssdlab.errors import ConfigError, DeviceError, NandRuleError, SsdlabError, WorkloadError
from ssdlab.hints import Hint
from ssdlab.native import NativeFlash
from ssdlab.serve import Server


def sweep(spec: Any, **options: Any) -> Any:
    """Run a sweep spec on Dask and return its results as a pandas DataFrame, one row per run
    (see :func:`ssdlab.sweeps.sweep` for the options: ``out``, ``workers``, ``dask``,
    ``force``, ``scale``, ``progress``). A script that calls it with a local cluster must do so
    under ``if __name__ == "__main__":``, as the worker processes import the script."""
    from ssdlab import sweeps

    return sweeps.sweep(spec, **options)


def load_results(out_dir: Any) -> Any:
    """The results of a ``sweep`` or ``reproduce`` output directory as a pandas DataFrame."""
    from ssdlab import store

    return store.load_results(out_dir)


def presets() -> list[tuple[str, str]]:
    """The built-in device presets as ``(name, one-line description)`` pairs, sorted by name."""
    return _core.presets()


__all__ = [
    "Completion",
    "ConfigError",
    "Device",
    "DeviceError",
    "Hint",
    "JobResult",
    "NandRuleError",
    "NativeFlash",
    "RunResult",
    "Server",
    "SsdlabError",
    "WorkloadError",
    "__version__",
    "load_results",
    "presets",
    "sweep",
]
