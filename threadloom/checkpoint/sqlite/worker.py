"""Run sync code on an ``aiosqlite`` connection's worker thread, in one hop.

``AsyncSqliteSaver`` runs each storage flow whole on the thread that owns the
``sqlite3`` connection, through the sync :class:`~.executor.SqliteExecutor`
(the same plans, memo, lazy BEGINs and durability rules as ``SqliteSaver``):
one hop per flow (per page for ``list``) instead of two per statement.

It relies on two private but long-stable parts of ``aiosqlite``:
``Connection._execute(fn, *args)`` (queue a callable for the worker thread and
await its result) and ``Connection._conn`` (the ``sqlite3.Connection``);
:func:`check` fails loudly, naming them, if a future aiosqlite drops them.

Cancellation: the worker runs a queued callable even when its awaiting task is
cancelled. A job cancelled before the worker started it is skipped; one that
started runs to its end (a flow commits or rolls back as if nobody had
cancelled). Either way the cancelled caller sees ``CancelledError`` only once
the job is settled, so the connection is never left mid-transaction while the
loop goes on (a statement queued after the job runs after it).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from threadloom.checkpoint.storage.drive import Emit, Flow
from threadloom.errors import ConfigError

__all__ = ["check", "hop", "page", "tapped"]


def check(conn: Any) -> None:
    """Fail loudly when ``conn`` lacks what :func:`hop` needs (an aiosqlite
    that no longer has ``_execute``/``_conn``, or not an aiosqlite connection)."""
    missing = [name for name in ("_execute", "_conn") if not hasattr(type(conn), name)]
    if missing:
        raise ConfigError(
            "AsyncSqliteSaver needs an aiosqlite.Connection with the private"
            " Connection._execute(fn, *args) and Connection._conn this threadloom"
            f" relies on; {type(conn).__module__}.{type(conn).__qualname__} lacks"
            f" {' and '.join(missing)} (pin aiosqlite to a version that has them)"
        )


class _Job:
    """The callable queued for the worker: skipped when cancelled before it
    started, run in the caller's context (context variables) otherwise."""

    __slots__ = ("fn", "args", "ctx", "skip")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args
        self.ctx = contextvars.copy_context()
        self.skip = False

    def __call__(self) -> Any:
        if self.skip:
            return None  # its caller was cancelled before it started
        return self.ctx.run(self.fn, *self.args)


def _noop() -> None:
    return None


async def hop(conn: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on ``conn``'s worker thread (the ``sqlite3`` connection is
    ``conn._conn`` there); its result or exception. Cancelled: see the module doc."""
    job = _Job(fn, args)
    try:
        return await conn._execute(job)
    except asyncio.CancelledError:
        job.skip = True  # not started yet: it never runs
        # the worker runs its queue in order: the job has settled once a
        # callable queued after it has
        await _settled(conn._execute(_noop))
        raise


async def _settled(coro: Coroutine[Any, Any, Any]) -> None:
    """Await ``coro`` to its end even when this task is cancelled meanwhile
    (errors ignored: the caller raises its own CancelledError)."""
    task = asyncio.ensure_future(coro)
    while not task.done():
        try:
            await asyncio.shield(task)
        except BaseException:
            pass
    if not task.cancelled():
        task.exception()  # retrieved: the cancellation is what the caller sees


class Tap:
    """The item count of the last page a :func:`tapped` flow emitted."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


def tapped(flow: Flow, tap: Tap) -> Flow:
    """``flow`` as is, noting each emitted page's size in ``tap`` (so
    :func:`page` knows where a page ends without reading the next one)."""
    result = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as stop:
            return stop.value
        if type(op) is Emit:
            tap.count = len(op.items)
        result = yield op


def page(items: Iterator[Any], tap: Tap) -> list[Any] | None:
    """The next page of ``items`` (``drive.iterate`` over a :func:`tapped`
    flow), None at the end: one read transaction, never a read of the page
    after it (a consumer that stops early reads nothing more)."""
    for first in items:
        out = [first]
        for _ in range(tap.count - 1):
            out.append(next(items))
        return out
    return None
