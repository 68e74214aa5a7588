"""TPC-H (revision 3.0) queries 1, 6, 12 and 14 on data generated as dbgen generates it.

The tables are those the four queries read -- ``part``, ``orders`` and ``lineitem`` -- with
every column of clause 1.4 and dbgen's value rules (clause 4.2.3) at scale factor
``scale_factor`` (SF):

- **part**: SF x 200,000 rows; ``p_name`` five distinct colours of the 92, ``p_mfgr``
  Manufacturer#M and ``p_brand`` Brand#MN (M, N in 1..5), ``p_type`` one of the 150 syllable
  combinations, ``p_size`` 1..50, ``p_container`` one of the 40, ``p_retailprice`` by its
  formula from the key.
- **orders**: SF x 1,500,000 rows with dbgen's sparse keys (the first 8 of every 32),
  ``o_custkey`` in 1..SF x 150,000 and not a multiple of 3, ``o_orderdate`` uniform in
  [1992-01-01, 1998-12-31 - 151 days], one of the five priorities, ``o_clerk`` Clerk#
  over SF x 1,000 clerks, ``o_orderstatus`` F, O or P from its lines' statuses and
  ``o_totalprice`` the sum of its lines' price after discount and tax.
- **lineitem**: 1..7 lines per order (about SF x 6,000,000 rows); ``l_partkey`` uniform,
  ``l_suppkey`` by dbgen's formula over SF x 10,000 suppliers, quantity 1..50, extended
  price = quantity x the part's retail price, discount 0.00..0.10, tax 0.00..0.08, ship date
  order date + 1..121 days, commit date + 30..90, receipt date ship date + 1..30, return flag
  R or A when received by 1995-06-17 (CURRENTDATE) else N, line status O when shipped after
  it else F, one of the 4 instructions and 7 ship modes.

Comments are cut from a pseudo-text pool built from dbgen's word lists and sentence grammar,
at a random offset and length within the column's bounds, as dbgen cuts them from its own
pool (ours is 512 KiB instead of 300 MB, and its grammar is dbgen's simplest sentence forms).
Dates are ISO text (``YYYY-MM-DD``, compared as strings), money SQLite REAL rounded to cents.
Keys are primary keys (``lineitem``: ``l_orderkey, l_linenumber``), which clause 1.4.2.2 allows.

The run executes the chosen ``queries`` (default 1, 6, 12, 14) round-robin, each a
"transaction type" of the driver, so that per-type latency is query time; substitution
parameters are drawn per execution as clause 2.4 says (Q1: DELTA 60..120; Q6: a year
1993..1997, DISCOUNT 0.02..0.09, QUANTITY 24..25; Q12: two distinct ship modes and a year;
Q14: a month of 1993..1997), from the run seed. :func:`query` returns a query's SQL and
arguments, so the same SQL can be checked on another database (an in-memory one, in the tests).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from ssdlab.oltp.driver import SessionBase, insert_batches, transaction

QUERIES = (1, 6, 12, 14)

PART_PER_SF = 200_000
ORDERS_PER_SF = 1_500_000
CUSTOMERS_PER_SF = 150_000
SUPPLIERS_PER_SF = 10_000
CLERKS_PER_SF = 1_000

START_DATE = dt.date(1992, 1, 1)
CURRENT_DATE = dt.date(1995, 6, 17)
END_DATE = dt.date(1998, 12, 31)
#: Orders are placed up to END_DATE - 151 days, so every line ships and arrives by END_DATE.
ORDER_DATE_SPAN = (END_DATE - START_DATE).days - 151

COLORS = [
    "almond",
    "antique",
    "aquamarine",
    "azure",
    "beige",
    "bisque",
    "black",
    "blanched",
    "blue",
    "blush",
    "brown",
    "burlywood",
    "burnished",
    "chartreuse",
    "chiffon",
    "chocolate",
    "coral",
    "cornflower",
    "cornsilk",
    "cream",
    "cyan",
    "dark",
    "deep",
    "dim",
    "dodger",
    "drab",
    "firebrick",
    "floral",
    "forest",
    "frosted",
    "gainsboro",
    "ghost",
    "goldenrod",
    "green",
    "grey",
    "honeydew",
    "hot",
    "indian",
    "ivory",
    "khaki",
    "lace",
    "lavender",
    "lawn",
    "lemon",
    "light",
    "lime",
    "linen",
    "magenta",
    "maroon",
    "medium",
    "metallic",
    "midnight",
    "mint",
    "misty",
    "moccasin",
    "navajo",
    "navy",
    "olive",
    "orange",
    "orchid",
    "pale",
    "papaya",
    "peach",
    "peru",
    "pink",
    "plum",
    "powder",
    "puff",
    "purple",
    "red",
    "rose",
    "rosy",
    "royal",
    "saddle",
    "salmon",
    "sandy",
    "seashell",
    "sienna",
    "sky",
    "slate",
    "smoke",
    "snow",
    "spring",
    "steel",
    "tan",
    "thistle",
    "tomato",
    "turquoise",
    "violet",
    "wheat",
    "white",
    "yellow",
]
TYPE_SYLLABLES = (
    ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"),
    ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"),
    ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER"),
)
CONTAINER_SYLLABLES = (
    ("SM", "LG", "MED", "JUMBO", "WRAP"),
    ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"),
)
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
INSTRUCTIONS = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")

# dbgen's text grammar (dists.dss): the word lists of its sentences.
_NOUNS = [
    "foxes",
    "ideas",
    "theodolites",
    "pinto_beans",
    "instructions",
    "dependencies",
    "excuses",
    "platelets",
    "asymptotes",
    "courts",
    "dolphins",
    "multipliers",
    "sauternes",
    "warthogs",
    "frets",
    "dinos",
    "attainments",
    "somas",
    "Tiresias'",
    "patterns",
    "forges",
    "braids",
    "hockey_players",
    "frays",
    "warhorses",
    "dugouts",
    "notornis",
    "epitaphs",
    "pearls",
    "tithes",
    "waters",
    "orbits",
    "gifts",
    "sheaves",
    "depths",
    "sentiments",
    "decoys",
    "realms",
    "pains",
    "grouches",
    "escapades",
]
_VERBS = [
    "sleep",
    "wake",
    "are",
    "cajole",
    "haggle",
    "nag",
    "use",
    "boost",
    "affix",
    "detect",
    "integrate",
    "maintain",
    "nod",
    "was",
    "lose",
    "sublate",
    "solve",
    "thrash",
    "promise",
    "engage",
    "hinder",
    "print",
    "x-ray",
    "breach",
    "eat",
    "grow",
    "impress",
    "mold",
    "poach",
    "serve",
    "run",
    "dazzle",
    "snooze",
    "doze",
    "unwind",
    "kindle",
    "play",
    "hang",
    "believe",
    "doubt",
]
_ADJECTIVES = [
    "furious",
    "sly",
    "careful",
    "blithe",
    "quick",
    "fluffy",
    "slow",
    "quiet",
    "ruthless",
    "thin",
    "close",
    "dogged",
    "daring",
    "brave",
    "stealthy",
    "permanent",
    "enticing",
    "idle",
    "busy",
    "regular",
    "final",
    "ironic",
    "even",
    "bold",
    "silent",
]
_ADVERBS = [
    "sometimes",
    "always",
    "never",
    "furiously",
    "slyly",
    "carefully",
    "blithely",
    "quickly",
    "fluffily",
    "slowly",
    "quietly",
    "ruthlessly",
    "thinly",
    "closely",
    "doggedly",
    "daringly",
    "bravely",
    "stealthily",
    "permanently",
    "enticingly",
    "idly",
    "busily",
    "regularly",
    "finally",
    "ironically",
    "evenly",
    "boldly",
    "silently",
]
_PREPOSITIONS = [
    "about",
    "above",
    "according_to",
    "across",
    "after",
    "against",
    "along",
    "alongside_of",
    "among",
    "around",
    "at",
    "atop",
    "before",
    "behind",
    "beneath",
    "beside",
    "besides",
    "between",
    "beyond",
    "by",
    "despite",
    "during",
    "except",
    "for",
    "from",
    "in_place_of",
    "inside",
    "instead_of",
    "into",
    "near",
    "of",
    "on",
    "outside",
    "over",
    "past",
    "since",
    "through",
    "throughout",
    "to",
    "toward",
    "under",
    "until",
    "up",
    "upon",
    "without",
    "with",
    "within",
]
_TERMINATORS = (".", ";", ":", "?", "!", "--")
TEXT_POOL_BYTES = 1 << 19

TABLES = ("part", "orders", "lineitem")

#: Orders (with their lines) per load transaction.
ORDERS_PER_COMMIT = 2_500

SCHEMA = (
    """CREATE TABLE part (
        p_partkey INTEGER PRIMARY KEY, p_name VARCHAR(55), p_mfgr CHAR(25), p_brand CHAR(10),
        p_type VARCHAR(25), p_size INTEGER, p_container CHAR(10), p_retailprice REAL,
        p_comment VARCHAR(23))""",
    """CREATE TABLE orders (
        o_orderkey INTEGER PRIMARY KEY, o_custkey INTEGER, o_orderstatus CHAR(1),
        o_totalprice REAL, o_orderdate TEXT, o_orderpriority CHAR(15), o_clerk CHAR(15),
        o_shippriority INTEGER, o_comment VARCHAR(79))""",
    """CREATE TABLE lineitem (
        l_orderkey INTEGER NOT NULL, l_partkey INTEGER, l_suppkey INTEGER,
        l_linenumber INTEGER NOT NULL, l_quantity REAL, l_extendedprice REAL, l_discount REAL,
        l_tax REAL, l_returnflag CHAR(1), l_linestatus CHAR(1), l_shipdate TEXT,
        l_commitdate TEXT, l_receiptdate TEXT, l_shipinstruct CHAR(25), l_shipmode CHAR(10),
        l_comment VARCHAR(44), PRIMARY KEY (l_orderkey, l_linenumber))""",
)

_SQL = {
    1: """SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty,
        SUM(l_extendedprice) AS sum_base_price,
        SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
        SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
        AVG(l_quantity) AS avg_qty, AVG(l_extendedprice) AS avg_price,
        AVG(l_discount) AS avg_disc, COUNT(*) AS count_order
        FROM lineitem WHERE l_shipdate <= date('1998-12-01', ?)
        GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    6: """SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem
        WHERE l_shipdate >= ? AND l_shipdate < date(?, '+1 year')
        AND l_discount BETWEEN ? AND ? AND l_quantity < ?""",
    12: """SELECT l_shipmode,
        SUM(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH'
            THEN 1 ELSE 0 END) AS high_line_count,
        SUM(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH'
            THEN 1 ELSE 0 END) AS low_line_count
        FROM orders, lineitem
        WHERE o_orderkey = l_orderkey AND l_shipmode IN (?, ?)
        AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
        AND l_receiptdate >= ? AND l_receiptdate < date(?, '+1 year')
        GROUP BY l_shipmode ORDER BY l_shipmode""",
    14: """SELECT 100.00 * SUM(CASE WHEN p_type LIKE 'PROMO%'
            THEN l_extendedprice * (1 - l_discount) ELSE 0 END)
        / SUM(l_extendedprice * (1 - l_discount)) AS promo_revenue
        FROM lineitem, part
        WHERE l_partkey = p_partkey AND l_shipdate >= ? AND l_shipdate < date(?, '+1 month')""",
}


