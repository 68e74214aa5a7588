"""``ssdlab reproduce``: the studies shipped with ssdlab, each a sweep spec in ``ssdlab/specs``.

A study is run as any sweep (same store, same resume, same Dask options), then reported; its
scales (``quick``, ``small``, ``paper``) are the spec's ``[scales.NAME]`` tables. ``quick``
finishes in under a minute on two cores and is what the test suite runs; ``small`` is the
default.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ssdlab import spec as spec_mod
from ssdlab.errors import SsdlabError

SCALES = ("quick", "small", "paper")
DEFAULT_SCALE = "small"


class UnknownStudy(SsdlabError):
    """No study of that name ships with ssdlab."""


def studies() -> list[tuple[str, str]]:
    """``(name, one-line description)`` of every shipped study, sorted by name."""
    out = []
    for name in sorted(_spec_files()):
        spec = spec_mod.load(_spec_files()[name], scale=DEFAULT_SCALE)
        out.append((name, spec.description))
    return out


def spec_path(name: str) -> Path:
    """The spec file of study ``name``.

    Raises:
        UnknownStudy: no such study; the message lists them.
    """
    files = _spec_files()
    if name not in files:
        raise UnknownStudy(
            f"no study {name!r}; the studies are: {', '.join(sorted(files))} "
            "(ssdlab reproduce --list)"
        )
    return files[name]


def load(name: str, scale: str = DEFAULT_SCALE) -> spec_mod.Spec:
    if scale not in SCALES:
        raise ValueError(f"scale: expected one of {', '.join(SCALES)}, got {scale!r}")
    return spec_mod.load(spec_path(name), scale=scale)


def extra_report(name: str, out_dir: str) -> str:
    """A study's own table beyond the sweep report (markdown; "" for most studies): the
    NoFTL fio study's compact table, the database study's slowdown factors (in simulated and
    in real time) and FlexECC's predicted against measured gain."""
    if name == "noftl":
        from ssdlab.noftl_report import write_fio_table

        return write_fio_table(out_dir)
    if name == "flexecc":
        from ssdlab.flexecc_report import write_gain_table

        return write_gain_table(out_dir)
    if name == "noftl-db":
        from ssdlab.noftl_report import write_slowdown

        return write_slowdown(out_dir)
    if name == "noftl-realtime":
        from ssdlab.noftl_report import write_realtime

        return write_realtime(out_dir)
    return ""


def default_out(name: str, scale: str) -> str:
    return f"reproduce-{name}-{scale}"


def study_text(name: str, out_dir: str) -> str | None:
    """The terminal tables of a study whose report module writes its own (CSV, PNG), or
    None for the studies the generic report serves alone."""
    if name.startswith("melded"):
        from ssdlab.melded import study_report

        return study_report(out_dir)
    return None


def _spec_files() -> dict[str, Path]:
    folder = resources.files("ssdlab") / "specs"
    return {
        Path(entry.name).stem: Path(str(entry))
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    }
