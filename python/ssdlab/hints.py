"""Hints: what a host layer tells the device about a request's data (see the hints spec).

A :class:`Hint` rides on one request. The device may use it or ignore it; a device that ignores
every hint behaves exactly like the baseline, which is how experiments get their baselines. The
vocabulary follows the standards it mirrors: Linux ``F_SET_RW_HINT`` write-life values, NVMe
Streams ids, NVMe FDP placement identifiers, SEA-SSD's ``dyn``/``stat`` classes, melded-page
read-together groups and FlexECC's dirty/clean reliability and flush reads.

Validation happens here, at construction, so that a bad hint fails where it is written with the
field's name rather than deep inside a run.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

WRITE_LIFE_VALUES = ("not_set", "none", "short", "medium", "long", "extreme")
SEA_CLASS_VALUES = ("dyn", "stat")
RELIABILITY_VALUES = ("dirty", "clean")

# Identifiers travel to Rust as unsigned integers; anything beyond 32 bits is a mistake, not an id.
_ID_LIMIT = 2**32


@dataclass(frozen=True)
class Hint:
    """Information about a request's data that the device may use for placement or protection.

    Every field is optional; ``Hint()`` carries nothing.

    Attributes:
        write_life: Linux write-life hint: ``not_set``, ``none``, ``short``, ``medium``, ``long``
            or ``extreme`` (relative lifetimes, no absolute meaning).
        stream: NVMe Streams id of a write.
        placement_id: NVMe FDP placement identifier (reclaim unit handle) of a write; writes
            without one go to handle 0.
        sea_class: SEA-SSD class of a write: ``dyn`` (short-lived) or ``stat`` (long-lived).
        read_group: read-together group of a write (melded pages).
        reliability: FlexECC protection class of a write: ``dirty`` (ECC) or ``clean`` (EDC).
        flush_read: on a read, that the host is writing this dirty data back (FlexECC).
    """

    write_life: str | None = None
    stream: int | None = None
    placement_id: int | None = None
    sea_class: str | None = None
    read_group: int | None = None
    reliability: str | None = None
    flush_read: bool = False

    def __post_init__(self) -> None:
        _check_choice("write_life", self.write_life, WRITE_LIFE_VALUES)
        _check_choice("sea_class", self.sea_class, SEA_CLASS_VALUES)
        _check_choice("reliability", self.reliability, RELIABILITY_VALUES)
        for name in ("stream", "placement_id", "read_group"):
            _check_id(name, getattr(self, name))
        if not isinstance(self.flush_read, bool):
            raise ValueError(f"flush_read: expected True or False, got {self.flush_read!r}")

    @classmethod
    def coerce(cls, hint: Hint | dict[str, Any] | None) -> Hint | None:
        """Accept a :class:`Hint`, a dict of its fields (validated the same way) or ``None``."""
        if hint is None or isinstance(hint, Hint):
            return hint
        if isinstance(hint, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(hint) - known)
            if unknown:
                raise ValueError(
                    f"unknown hint field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
                )
            return cls(**hint)
        raise TypeError(f"hint: expected a Hint, a dict or None, got {type(hint).__name__}")

    def to_dict(self) -> dict[str, Any]:
        """The hint as the native module takes it: set fields only (``flush_read`` if true)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value is False:
                continue
            out[f.name] = value
        return out


def _check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise ValueError(f"{name}: expected one of {', '.join(allowed)}, got {value!r}")


def _check_id(name: str, value: object) -> None:
    if value is None:
        return
    # bool is an int subclass; True as a stream id is a bug, not stream 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected a non-negative integer, got {value!r}")
    if not 0 <= value < _ID_LIMIT:
        raise ValueError(f"{name}: expected 0 <= {name} < 2**32, got {value}")