def check_queries(queries: Any) -> tuple[int, ...]:
    """``queries`` as a tuple of query numbers; ``ValueError`` naming the option otherwise.
    Takes an int, an iterable of ints, or text like ``"1,6,12,14"``."""
    if isinstance(queries, str):
        parts = [p.strip().lstrip("qQ") for p in queries.replace("+", ",").split(",")]
        try:
            queries = [int(p) for p in parts if p]
        except ValueError:
            raise ValueError(
                f"tpch queries: expected query numbers among {QUERIES}, got {queries!r}"
            ) from None
    elif isinstance(queries, int) and not isinstance(queries, bool):
        queries = [queries]
    try:
        numbers = tuple(queries)
    except TypeError:
        raise ValueError(
            f"tpch queries: expected query numbers among {QUERIES}, got {queries!r}"
        ) from None
    if not numbers:
        raise ValueError(f"tpch queries: expected at least one of {QUERIES}, got none")
    unknown = [q for q in numbers if isinstance(q, bool) or q not in QUERIES]
    if unknown:
        raise ValueError(
            f"tpch queries: unknown query {unknown[0]!r}; "
            f"implemented: {', '.join(map(str, QUERIES))}"
        )
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"tpch queries: a query is named twice in {numbers}")
    return numbers


def query(number: int, rng: random.Random) -> tuple[str, tuple[Any, ...]]:
    """Query ``number``'s SQL and its substitution parameters drawn from ``rng`` (clause 2.4)."""
    if number == 1:
        return _SQL[1], (f"-{rng.randint(60, 120)} days",)
    if number == 6:
        year = f"{rng.randint(1993, 1997)}-01-01"
        discount = rng.randint(2, 9)
        return _SQL[6], (
            year,
            year,
            (discount - 1) / 100,
            (discount + 1) / 100,
            rng.randint(24, 25),
        )
    if number == 12:
        first, second = rng.sample(SHIP_MODES, 2)
        year = f"{rng.randint(1993, 1997)}-01-01"
        return _SQL[12], (first, second, year, year)
    if number == 14:
        month = f"{rng.randint(1993, 1997)}-{rng.randint(1, 12):02d}-01"
        return _SQL[14], (month, month)
    raise ValueError(f"tpch queries: unknown query {number!r}; implemented: {QUERIES}")


