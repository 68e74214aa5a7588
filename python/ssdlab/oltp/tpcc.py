"""TPC-C (revision 5.11) in SQL: schema, initial population, the five transactions, consistency.

The nine tables carry the columns and primary keys of clause 1.3, plus two secondary indexes:
``customer_by_last`` (``c_w_id, c_d_id, c_last, c_first``) for the by-last-name selections of
Payment and Order-Status, and ``orders_by_customer`` (``o_w_id, o_d_id, o_c_id, o_id``) for
Order-Status's "most recent order of the customer", as BenchBase and HammerDB carry them. The
population follows clause 4.3.3.1 (NURand with the C constants of 2.1.6, last names from the
syllables of 4.3.2.3, "ORIGINAL" in 10 % of item and stock data, 10 % bad credit, orders with a
random permutation of customers and 5-15 lines, the last 900 of each district undelivered in
``new_order``), deterministic from the load seed. The run is the standard mix drawn from a
shuffled deck of 100 cards (45 New-Order, 43 Payment, 4 each of Order-Status, Delivery and
Stock-Level; clause 5.2.4.2 allows a deck); 1 % of New-Orders end on an unused item id and roll
back after doing the work up to it, 60 % of Payments and Order-Status select the customer by
last name, 15 % of Payments pay through a remote warehouse and 1 % of order lines are supplied
remotely when there is more than one warehouse. Every transaction runs between an explicit
``BEGIN`` and ``commit()``/``rollback()``. :func:`check_consistency` tests conditions 1-10 of
clause 3.3.2. ``clustered=True`` stores the tables with composite keys ``WITHOUT ROWID``, in
their primary key's B-tree as InnoDB does (SQLite only; the default is plain SQL).

Deviations from the standard, each deliberate:

- **population** (default 1.0) scales items (100,000), customers per district (3,000), orders
  per district (= customers) and undelivered orders (900) down together, with D_YTD and W_YTD
  scaled so that the consistency conditions still hold; 1.0 is the standard. Run-time last
  names are drawn over the names that exist (NURand(255, 0, min(999, customers - 1))).
- **No terminals, no think or keying time**: one connection runs transactions back to back; the
  home warehouse and district are drawn uniformly for each transaction. Delivery runs
  inline, not deferred through a queue.
- **Dates are logical**: the load date is a fixed instant and each run transaction's "current
  date" is that instant plus a day plus its ordinal in seconds, so that the contents of the
  database depend on the seeds alone.
- **C constants**: the load's C for C_LAST is fixed (``C_LAST_LOAD``); the run's C for C_LAST is
  drawn from the run seed subject to clause 2.1.6.1's delta rule, its C for C_ID and OL_I_ID
  freely from the run seed.
- Money is SQLite REAL (binary floating point; values are generated in whole cents), and the
  consistency checks compare sums to within half a cent.
- Nothing of clause 5's response-time constraints, reporting rules or the 60-day space
  requirement; the transactions per second reported are not tpmC.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import string
from dataclasses import dataclass
from typing import Any

from ssdlab.oltp.driver import SessionBase, check_int, insert_batches, transaction

DISTRICTS_PER_WAREHOUSE = 10
ITEMS = 100_000
CUSTOMERS_PER_DISTRICT = 3_000
NEW_ORDERS_PER_DISTRICT = 900
#: The C of NURand(255, ...) for C_LAST used by the load (clause 2.1.6).
C_LAST_LOAD = 157
#: Deck of the mix: New-Order, Payment, Order-Status, Delivery, Stock-Level per 100 cards.
DECK = (
    ("new_order", 45),
    ("payment", 43),
    ("order_status", 4),
    ("delivery", 4),
    ("stock_level", 4),
)
TRANSACTION_TYPES = tuple(kind for kind, _ in DECK)

SYLLABLES = ("BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING")
_ALNUM = string.ascii_letters + string.digits
_LOAD_INSTANT = dt.datetime(2026, 1, 1)
_RUN_INSTANT = _LOAD_INSTANT + dt.timedelta(days=1)

TABLES = (
    "warehouse",
    "district",
    "customer",
    "history",
    "new_order",
    "orders",
    "order_line",
    "item",
    "stock",
)

SCHEMA = (
    """CREATE TABLE warehouse (
        w_id INTEGER NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20),
        w_street_2 VARCHAR(20), w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9),
        w_tax REAL, w_ytd REAL, PRIMARY KEY (w_id))""",
    """CREATE TABLE district (
        d_id INTEGER NOT NULL, d_w_id INTEGER NOT NULL, d_name VARCHAR(10),
        d_street_1 VARCHAR(20), d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2),
        d_zip CHAR(9), d_tax REAL, d_ytd REAL, d_next_o_id INTEGER,
        PRIMARY KEY (d_w_id, d_id))""",
    """CREATE TABLE customer (
        c_id INTEGER NOT NULL, c_d_id INTEGER NOT NULL, c_w_id INTEGER NOT NULL,
        c_first VARCHAR(16), c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20),
        c_street_2 VARCHAR(20), c_city VARCHAR(20), c_state CHAR(2), c_zip CHAR(9),
        c_phone CHAR(16), c_since TEXT, c_credit CHAR(2), c_credit_lim REAL,
        c_discount REAL, c_balance REAL, c_ytd_payment REAL, c_payment_cnt INTEGER,
        c_delivery_cnt INTEGER, c_data VARCHAR(500), PRIMARY KEY (c_w_id, c_d_id, c_id))""",
    """CREATE TABLE history (
        h_c_id INTEGER, h_c_d_id INTEGER, h_c_w_id INTEGER, h_d_id INTEGER, h_w_id INTEGER,
        h_date TEXT, h_amount REAL, h_data VARCHAR(24))""",
    """CREATE TABLE new_order (
        no_o_id INTEGER NOT NULL, no_d_id INTEGER NOT NULL, no_w_id INTEGER NOT NULL,
        PRIMARY KEY (no_w_id, no_d_id, no_o_id))""",
    """CREATE TABLE orders (
        o_id INTEGER NOT NULL, o_d_id INTEGER NOT NULL, o_w_id INTEGER NOT NULL,
        o_c_id INTEGER, o_entry_d TEXT, o_carrier_id INTEGER, o_ol_cnt INTEGER,
        o_all_local INTEGER, PRIMARY KEY (o_w_id, o_d_id, o_id))""",
    """CREATE TABLE order_line (
        ol_o_id INTEGER NOT NULL, ol_d_id INTEGER NOT NULL, ol_w_id INTEGER NOT NULL,
        ol_number INTEGER NOT NULL, ol_i_id INTEGER, ol_supply_w_id INTEGER,
        ol_delivery_d TEXT, ol_quantity INTEGER, ol_amount REAL, ol_dist_info CHAR(24),
        PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))""",
    """CREATE TABLE item (
        i_id INTEGER NOT NULL, i_im_id INTEGER, i_name VARCHAR(24), i_price REAL,
        i_data VARCHAR(50), PRIMARY KEY (i_id))""",
    """CREATE TABLE stock (
        s_i_id INTEGER NOT NULL, s_w_id INTEGER NOT NULL, s_quantity INTEGER,
        s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24),
        s_dist_05 CHAR(24), s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24),
        s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd INTEGER, s_order_cnt INTEGER,
        s_remote_cnt INTEGER, s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id))""",
    "CREATE INDEX customer_by_last ON customer (c_w_id, c_d_id, c_last, c_first)",
    "CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id)",
)


def primary_key(statement: str) -> str:
    """The column list of a CREATE TABLE statement's PRIMARY KEY, or "" when it has none."""
    _, found, rest = statement.partition("PRIMARY KEY (")
    return rest.partition(")")[0] if found else ""


