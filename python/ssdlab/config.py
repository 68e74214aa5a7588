"""Where a device's configuration comes from: a preset name or a TOML file, plus overrides.

The configuration itself (its keys, defaults, validation and hash) lives in the Rust core; this
module only finds the TOML text and turns ``--set key=value`` items into ``(key, value)`` pairs.
The core applies overrides to the typed tree and names the key when one is wrong.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

from ssdlab import _core
from ssdlab.errors import ConfigError

Overrides = Mapping[str, object] | Iterable[str] | Iterable[tuple[str, object]] | None


def preset_names() -> list[str]:
    """The names of the built-in presets, sorted."""
    return [name for name, _ in _core.presets()]


def resolve(config: str | os.PathLike[str]) -> tuple[str, str]:
    """Turn CONFIG (a preset name or a path to a TOML file) into ``(toml_text, source_name)``.

    Something that looks like a path (it ends in ``.toml`` or contains a directory separator) is
    read as a file; otherwise a preset name wins over a file of the same name in the working
    directory. ``source_name`` is what the core puts in front of configuration errors.

    Raises:
        ConfigError: CONFIG is neither a preset nor a readable file; the message lists the presets.
    """
    text = os.fspath(config)
    looks_like_path = text.endswith(".toml") or os.sep in text or "/" in text
    names = preset_names()
    if not looks_like_path and text in names:
        return _core.preset_toml(text), f"preset {text}"
    path = Path(text)
    if looks_like_path or path.is_file():
        try:
            return path.read_text(encoding="utf-8"), text
        except FileNotFoundError:
            raise ConfigError(
                f"{text}: no such configuration file (presets: {', '.join(names)})"
            ) from None
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"{text}: cannot read configuration file: {err}") from None
    raise ConfigError(
        f"unknown preset {text!r}; presets are: {', '.join(names)} (or give a path to a TOML file)"
    )


def parse_overrides(overrides: Overrides) -> list[tuple[str, str]]:
    """Normalise overrides to ``[(key, value_text), ...]`` in the order given.

    Accepts a mapping ``{"geometry.channels": 2}``, ``"key=value"`` strings (as given to
    ``--set``) or ``(key, value)`` pairs. Values become TOML-like text: booleans ``true``/``false``,
    numbers via ``str``, strings unchanged; the core parses them against the key's type.

    Raises:
        ConfigError: an item is not ``key=value``, its key is empty, or it contains a newline
            or another control character; the message quotes it.
    """
    if overrides is None:
        return []
    items: Iterable[object] = overrides.items() if isinstance(overrides, Mapping) else overrides
    if isinstance(items, str):
        items = [items]
    pairs: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, str):
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"override {item!r}: expected key=value")
        elif isinstance(item, tuple) and len(item) == 2:
            key, value = item
            if not isinstance(key, str):
                raise ConfigError(f"override {item!r}: the key must be a string")
        else:
            raise ConfigError(f"override {item!r}: expected 'key=value' or a (key, value) pair")
        # Checked before stripping: a trailing newline is as wrong as one inside (TOML would
        # end the value there and read the rest as more TOML).
        raw = key + (value if isinstance(value, str) else _value_text(value))
        key = key.strip()
        if not key:
            raise ConfigError(f"override {item!r}: empty key")
        text = _value_text(value)
        if any(_is_control(c) for c in raw):
            raise ConfigError(
                f"override {item!r}: control character in the override; "
                "expected key=value on one line"
            )
        pairs.append((key, text))
    return pairs


def _is_control(char: str) -> bool:
    # The same set as Rust's char::is_control (Unicode category Cc).
    return unicodedata.category(char) == "Cc"


def _value_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value.strip() if isinstance(value, str) else str(value)
