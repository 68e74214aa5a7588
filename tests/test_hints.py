"""The hint vocabulary as Python sees it: the core's table, aliases, messages, text form.

The Rust core owns the vocabulary (``ssdlab_core::hint``); a trace's hint column parses through
the same table, so these tests pin that Python accepts the same names and says the same things.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from ssdlab import _core
from ssdlab.hints import HINT_FIELDS, RELIABILITY_VALUES, WRITE_LIFE_VALUES, Hint

KIB4 = 4096


def test_the_dataclass_has_exactly_the_cores_fields():
    assert [f.name for f in dataclasses.fields(Hint)] == list(HINT_FIELDS)
    assert WRITE_LIFE_VALUES == ("not_set", "none", "short", "medium", "long", "extreme")
    assert RELIABILITY_VALUES == ("dirty", "clean")


def _sample_values(field):
    """Every named value of a field, a number for numeric fields, True for the flag."""
    if field.name == "flush_read":
        return [True]
    return list(field.values) or [7]


@pytest.mark.parametrize(
    ("name", "alias", "value"),
    [
        (field.name, alias, value)
        for field in HINT_FIELDS.values()
        for alias in field.aliases
        for value in _sample_values(field)
    ],
)
def test_every_alias_gives_the_same_hint(name, alias, value):
    want = Hint(**{name: value})
    assert want != Hint()
    assert Hint(**{alias: value}) == want
    assert Hint.coerce({alias: value}) == want
    # The text form a trace's hint column uses parses to the same hint.
    text = alias if value is True else f"{alias}={value}"
    assert Hint.parse(text) == want


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ({"life": "notset"}, Hint(write_life="not_set")),
        ({"write_life": "NOT_SET"}, Hint(write_life="not_set")),
        ({"write_life": 2}, Hint(write_life="short")),
        ({"write_life": "5"}, Hint(write_life="extreme")),
        ({"fdp": 3}, Hint(placement_id=3)),
        ({"group": 2**64 - 1}, Hint(read_group=2**64 - 1)),
        ({"rel": "DIRTY"}, Hint(reliability="dirty")),
        ({"flushread": True}, Hint(flush_read=True)),
        ({"flush_read": False}, Hint()),
        ({"stream": None}, Hint()),
    ],
)
def test_old_and_standard_spellings_are_stored_canonically(given, want):
    assert Hint(**given) == want


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"life": "forever"},
            "hint 'write_life' expects one of not_set, none, short, medium, long, extreme "
            "(or 0-5), found 'forever'",
        ),
        ({"fdp": 65536}, "hint 'placement_id' expects an integer 0-65535, found 65536"),
        ({"stream": -1}, "hint 'stream' expects an integer 0-65535, found -1"),
        ({"stream": True}, "hint 'stream' expects an integer 0-65535, found true"),
        ({"placement_id": 1.5}, "hint 'placement_id' expects an integer 0-65535, found '1.5'"),
        ({"flush_read": 1}, "hint 'flush_read' expects no value, true or false, found 1"),
        ({"fdp": 1, "placement_id": 2}, "hint 'placement_id' given twice"),
        ({"bogus": 1}, "unknown hint 'bogus' (known: write_life (life), stream"),
    ],
)
def test_errors_are_the_cores_messages(given, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        Hint(**given)


def test_python_and_the_trace_column_refuse_alike():
    with pytest.raises(ValueError, match="write_life") as from_text:
        Hint.parse("life=forever")
    with pytest.raises(ValueError, match="write_life") as from_keywords:
        Hint(write_life="forever")
    assert str(from_text.value) == str(from_keywords.value)


def test_text_form_round_trips_with_canonical_names():
    hint = Hint(life="short", fdp=2, sea="dyn", group=9, rel="clean", flushread=True, stream=4)
    text = str(hint)
    assert text == (
        "write_life=short;stream=4;placement_id=2;sea_class=dyn;read_group=9;"
        "reliability=clean;flush_read"
    )
    assert Hint.parse(text) == hint
    assert str(Hint()) == ""


def test_replace_and_frozen_still_work():
    hint = Hint(fdp=1)
    assert dataclasses.replace(hint, stream=3) == Hint(placement_id=1, stream=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hint.stream = 2  # type: ignore[misc]


def test_the_device_takes_aliases_in_dicts(make_device):
    dev = make_device(extra=["placement.handles=2"])
    assert dev.write(0, KIB4, hint={"fdp": 1, "life": "notset"}).latency_ns > 0
    with pytest.raises(ValueError, match="unknown hint 'bogus'"):
        dev.write(0, KIB4, hint={"bogus": 1})
    # The native module refuses the same way when handed a dict directly.
    with pytest.raises(ValueError, match="hint 'sea_class' expects one of dyn, stat"):
        _core.normalize_hint({"sea": "hot"})


def test_the_readme_table_lists_the_cores_vocabulary():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(): line
        for line in readme.split("### Hints", 1)[1].split("###", 1)[0].splitlines()
        if line.startswith("| `")
    }
    assert set(rows) == {f"`{name}`" for name in HINT_FIELDS}
    for field in HINT_FIELDS.values():
        row = rows[f"`{field.name}`"]
        for word in (*field.aliases, *field.values):
            assert f"`{word}`" in row, (field.name, word)
