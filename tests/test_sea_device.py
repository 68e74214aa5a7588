"""SEA-SSD hints from Python: ``sea_settings``, ``sea_predict`` and the untimed ``peek``."""

from __future__ import annotations

import numpy as np
import pytest

import ssdlab
from ssdlab.hints import Hint

KIB4 = 4096
TWO_HANDLES = ("placement.handles=2",)
HINTS_OFF = (*TWO_HANDLES, "placement.honor_hints=false")


def _oltp_like(dev: ssdlab.Device, *, hints: bool, seed: int = 3) -> None:
    """A tenth of the units hot (``dyn``), the rest cold (``stat``); each cold page is
    predicted 500 writes before it is written."""
    units = dev.logical_bytes // KIB4
    hot = units // 10
    if hints:
        dev.sea_settings(wal_bytes=0, cache_bytes=8 * hot * KIB4)
    for unit in range(units):
        dev.write(unit * KIB4, KIB4, hint=Hint(sea_class="dyn" if unit < hot else "stat"))
    rng = np.random.default_rng(seed)
    waiting: list[int] = []
    for draw in rng.random(3 * units).tolist():
        if draw < 0.7:
            unit = int(draw / 0.7 * hot)
            dev.write(unit * KIB4, KIB4, hint=Hint(sea_class="dyn"))
            continue
        page = hot + int((draw - 0.7) / 0.3 * (units - hot))
        if hints:
            dev.sea_predict(page * KIB4, KIB4)
        waiting.append(page)
        if len(waiting) > 500:
            dev.write(waiting.pop(0) * KIB4, KIB4, hint=Hint(sea_class="stat"))


def test_hints_migrate_predicted_pages_and_lower_waf(make_device):
    hinted = make_device(extra=TWO_HANDLES)
    _oltp_like(hinted, hints=True)
    plain = make_device(extra=HINTS_OFF)
    _oltp_like(plain, hints=True)
    sea = hinted.stats()["sea"]
    assert sea["settings"]["received"] == 1
    assert sea["settings"]["dyn_quota_blocks"] > 0
    assert sea["predictions"]["migrated_units"] > 0
    assert sea["predictions"]["came_true_units"] > 0
    assert sea["dyn_blocks"] > 0
    assert sea["stat_blocks"] > 0
    assert hinted.stats()["waf"] < plain.stats()["waf"]


def test_ignored_hints_are_counted_and_change_nothing_else(make_device):
    ignored = make_device(extra=HINTS_OFF)
    _oltp_like(ignored, hints=True)
    never_sent = make_device(extra=HINTS_OFF)
    _oltp_like(never_sent, hints=False)
    a, b = ignored.stats(), never_sent.stats()
    sea = a.pop("sea")
    b.pop("sea")
    assert a == b
    assert sea["honor_hints"] is False
    assert sea["settings"]["received"] == 1
    assert sea["settings"]["dyn_quota_blocks"] is None
    assert sea["predictions"]["received_units"] > 0
    assert sea["predictions"]["migrated_units"] == 0
    assert sea["predictions"]["in_table_units"] == 0


def test_sea_settings_takes_keywords_and_checks_them(make_device):
    dev = make_device(extra=TWO_HANDLES)
    with pytest.raises(TypeError):
        dev.sea_settings(1, 2)  # type: ignore[misc]
    with pytest.raises(ValueError, match="wal_bytes"):
        dev.sea_settings(wal_bytes=-1, cache_bytes=0)
    with pytest.raises(ValueError, match="cache_bytes"):
        dev.sea_settings(wal_bytes=0, cache_bytes=1.5)  # type: ignore[arg-type]
    dev.sea_settings(wal_bytes=1 << 20, cache_bytes=4 << 20)
    settings = dev.stats()["sea"]["settings"]
    assert (settings["wal_bytes"], settings["cache_bytes"]) == (1 << 20, 4 << 20)
    assert settings["dyn_quota_blocks"] > 0


def test_sea_predict_is_range_checked(make_device):
    dev = make_device(extra=TWO_HANDLES)
    with pytest.raises(ValueError, match="offset"):
        dev.sea_predict(-1, KIB4)
    with pytest.raises(ValueError, match="length"):
        dev.sea_predict(0, "4096")  # type: ignore[arg-type]
    with pytest.raises(ssdlab.DeviceError, match="past the device's end"):
        dev.sea_predict(dev.logical_bytes, KIB4)
    with pytest.raises(ssdlab.DeviceError, match="length 0"):
        dev.sea_predict(0, 0)
    dev.sea_predict(0, 3 * KIB4)
    assert dev.stats()["sea"]["predictions"]["in_table_units"] == 3


def test_sea_hints_need_two_handles_when_honoured(make_device):
    dev = make_device()
    with pytest.raises(ssdlab.DeviceError, match=r"placement\.handles"):
        dev.sea_settings(wal_bytes=1 << 20, cache_bytes=0)
    with pytest.raises(ssdlab.DeviceError, match=r"placement\.handles"):
        dev.sea_predict(0, KIB4)
    off = make_device(extra=("placement.honor_hints=false",))
    off.sea_settings(wal_bytes=1 << 20, cache_bytes=0)
    off.sea_predict(0, KIB4)


def test_sea_config_errors_name_the_key(make_device):
    with pytest.raises(ssdlab.ConfigError, match=r"sea\.dirty_fraction.*\[0, 1\]"):
        make_device(extra=("sea.dirty_fraction=2",))
    with pytest.raises(ssdlab.ConfigError, match=r"sea\.predict_table_entries"):
        make_device(extra=("sea.predict_table_entries=0",))


def test_segment_sizes_are_in_the_time_series(tiny_overrides):
    dev = ssdlab.Device("tlc", overrides=[*tiny_overrides, *TWO_HANDLES], time_series=True, seed=1)
    _oltp_like(dev, hints=True)
    rows = dev.time_series()
    assert rows
    assert all("dyn_blocks" in row and "stat_blocks" in row for row in rows)
    assert rows[-1]["dyn_blocks"] == dev.stats()["sea"]["dyn_blocks"]


def test_peek_reads_stored_data_untimed(make_device):
    dev = make_device(store_data=True)
    payload = bytes(range(256)) * 32
    dev.write(KIB4, data=payload)
    now, stats = dev.now, dev.stats()
    assert dev.peek(KIB4 - 16, len(payload) + 32) == bytes(16) + payload + bytes(16)
    assert dev.peek(0, KIB4) == bytes(KIB4)
    assert (dev.now, dev.stats()) == (now, stats), "a peek is not timed or counted"
    assert dev.read(KIB4, len(payload)).data == payload
    assert dev.now > now, "a read is timed"


def test_peek_errors(make_device):
    with pytest.raises(ssdlab.DeviceError, match="store_data"):
        make_device().peek(0, KIB4)
    dev = make_device(store_data=True)
    with pytest.raises(ssdlab.DeviceError, match="past the device's end"):
        dev.peek(dev.logical_bytes - KIB4, 2 * KIB4)
    with pytest.raises(ssdlab.DeviceError, match="length 0"):
        dev.peek(0, 0)
    with pytest.raises(ValueError, match="offset"):
        dev.peek(-5, KIB4)
