"""NoFTL's storage manager: SQLite's pages mapped straight onto native flash by the host.

NoFTL (Hardock, Petrov, Gottstein, Buchmann; VLDB 2013 demo) removes the SSD's FTL: the flash
exposes read page, program page and erase block (:class:`ssdlab.NativeFlash`), and the
database's storage manager maps its pages to flash pages, collects garbage and levels wear,
using what it knows. Here that storage manager is the SQLite coupling's store
(:class:`HostFtlStore`, a :class:`~ssdlab.sqlite.store.DeviceStore` whose device requests go
to a :class:`HostFtl` instead of a block interface), selected by ``connect(..., backend="native")``.

**Space.** The store keeps its extent layout (files are lists of extents of a logical page
space, as a tablespace is a list of extents), but the logical space is the host FTL's own:
``logical_pages`` flash pages' worth: by default as many as the device's block interface
exports (its configured over-provisioning becomes the host's spare space, so both are compared
on equal terms), or the usable blocks less ``spare_fraction`` of them; never fewer spare blocks
than GC's reserve and the open blocks. A logical page is a
flash page: the database page size is the flash page size. A write goes out of place to the
next free page of an open block; the old copy becomes invalid.

**What the engine knows.** Everything the store deallocates is dead at once and never copied
by GC: pages that joined SQLite's freelist (at the checkpoint's sync), WAL frames behind a
restarted or truncated WAL, journals and deleted or truncated files -- the store's trims.

**Streams and dies.** Writes of the main database, of the logs (WAL, rollback journal), of
temporary files and of GC go to different open blocks (one per stream and die), so data of one
lifetime shares a block. A stream's pages go round-robin over the dies: the pages of one
request (a commit's gathered WAL frames, a checkpoint's run of pages) are programmed on
different dies at once, and the request waits for the last. Reads of several pages overlap
likewise.

**GC and wear.** When the free blocks fall to ``gc_free_blocks``, GC runs before the write
(the host waits for it, a foreground collection): a victim is chosen among the closed blocks
by the host's own valid counts, greedy (fewest valid pages) or cost-benefit (LFS: age x (1 - u)
/ 2u, age in sequence numbers since the block closed), its valid pages are read and programmed
into the GC stream's open block on the victim's die, and it is erased. Free blocks are handed
out least-worn first, per die (dynamic wear levelling as erase-count-aware allocation); when
the most-erased block runs ``wear_gap`` erases ahead of the least-erased block holding data,
that cold block is the next victim (static wear levelling: its long-lived data moves onto a
worn block). A block whose erase fails at the endurance limit is retired.

**Recovery.** Each programmed page's out-of-band area holds (file id, page within the file,
sequence number) -- 16 bytes, ``OOB``. The page map lives in host RAM only. After a power loss
(:meth:`HostFtl.power_loss`, called by :func:`ssdlab.sqlite.crash`) the map, the valid counts
and the open blocks are gone; :meth:`HostFtl.recover` reads the OOB of every programmed page
(issued together, so the dies scan in parallel), keeps for each (file, page) the copy with the
highest sequence number, and rebuilds the map through the store's catalog -- files, their ids
and extents, sizes and the sequence number of each deallocation, which the store keeps as
durable metadata (as it already keeps file sizes). A copy older than its page's deallocation,
or of a file that no longer exists, is dead. Partly written blocks are closed, not reopened.
The scan's simulated time is in ``recoveries``.
"""

from __future__ import annotations

import heapq
import struct
from array import array
from dataclasses import dataclass, field
from typing import Any

from ssdlab.sqlite.freelist import FreelistTracker
from ssdlab.sqlite.store import (
    EXTENT_BYTES,
    ROLE_JOURNAL,
    ROLE_MAIN,
    ROLE_OTHER,
    ROLE_WAL,
    TRIM_ALIGN,
    DeviceStore,
    ExtentAllocator,
    IoCounters,
    StoredFile,
    require_stored_data,
)

#: OOB layout: file id (u32), page within the file (u32), sequence number (u64), little-endian.
OOB = struct.Struct("<IIQ")
#: The file id of a page not owned by any file (never written by the store).
NO_FILE = 0xFFFF_FFFF

