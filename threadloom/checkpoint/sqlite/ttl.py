"""Per-thread TTL clocks on SQLite: a ``tl_thread_clocks`` row per thread
(schema migration 3), read and written inside the saver's transaction."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

from threadloom.checkpoint.storage import ttl as t

__all__ = ["PLANS", "TABLE"]


class Stmt(NamedTuple):
    """Same shape as ``sqlite.queries.Stmt`` (the executor reads sql/params/mode)."""

    sql: str
    params: Any = ()
    mode: str = "all"


TABLE = (
    "CREATE TABLE IF NOT EXISTS tl_thread_clocks (thread_id TEXT PRIMARY KEY,"
    " touched_at REAL NOT NULL, ttl REAL)"
)

Plan = Generator[Stmt, Any, Any]


def _read(op: t.ReadClock) -> Plan:
    sql = "SELECT touched_at, ttl FROM tl_thread_clocks WHERE thread_id = ?"
    row = yield Stmt(sql, (op.thread_id,), "one")
    return None if row is None else (row[0], row[1])


def _touch(op: t.TouchClock) -> Plan:
    keep = "NULL" if op.reset else "ttl"
    sql = (
        "INSERT INTO tl_thread_clocks (thread_id, touched_at) VALUES (?, ?)"
        f" ON CONFLICT (thread_id) DO UPDATE SET touched_at = excluded.touched_at, ttl = {keep}"
    )
    yield Stmt(sql, (op.thread_id, op.at), "count")


def _set_ttl(op: t.SetClockTTL) -> Plan:
    sql = "INSERT OR REPLACE INTO tl_thread_clocks (thread_id, touched_at, ttl) VALUES (?, ?, ?)"
    yield Stmt(sql, (op.thread_id, op.at, op.ttl), "count")


def _expired(op: t.ListExpired) -> Plan:
    sql = (
        "SELECT thread_id FROM tl_thread_clocks WHERE coalesce(ttl, ?) >= 0"
        " AND touched_at + coalesce(ttl, ?) <= ?"
    )
    rows = yield Stmt(sql, (op.default, op.default, op.now), "all")
    return [r[0] for r in rows]


def _drop(op: t.DropClock) -> Plan:
    yield Stmt("DELETE FROM tl_thread_clocks WHERE thread_id = ?", (op.thread_id,), "count")


PLANS: dict[type, Any] = {
    t.ReadClock: _read,
    t.TouchClock: _touch,
    t.SetClockTTL: _set_ttl,
    t.ListExpired: _expired,
    t.DropClock: _drop,
}
