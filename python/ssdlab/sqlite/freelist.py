"""Which pages of a main database file are free, read from what SQLite writes to it.

The database header (page 1) holds the freelist's first trunk page at bytes 32-35 and its total
page count at 36-39, big endian (SQLite's file format, section 1.3.8). A trunk page holds the
next trunk's number (bytes 0-3), a leaf count L (4-7) and L leaf page numbers. Leaf pages hold
nothing SQLite will read back, so their device space can be trimmed; trunk pages hold the list
and stay.

:class:`FreelistTracker` sees every page written to the file (and page 1 and wanted trunk pages
when they are read, so a reopened database is known too). SQLite writes page 1 before the trunk
pages of a checkpoint, so the chain is walked when the file is synced, when every page of the
change is there: ``resolve()`` returns the leaves that became free since the last walk. It is
compiled (crate ``ssdlab-sqlite``, ``freelist.rs``): the VFS's compiled file object observes
pages without a Python call, and the Python path uses the same tracker.
"""

from __future__ import annotations

from ssdlab._core import FreelistTracker

__all__ = ["FreelistTracker"]
