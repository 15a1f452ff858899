"""Per-thread TTL clocks for the in-memory saver: a dict on the executor
(``thread_id -> [touched_at, ttl override]``), under its lock."""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.storage import ttl as t

__all__ = ["handlers"]


def handlers(ex: Any) -> dict[type, Any]:
    """Op type -> handler bound to the executor ``ex`` (for its dispatch table)."""
    clocks: dict[str, list[Any]] = {}
    ex.clocks = clocks

    def read(op: t.ReadClock) -> tuple[float, float | None] | None:
        row = clocks.get(op.thread_id)
        return None if row is None else (row[0], row[1])

    def touch(op: t.TouchClock) -> None:
        row = clocks.get(op.thread_id)
        if row is None or op.reset:
            clocks[op.thread_id] = [op.at, None]
        else:
            row[0] = op.at

    def set_ttl(op: t.SetClockTTL) -> None:
        clocks[op.thread_id] = [op.at, op.ttl]

    def expired(op: t.ListExpired) -> list[str]:
        default = None if op.default < 0 else op.default
        return [
            tid
            for tid, (at, ttl) in clocks.items()
            if t.deadline((at, ttl), default, op.now) <= op.now
        ]

    def drop(op: t.DropClock) -> None:
        clocks.pop(op.thread_id, None)

    return {
        t.ReadClock: read,
        t.TouchClock: touch,
        t.SetClockTTL: set_ttl,
        t.ListExpired: expired,
        t.DropClock: drop,
    }
