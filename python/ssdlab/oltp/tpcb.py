"""TPC-B as pgbench runs it: branches, tellers, accounts, history and "TPC-B (sort of)".

The schema and initial data are pgbench's (PostgreSQL's ``pgbench -i``): per unit of scale
one branch, 10 tellers and 100,000 accounts, every balance 0, ``pgbench_history`` empty.
pgbench's ``filler`` columns are ``char(n)``, which PostgreSQL stores blank-padded to n
characters; SQLite does not pad, so the loader writes n blanks where pgbench writes the empty
string (accounts), and leaves NULL where pgbench does (branches, tellers, history), which
keeps rows as large as PostgreSQL's. The one transaction is pgbench's built-in
``tpcb-like`` script::

    \\set aid random(1, 100000 * :scale)
    \\set bid random(1, 1 * :scale)
    \\set tid random(1, 10 * :scale)
    \\set delta random(-5000, 5000)
    BEGIN;
    UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
    SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
    UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
    UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
    INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (...);
    END;

(the branch, teller and account are drawn independently, as in pgbench, not TPC-B's 85 %
home-branch rule). :func:`check_consistency` checks what every committed transaction keeps
equal: the sums of the account, teller and branch balances and of the history's deltas, and
one history row per committed transaction.

Deviations, each deliberate:

- **population** (default 1.0, pgbench's) scales the accounts per branch (100,000) down,
  as TPC-C's ``population`` does, so that a scale of many branches fits a small device; the
  tellers per branch (10) stay.
- ``mtime`` is logical: a fixed instant plus the transaction's ordinal in seconds, so the
  database's contents depend on the seeds alone.
- One connection, no think time; ``random.Random`` in place of pgbench's PRNG (same uniform
  distributions, different streams).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from dataclasses import dataclass
from typing import Any

from ssdlab.oltp.driver import SessionBase, check_int, insert_batches, transaction

TELLERS_PER_BRANCH = 10
ACCOUNTS_PER_BRANCH = 100_000
#: pgbench's filler widths (char(n)), as PostgreSQL stores them: blank-padded.
ACCOUNT_FILLER = " " * 84
_LOAD_INSTANT = dt.datetime(2026, 1, 1)

TABLES = ("pgbench_branches", "pgbench_tellers", "pgbench_accounts", "pgbench_history")

SCHEMA = (
    "CREATE TABLE pgbench_history (tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER,"
    " mtime TEXT, filler CHAR(22))",
    "CREATE TABLE pgbench_tellers (tid INTEGER NOT NULL PRIMARY KEY, bid INTEGER,"
    " tbalance INTEGER, filler CHAR(84))",
    "CREATE TABLE pgbench_accounts (aid INTEGER NOT NULL PRIMARY KEY, bid INTEGER,"
    " abalance INTEGER, filler CHAR(84))",
    "CREATE TABLE pgbench_branches (bid INTEGER NOT NULL PRIMARY KEY, bbalance INTEGER,"
    " filler CHAR(88))",
)


@dataclass(frozen=True)
class Tpcb:
    """pgbench's TPC-B-like workload over ``branches`` (pgbench's scale) at ``population``."""

    branches: int = 1
    population: float = 1.0

    name = "tpcb"
    transaction_types = ("tpcb",)

    def __post_init__(self) -> None:
        check_int("tpcb branches", self.branches, minimum=1)
        p = self.population
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            raise ValueError(f"tpcb population must be a number in (0, 1], got {p!r}")
        if self.accounts_per_branch < 1:
            raise ValueError(f"tpcb population {p!r} leaves no accounts")

    @property
    def accounts_per_branch(self) -> int:
        return round(ACCOUNTS_PER_BRANCH * self.population)

    @property
    def accounts(self) -> int:
        return self.accounts_per_branch * self.branches

    @property
    def tellers(self) -> int:
        return TELLERS_PER_BRANCH * self.branches

    def params(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def load(self, conn: Any, seed: int) -> None:
        """pgbench -i: drop, create, fill (the data is the same for every seed, as pgbench's)."""
        cur = conn.cursor()
        cur.execute("BEGIN")
        for table in TABLES:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in SCHEMA:
            cur.execute(statement)
        cur.executemany(
            "INSERT INTO pgbench_branches (bid, bbalance) VALUES (?, 0)",
            [(bid,) for bid in range(1, self.branches + 1)],
        )
        cur.executemany(
            "INSERT INTO pgbench_tellers (tid, bid, tbalance) VALUES (?, ?, 0)",
            [(tid, (tid - 1) // TELLERS_PER_BRANCH + 1) for tid in range(1, self.tellers + 1)],
        )
        per_branch = self.accounts_per_branch
        insert_batches(
            cur,
            "INSERT INTO pgbench_accounts VALUES (?, ?, 0, ?)",
            (
                (aid, (aid - 1) // per_branch + 1, ACCOUNT_FILLER)
                for aid in range(1, self.accounts + 1)
            ),
        )
        conn.commit()

    def session(self, conn: Any, seed: int) -> TpcbSession:
        return TpcbSession(self, conn, seed)


class TpcbSession(SessionBase):
    """Runs pgbench's ``tpcb-like`` script back to back on one connection."""

    def __init__(self, workload: Tpcb, conn: Any, seed: int) -> None:
        super().__init__(workload, conn)
        self.rng = random.Random(f"tpcb-run-{seed}")
        self.ordinal = 0
        #: The last transaction's account balance (what pgbench's SELECT returns).
        self.balance = 0

    def next_type(self) -> str:
        return "tpcb"

    def execute(self, kind: str) -> bool:
        self.ordinal += 1
        return transaction(self.conn, self.cur, self._tpcb)

    def _tpcb(self) -> bool:
        r, cur, wl = self.rng, self.cur, self.wl
        aid = r.randint(1, wl.accounts)
        bid = r.randint(1, wl.branches)
        tid = r.randint(1, wl.tellers)
        delta = r.randint(-5000, 5000)
        mtime = (_LOAD_INSTANT + dt.timedelta(seconds=self.ordinal)).strftime("%Y-%m-%d %H:%M:%S")
        cur.execute(
            "UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?", (delta, aid)
        )
        row = cur.execute("SELECT abalance FROM pgbench_accounts WHERE aid = ?", (aid,)).fetchone()
        if row is None:
            raise LookupError(f"tpcb: no account {aid}")
        self.balance = row[0]
        cur.execute(
            "UPDATE pgbench_tellers SET tbalance = tbalance + ? WHERE tid = ?", (delta, tid)
        )
        cur.execute(
            "UPDATE pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?", (delta, bid)
        )
        cur.execute(
            "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (?, ?, ?, ?, ?)",
            (tid, bid, aid, delta, mtime),
        )
        return True


def check_consistency(conn: Any, *, transactions: int | None = None) -> list[str]:
    """What TPC-B's transactions keep equal, as a list of violations (empty: consistent): the
    sums of account, teller and branch balances equal the sum of the history's deltas, and
    with ``transactions`` given, the history holds exactly that many rows."""
    cur = conn.cursor()
    sums = {
        table: cur.execute(f"SELECT COALESCE(SUM({column}), 0) FROM {table}").fetchone()[0]
        for table, column in (
            ("pgbench_accounts", "abalance"),
            ("pgbench_tellers", "tbalance"),
            ("pgbench_branches", "bbalance"),
            ("pgbench_history", "delta"),
        )
    }
    violations = []
    if len(set(sums.values())) != 1:
        violations.append(f"balance sums differ: {sums}")
    if transactions is not None:
        (rows,) = cur.execute("SELECT COUNT(*) FROM pgbench_history").fetchone()
        if rows != transactions:
            violations.append(f"pgbench_history holds {rows} rows, expected {transactions}")
    return violations
