"""The commit floor: what one durable commit costs on each durable store, and
the best ``superstep`` ratio it leaves to any saver making one commit per step.

With ``durability="sync"`` a step is durable before the next one starts, so an
implementation pays at least one durable commit per step on top of its runtime.
The ``<kind>/commit-floor`` cases time the cheapest durable commit there is (one
tiny row INSERT, committed) on a connection opened exactly as the bench opens
that side's saver: the SQLite saver's own connection (its WAL mode and
``PRAGMA synchronous``), or a Postgres connection with the savers' connect
arguments. :func:`bound_rows` then adds, next to them, the ratio LangGraph's
``<kind>/sync`` step leaves to a step costing threadloom's no-checkpointer step
plus that floor: no implementation making one commit per step can beat it, so
a ``superstep`` target above it is out of reach by design, not by a slow path.
Both rows are informational (no target, left out of the summary's mean).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable

from bench.harness import Case, Config, MetricSpec, Outcome, Row
from bench.sides import (
    NotAvailable,
    Side,
    pg_connect_kwargs,
    pg_schema_name,
    pg_url,
    sqlite_conn_of,
)

__all__ = ["BOUND_METRIC", "FLOOR_METRIC", "bound_rows", "cases", "median_commit_us"]

FLOOR_METRIC = "us/commit"
BOUND_METRIC = "us/step if 1 commit"
_TABLE = "bench_commit_floor"
_WARMUP = 20


def median_commit_us(commit: Callable[[], None], n: int) -> float:
    """Median microseconds of ``commit()`` over ``n`` calls, each timed on its own
    (after a few untimed ones: page allocation, the first WAL frames)."""
    for _ in range(_WARMUP):
        commit()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        commit()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def _sqlite_floor(side: Side, kind: str, workdir: str, n: int) -> float:
    with side.saver(kind, workdir) as saver:
        conn = sqlite_conn_of(saver)
        if conn is None:  # side.saver already refused such a saver; kept for typing
            raise RuntimeError("no sqlite3 connection on the saver")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (id INTEGER PRIMARY KEY, v BLOB)")
        if conn.in_transaction:
            conn.commit()

        def commit() -> None:
            # autocommit connection (threadloom): the INSERT is its own transaction;
            # otherwise (LangGraph's) sqlite3 opened one and commit() ends it
            conn.execute(f"INSERT INTO {_TABLE} (v) VALUES (?)", (b"x",))
            if conn.in_transaction:
                conn.commit()

        return median_commit_us(commit, n)


def _pg_floor(n: int) -> float:
    import psycopg

    url = pg_url()
    if not url:
        raise NotAvailable("Postgres disabled (set THREADLOOM_BENCH_PG)")
    schema = pg_schema_name("floor")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            with psycopg.connect(url, **pg_connect_kwargs(schema)) as conn:
                conn.execute(f"CREATE TABLE {_TABLE} (id bigserial PRIMARY KEY, v bytea)")
                # autocommit: one statement is one transaction, committed (and its
                # WAL flushed) before the reply, in one round trip
                insert = f"INSERT INTO {_TABLE} (v) VALUES (%s)"
                return median_commit_us(lambda: conn.execute(insert, (b"x",)), n)
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _run(kind: str) -> Callable[[Side, Config], Outcome]:
    def fn(side: Side, cfg: Config) -> Outcome:
        n = cfg.share(600, 30)
        if kind == "postgres":
            return Outcome({FLOOR_METRIC: _pg_floor(n)})
        with tempfile.TemporaryDirectory(dir=cfg.workdir) as tmp:
            return Outcome({FLOOR_METRIC: _sqlite_floor(side, kind, tmp, n)})

    return fn


def cases(kinds: list[str]) -> list[Case]:
    """A ``<kind>/commit-floor`` case per durable store among ``kinds``."""
    spec = [MetricSpec(FLOOR_METRIC, "us", target=None, ratio=False)]
    return [
        Case("superstep", f"{k}/commit-floor", _run(k), spec, compare_state=False)
        for k in kinds
        if k.startswith("sqlite") or k == "postgres"
    ]


def _value(rows: list[Row], case: str, side: str) -> float | None:
    for r in rows:
        if r.workload == "superstep" and r.case == case and r.metric == "us/superstep":
            return getattr(r, side)
    return None


def bound_rows(rows: list[Row]) -> list[Row]:
    """``rows`` with a bound row after each commit-floor row: LangGraph's
    ``<kind>/sync`` us/step against threadloom's no-checkpointer us/step plus the
    cheaper of the two sides' commit floors; LG/TL is then the best ratio a saver
    making one commit per step could reach. Skipped when an input is missing."""
    out: list[Row] = []
    none_step = _value(rows, "none/-", "threadloom")
    for r in rows:
        out.append(r)
        if r.workload != "superstep" or r.metric != FLOOR_METRIC:
            continue
        kind = r.case.split("/")[0]
        lg_step = _value(rows, f"{kind}/sync", "langgraph")
        floors = [v for v in (r.langgraph, r.threadloom) if v is not None]
        if lg_step is None or none_step is None or not floors:
            continue
        bound = none_step + min(floors)
        note = (
            f"LangGraph {kind}/sync us/step vs threadloom none/- us/step "
            f"({none_step:.0f}) + commit floor ({min(floors):.0f})"
        )
        out.append(
            Row(
                "superstep",
                f"{kind}/sync",
                BOUND_METRIC,
                "us",
                lg_step,
                bound,
                ratio=lg_step / bound,
                notes={"bound": note},
                informational=True,
            )
        )
    return out