STREAMS = ("db", "log", "temp", "gc")
GC_POLICIES = ("greedy", "cost_benefit")

_NONE = -1

#: Log tails kept in host RAM (pages that recent writes ended inside).
TAIL_PAGES = 16

#: Static wear levelling: when the most-erased block is this many erases ahead of the least-
#: erased block holding data, GC takes that cold block next, so its data moves to a worn block
#: and the little-worn block joins the free pool.
DEFAULT_WEAR_GAP = 16


@dataclass
class HostFtlCounters:
    """What the host FTL did, in pages and blocks, and the simulated time it waited for."""

    host_page_writes: int = 0
    host_page_reads: int = 0
    unmapped_reads: int = 0
    read_modify_writes: int = 0
    #: Partial-page writes merged with a log tail kept in host RAM (no flash read).
    tail_hits: int = 0
    trimmed_pages: int = 0
    gc_runs: int = 0
    gc_page_copies: int = 0
    gc_ns: int = 0
    erases: int = 0
    #: Victims taken for static wear levelling (cold blocks moved to worn ones).
    wear_moves: int = 0
    retired_blocks: int = 0
    recoveries: list[dict[str, int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["recoveries"] = [dict(r) for r in self.recoveries]
        out["waf"] = (
            (self.host_page_writes + self.gc_page_copies) / self.host_page_writes
            if self.host_page_writes
            else 0.0
        )
        return out


class HostFtl:
    """The host's page map over one device's native flash (see the module's description).

    ``owner(logical_page)`` is the store's callback naming the (file id, page within the file,
    stream) of a logical page being written; ``catalog()`` gives, at recovery, each live file's
    id, extents (in logical pages) and size in pages, plus the deallocation table.
    """

    def __init__(
        self,
        device: Any,
        *,
        gc_policy: str = "greedy",
        spare_fraction: float | None = None,
        gc_free_blocks: int | None = None,
        wear_gap: int = DEFAULT_WEAR_GAP,
    ) -> None:
        if isinstance(wear_gap, bool) or not isinstance(wear_gap, int) or wear_gap < 1:
            raise ValueError(f"wear_gap: expected an integer >= 1, got {wear_gap!r}")
        self.wear_gap = wear_gap
        if gc_policy not in GC_POLICIES:
            raise ValueError(
                f"gc_policy: expected one of {', '.join(GC_POLICIES)}, got {gc_policy!r}"
            )
        if spare_fraction is not None and (
            isinstance(spare_fraction, bool) or not 0 < spare_fraction < 0.9
        ):
            raise ValueError(
                f"spare_fraction: expected a number in (0, 0.9), got {spare_fraction!r}"
            )
        self.device = device
        self.flash = device.native()
        # The hot path calls the native handles themselves: the addresses it passes are its
        # own (always in range), so the front end's argument checks would only cost time.
        self._native = self.flash._handle
        self._clock = device._handle
        g = self.flash.geometry
        self.page_bytes = int(g["page_bytes"])
        self.pages_per_block = int(g["pages_per_block"])
        self.total_blocks = int(g["total_blocks"])
        self.oob_bytes = int(g["oob_bytes"])
        if self.oob_bytes < OOB.size:
            raise ValueError(
                f"the flash's OOB area holds {self.oob_bytes} bytes; the host FTL needs "
                f"{OOB.size} (file id, page, sequence number)"
            )
        dies_per_channel = int(g["dies_per_channel"])
        self.dies = int(g["channels"]) * dies_per_channel
        self.die_of = [0] * self.total_blocks
        for block in range(self.total_blocks):
            channel, die, _plane, _index = self.flash.locate(block)
            self.die_of[block] = channel * dies_per_channel + die
        self.gc_policy = gc_policy
        bad = set(self.flash.bad_blocks())
        usable = self.total_blocks - len(bad)
        # Open blocks: one per stream and die; GC needs its own to finish a victim.
        self.gc_free_blocks = (
            gc_free_blocks if gc_free_blocks is not None else len(STREAMS) * self.dies + 2
        )
        reserve = self.gc_free_blocks + len(STREAMS) * self.dies
        if spare_fraction is None:
            # The same logical space as the device's block interface (its over-provisioning),
            # so that the host FTL and the device's FTL are compared on equal terms.
            logical_blocks = device.logical_bytes // (self.page_bytes * self.pages_per_block)
            spare = max(usable - logical_blocks, reserve)
        else:
            spare = max(round(usable * spare_fraction), reserve)
        if spare >= usable:
            raise ValueError(
                f"the flash has {usable} usable blocks; the host FTL keeps {spare} spare "
                "(open blocks per stream and die, and GC's reserve): too small a device"
            )
        self.logical_pages = (usable - spare) * self.pages_per_block
        self.spare_blocks = spare
        self.counters = HostFtlCounters()
        self.owner: Any = None  # set by the store: logical page -> (file id, file page, stream)
        self.catalog: Any = None  # set by the store: for recovery
        #: Deallocations: logical page -> sequence number when it was trimmed (durable metadata).
        self.trimmed_at: dict[int, int] = {}
        self.seq = 0
        self._reset_volatile(bad)
        for block in range(self.total_blocks):
            if block not in bad:
                self._give_free(block)

    # -- volatile state ------------------------------------------------------------------------

    def _reset_volatile(self, bad: set[int]) -> None:
        total_pages = self.total_blocks * self.pages_per_block
        self.l2p = array("q", [_NONE]) * self.logical_pages
        self.p2l = array("q", [_NONE]) * total_pages
        self.valid = array("l", [0]) * self.total_blocks
        #: Sequence number when each block was closed (cost-benefit's age), -1 while not closed.
        self.closed_seq = array("q", [_NONE]) * self.total_blocks
        self.retired = set(bad)
        #: The stream whose open block each block last was (GC's blocks hold the survivors of
        #: every stream's victims).
        self.block_stream: dict[int, str] = {}
        #: Erase counts as the host keeps them (the flash's, read once at start).
        self.erases = array("l", self.flash.erase_counts())
        self.free: list[list[tuple[int, int]]] = [[] for _ in range(self.dies)]
        self.free_count = 0
        #: Open block and next page index per (stream, die).
        self.open: dict[tuple[str, int], list[int]] = {}
        # Each stream starts on a die of its own, so streams written together use different dies.
        self.cursor = {stream: index % self.dies for index, stream in enumerate(STREAMS)}
        #: The last page of recent writes that ended inside a page (a log's tail), as written:
        #: the next append to it merges in host RAM instead of reading the page back.
        self.tails: dict[int, bytes] = {}
        self.mapped = 0

    def _give_free(self, block: int) -> None:
        heapq.heappush(self.free[self.die_of[block]], (self.erases[block], block))
        self.free_count += 1

    # -- the block interface the store calls ---------------------------------------------------

    def submit(
        self, op: str, offset: int, length: int, data: Any, hint: Any
    ) -> tuple[bytes | None, bool]:
        """A request of the store at logical byte ``offset``, as a device's ``submit_quick``:
        ``(data read or None, uncorrectable)``."""
        now = self._clock.now
        if op == "read":
            out, done = self.read(offset, length, now)
            self._advance(done)
            return out, False
        if op == "write":
            self._advance(self.write(offset, data if type(data) is bytes else bytes(data), now))
            return None, False
        if op == "trim":
            self.trim(offset, length)
            return None, False
        if op == "flush":
            return None, False  # a program is on flash when it returns: nothing is volatile
        raise ValueError(f"host FTL: unknown operation {op!r}")

    def _advance(self, done: int) -> None:
        clock = self._clock
        if done > clock.now:
            clock.advance_to(done)

    def read(self, offset: int, length: int, at_ns: int) -> tuple[bytes, int]:
        page_bytes = self.page_bytes
        if length == page_bytes and not offset % page_bytes:  # a database page
            return self._read_page(offset // page_bytes, at_ns)
        first, last = offset // page_bytes, (offset + length - 1) // page_bytes
        pieces = []
        done = at_ns
        for lpage in range(first, last + 1):
            data, t = self._read_page(lpage, at_ns)
            pieces.append(data)
            done = max(done, t)
        joined = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        start = offset - first * page_bytes
        return joined[start : start + length], done

    def _read_page(self, lpage: int, at_ns: int) -> tuple[bytes, int]:
        if not 0 <= lpage < self.logical_pages:
            self._check_range(lpage)
        ppage = self.l2p[lpage]
        if ppage == _NONE:
            self.counters.unmapped_reads += 1
            return bytes(self.page_bytes), at_ns
        self.counters.host_page_reads += 1
        data, _oob, done = self._native.read(ppage, at_ns)
        return data, done

    def write(self, offset: int, data: bytes, at_ns: int) -> int:
        page_bytes = self.page_bytes
        length = len(data)
        first, last = offset // page_bytes, (offset + length - 1) // page_bytes
        pages = last - first + 1
        if self.free_count < self.gc_free_blocks + -(-pages // self.pages_per_block):
            at_ns = self._ensure_free(pages, at_ns)
        if length == page_bytes and offset == first * page_bytes:  # a database page
            return self._program(first, data, at_ns)
        done = at_ns
        for lpage in range(first, last + 1):
            start = lpage * page_bytes
            lo, hi = max(offset, start), min(offset + length, start + page_bytes)
            piece = data[lo - offset : hi - offset]
            ready = at_ns
            if hi - lo < page_bytes:  # a partial page: merge with what the page holds
                old = self.tails.pop(lpage, None)
                if old is None:
                    old, ready = self._read_page(lpage, at_ns)
                    self.counters.read_modify_writes += 1
                else:
                    self.counters.tail_hits += 1
                piece = old[: lo - start] + piece + old[hi - start :]
            done = max(done, self._program(lpage, piece, ready))
            if hi - lo < page_bytes and hi == offset + length:  # ends inside: keep the tail
                self.tails[lpage] = piece
                if len(self.tails) > TAIL_PAGES:
                    del self.tails[next(iter(self.tails))]
        return done

    def trim(self, offset: int, length: int) -> None:
        page_bytes = self.page_bytes
        first = -(-offset // page_bytes)
        last = (offset + length) // page_bytes  # exclusive: whole pages only
        self.seq += 1
        for lpage in range(first, min(last, self.logical_pages)):
            self.trimmed_at[lpage] = self.seq
            ppage = self.l2p[lpage]
            self.tails.pop(lpage, None)
            if ppage != _NONE:
                self._invalidate(ppage)
                self.l2p[lpage] = _NONE
                self.mapped -= 1
                self.counters.trimmed_pages += 1

    def _check_range(self, lpage: int) -> None:
        if not 0 <= lpage < self.logical_pages:
            raise ValueError(f"host FTL: logical page {lpage} outside 0..{self.logical_pages - 1}")

    # -- writing --------------------------------------------------------------------------------

    def _program(self, lpage: int, data: bytes, at_ns: int) -> int:
        if not 0 <= lpage < self.logical_pages:
            self._check_range(lpage)
        file_id, file_page, stream = self.owner(lpage)
        self.seq += 1
        die = self.cursor[stream]
        self.cursor[stream] = (die + 1) % self.dies
        slot = self.open.get((stream, die))
        if slot is not None and slot[1] < self.pages_per_block:  # the open block has room
            ppage = slot[0] * self.pages_per_block + slot[1]
            slot[1] += 1
        else:
            ppage = self._allocate(stream, die)
        done = self._native.program(ppage, data, OOB.pack(file_id, file_page, self.seq), at_ns)
        old = self.l2p[lpage]
        if old != _NONE:
            self._invalidate(old)
        else:
            self.mapped += 1
        if self.tails:
            self.tails.pop(lpage, None)  # rewritten: a kept tail is stale
        self.trimmed_at.pop(lpage, None)
        self.l2p[lpage] = ppage
        self.p2l[ppage] = lpage
        self.valid[ppage // self.pages_per_block] += 1
        self.counters.host_page_writes += 1
        return done

    def _allocate(self, stream: str, die: int) -> int:
        """The next free page of ``stream``'s open block on ``die``, opening the die's
        least-worn free block when needed (or writing on the die with the most free blocks
        when this one has none)."""
        ppb = self.pages_per_block
        slot = self.open.get((stream, die))
        if slot is None or slot[1] == ppb:
            if slot is not None:
                self.closed_seq[slot[0]] = self.seq
                del self.open[(stream, die)]
            if not self.free[die]:
                other = max(range(self.dies), key=lambda d: len(self.free[d]))
                if not self.free[other]:
                    raise RuntimeError("host FTL: no free block left (GC could not keep up)")
                return self._allocate(stream, other)
            block = heapq.heappop(self.free[die])[1]
            self.free_count -= 1
            slot = [block, 0]
            self.open[(stream, die)] = slot
            self.block_stream[block] = stream
        ppage = slot[0] * ppb + slot[1]
        slot[1] += 1
        return ppage

    def _invalidate(self, ppage: int) -> None:
        self.p2l[ppage] = _NONE
        self.valid[ppage // self.pages_per_block] -= 1

    # -- garbage collection ---------------------------------------------------------------------

    def _ensure_free(self, pages: int, at_ns: int) -> int:
        """Collect until a write of ``pages`` pages leaves ``gc_free_blocks`` free blocks;
        returns when the collection ends (the host waits for it)."""
        need = self.gc_free_blocks + -(-pages // self.pages_per_block)
        start = at_ns
        rounds = 0
        while self.free_count < need:
            victim = self._victim()
            if victim is None:
                break
            at_ns = self._collect(victim, at_ns)
            rounds += 1
            if rounds > self.total_blocks:
                raise RuntimeError("host FTL: GC makes no progress (every block is valid)")
        if rounds:
            self.counters.gc_runs += 1
            self.counters.gc_ns += at_ns - start
        return at_ns

    def _victim(self) -> int | None:
        """The next block to collect: the coldest closed block when wear has drifted
        ``wear_gap`` apart (static wear levelling), else the policy's choice among closed
        blocks with something to gain."""
        open_blocks = {slot[0] for slot in self.open.values()}
        ppb = self.pages_per_block
        erases = self.erases
        best, best_score = None, None
        coldest, coldest_erases = None, None
        for block in range(self.total_blocks):
            closed = self.closed_seq[block]
            if closed == _NONE or block in open_blocks or block in self.retired:
                continue
            if coldest_erases is None or erases[block] < coldest_erases:
                coldest, coldest_erases = block, erases[block]
            valid = self.valid[block]
            if valid == ppb:
                continue
            if self.gc_policy == "greedy":
                score = -valid
            else:
                u = valid / ppb
                age = self.seq - closed + 1
                score = float("inf") if u == 0 else age * (1 - u) / (2 * u)
            if best_score is None or score > best_score:
                best, best_score = block, score
        if coldest is not None and max(erases) - coldest_erases > self.wear_gap:
            self.counters.wear_moves += 1
            return coldest
        return best

    def _collect(self, victim: int, at_ns: int) -> int:
        """Move the victim's valid pages into the GC stream on its die, then erase it."""
        ppb = self.pages_per_block
        die = self.die_of[victim]
        done = at_ns
        for ppage in range(victim * ppb, (victim + 1) * ppb):
            lpage = self.p2l[ppage]
            if lpage == _NONE:
                continue
            data, oob, read_done = self.flash.read(ppage, at_ns=at_ns)
            target = self._allocate("gc", die)
            # The copy keeps the page's sequence number: it never outranks a newer write.
            written = self.flash.program(
                target, bytes(data), bytes(oob[: OOB.size]), at_ns=read_done
            )
            self._invalidate(ppage)
            self.l2p[lpage] = target
            self.p2l[target] = lpage
            self.valid[target // ppb] += 1
            self.counters.gc_page_copies += 1
            done = max(done, written)
        return self._erase(victim, done)

    def _erase(self, block: int, at_ns: int) -> int:
        import ssdlab

        self.closed_seq[block] = _NONE
        try:
            done = self.flash.erase(block, at_ns=at_ns)
        except ssdlab.NandRuleError:
            self.retired.add(block)  # worn out: the block is bad from now on
            self.counters.retired_blocks += 1
            return at_ns
        self.counters.erases += 1
        self.erases[block] += 1
        self._give_free(block)
        return done

    # -- power loss and recovery ----------------------------------------------------------------

    def power_loss(self) -> None:
        """Drop everything held in host RAM: the page map, valid counts, open blocks, pools."""
        self._reset_volatile(set(self.flash.bad_blocks()))

    def recover(self) -> dict[str, int]:
        """Rebuild the page map from the OOB of every programmed page (see the module)."""
        started = self.device.now
        ppb = self.pages_per_block
        latest: dict[tuple[int, int], tuple[int, int]] = {}
        done = started
        scanned = 0
        max_seq = self.seq
        for block in range(self.total_blocks):
            if block in self.retired:
                continue
            programmed = self.flash.next_page(block)
            if programmed == 0:
                self._give_free(block)
                continue
            # A partly written block stays closed until GC takes it.
            self.closed_seq[block] = 0
            for index in range(programmed):
                ppage = block * ppb + index
                oob, t = self.flash.read_oob(ppage, at_ns=started)
                done = max(done, t)
                scanned += 1
                file_id, file_page, seq = OOB.unpack_from(bytes(oob), 0)
                if file_id == NO_FILE:
                    continue
                max_seq = max(max_seq, seq)
                key = (file_id, file_page)
                known = latest.get(key)
                if known is None or seq >= known[0]:
                    latest[key] = (seq, ppage)
        self.seq = max_seq
        files = self.catalog()  # file id -> (extents in logical pages, pages per extent, size)
        live = 0
        for (file_id, file_page), (seq, ppage) in latest.items():
            entry = files.get(file_id)
            if entry is None:
                continue
            extents, extent_pages, size_pages = entry
            index, within = divmod(file_page, extent_pages)
            if file_page >= size_pages or index >= len(extents):
                continue
            lpage = extents[index] * extent_pages + within
            if self.trimmed_at.get(lpage, -1) > seq:
                continue
            self.l2p[lpage] = ppage
            self.p2l[ppage] = lpage
            self.valid[ppage // ppb] += 1
            live += 1
        self.mapped = live
        self._advance(done)
        report = {
            "scanned_pages": scanned,
            "live_pages": live,
            "scan_ns": done - started,
            "free_blocks": self.free_count,
        }
        self.counters.recoveries.append(report)
        return report

    def stats(self) -> dict[str, Any]:
        out = self.counters.as_dict()
        out.update(
            gc_policy=self.gc_policy,
            logical_pages=self.logical_pages,
            spare_blocks=self.spare_blocks,
            mapped_pages=self.mapped,
            free_blocks=self.free_count,
            dies=self.dies,
        )
        counts = list(self.flash.erase_counts())
        if counts:
            out["erase_count_max"] = max(counts)
            out["erase_count_mean"] = sum(counts) / len(counts)
        return out


class HostFtlStore(DeviceStore):
    """The SQLite store of a device whose flash the host drives natively: the same files,
    extents, freelist and WAL tracking as :class:`DeviceStore`, with every device request
    served by a :class:`HostFtl` (see the module's description)."""

    def __init__(
        self,
        device: Any,
        *,
        gc_policy: str = "greedy",
        spare_fraction: float | None = None,
        extent_bytes: int = EXTENT_BYTES,
        crash_tracking: bool = False,
        sea_recent_checkpoints: int = 2,
    ) -> None:
        require_stored_data(device)  # before the host FTL takes the flash over
        ftl = HostFtl(device, gc_policy=gc_policy, spare_fraction=spare_fraction)
        if ftl.page_bytes != TRIM_ALIGN or extent_bytes % ftl.page_bytes:
            raise ValueError(
                f"backend: the host FTL maps 4 KiB database pages onto flash pages; this flash has "
                f"{ftl.page_bytes}-byte pages"
            )
        super().__init__(
            device,
            extent_bytes=extent_bytes,
            crash_tracking=False,
            sea_recent_checkpoints=sea_recent_checkpoints,
        )
        # A power loss needs no copy of the files here: what survives is what is on flash. The
        # option is kept only so that every connection on the device agrees on it.
        self.crash_tracking = crash_tracking
        self.ftl = ftl
        self._submit = ftl.submit
        self.allocator = ExtentAllocator(ftl.logical_pages * ftl.page_bytes, extent_bytes)
        if self.allocator.total == 0:
            raise ValueError(f"extent_bytes: {extent_bytes} is larger than the host FTL's space")
        self.extent_pages = extent_bytes // ftl.page_bytes
        #: Extent -> (file, its index in the file's extents): whose page a write is.
        self.extent_owner: dict[int, tuple[StoredFile, int]] = {}
        self.file_ids: dict[str, int] = {}
        self._next_file_id = 0
        ftl.owner = self._owner
        ftl.catalog = self._catalog

    # -- the catalog: file ids, extents, sizes --------------------------------------------------

    def open_file(self, name: str, flags: int) -> StoredFile:
        stored = super().open_file(name, flags)
        stored.mirror = None
        if name not in self.file_ids:
            # Ids are never reused, so a page of a deleted file can never pass for a new one's.
            self.file_ids[name] = self._next_file_id
            self._next_file_id += 1
        return stored

    def delete_file(self, name: str) -> None:
        super().delete_file(name)
        self.file_ids.pop(name, None)

    def _grow(self, stored: StoredFile, end_offset: int, counters: IoCounters) -> None:
        before = len(stored.extents)
        super()._grow(stored, end_offset, counters)
        for index in range(before, len(stored.extents)):
            self.extent_owner[stored.extents[index]] = (stored, index)

    def _release(self, stored: StoredFile, new_size: int) -> None:
        keep = -(-new_size // self.extent_bytes)
        gone = stored.extents[keep:]
        super()._release(stored, new_size)
        for extent in gone:
            self.extent_owner.pop(extent, None)

    def _owner(self, lpage: int) -> tuple[int, int, str]:
        extent, within = divmod(lpage, self.extent_pages)
        owner = self.extent_owner.get(extent)
        if owner is None:
            return NO_FILE, 0, "temp"
        stored, index = owner
        stream = {ROLE_MAIN: "db", ROLE_WAL: "log", ROLE_JOURNAL: "log"}.get(stored.role, "temp")
        return self.file_ids[stored.name], index * self.extent_pages + within, stream

    def _catalog(self) -> dict[int, tuple[list[int], int, int]]:
        page_bytes = self.ftl.page_bytes
        return {
            self.file_ids[name]: (
                list(stored.extents),
                self.extent_pages,
                -(-stored.size // page_bytes),
            )
            for name, stored in self.files.items()
        }

    # -- power loss -----------------------------------------------------------------------------

    def crash(self) -> dict[str, int]:  # type: ignore[override]
        """A power loss: the host's RAM is gone -- the page map (rebuilt from OOB), gathered log
        writes not yet submitted, temporary files, open handles. What was programmed stays on
        flash: the host FTL has no volatile write cache. Each file is then cut to the size it
        had at its last sync, as :meth:`DeviceStore.crash` does. Returns the recovery's
        report."""
        with self.lock:
            self.generation += 1
            self.active = None
            self.ftl.power_loss()
            report = self.ftl.recover()
            for name, stored in list(self.files.items()):
                stored.log_length = 0  # gathered log writes never reached the flash
                stored.shared = 0
                stored.reserved = stored.pending = stored.exclusive = None
                if stored.role == ROLE_OTHER:
                    self.files.pop(name)
                    self.file_ids.pop(name, None)
                    self._release(stored, 0)
                    continue
                stored.undo.clear()
                if stored.synced_size < stored.size:
                    stored.size = stored.synced_size
                    if stored.mirror is not None:
                        del stored.mirror[stored.size :]
                    self._release(stored, stored.size)
                stored.pending_leaf_trims.clear()
                if stored.freelist is not None:
                    stored.freelist = FreelistTracker()
                stored.wal_page_size = 0
        return report