def last_name(number: int) -> str:
    """Clause 4.3.2.3: three syllables from the digits of a number in 0..999."""
    return SYLLABLES[number // 100] + SYLLABLES[number // 10 % 10] + SYLLABLES[number % 10]


def _stamp(instant: dt.datetime) -> str:
    return instant.strftime("%Y-%m-%d %H:%M:%S")


class TpccRandom:
    """The random functions of clause 4.3.2 over one seeded ``random.Random``."""

    def __init__(self, seed: str, c_last: int, c_id: int, c_ol_i_id: int) -> None:
        self.rng = random.Random(seed)
        self.c = {255: c_last, 1023: c_id, 8191: c_ol_i_id}

    def uniform(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def nurand(self, a: int, x: int, y: int) -> int:
        r = self.rng
        return ((r.randint(0, a) | r.randint(x, y)) + self.c[a]) % (y - x + 1) + x

    def astring(self, low: int, high: int) -> str:
        return "".join(self.rng.choices(_ALNUM, k=self.rng.randint(low, high)))

    def nstring(self, low: int, high: int) -> str:
        return "".join(self.rng.choices(string.digits, k=self.rng.randint(low, high)))

    def money(self, low_cents: int, high_cents: int) -> float:
        return self.rng.randint(low_cents, high_cents) / 100

    def rate(self, high_ten_thousandths: int) -> float:
        return self.rng.randint(0, high_ten_thousandths) / 10_000

    def data(self) -> str:
        """Item and stock data: 26-50 characters, 10 % of them containing "ORIGINAL"."""
        text = self.astring(26, 50)
        if self.rng.randint(1, 10) == 1:
            at = self.rng.randint(0, len(text) - 8)
            text = text[:at] + "ORIGINAL" + text[at + 8 :]
        return text

    def address(self) -> tuple[str, str, str, str, str]:
        return (
            self.astring(10, 20),
            self.astring(10, 20),
            self.astring(10, 20),
            "".join(self.rng.choices(string.ascii_uppercase, k=2)),
            self.nstring(4, 4) + "11111",
        )


def run_c_last(rng: random.Random) -> int:
    """A run-time C for C_LAST satisfying clause 2.1.6.1's delta rule against C_LAST_LOAD."""
    allowed = [
        c
        for c in range(256)
        if 65 <= abs(c - C_LAST_LOAD) <= 119 and abs(c - C_LAST_LOAD) not in (96, 112)
    ]
    return rng.choice(allowed)


@dataclass(frozen=True)
class Tpcc:
    """TPC-C over ``warehouses`` warehouses at ``population`` (see the module's deviations).

    ``clustered=True`` creates the tables with a composite primary key ``WITHOUT ROWID``
    (SQLite only): rows then live in their primary key's B-tree, as in InnoDB's clustered
    index, instead of in a rowid table beside a separate index of the key, so each insert
    writes one B-tree where it wrote two. The default is plain SQL."""

    warehouses: int = 1
    population: float = 1.0
    clustered: bool = False

    name = "tpcc"
    transaction_types = TRANSACTION_TYPES

    def __post_init__(self) -> None:
        check_int("tpcc warehouses", self.warehouses, minimum=1)
        p = self.population
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            raise ValueError(f"tpcc population must be a number in (0, 1], got {p!r}")
        if not isinstance(self.clustered, bool):
            raise ValueError(f"tpcc clustered must be true or false, got {self.clustered!r}")
        if self.items < 1 or self.customers < 1:
            raise ValueError(f"tpcc population {p!r} leaves no items or customers")

    @property
    def items(self) -> int:
        return round(ITEMS * self.population)

    @property
    def customers(self) -> int:
        """Customers per district, and orders per district at load."""
        return round(CUSTOMERS_PER_DISTRICT * self.population)

    @property
    def new_orders(self) -> int:
        """Undelivered orders per district at load."""
        return min(self.customers, round(NEW_ORDERS_PER_DISTRICT * self.population))

    def params(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def load(self, conn: Any, seed: int) -> None:
        r = TpccRandom(f"tpcc-load-{seed}", C_LAST_LOAD, 0, 0)
        cur = conn.cursor()
        cur.execute("BEGIN")
        for table in TABLES:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in SCHEMA:
            composite = statement.startswith("CREATE TABLE") and "," in primary_key(statement)
            cur.execute(statement + " WITHOUT ROWID" if self.clustered and composite else statement)
        insert_batches(
            cur,
            "INSERT INTO item VALUES (?, ?, ?, ?, ?)",
            (
                (i, r.uniform(1, 10_000), r.astring(14, 24), r.money(100, 10_000), r.data())
                for i in range(1, self.items + 1)
            ),
        )
        conn.commit()
        for w_id in range(1, self.warehouses + 1):
            cur.execute("BEGIN")
            self._load_warehouse(cur, r, w_id)
            conn.commit()

    def _load_warehouse(self, cur: Any, r: TpccRandom, w_id: int) -> None:
        since = _stamp(_LOAD_INSTANT)
        d_ytd = 10.0 * self.customers
        cur.execute(
            "INSERT INTO warehouse VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (w_id, r.astring(6, 10), *r.address(), r.rate(2000), d_ytd * DISTRICTS_PER_WAREHOUSE),
        )
        insert_batches(
            cur,
            "INSERT INTO stock VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, ?)",
            (
                (
                    i_id,
                    w_id,
                    r.uniform(10, 100),
                    *(r.astring(24, 24) for _ in range(DISTRICTS_PER_WAREHOUSE)),
                    r.data(),
                )
                for i_id in range(1, self.items + 1)
            ),
        )
        delivered_below = self.customers - self.new_orders + 1
        for d_id in range(1, DISTRICTS_PER_WAREHOUSE + 1):
            cur.execute(
                "INSERT INTO district VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    d_id,
                    w_id,
                    r.astring(6, 10),
                    *r.address(),
                    r.rate(2000),
                    d_ytd,
                    self.customers + 1,
                ),
            )
            customers = []
            history = []
            for c_id in range(1, self.customers + 1):
                name = c_id - 1 if c_id <= 1000 else r.nurand(255, 0, 999)
                customers.append(
                    (
                        c_id,
                        d_id,
                        w_id,
                        r.astring(8, 16),
                        "OE",
                        last_name(name),
                        *r.address(),
                        r.nstring(16, 16),
                        since,
                        "BC" if r.uniform(1, 10) == 1 else "GC",
                        50_000.0,
                        r.rate(5000),
                        -10.0,
                        10.0,
                        1,
                        0,
                        r.astring(300, 500),
                    )
                )
                history.append((c_id, d_id, w_id, d_id, w_id, since, 10.0, r.astring(12, 24)))
            cur.executemany(f"INSERT INTO customer VALUES ({', '.join('?' * 21)})", customers)
            cur.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)", history)
            owners = list(range(1, self.customers + 1))
            r.rng.shuffle(owners)
            orders = []
            lines = []
            for o_id, c_id in enumerate(owners, start=1):
                delivered = o_id < delivered_below
                ol_cnt = r.uniform(5, 15)
                carrier = r.uniform(1, 10) if delivered else None
                orders.append((o_id, d_id, w_id, c_id, since, carrier, ol_cnt, 1))
                for number in range(1, ol_cnt + 1):
                    lines.append(
                        (
                            o_id,
                            d_id,
                            w_id,
                            number,
                            r.uniform(1, self.items),
                            w_id,
                            since if delivered else None,
                            5,
                            0.0 if delivered else r.money(1, 999_999),
                            r.astring(24, 24),
                        )
                    )
            cur.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?)", orders)
            cur.executemany("INSERT INTO order_line VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", lines)
            cur.executemany(
                "INSERT INTO new_order VALUES (?, ?, ?)",
                [(o_id, d_id, w_id) for o_id in range(delivered_below, self.customers + 1)],
            )

    def session(self, conn: Any, seed: int) -> TpccSession:
        return TpccSession(self, conn, seed)