def text_pool(seed: int, size: int = TEXT_POOL_BYTES) -> str:
    """dbgen-style pseudo-text: sentences of its grammar, ``size`` characters."""
    rng = random.Random(f"tpch-text-{seed}")
    out: list[str] = []
    length = 0
    while length < size:
        form = rng.randrange(4)
        noun = rng.choice(_NOUNS)
        if form == 0:
            words = [rng.choice(_ADJECTIVES), noun, rng.choice(_VERBS), rng.choice(_ADVERBS)]
        elif form == 1:
            words = [noun, rng.choice(_VERBS), rng.choice(_PREPOSITIONS), "the",
                     rng.choice(_ADJECTIVES), rng.choice(_NOUNS)]  # fmt: skip
        elif form == 2:
            words = [rng.choice(_ADJECTIVES), rng.choice(_ADJECTIVES), noun,
                     rng.choice(_ADVERBS), rng.choice(_VERBS)]  # fmt: skip
        else:
            words = [noun, rng.choice(_ADVERBS), rng.choice(_VERBS)]
        sentence = " ".join(words).replace("_", " ") + rng.choice(_TERMINATORS) + " "
        out.append(sentence)
        length += len(sentence)
    return "".join(out)[:size]


def sparse_key(index: int) -> int:
    """dbgen's ``mk_sparse``: order key of the ``index``-th order (1-based): 8 of every 32."""
    low = index & 7
    return (index >> 3 << 5) | low


