"""Leases for the in-memory saver: a dict on the executor, under its lock.

Every storage flow of the memory saver runs under the executor's lock, so a
:class:`~.ops.CheckLease` and the write after it are one atomic step.
"""

from __future__ import annotations

import time
from typing import Any

from threadloom.checkpoint.lease import ops as lo

__all__ = ["handlers"]


def _now() -> float:
    return time.monotonic() * 1000.0


def _table(ex: Any) -> dict[str, list[Any]]:
    table = getattr(ex, "leases", None)
    if table is None:
        table = ex.leases = {}
    return table


def _live(ex: Any, thread_id: str) -> list[Any] | None:
    row = _table(ex).get(thread_id)
    if row is None or row[2] <= _now():
        return None
    return row  # [holder, token, expires_at, stop]


def _info(row: list[Any]) -> lo.LeaseInfo:
    return lo.LeaseInfo(row[0], row[1], int(row[2] - _now()), row[3])


def handlers(ex: Any) -> dict[type, Any]:
    """Op type -> handler bound to the executor ``ex`` (for its dispatch table)."""

    def acquire(op: lo.AcquireLease) -> lo.LeaseInfo | None:
        row = _live(ex, op.thread_id)
        if row is not None and row[1] not in (op.token, op.steal):
            return _info(row)
        _table(ex)[op.thread_id] = [op.holder, op.token, _now() + op.ttl_ms, ""]
        return None

    def renew(op: lo.RenewLease) -> lo.LeaseInfo | None:
        row = _live(ex, op.thread_id)
        if row is None or row[1] != op.token:
            return None
        row[2] = _now() + op.ttl_ms
        return _info(row)

    def release(op: lo.ReleaseLease) -> None:
        row = _table(ex).get(op.thread_id)
        if row is not None and row[1] == op.token:
            del _table(ex)[op.thread_id]

    def request_stop(op: lo.RequestStop) -> lo.LeaseInfo | None:
        row = _live(ex, op.thread_id)
        if row is None:
            return None
        if op.withdraw:
            row[3] = "" if row[3] == op.mode else row[3]
        else:
            row[3] = row[3] or op.mode
        return _info(row)

    def check(op: lo.CheckLease) -> str | None:  # every fenced write: kept lean
        row = _table(ex).get(op.thread_id)
        if row is None or row[1] != op.token:
            return None
        now = time.monotonic() * 1000.0
        if row[2] <= now:
            return None
        row[2] = now + op.ttl_ms
        return row[3]

    def read(op: lo.ReadLease) -> lo.LeaseInfo | None:
        row = _live(ex, op.thread_id)
        return None if row is None else _info(row)

    return {
        lo.AcquireLease: acquire,
        lo.RenewLease: renew,
        lo.ReleaseLease: release,
        lo.RequestStop: request_stop,
        lo.CheckLease: check,
        lo.ReadLease: read,
    }
