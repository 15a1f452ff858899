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
cancelled. A job cancelled before the worker started it is skipped; a flow
(:func:`run_flow`) whose caller is cancelled while it runs stops before its
next op and rolls back, as when each statement was an ``await`` of its own. A
cancel landing after its last op (the flow's own bookkeeping, the COMMIT, the
result on its way back) finds it committed. Either way the cancelled caller sees ``CancelledError`` only
once the job is settled, so the connection is never left mid-transaction while
the loop goes on (a statement queued after the job runs after it).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.drive import Emit, Flow
from threadloom.errors import ConfigError, StorageError

__all__ = ["check", "hop", "page", "run_flow", "tapped"]


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
    """The callable queued for the worker, run in the caller's context (context
    variables); skipped when its caller was cancelled before it started.

    Whether the caller is cancelled is read on the worker thread: its task's
    ``cancelling()`` count (Python 3.11+) rises the moment ``cancel()`` is
    called, before the loop delivers the CancelledError (which may take the
    whole flow's time); ``caller_cancelled`` is also set when it is delivered
    (the only signal on 3.10). The task is suspended on this job meanwhile, so
    a cancel requested then is delivered to it.
    """

    __slots__ = ("fn", "args", "ctx", "caller_cancelled", "task", "base")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args
        self.ctx = contextvars.copy_context()
        self.caller_cancelled = False
        task = asyncio.current_task()
        self.task = task if hasattr(task, "cancelling") else None
        self.base = self.task.cancelling() if self.task is not None else 0

    @property
    def cancelled(self) -> bool:
        if self.caller_cancelled:
            return True
        return self.task is not None and self.task.cancelling() > self.base

    def __call__(self) -> Any:
        if self.cancelled:
            return None  # its caller was cancelled before it started
        try:
            return self.ctx.run(self.fn, *self.args)
        except StopIteration as exc:
            # a future cannot hold StopIteration: aiosqlite's set_exception would
            # fail on the loop and leave the caller waiting forever
            raise RuntimeError(f"an exhausted iterator escaped a SQLite job: {exc!r}") from exc


class Abandoned(Exception):
    """Raised into a flow's transaction when its caller was cancelled: the
    transaction rolls back (nobody sees this: the caller has CancelledError)."""


def _noop() -> None:
    return None


async def hop(conn: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on ``conn``'s worker thread (the ``sqlite3`` connection is
    ``conn._conn`` there); its result or exception. Cancelled: see the module doc."""
    return await _submit(conn, _Job(fn, args))


async def run_flow(conn: Any, flow: Flow, executor: Any, write: bool) -> Any:
    """``drive.run(flow, executor, write)`` in one hop, rolled back when its
    caller is cancelled before the flow's last op ran (module doc)."""
    job = _Job(drive.run, ())
    job.args = (_watched(flow, job), executor, write)
    return await _submit(conn, job)


def _watched(flow: Flow, job: _Job) -> Flow:
    """``flow``, stopped with :class:`Abandoned` before its next op once
    ``job``'s caller is cancelled: left at a ``yield`` as when a cancel landed
    on an op's ``await``. Never after its last op: a flow updates the codec's
    caches once its ops answered (``puts.put_flow``), and those must describe
    what is committed."""

    def check(op: Any) -> None:
        if job.cancelled:
            raise Abandoned

    return (yield from _relayed(flow, check))


async def _submit(conn: Any, job: _Job) -> Any:
    try:
        return await conn._execute(job)
    except ValueError as exc:
        if getattr(conn, "_connection", None) is not None and getattr(conn, "_running", True):
            raise
        raise StorageError(f"the aiosqlite connection is closed ({exc})") from exc
    except asyncio.CancelledError:
        job.caller_cancelled = True  # not started: never runs; running: rolls back
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

    def note(op: Any) -> None:
        if type(op) is Emit:
            tap.count = len(op.items)

    return (yield from _relayed(flow, note))


def _relayed(flow: Flow, before: Callable[[Any], None]) -> Flow:
    """``flow``'s ops passed on unchanged, ``before(op)`` called on each first
    (it may raise to stop the flow there); the flow's answers passed back."""
    result = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as stop:
            return stop.value
        before(op)
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
