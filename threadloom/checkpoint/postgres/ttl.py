"""Per-thread TTL clocks on Postgres: a ``tl_thread_clocks`` row per thread in
the saver's schema (a migration of ``postgres/schema.py``)."""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage import ttl as t

__all__ = ["PLANNERS", "TABLE"]

TABLE = (  # a migration of the saver's schema (postgres/schema.py MIGRATIONS)
    "CREATE TABLE IF NOT EXISTS {s}.tl_thread_clocks (thread_id TEXT PRIMARY KEY,"
    " touched_at DOUBLE PRECISION NOT NULL, ttl DOUBLE PRECISION)"
)


def _t(sql: Any) -> str:
    return f"{sql.s}.tl_thread_clocks"


def _read(op: t.ReadClock, sql: Any) -> Any:
    stmt = Stmt(
        f"SELECT touched_at, ttl FROM {_t(sql)} WHERE thread_id = %s", (op.thread_id,), "one"
    )
    return [stmt], lambda r: None if r[0] is None else (r[0][0], r[0][1])


def _touch(op: t.TouchClock, sql: Any) -> Any:
    keep = "NULL" if op.reset else "c.ttl"
    stmt = Stmt(
        f"INSERT INTO {_t(sql)} AS c (thread_id, touched_at) VALUES (%s, %s)"
        f" ON CONFLICT (thread_id) DO UPDATE SET touched_at = EXCLUDED.touched_at, ttl = {keep}",
        (op.thread_id, op.at),
    )
    return [stmt], lambda r: None


def _set_ttl(op: t.SetClockTTL, sql: Any) -> Any:
    stmt = Stmt(
        f"INSERT INTO {_t(sql)} (thread_id, touched_at, ttl) VALUES (%s, %s, %s)"
        " ON CONFLICT (thread_id) DO UPDATE SET touched_at = EXCLUDED.touched_at,"
        " ttl = EXCLUDED.ttl",
        (op.thread_id, op.at, op.ttl),
    )
    return [stmt], lambda r: None


def _expired(op: t.ListExpired, sql: Any) -> Any:
    stmt = Stmt(
        f"SELECT thread_id FROM {_t(sql)} WHERE coalesce(ttl, %s) >= 0"
        " AND touched_at + coalesce(ttl, %s) <= %s",
        (op.default, op.default, op.now),
        "all",
    )
    return [stmt], lambda r: [row[0] for row in r[0]]


def _drop(op: t.DropClock, sql: Any) -> Any:
    stmt = Stmt(f"DELETE FROM {_t(sql)} WHERE thread_id = %s", (op.thread_id,))
    return [stmt], lambda r: None


PLANNERS: dict[type, Any] = {
    t.ReadClock: _read,
    t.TouchClock: _touch,
    t.SetClockTTL: _set_ttl,
    t.ListExpired: _expired,
    t.DropClock: _drop,
}
