"""Hints: what a host layer tells the device about a request's data (see the hints spec).

A :class:`Hint` rides on one request. The device may use it or ignore it; a device that ignores
every hint behaves exactly like the baseline, which is how experiments get their baselines. The
vocabulary follows the standards it mirrors: Linux ``F_SET_RW_HINT`` write-life values, NVMe
Streams ids, NVMe FDP placement identifiers, SEA-SSD's ``dyn``/``stat`` classes, melded-page
read-together groups and FlexECC's dirty/clean reliability and flush reads.

The vocabulary itself (names, aliases, values, messages) lives in the Rust core, which a trace's
hint column and fio's ``write_hint`` also parse through; this module asks ``ssdlab._core`` for it
rather than keeping a second list, so ``Hint(fdp=2)`` and a trace's ``fdp=2`` cannot disagree.
Validation happens at construction, so that a bad hint fails where it is written.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from ssdlab import _core


class HintField(NamedTuple):
    """One hint field as the core describes it."""

    name: str
    aliases: tuple[str, ...]
    values: tuple[str, ...]
    expected: str
    doc: str


#: Every hint field, in the core's order, keyed by canonical name.
HINT_FIELDS: dict[str, HintField] = {
    row[0]: HintField(row[0], tuple(row[1]), tuple(row[2]), row[3], row[4])
    for row in _core.hint_fields()
}

WRITE_LIFE_VALUES = HINT_FIELDS["write_life"].values
SEA_CLASS_VALUES = HINT_FIELDS["sea_class"].values
RELIABILITY_VALUES = HINT_FIELDS["reliability"].values


@dataclass(frozen=True, init=False)
class Hint:
    """Information about a request's data that the device may use for placement or protection.

    Every field is optional; ``Hint()`` carries nothing. Fields are given by keyword, under their
    canonical names below or the aliases of :data:`HINT_FIELDS` (``life``, ``fdp``, ``sea``,
    ``group``, ``rel``, ``flushread``); values are stored in canonical form, so
    ``Hint(life="NOT_SET") == Hint(write_life="not_set")``.

    Attributes:
        write_life: Linux write-life hint: ``not_set``, ``none``, ``short``, ``medium``, ``long``
            or ``extreme`` (relative lifetimes, no absolute meaning; also 0-5).
        stream: NVMe Streams id of a write (0-65535).
        placement_id: NVMe FDP placement identifier of a write (0-65535); writes without one go
            to handle 0.
        sea_class: SEA-SSD class of a write: ``dyn`` (short-lived) or ``stat`` (long-lived).
        read_group: read-together group of a write (melded pages), a 64-bit integer.
        reliability: FlexECC protection class of a write: ``dirty`` (ECC) or ``clean`` (EDC).
        flush_read: on a read, that the host is writing this dirty data back (FlexECC).

    Raises:
        ValueError: an unknown name, a bad value or a field given twice; the message is the
            core's, the same a trace's hint column gives.
    """

    write_life: str | None
    stream: int | None
    placement_id: int | None
    sea_class: str | None
    read_group: int | None
    reliability: str | None
    flush_read: bool

    def __init__(self, **hint: Any) -> None:
        canonical = _core.normalize_hint(hint)
        for f in fields(self):
            unset = False if f.name == "flush_read" else None
            # Frozen: the dataclass's own __setattr__ refuses, as it should for users.
            object.__setattr__(self, f.name, canonical.get(f.name, unset))

    @classmethod
    def parse(cls, text: str) -> Hint:
        """Parse the text form a trace's hint column uses, e.g. ``"life=short;fdp=2"``."""
        return cls(**_core.parse_hint_text(text))

    def __str__(self) -> str:
        """The text form with canonical names (``write_life=short;placement_id=2``)."""
        return _core.format_hint(self.to_dict())

    @classmethod
    def coerce(cls, hint: Hint | dict[str, Any] | None) -> Hint | None:
        """Accept a :class:`Hint`, a dict of its fields (validated the same way) or ``None``."""
        if hint is None or isinstance(hint, Hint):
            return hint
        if isinstance(hint, dict):
            bad_keys = [key for key in hint if not isinstance(key, str)]
            if bad_keys:
                raise ValueError(f"hint field names are strings, got {bad_keys[0]!r}")
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


# The dataclass's attributes are typed for users and editors; the core decides what exists. If
# the core grows a field this class lacks, Hint(...) would drop it silently: fail at import.
if {f.name for f in fields(Hint)} != set(HINT_FIELDS):
    raise ImportError(
        f"ssdlab.Hint fields {sorted(f.name for f in fields(Hint))} differ from the native "
        f"module's hint fields {sorted(HINT_FIELDS)}; rebuild the extension (make build)"
    )