def retail_price(partkey: int) -> float:
    """Clause 4.2.3: P_RETAILPRICE = (90000 + ((key / 10) mod 20001) + 100 (key mod 1000)) / 100."""
    return (90_000 + (partkey // 10) % 20_001 + 100 * (partkey % 1_000)) / 100


@dataclass(frozen=True)
class Tpch:
    """TPC-H's ``part``, ``orders`` and ``lineitem`` at ``scale_factor``, and ``queries``."""

    scale_factor: float = 0.01
    queries: tuple[int, ...] = field(default=QUERIES)

    name = "tpch"

    def __post_init__(self) -> None:
        sf = self.scale_factor
        if isinstance(sf, bool) or not isinstance(sf, int | float) or not sf > 0:
            raise ValueError(f"tpch scale_factor must be a number > 0, got {sf!r}")
        if sf > 100:
            raise ValueError(f"tpch scale_factor {sf!r} is beyond what a simulated run loads")
        object.__setattr__(self, "queries", check_queries(self.queries))
        if self.parts < 1 or self.orders < 1:
            raise ValueError(f"tpch scale_factor {sf!r} leaves no parts or orders")

    @property
    def transaction_types(self) -> tuple[str, ...]:
        return tuple(f"q{q}" for q in self.queries)

    @property
    def parts(self) -> int:
        return round(PART_PER_SF * self.scale_factor)

    @property
    def orders(self) -> int:
        return round(ORDERS_PER_SF * self.scale_factor)

    @property
    def customers(self) -> int:
        return max(round(CUSTOMERS_PER_SF * self.scale_factor), 2)

    @property
    def suppliers(self) -> int:
        return max(round(SUPPLIERS_PER_SF * self.scale_factor), 4)

    @property
    def clerks(self) -> int:
        return max(round(CLERKS_PER_SF * self.scale_factor), 1)

    def params(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["queries"] = list(self.queries)
        return out

    def load(self, conn: Any, seed: int) -> None:
        rng = random.Random(f"tpch-load-{seed}")
        pool = text_pool(seed)
        cur = conn.cursor()
        cur.execute("BEGIN")
        for table in TABLES:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in SCHEMA:
            cur.execute(statement)
        insert_batches(
            cur, f"INSERT INTO part VALUES ({', '.join('?' * 9)})", self._parts(rng, pool)
        )
        conn.commit()
        # Orders and their lines in transactions of ORDERS_PER_COMMIT orders, as a bulk load
        # commits: one transaction would hold the whole table in the WAL until it ends.
        lines: list[tuple[Any, ...]] = []
        orders = self._orders(rng, pool, lines)
        while batch := list(itertools.islice(orders, ORDERS_PER_COMMIT)):
            cur.execute("BEGIN")
            cur.executemany(f"INSERT INTO orders VALUES ({', '.join('?' * 9)})", batch)
            cur.executemany(f"INSERT INTO lineitem VALUES ({', '.join('?' * 16)})", lines)
            conn.commit()
            lines.clear()

    def _parts(self, rng: random.Random, pool: str) -> Any:
        randint = rng.randint
        for key in range(1, self.parts + 1):
            m = randint(1, 5)
            yield (
                key,
                " ".join(rng.sample(COLORS, 5)),
                f"Manufacturer#{m}",
                f"Brand#{m}{randint(1, 5)}",
                " ".join(rng.choice(s) for s in TYPE_SYLLABLES),
                randint(1, 50),
                " ".join(rng.choice(s) for s in CONTAINER_SYLLABLES),
                retail_price(key),
                _comment(rng, pool, 5, 22),
            )

    def _orders(self, rng: random.Random, pool: str, lines: list[tuple[Any, ...]]) -> Any:
        # Uniform integers as low + int(random() * count): a third of randint's cost, which
        # matters at six million lines per scale factor.
        r = rng.random
        dates = [(START_DATE + dt.timedelta(days=d)).isoformat() for d in range(2600)]
        current = (CURRENT_DATE - START_DATE).days
        parts, suppliers, customers = self.parts, self.suppliers, self.customers
        spread = suppliers // 4
        pool_end = len(pool) - 44
        append = lines.append
        for index in range(1, self.orders + 1):
            key = sparse_key(index)
            custkey = 1 + int(r() * customers)
            while custkey % 3 == 0:
                custkey = 1 + int(r() * customers)
            day = int(r() * (ORDER_DATE_SPAN + 1))
            total = 0.0
            statuses = set()
            for number in range(1, 2 + int(r() * 7)):
                partkey = 1 + int(r() * parts)
                i = int(r() * 4)
                suppkey = (partkey + i * (spread + (partkey - 1) // suppliers)) % suppliers
                quantity = 1 + int(r() * 50)
                price = round(quantity * retail_price(partkey), 2)
                discount = int(r() * 11) / 100
                tax = int(r() * 9) / 100
                ship = day + 1 + int(r() * 121)
                commit = day + 30 + int(r() * 61)
                receipt = ship + 1 + int(r() * 30)
                flag = ("R" if r() < 0.5 else "A") if receipt <= current else "N"
                status = "O" if ship > current else "F"
                statuses.add(status)
                total += price * (1 + tax) * (1 - discount)
                length = 10 + int(r() * 34)
                at = int(r() * pool_end)
                append(
                    (
                        key,
                        partkey,
                        suppkey + 1,
                        number,
                        float(quantity),
                        price,
                        discount,
                        tax,
                        flag,
                        status,
                        dates[ship],
                        dates[commit],
                        dates[receipt],
                        INSTRUCTIONS[int(r() * 4)],
                        SHIP_MODES[int(r() * 7)],
                        pool[at : at + length],
                    )
                )
            yield (
                key,
                custkey,
                statuses.pop() if len(statuses) == 1 else "P",
                round(total, 2),
                dates[day],
                PRIORITIES[int(r() * 5)],
                f"Clerk#{1 + int(r() * self.clerks):09d}",
                0,
                _comment(rng, pool, 19, 78),
            )

    def session(self, conn: Any, seed: int) -> TpchSession:
        return TpchSession(self, conn, seed)


def _comment(rng: random.Random, pool: str, low: int, high: int) -> str:
    """A comment as dbgen makes one: a random-length cut of the text pool at a random offset."""
    length = rng.randint(low, high)
    at = rng.randrange(len(pool) - length)
    return pool[at : at + length]


class TpchSession(SessionBase):
    """Runs the workload's queries round-robin; ``results`` keeps each query's last rows."""

    def __init__(self, workload: Tpch, conn: Any, seed: int) -> None:
        super().__init__(workload, conn)
        self.rng = random.Random(f"tpch-run-{seed}")
        self.turn = 0
        self.results: dict[str, list[tuple[Any, ...]]] = {}
        self.arguments: dict[str, tuple[Any, ...]] = {}

    def next_type(self) -> str:
        kind = self.wl.transaction_types[self.turn % len(self.wl.queries)]
        self.turn += 1
        return kind

    def execute(self, kind: str) -> bool:
        sql, args = query(int(kind[1:]), self.rng)

        def run() -> bool:
            self.results[kind] = self.cur.execute(sql, args).fetchall()
            self.arguments[kind] = args
            return True

        return transaction(self.conn, self.cur, run)
