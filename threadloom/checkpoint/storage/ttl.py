"""Per-thread TTL: the storage operations and flows behind ``ttl=`` (memory,
SQLite and Postgres savers; Redis has its own, native, TTL).

A thread's *clock* is one small row per thread: when it was last touched
(written or read) and its own TTL override. The TTL a thread lives by is its
override when set (``FOREVER`` = never expires), else the saver's ``ttl``.
Times are seconds from the saver's clock (``time.time`` unless injected), so
processes sharing a database share the clock of the host(s) they run on.

A thread whose lease a run holds does not expire while the run holds it: the
clock is consulted first, and only a thread whose clock ran out reads its lease
(:func:`held`), so the hot path pays nothing for it. A run takes its lease in
the transaction that checks (and, when expired, erases) the thread first
(``ThreadTTL._lease_clock``), so a run starting on an expired thread still
finds it gone: the lease protects only what was alive when it was taken.

Backends answer the ops below (``memory/ttl.py``, ``sqlite/ttl.py``,
``postgres/ttl.py``); the flows are shared.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from threadloom.checkpoint.lease.ops import ReadLease
from threadloom.checkpoint.storage.ops import (
    DeleteCheckpoints,
    DeleteRefs,
    GetCheckpoint,
    LoadThreadRefs,
    LoadWrites,
)
from threadloom.checkpoint.storage.values import ValueCodec

__all__ = [
    "FOREVER",
    "UNTRACKED",
    "ReadClock",
    "TouchClock",
    "SetClockTTL",
    "ListExpired",
    "DropClock",
    "TTL_OPS",
    "Restarted",
    "deadline",
    "held",
    "sync_flow",
    "peek_flow",
    "set_ttl_flow",
    "expired_flow",
    "sweep_one_flow",
]

Flow = Generator[Any, Any, Any]

FOREVER = -1.0
"""Stored TTL override meaning "this thread never expires"."""

UNTRACKED = -math.inf
"""``sync_flow`` result for a read of a thread that has no clock and no data:
alive (an empty thread), but nothing was touched, so nothing may be cached."""


class Restarted(float):
    """``sync_flow`` result for a write that found its thread expired and erased
    it first: the new deadline, marked so the write drops its parent link (the
    checkpoint it names was just erased; ``parent_config`` must not name it)."""


@dataclass(frozen=True)
class ReadClock:
    """Result: ``(touched_at, ttl_override_or_None)`` of the thread, or None."""

    thread_id: str


@dataclass(frozen=True)
class TouchClock:
    """Upsert ``touched_at = at``; ``reset`` also clears the TTL override. Result: None."""

    thread_id: str
    at: float
    reset: bool = False


@dataclass(frozen=True)
class SetClockTTL:
    """Upsert the thread's TTL override (None = saver default, ``FOREVER``) and
    ``touched_at = at``. Result: None."""

    thread_id: str
    ttl: float | None
    at: float


@dataclass(frozen=True)
class ListExpired:
    """Result: thread ids whose clock ran out at ``now`` (``default`` = the
    saver's ttl, ``FOREVER`` when it has none)."""

    now: float
    default: float


@dataclass(frozen=True)
class DropClock:
    """Delete the thread's clock row. Result: None."""

    thread_id: str


TTL_OPS = (ReadClock, TouchClock, SetClockTTL, ListExpired, DropClock)


def deadline(row: tuple[float, float | None] | None, default: float | None, now: float) -> float:
    """When the thread expires (``math.inf``: never); an untracked thread counts
    as touched ``now``."""
    if row is None:
        return math.inf if default is None else now + default
    touched, ttl = row
    if ttl is None:
        ttl = default
    if ttl is None or ttl < 0:
        return math.inf
    return touched + ttl


def held(thread_id: str) -> Flow:
    """Whether a run holds the thread's lease (read only once its clock ran out):
    the thread then lives on, its clock counting from the run's next write or
    read or from its end (the release touches it), whichever is later."""
    return (yield ReadLease(thread_id)) is not None


def _purge(codec: ValueCodec, thread_id: str) -> Flow:
    """Erase an expired thread's data before it is written again, so its old
    history cannot resurface. Same steps as ``retention.delete_thread_flow``
    minus its lease guard: the writer (which may hold the lease) is the caller."""
    from threadloom.checkpoint.storage.puts import release
    from threadloom.checkpoint.storage.retention import _held

    codec.forget_thread(thread_id)
    refs = yield LoadThreadRefs(thread_id, None)
    writes = yield LoadWrites(thread_id, None, None)
    yield DeleteCheckpoints(thread_id, None, None)
    yield DeleteRefs(thread_id, None, None)
    yield from release(_held(refs) + _held(writes))


def sync_flow(
    codec: ValueCodec, thread_id: str, now: float, default: float | None, write: bool
) -> Flow:
    """Check the thread's clock and touch it. Returns its new deadline, or None
    when it has expired (a read then sees nothing). A ``write`` to an expired
    thread first erases what is left of it and restarts its clock. A thread a
    run holds the lease of is alive whatever its clock says (:func:`held`)."""
    row = yield ReadClock(thread_id)
    if deadline(row, default, now) <= now and not (yield from held(thread_id)):
        if not write:
            return None
        yield from _purge(codec, thread_id)
        yield TouchClock(thread_id, now, reset=True)
        return Restarted(deadline(None, default, now))
    if row is None and not write:
        # written before TTL was on (or absent): start its clock only if it exists
        if (yield GetCheckpoint(thread_id, "", None)) is None:
            return UNTRACKED
    yield TouchClock(thread_id, now)
    return deadline((now, None if row is None else row[1]), default, now)


def peek_flow(thread_id: str, now: float, default: float | None) -> Flow:
    """The thread's deadline (None: expired) without touching it: listing many
    threads must not keep them all alive. A thread held by a run: ``math.inf``."""
    until = deadline((yield ReadClock(thread_id)), default, now)
    if until > now:
        return until
    return math.inf if (yield from held(thread_id)) else None


def set_ttl_flow(thread_id: str, ttl: float | None, now: float) -> Flow:
    yield SetClockTTL(thread_id, ttl, now)


def expired_flow(now: float, default: float | None) -> Flow:
    return (yield ListExpired(now, FOREVER if default is None else float(default)))


def sweep_one_flow(codec: ValueCodec, thread_id: str, now: float, default: float | None) -> Flow:
    """Delete one expired thread through ``delete_thread_flow`` (blobs only it
    used are erased). Returns ``(checkpoints, writes, blobs, bytes)``, or None
    when it was touched meanwhile or a run holds its lease (skipped)."""
    from threadloom.checkpoint.storage.retention import delete_thread_flow

    row = yield ReadClock(thread_id)
    if row is not None and deadline(row, default, now) > now:
        return None
    if (yield from held(thread_id)):
        return None
    writes = yield LoadWrites(thread_id, None, None)
    deleted, released = yield from delete_thread_flow(codec, thread_id)
    yield DropClock(thread_id)
    blobs, freed = released if isinstance(released, tuple) else (released or 0, 0)
    return int(deleted or 0), len(writes), int(blobs), int(freed)
