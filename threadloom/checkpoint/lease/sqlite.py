"""Leases on SQLite: a ``tl_leases`` row per thread (schema migration 2), read and
written inside the saver's ``BEGIN IMMEDIATE`` transaction.

A write flow takes SQLite's write lock before its first statement, so the
fence (:class:`~.ops.CheckLease`) and the checkpoint it guards cannot be
separated by another process taking the lease over. Times are wall-clock
milliseconds of the writing process (processes sharing a file share a clock).

The row is read in mode ``lease`` and written in modes ``leased`` (the
whole row) or ``unlease`` (thread id first): the executor answers the per-step fence from memory while no one else
wrote the database (``sqlite/memo.py``), so a step costs no lease statement
between renewals.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any, NamedTuple

from threadloom.checkpoint.lease import ops as lo


class Stmt(NamedTuple):
    """Same shape as ``sqlite.queries.Stmt`` (the executor reads sql/params/mode;
    modes ``lease``, ``leased`` and ``unlease``: see ``sqlite/memo.py``)."""

    sql: str
    params: Any = ()
    mode: str = "all"


__all__ = ["PLANS", "TABLE"]

TABLE = (
    "CREATE TABLE IF NOT EXISTS tl_leases (thread_id TEXT PRIMARY KEY, holder TEXT NOT NULL,"
    " token TEXT NOT NULL, expires_at REAL NOT NULL, stop TEXT NOT NULL DEFAULT '')"
)
_SELECT = "SELECT holder, token, expires_at, stop FROM tl_leases WHERE thread_id = ?"
_EXTEND = "UPDATE tl_leases SET expires_at = ?2 WHERE thread_id = ?1"

Plan = Generator[Stmt, Any, Any]


def _now() -> float:
    return time.time() * 1000.0


def _live(thread_id: str) -> Plan:
    row = yield Stmt(_SELECT, (thread_id,), "lease")
    if row is None or row[2] <= _now():
        return None
    return lo.LeaseInfo(row[0], row[1], int(row[2] - _now()), row[3])


def _acquire(op: lo.AcquireLease) -> Plan:
    live = yield from _live(op.thread_id)
    if live is not None and live.token not in (op.token, op.steal):
        return live
    sql = "INSERT OR REPLACE INTO tl_leases VALUES (?, ?, ?, ?, '')"
    yield Stmt(sql, (op.thread_id, op.holder, op.token, _now() + op.ttl_ms), "leased")
    return None


def _renew(op: lo.RenewLease) -> Plan:
    live = yield from _live(op.thread_id)
    if live is None or live.token != op.token:
        return None
    yield Stmt(_EXTEND, (op.thread_id, _now() + op.ttl_ms), "unlease")
    return live


def _release(op: lo.ReleaseLease) -> Plan:
    sql = "DELETE FROM tl_leases WHERE thread_id = ? AND token = ?"
    yield Stmt(sql, (op.thread_id, op.token), "unlease")


def _request_stop(op: lo.RequestStop) -> Plan:
    live = yield from _live(op.thread_id)
    if live is None:
        return None
    if op.withdraw:
        sql = "UPDATE tl_leases SET stop = '' WHERE thread_id = ?1 AND stop = ?2"
    else:
        sql = "UPDATE tl_leases SET stop = ?2 WHERE thread_id = ?1 AND stop = ''"
    yield Stmt(sql, (op.thread_id, op.mode), "unlease")
    return live


def _check(op: lo.CheckLease) -> Plan:
    """Every saving step runs this (the fence): the row is read as is, without
    the :class:`LeaseInfo` that :func:`_live` builds for callers that want it."""
    row = yield Stmt(_SELECT, (op.thread_id,), "lease")
    if row is None:
        return None
    now = _now()
    left = row[2] - now
    if left <= 0 or row[1] != op.token:
        return None
    if int(left) > op.ttl_ms * 2 // 3:  # renewed recently: spare the UPDATE
        return row[3]
    yield Stmt(_EXTEND, (op.thread_id, now + op.ttl_ms), "unlease")
    return row[3]


def _read(op: lo.ReadLease) -> Plan:
    return (yield from _live(op.thread_id))


PLANS: dict[type, Any] = {
    lo.AcquireLease: _acquire,
    lo.RenewLease: _renew,
    lo.ReleaseLease: _release,
    lo.RequestStop: _request_stop,
    lo.CheckLease: _check,
    lo.ReadLease: _read,
}