class TpccSession(SessionBase):
    """Runs the mix on one connection: ``next_type`` deals from the deck, ``execute`` runs."""

    def __init__(self, workload: Tpcc, conn: Any, seed: int) -> None:
        super().__init__(workload, conn)
        constants = random.Random(f"tpcc-constants-{seed}")
        self.r = TpccRandom(
            f"tpcc-run-{seed}",
            run_c_last(constants),
            constants.randint(0, 1023),
            constants.randint(0, 8191),
        )
        self.deck: list[str] = []
        self.ordinal = 0
        self.now = _stamp(_RUN_INSTANT)
        #: The last New-Order's total amount (clause 2.4.2.2), what a terminal would display.
        self.total = 0.0
        self.runners = {
            "new_order": self.new_order,
            "payment": self.payment,
            "order_status": self.order_status,
            "delivery": self.delivery,
            "stock_level": self.stock_level,
        }

    def next_type(self) -> str:
        if not self.deck:
            self.deck = [kind for kind, cards in DECK for _ in range(cards)]
            self.r.rng.shuffle(self.deck)
        return self.deck.pop()

    def execute(self, kind: str) -> bool:
        self.ordinal += 1
        self.now = _stamp(_RUN_INSTANT + dt.timedelta(seconds=self.ordinal))
        return transaction(self.conn, self.cur, self.runners[kind])

    # -- helpers ----------------------------------------------------------------------------

    def _one(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        row = self.cur.execute(sql, args).fetchone()
        if row is None:
            raise LookupError(f"tpcc: no row for {sql!r} with {args!r}")
        return row

    def _home(self) -> tuple[int, int]:
        return self.r.uniform(1, self.wl.warehouses), self.r.uniform(1, DISTRICTS_PER_WAREHOUSE)

    def _other_warehouse(self, w_id: int) -> int:
        other = self.r.uniform(1, self.wl.warehouses - 1)
        return other + 1 if other >= w_id else other

    def _customer_key(self) -> tuple[str, int | str]:
        """By last name 60 % of the time (clause 2.5.1.2), else by id."""
        if self.r.uniform(1, 100) <= 60:
            top = min(999, self.wl.customers - 1)
            return "c_last", last_name(self.r.nurand(255, 0, top))
        return "c_id", self.r.nurand(1023, 1, self.wl.customers)

    def _find_customer(self, columns: str, w_id: int, d_id: int, key: tuple[str, Any]) -> tuple:
        """The customer by id, or the middle one (n/2 rounded up) of those with the last name
        ordered by first name (clause 2.5.2.2); ``columns`` starts with ``c_id``."""
        field, value = key
        if field == "c_id":
            return self._one(
                f"SELECT {columns} FROM customer WHERE c_w_id=? AND c_d_id=? AND c_id=?",
                (w_id, d_id, value),
            )
        rows = self.cur.execute(
            f"SELECT {columns} FROM customer WHERE c_w_id=? AND c_d_id=? AND c_last=?"
            " ORDER BY c_first",
            (w_id, d_id, value),
        ).fetchall()
        if not rows:
            raise LookupError(f"tpcc: no customer named {value!r} in {w_id}/{d_id}")
        return rows[(len(rows) + 1) // 2 - 1]

    # -- the five transactions (clauses 2.4-2.8) -------------------------------------------

    def new_order(self) -> bool:
        r, cur, wl = self.r, self.cur, self.wl
        w_id, d_id = self._home()
        c_id = r.nurand(1023, 1, wl.customers)
        ol_cnt = r.uniform(5, 15)
        rollback = r.uniform(1, 100) == 1
        lines = []
        for number in range(1, ol_cnt + 1):
            i_id = r.nurand(8191, 1, wl.items)
            if rollback and number == ol_cnt:
                i_id = wl.items + 1
            supply = w_id
            if wl.warehouses > 1 and r.uniform(1, 100) == 1:
                supply = self._other_warehouse(w_id)
            lines.append((i_id, supply, r.uniform(1, 10)))

        (w_tax,) = self._one("SELECT w_tax FROM warehouse WHERE w_id=?", (w_id,))
        d_tax, o_id = self._one(
            "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id=? AND d_id=?", (w_id, d_id)
        )
        cur.execute(
            "UPDATE district SET d_next_o_id=d_next_o_id+1 WHERE d_w_id=? AND d_id=?",
            (w_id, d_id),
        )
        c_discount, _c_last, _c_credit = self._one(
            "SELECT c_discount, c_last, c_credit FROM customer"
            " WHERE c_w_id=? AND c_d_id=? AND c_id=?",
            (w_id, d_id, c_id),
        )
        all_local = int(all(supply == w_id for _, supply, _ in lines))
        cur.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
            (o_id, d_id, w_id, c_id, self.now, ol_cnt, all_local),
        )
        cur.execute("INSERT INTO new_order VALUES (?, ?, ?)", (o_id, d_id, w_id))
        dist_column = f"s_dist_{d_id:02d}"
        total = 0.0
        for number, (i_id, supply, quantity) in enumerate(lines, start=1):
            item = cur.execute(
                "SELECT i_price, i_name, i_data FROM item WHERE i_id=?", (i_id,)
            ).fetchone()
            if item is None:
                return False  # the unused item id: "Item number is not valid", roll back
            i_price, _i_name, i_data = item
            s_quantity, s_dist, s_data = self._one(
                f"SELECT s_quantity, {dist_column}, s_data FROM stock WHERE s_w_id=? AND s_i_id=?",
                (supply, i_id),
            )
            if s_quantity >= quantity + 10:
                s_quantity -= quantity
            else:
                s_quantity = s_quantity - quantity + 91
            cur.execute(
                "UPDATE stock SET s_quantity=?, s_ytd=s_ytd+?, s_order_cnt=s_order_cnt+1,"
                " s_remote_cnt=s_remote_cnt+? WHERE s_w_id=? AND s_i_id=?",
                (s_quantity, quantity, int(supply != w_id), supply, i_id),
            )
            amount = round(quantity * i_price, 2)
            total += amount
            _brand = "B" if "ORIGINAL" in i_data and "ORIGINAL" in s_data else "G"
            cur.execute(
                "INSERT INTO order_line VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
                (o_id, d_id, w_id, number, i_id, supply, quantity, amount, s_dist),
            )
        self.total = total * (1 - c_discount) * (1 + w_tax + d_tax)
        return True

    def payment(self) -> bool:
        r, cur, wl = self.r, self.cur, self.wl
        w_id, d_id = self._home()
        c_w_id, c_d_id = w_id, d_id
        if wl.warehouses > 1 and r.uniform(1, 100) > 85:
            c_w_id = self._other_warehouse(w_id)
            c_d_id = r.uniform(1, DISTRICTS_PER_WAREHOUSE)
        key = self._customer_key()
        amount = r.money(100, 500_000)

        cur.execute("UPDATE warehouse SET w_ytd=w_ytd+? WHERE w_id=?", (amount, w_id))
        (w_name, *_w_address) = self._one(
            "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse"
            " WHERE w_id=?",
            (w_id,),
        )
        cur.execute(
            "UPDATE district SET d_ytd=d_ytd+? WHERE d_w_id=? AND d_id=?", (amount, w_id, d_id)
        )
        (d_name, *_d_address) = self._one(
            "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district"
            " WHERE d_w_id=? AND d_id=?",
            (w_id, d_id),
        )
        c_id, c_credit, c_data, *_rest = self._find_customer(
            "c_id, c_credit, c_data, c_first, c_middle, c_last, c_street_1, c_street_2,"
            " c_city, c_state, c_zip, c_phone, c_since, c_credit_lim, c_discount, c_balance",
            c_w_id,
            c_d_id,
            key,
        )
        customer = (c_w_id, c_d_id, c_id)
        if c_credit == "BC":
            entry = f"{c_id} {c_d_id} {c_w_id} {d_id} {w_id} {amount:.2f} | "
            cur.execute(
                "UPDATE customer SET c_balance=c_balance-?, c_ytd_payment=c_ytd_payment+?,"
                " c_payment_cnt=c_payment_cnt+1, c_data=?"
                " WHERE c_w_id=? AND c_d_id=? AND c_id=?",
                (amount, amount, (entry + c_data)[:500], *customer),
            )
        else:
            cur.execute(
                "UPDATE customer SET c_balance=c_balance-?, c_ytd_payment=c_ytd_payment+?,"
                " c_payment_cnt=c_payment_cnt+1 WHERE c_w_id=? AND c_d_id=? AND c_id=?",
                (amount, amount, *customer),
            )
        cur.execute(
            "INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (c_id, c_d_id, c_w_id, d_id, w_id, self.now, amount, f"{w_name}    {d_name}"),
        )
        return True

    def order_status(self) -> bool:
        cur = self.cur
        w_id, d_id = self._home()
        c_id, *_customer = self._find_customer(
            "c_id, c_balance, c_first, c_middle, c_last", w_id, d_id, self._customer_key()
        )
        o_id, _entry_d, _carrier = self._one(
            "SELECT o_id, o_entry_d, o_carrier_id FROM orders"
            " WHERE o_w_id=? AND o_d_id=? AND o_c_id=? ORDER BY o_id DESC LIMIT 1",
            (w_id, d_id, c_id),
        )
        cur.execute(
            "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d"
            " FROM order_line WHERE ol_w_id=? AND ol_d_id=? AND ol_o_id=?",
            (w_id, d_id, o_id),
        ).fetchall()
        return True

    def delivery(self) -> bool:
        r, cur = self.r, self.cur
        w_id = r.uniform(1, self.wl.warehouses)
        carrier = r.uniform(1, 10)
        for d_id in range(1, DISTRICTS_PER_WAREHOUSE + 1):
            row = cur.execute(
                "SELECT no_o_id FROM new_order WHERE no_w_id=? AND no_d_id=?"
                " ORDER BY no_o_id LIMIT 1",
                (w_id, d_id),
            ).fetchone()
            if row is None:
                continue  # clause 2.7.4.2: no outstanding order in this district, skip it
            order = (w_id, d_id, row[0])
            cur.execute("DELETE FROM new_order WHERE no_w_id=? AND no_d_id=? AND no_o_id=?", order)
            (c_id,) = self._one(
                "SELECT o_c_id FROM orders WHERE o_w_id=? AND o_d_id=? AND o_id=?", order
            )
            cur.execute(
                "UPDATE orders SET o_carrier_id=? WHERE o_w_id=? AND o_d_id=? AND o_id=?",
                (carrier, *order),
            )
            cur.execute(
                "UPDATE order_line SET ol_delivery_d=? WHERE ol_w_id=? AND ol_d_id=? AND ol_o_id=?",
                (self.now, *order),
            )
            (amount,) = self._one(
                "SELECT SUM(ol_amount) FROM order_line WHERE ol_w_id=? AND ol_d_id=? AND ol_o_id=?",
                order,
            )
            cur.execute(
                "UPDATE customer SET c_balance=c_balance+?, c_delivery_cnt=c_delivery_cnt+1"
                " WHERE c_w_id=? AND c_d_id=? AND c_id=?",
                (amount, w_id, d_id, c_id),
            )
        return True

    def stock_level(self) -> bool:
        w_id, d_id = self._home()
        threshold = self.r.uniform(10, 20)
        (next_o_id,) = self._one(
            "SELECT d_next_o_id FROM district WHERE d_w_id=? AND d_id=?", (w_id, d_id)
        )
        self._one(
            "SELECT COUNT(DISTINCT s_i_id) FROM order_line JOIN stock"
            " ON s_w_id=ol_w_id AND s_i_id=ol_i_id"
            " WHERE ol_w_id=? AND ol_d_id=? AND ol_o_id>=? AND ol_o_id<? AND s_quantity<?",
            (w_id, d_id, next_o_id - 20, next_o_id, threshold),
        )
        return True


#: Consistency conditions of clause 3.3.2: (number, what it says, a query returning one row
#: per violation).
CONDITIONS = (
    (
        1,
        "W_YTD = sum(D_YTD)",
        "SELECT w_id, w_ytd, s FROM warehouse JOIN (SELECT d_w_id, SUM(d_ytd) AS s"
        " FROM district GROUP BY d_w_id) ON d_w_id=w_id WHERE ABS(w_ytd - s) > 0.005",
    ),
    (
        2,
        "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
        "SELECT d_w_id, d_id FROM district"
        " WHERE d_next_o_id - 1 <> (SELECT MAX(o_id) FROM orders"
        "   WHERE o_w_id=d_w_id AND o_d_id=d_id)"
        " OR d_next_o_id - 1 <> (SELECT MAX(no_o_id) FROM new_order"
        "   WHERE no_w_id=d_w_id AND no_d_id=d_id)",
    ),
    (
        3,
        "max(NO_O_ID) - min(NO_O_ID) + 1 = count(new_order) per district",
        "SELECT no_w_id, no_d_id FROM new_order GROUP BY no_w_id, no_d_id"
        " HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)",
    ),
    (
        4,
        "sum(O_OL_CNT) = count(order_line) per district",
        "SELECT o_w_id, o_d_id FROM (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) AS n FROM orders"
        " GROUP BY o_w_id, o_d_id) JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) AS m"
        " FROM order_line GROUP BY ol_w_id, ol_d_id) ON ol_w_id=o_w_id AND ol_d_id=o_d_id"
        " WHERE n <> m",
    ),
    (
        5,
        "O_CARRIER_ID is null exactly for orders in new_order",
        "SELECT o_w_id, o_d_id, o_id FROM orders LEFT JOIN new_order"
        " ON no_w_id=o_w_id AND no_d_id=o_d_id AND no_o_id=o_id"
        " WHERE (o_carrier_id IS NULL) <> (no_o_id IS NOT NULL)",
    ),
    (
        6,
        "O_OL_CNT = count(order_line) per order",
        "SELECT o_w_id, o_d_id, o_id FROM orders WHERE o_ol_cnt <> (SELECT COUNT(*)"
        " FROM order_line WHERE ol_w_id=o_w_id AND ol_d_id=o_d_id AND ol_o_id=o_id)",
    ),
    (
        7,
        "OL_DELIVERY_D is null exactly when O_CARRIER_ID is null",
        "SELECT ol_w_id, ol_d_id, ol_o_id, ol_number FROM order_line JOIN orders"
        " ON o_w_id=ol_w_id AND o_d_id=ol_d_id AND o_id=ol_o_id"
        " WHERE (ol_delivery_d IS NULL) <> (o_carrier_id IS NULL)",
    ),
    (
        8,
        "W_YTD = sum(H_AMOUNT) per warehouse",
        "SELECT w_id FROM warehouse JOIN (SELECT h_w_id, SUM(h_amount) AS s FROM history"
        " GROUP BY h_w_id) ON h_w_id=w_id WHERE ABS(w_ytd - s) > 0.005",
    ),
    (
        9,
        "D_YTD = sum(H_AMOUNT) per district",
        "SELECT d_w_id, d_id FROM district JOIN (SELECT h_w_id, h_d_id, SUM(h_amount) AS s"
        " FROM history GROUP BY h_w_id, h_d_id) ON h_w_id=d_w_id AND h_d_id=d_id"
        " WHERE ABS(d_ytd - s) > 0.005",
    ),
    (
        10,
        "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT) per customer",
        "SELECT c_w_id, c_d_id, c_id FROM customer"
        " LEFT JOIN (SELECT o_w_id, o_d_id, o_c_id, SUM(ol_amount) AS delivered"
        "   FROM orders JOIN order_line ON ol_w_id=o_w_id AND ol_d_id=o_d_id AND ol_o_id=o_id"
        "   WHERE ol_delivery_d IS NOT NULL GROUP BY o_w_id, o_d_id, o_c_id)"
        "   ON o_w_id=c_w_id AND o_d_id=c_d_id AND o_c_id=c_id"
        " LEFT JOIN (SELECT h_c_w_id, h_c_d_id, h_c_id, SUM(h_amount) AS paid FROM history"
        "   GROUP BY h_c_w_id, h_c_d_id, h_c_id)"
        "   ON h_c_w_id=c_w_id AND h_c_d_id=c_d_id AND h_c_id=c_id"
        " WHERE ABS(c_balance - (COALESCE(delivered, 0) - COALESCE(paid, 0))) > 0.005",
    ),
)


def check_consistency(conn: Any) -> list[str]:
    """The violated conditions of clause 3.3.2 (1-10), each with a few offending keys; an
    empty list means the database is consistent."""
    cur = conn.cursor()
    violations = []
    for number, text, sql in CONDITIONS:
        rows = cur.execute(sql).fetchall()
        if rows:
            violations.append(f"condition {number} ({text}) fails for {rows[:5]!r}")
    return violations
