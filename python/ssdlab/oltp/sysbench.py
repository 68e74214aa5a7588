"""sysbench's ``oltp_read_write`` in SQL, as sysbench 1.0's ``oltp_common.lua`` defines it.

``tables`` tables ``sbtest1..N`` of ``table_size`` rows each: ``id INTEGER PRIMARY KEY``, ``k``
drawn from the id distribution, ``c`` ten and ``pad`` five groups of eleven random digits joined
by ``-`` (sysbench's templates), and the secondary index ``k_N`` on ``k`` built after the rows,
as sysbench's ``prepare`` does. One transaction is sysbench's defaults exactly: ``BEGIN``, 10
point selects, one simple, one sum, one order and one distinct range of ``range_size`` (100)
ids, one update of the indexed ``k``, one update of ``c``, one delete and the insert of the same
id, ``COMMIT``; each group picks its table uniformly, as sysbench does. The table row counts
never change.

Ids come from ``rand_type``: ``uniform`` (our default) or ``special``, sysbench's own default,
implemented as its ``sb_rand_special`` with the default ``rand-spec-iter=12``,
``rand-spec-pct=1``, ``rand-spec-res=75``: 75 % of draws fall uniformly into the middle 1 % of
the ids, the rest follow a 12-fold sum of uniforms (near normal) over the whole range. The
default differs from sysbench's so that the page accesses are spread over the whole table
unless a study asks for the hot spot. Differences from sysbench: one connection, no
``--skip-trx`` or prepared-statement options, and Python's ``random.Random`` in place of
xoroshiro128+ (same distributions, different streams).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

from ssdlab.oltp.driver import SessionBase, check_int, insert_batches, transaction

#: Random digits per group and groups per value, from sysbench's c and pad templates.
_GROUP_DIGITS = 11
_C_GROUPS = 10
_PAD_GROUPS = 5
#: sysbench's defaults for the special distribution.
_SPEC_ITER = 12
_SPEC_PCT = 1
_SPEC_RES = 75

RAND_TYPES = ("uniform", "special")


def _digits(rng: random.Random, groups: int) -> str:
    return "-".join(f"{rng.randrange(10**_GROUP_DIGITS):0{_GROUP_DIGITS}d}" for _ in range(groups))


class IdGenerator:
    """``default(a, b)`` as sysbench's ``sb_rand_default`` for the configured ``rand_type``."""

    def __init__(self, rng: random.Random, rand_type: str) -> None:
        self.rng = rng
        self.default = self.uniform if rand_type == "uniform" else self.special

    def uniform(self, a: int, b: int) -> int:
        return a + int(self.rng.random() * (b - a + 1))

    def special(self, a: int, b: int) -> int:
        t = b - a
        rnd = self.rng.random()
        if rnd * t * (100.0 / (100.0 - _SPEC_RES)) < t:
            total = sum(self.rng.random() for _ in range(_SPEC_ITER))
            return a + int(total * t / _SPEC_ITER)
        res = rnd * (t * _SPEC_PCT / 100.0 + 1) + t / 2 - t * _SPEC_PCT / 200.0
        return a + int(res)


@dataclass(frozen=True)
class Sysbench:
    """The ``oltp_read_write`` workload; parameters are checked on construction."""

    tables: int = 1
    table_size: int = 10_000
    range_size: int = 100
    rand_type: str = "uniform"

    name = "sysbench"
    transaction_types = ("read_write",)

    def __post_init__(self) -> None:
        for option in ("tables", "table_size", "range_size"):
            check_int(f"sysbench {option}", getattr(self, option), minimum=1)
        if self.rand_type not in RAND_TYPES:
            raise ValueError(
                f"sysbench rand_type must be one of {RAND_TYPES}, got {self.rand_type!r}"
            )

    def params(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def load(self, conn: Any, seed: int) -> None:
        rng = random.Random(f"sysbench-load-{seed}")
        ids = IdGenerator(rng, self.rand_type)
        cur = conn.cursor()
        for n in range(1, self.tables + 1):
            cur.execute("BEGIN")
            cur.execute(f"DROP TABLE IF EXISTS sbtest{n}")
            cur.execute(
                f"CREATE TABLE sbtest{n} (id INTEGER PRIMARY KEY, k INTEGER NOT NULL DEFAULT 0,"
                " c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '')"
            )
            insert_batches(
                cur,
                f"INSERT INTO sbtest{n} (id, k, c, pad) VALUES (?, ?, ?, ?)",
                (
                    (
                        i,
                        ids.default(1, self.table_size),
                        _digits(rng, _C_GROUPS),
                        _digits(rng, _PAD_GROUPS),
                    )
                    for i in range(1, self.table_size + 1)
                ),
            )
            cur.execute(f"CREATE INDEX k_{n} ON sbtest{n}(k)")
            conn.commit()

    def session(self, conn: Any, seed: int) -> SysbenchSession:
        return SysbenchSession(self, conn, seed)


class SysbenchSession(SessionBase):
    """Runs ``oltp_read_write`` transactions on one connection, ids drawn from the run seed."""

    def __init__(self, workload: Sysbench, conn: Any, seed: int) -> None:
        super().__init__(workload, conn)
        self.rng = random.Random(f"sysbench-run-{seed}")
        self.ids = IdGenerator(self.rng, workload.rand_type)

    def next_type(self) -> str:
        return "read_write"

    def _table(self) -> str:
        return f"sbtest{self.ids.uniform(1, self.wl.tables)}"

    def _id(self) -> int:
        return self.ids.default(1, self.wl.table_size)

    def execute(self, kind: str) -> bool:
        return transaction(self.conn, self.cur, self._read_write)

    def _read_write(self) -> bool:
        cur = self.cur
        rng = self.rng
        span = self.wl.range_size - 1
        table = self._table()
        for _ in range(10):
            cur.execute(f"SELECT c FROM {table} WHERE id=?", (self._id(),)).fetchall()
        for template in (
            "SELECT c FROM {t} WHERE id BETWEEN ? AND ?",
            "SELECT SUM(k) FROM {t} WHERE id BETWEEN ? AND ?",
            "SELECT c FROM {t} WHERE id BETWEEN ? AND ? ORDER BY c",
            "SELECT DISTINCT c FROM {t} WHERE id BETWEEN ? AND ? ORDER BY c",
        ):
            low = self._id()
            cur.execute(template.format(t=self._table()), (low, low + span)).fetchall()
        cur.execute(f"UPDATE {self._table()} SET k=k+1 WHERE id=?", (self._id(),))
        c = _digits(rng, _C_GROUPS)
        cur.execute(f"UPDATE {self._table()} SET c=? WHERE id=?", (c, self._id()))
        table = self._table()  # one table for the delete and the insert of the same id
        row_id = self._id()
        cur.execute(f"DELETE FROM {table} WHERE id=?", (row_id,))
        cur.execute(
            f"INSERT INTO {table} (id, k, c, pad) VALUES (?, ?, ?, ?)",
            (row_id, self._id(), _digits(rng, _C_GROUPS), _digits(rng, _PAD_GROUPS)),
        )
        return True
