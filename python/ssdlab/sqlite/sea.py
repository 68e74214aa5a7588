"""SEA-SSD engine side: the three hints SQLite's storage layer sends the device.

SEA-SSD (Sun, Arakawa, Takeuchi, TCAS-I 2014) splits the device into a ``dyn`` segment for data
rewritten soon and a ``stat`` segment for the rest, and lets the storage engine say which is
which. This module holds the engine's rules, apart from the VFS mechanism that calls it, so
they can be tested with a recording fake device:

- *classification*: every write to the WAL, a rollback journal or a temporary file is ``dyn``;
  a main-database page write is ``dyn`` when the same page was written within the last
  ``recent_checkpoints`` checkpoints of that database (or earlier in the current one), else
  ``stat``. A *checkpoint* is a sync of the main database file: in WAL mode SQLite syncs it once
  at the end of each checkpoint; with a rollback journal once per commit.
- *prediction*: each WAL frame written names a database page (frame header bytes 0-3, big
  endian); that page will be written to the main database at the next checkpoint (the WAL's
  page set is SQLite's flush list), so its device range is sent ahead with
  ``device.sea_predict(offset, length)``.
- *settings*: at open, ``device.sea_settings(wal_bytes=..., cache_bytes=...)``.

With hints off the VFS builds no :class:`SeaHinter` and sends nothing.
"""

from __future__ import annotations

from typing import Any, Protocol

from ssdlab._core import CompiledHint, HintCounters, PageEpochs, compile_hint
from ssdlab.errors import DeviceError

#: The two hints a write carries, parsed once by the core (``CompiledHint.as_dict()`` shows
#: the fields).
DYN: CompiledHint = compile_hint({"sea_class": "dyn"})
STAT: CompiledHint = compile_hint({"sea_class": "stat"})


class SeaDevice(Protocol):
    """What the hinter needs of a device (``ssdlab.Device`` or a test's recording fake)."""

    def sea_predict(self, offset: int, length: int) -> Any: ...

    def sea_predict_many(self, ranges: list[tuple[int, int]]) -> Any: ...

    def sea_settings(self, *, wal_bytes: int, cache_bytes: int) -> Any: ...


# HintCounters (``dyn``, ``stat``, ``predictions``, ``settings``) is compiled: the VFS's
# compiled file object counts the hints it classifies in the same object.
__all__ = ["DYN", "STAT", "HintCounters", "SeaDevice", "SeaHinter"]


class SeaHinter:
    """The SEA-SSD hint rules for every database file of one VFS.

    Args:
        device: the device the hints go to; ``sea_predict``/``sea_settings`` are called on it
            when it has them (a device without them still gets classified writes).
        recent_checkpoints: a page rewritten within this many checkpoints is ``dyn``.
    """

    def __init__(self, device: Any, *, recent_checkpoints: int = 2) -> None:
        if isinstance(recent_checkpoints, bool) or not isinstance(recent_checkpoints, int):
            raise ValueError(
                f"sea_recent_checkpoints: expected an integer >= 0, got {recent_checkpoints!r}"
            )
        if recent_checkpoints < 0:
            raise ValueError(
                f"sea_recent_checkpoints: expected an integer >= 0, got {recent_checkpoints}"
            )
        self.recent_checkpoints = recent_checkpoints
        self.counters = HintCounters()
        self._databases: dict[str, PageEpochs] = {}
        # Looked up per call rather than kept as bound methods, which would hold the device
        # (the VFS passes a weak proxy).
        self._device = device
        #: Predictions not yet sent (see :meth:`predict`).
        self.pending_predictions: list[tuple[int, int]] = []
        self._has_predict = hasattr(device, "sea_predict_many")
        self._has_settings = hasattr(device, "sea_settings")
        #: Why the device refused prediction and settings hints (then no more are sent), e.g.
        #: a configuration without distinct dyn and stat placement handles.
        self.refused: str | None = None

    @property
    def can_predict(self) -> bool:
        """Whether the device takes prediction and settings hints."""
        return self._has_predict

    def settings(self, *, wal_bytes: int, cache_bytes: int) -> None:
        """Send the settings hint (at open): the WAL size limit and the page cache size."""
        if self._has_settings and self._send("sea_settings", wal_bytes=wal_bytes,
                                             cache_bytes=cache_bytes):  # fmt: skip
            self.counters.settings += 1

    def log_write(self) -> CompiledHint:
        """The hint of a WAL, journal or temporary-file write: always ``dyn``."""
        self.counters.dyn += 1
        return DYN

    def epochs(self, database: str) -> PageEpochs:
        """The page history of main database ``database`` (made on first use): the checkpoint
        count and the checkpoint each page was last written in (``ssdlab-sqlite``'s
        ``sea.rs``, shared with the VFS's compiled file object)."""
        epochs = self._databases.get(database)
        if epochs is None:
            epochs = self._databases[database] = PageEpochs()
        return epochs

    def database_write(self, database: str, page_number: int) -> CompiledHint:
        """The hint of a write of page ``page_number`` (1-based) of main database ``database``,
        recording the write for later classifications."""
        if self.epochs(database).write(page_number, self.recent_checkpoints):
            self.counters.dyn += 1
            return DYN
        self.counters.stat += 1
        return STAT

    def checkpoint(self, database: str) -> None:
        """The main database was synced: one checkpoint ended. Pages not written in the last
        ``recent_checkpoints`` checkpoints are forgotten, so the table stays as small as the
        set of recently written pages."""
        self.epochs(database).checkpoint(self.recent_checkpoints)

    def forget(self, database: str) -> None:
        """The database file was deleted: its history no longer applies."""
        self._databases.pop(database, None)

    def predict(self, offset: int, length: int) -> None:
        """Queue a prediction hint for a device range (a database page named by a WAL frame);
        :meth:`send_predictions` sends the queue, which the VFS does before its next request
        to the device, so that the device learns of every prediction at the same simulated
        instant as if each were sent alone, for one call per commit instead of one per frame."""
        if self._has_predict:
            self.pending_predictions.append((offset, length))

    def send_predictions(self) -> None:
        """Send the queued predictions (all counted, or none if the device refuses them)."""
        ranges = self.pending_predictions
        self.pending_predictions = []
        if ranges and self._has_predict and self._send("sea_predict_many", ranges):
            self.counters.predictions += len(ranges)

    def _send(self, method: str, *args: Any, **kwargs: Any) -> bool:
        """Call the device; a device that refuses SEA hints is sent no more of them (its
        refusal is kept in :attr:`refused`), as the engine of a drive without the feature
        would stop."""
        try:
            getattr(self._device, method)(*args, **kwargs)
        except DeviceError as error:
            self.refused = f"{method}: {error}"
            self._has_predict = self._has_settings = False
            return False
        return True
