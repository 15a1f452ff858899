"""Drivers: run a storage flow against an executor, sync or async.

A flow is a generator that yields :mod:`.ops` operations and receives their
results (or yields :class:`Emit` to hand a value to the caller, for lazy
``list``). Executors implement ``execute(op)`` (sync) or ``aexecute(op)``
(async) and ``transaction(write)`` / ``atransaction(write)`` context managers.

An executor may also offer ``optimistic_transaction(write)`` /
``aoptimistic_transaction(write)`` and ``in_transaction()``: a write flow then
runs first in a transaction where the executor answers rare-case reads itself
and lets the store validate them (Postgres: one round trip per write). When the
store refuses, the executor raises :class:`OptimisticConflict` and the driver
runs the flow again, rebuilt from its arguments, in a normal transaction.
A flow that must not run twice (its function marked :func:`run_once`) skips
the optimistic run and runs once, in a normal transaction.

Torn reads: a store whose reads are not one snapshot (Postgres autocommit
statements, Redis commands) can have a delete or prune commit between two
statements of one read, so the read finds the checkpoint row but not the blobs
or diff base it references (:class:`~threadloom.errors.CorruptBlobError`). Such
a read runs once more from its arguments, the thread's cached rows dropped,
with :func:`snapshot_wanted` true while its transactions open: an executor
that can (Postgres: REPEATABLE READ READ ONLY) gives that run one snapshot, so
what is still missing then is real corruption and is raised. The common read
costs nothing more (no BEGIN/COMMIT round trip); see :mod:`.rereads` for
what this does not catch.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Generator, Iterator
from types import GeneratorType
from typing import Any, NamedTuple

from threadloom.checkpoint.storage.rereads import (
    PLAIN,
    SNAPSHOT,
    Reread,
    Resume,
    consumable,
    joined,
    rebuild,
    rebuildable,
    run_once,
    snapshot_wanted,
    tears,
)
from threadloom.errors import CorruptBlobError

__all__ = [
    "Emit",
    "OptimisticConflict",
    "run",
    "arun",
    "iterate",
    "aiterate",
    "run_once",
    "snapshot_wanted",
]

Flow = Generator[Any, Any, Any]


class Emit(NamedTuple):
    """Yielded by a flow to produce a page of result items (not an operation)."""

    items: list[Any]


class OptimisticConflict(Exception):
    """Raised by an executor when a transaction it ran optimistically (answering
    some reads without asking, and queueing statements that fail in the database
    when the answer was wrong) failed that validation. Nothing was kept; the
    driver runs the flow again in a normal transaction.

    ``threads``: the threads the failed run wrote to (their process caches may
    describe rows that were rolled back and are forgotten).
    """

    def __init__(self, threads: frozenset[str] = frozenset()) -> None:
        super().__init__("an optimistic transaction was refused by the store; run again")
        self.threads = threads


def _step(flow: Flow, executor: Any) -> Any:
    result = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as stop:
            return stop.value
        result = executor.execute(op)


async def _astep(flow: Flow, executor: Any) -> Any:
    result = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as stop:
            return stop.value
        result = await executor.aexecute(op)


class _Restart:
    """Builds a flow again from the function and arguments it was made of (an
    argument that was itself a flow, e.g. a wrapper's inner flow, is rebuilt too)."""

    __slots__ = ("code", "globals", "args", "inner")

    def __init__(self, code: Any, globals_: Any, args: dict[str, Any], inner: Any) -> None:
        self.code, self.globals, self.args, self.inner = code, globals_, args, inner

    def __call__(self) -> Flow:
        args = dict(self.args)
        for name, again in self.inner:
            args[name] = again()
        return rebuild(self.code, self.globals, args)

    @property
    def codecs(self) -> list[Any]:
        """The ``codec`` arguments of this flow and its inner flows."""
        return [self.args.get("codec"), *(c for _, again in self.inner for c in again.codecs)]


if sys.version_info >= (3, 11):

    def _started(flow: Any, frame: Any) -> bool:
        return flow.gi_suspended

else:  # Python 3.10 has no gi_suspended: a generator not yet started is at f_lasti -1

    def _started(flow: Any, frame: Any) -> bool:
        return frame.f_lasti != -1


def _restarter(flow: Any) -> _Restart | None:
    """A way to build ``flow`` again from its arguments (None when it cannot be:
    already started, marked :func:`run_once`, a closure, or not a plain
    generator function's). None means the driver runs it once, in a normal
    transaction.

    Why here: callers hand the driver a generator, and an optimistic run that
    the store refuses has to start over from the same arguments.
    """
    if type(flow) is not GeneratorType:
        return None
    code = flow.gi_code
    if not rebuildable(code):
        return None
    frame = flow.gi_frame  # not yet started: neither running, suspended nor closed
    if frame is None or flow.gi_running or _started(flow, frame):
        return None
    local = frame.f_locals
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    args = {name: local[name] for name in names}
    inner = []
    for name, value in args.items():
        if type(value) in PLAIN:
            continue
        if type(value) is GeneratorType:
            again = _restarter(value)
            if again is None:
                return None
            inner.append((name, again))
        elif consumable(value, 4):  # a second run would see it exhausted
            return None
    return _Restart(code, frame.f_globals, args, inner)


def _forget(restart: Any, conflict: OptimisticConflict) -> None:
    """Drop what the refused run cached about its threads (the flows' ``codec``)."""
    for codec in restart.codecs:
        forget = getattr(codec, "forget_thread", None)
        if forget is not None:
            for thread_id in conflict.threads:
                forget(thread_id)


def _optimistic(executor: Any, flow: Flow, write: bool, name: str) -> Any:
    """(begin, restart) when the executor offers an optimistic transaction for
    this flow, else (None, None)."""
    begin = getattr(executor, name, None) if write else None
    if begin is not None and executor.in_transaction():
        begin = None  # a flow run from a flow: a refusal restarts the outermost one
    restart = _restarter(flow) if begin is not None else None
    return (begin, restart) if restart is not None else (None, None)


def run(flow: Flow, executor: Any, write: bool = False) -> Any:
    """Run ``flow`` to completion in one transaction; return its return value.

    An executor offering ``optimistic_transaction`` (and ``in_transaction()``)
    runs a write flow in it first; when it raises :class:`OptimisticConflict`
    the flow runs again, from its arguments, in a normal transaction.
    """
    if not write and tears(executor) and not joined(executor):
        return _read(flow, executor)
    begin, restart = _optimistic(executor, flow, write, "optimistic_transaction")
    if begin is not None:
        try:
            with begin(write):
                return _step(flow, executor)
        except OptimisticConflict as conflict:
            _forget(restart, conflict)
            flow = restart()
    with executor.transaction(write):
        return _step(flow, executor)


async def arun(flow: Flow, executor: Any, write: bool = False) -> Any:
    """Async twin of :func:`run`."""
    if not write and tears(executor) and not joined(executor):
        return await _aread(flow, executor)
    begin, restart = _optimistic(executor, flow, write, "aoptimistic_transaction")
    if begin is not None:
        try:
            async with begin(write):
                return await _astep(flow, executor)
        except OptimisticConflict as conflict:
            _forget(restart, conflict)
            flow = restart()
    async with executor.atransaction(write):
        return await _astep(flow, executor)


def _read(flow: Flow, executor: Any) -> Any:
    """A read flow on a store where reads may tear (see the module doc)."""
    again = Reread(flow)
    try:
        with executor.transaction(False):
            return _step(flow, executor)
    except CorruptBlobError as torn:
        flow = again.build(torn)  # type: ignore[assignment]
        if flow is None:
            raise
    token = SNAPSHOT.set(True)
    try:
        with executor.transaction(False):
            return _step(flow, executor)
    finally:
        SNAPSHOT.reset(token)


async def _aread(flow: Flow, executor: Any) -> Any:
    """Async twin of :func:`_read`."""
    again = Reread(flow)
    try:
        async with executor.atransaction(False):
            return await _astep(flow, executor)
    except CorruptBlobError as torn:
        flow = again.build(torn)  # type: ignore[assignment]
        if flow is None:
            raise
    token = SNAPSHOT.set(True)
    try:
        async with executor.atransaction(False):
            return await _astep(flow, executor)
    finally:
        SNAPSHOT.reset(token)


def _pages(flow: Flow, executor: Any, snapshot: bool) -> Iterator[Any]:
    """:func:`iterate`'s loop, pages opened as snapshots when ``snapshot``."""
    result = None
    while True:
        token = SNAPSHOT.set(snapshot)
        try:
            with executor.transaction(False):
                while True:
                    try:
                        op = flow.send(result)
                    except StopIteration:
                        return
                    if type(op) is Emit:
                        break
                    result = executor.execute(op)
        finally:
            SNAPSHOT.reset(token)
        result = None
        yield from op.items


def iterate(flow: Flow, executor: Any) -> Iterator[Any]:
    """Run a read flow lazily, yielding what it emits; one transaction per page.

    The flow's operations between two emits run in one read transaction, so
    a consumer that stops early never holds a transaction open. On a store
    whose reads may tear, a torn page re-runs the flow (see :class:`Resume`).
    """
    if tears(executor) and not joined(executor):
        yield from _resumed(flow, executor)
        return
    yield from _pages(flow, executor, False)


def _resumed(flow: Flow, executor: Any) -> Iterator[Any]:
    resume = Resume(flow)
    while True:
        try:
            for item in _pages(flow, executor, resume.snapshot):
                if resume.fresh(item):
                    yield item
                    if resume.cap is not None and resume.count >= resume.cap:
                        return
            return
        except CorruptBlobError as torn:
            flow = resume.rebuild(torn)


async def aiterate(flow: Flow, executor: Any) -> AsyncIterator[Any]:
    """Async twin of :func:`iterate`."""
    if tears(executor) and not joined(executor):
        async for item in _aresumed(flow, executor):
            yield item
        return
    async for item in _apages(flow, executor, False):
        yield item


async def _apages(flow: Flow, executor: Any, snapshot: bool) -> AsyncIterator[Any]:
    """Async twin of :func:`_pages`."""
    result = None
    while True:
        token = SNAPSHOT.set(snapshot)
        try:
            async with executor.atransaction(False):
                while True:
                    try:
                        op = flow.send(result)
                    except StopIteration:
                        return
                    if type(op) is Emit:
                        break
                    result = await executor.aexecute(op)
        finally:
            SNAPSHOT.reset(token)
        result = None
        for item in op.items:
            yield item


async def _aresumed(flow: Flow, executor: Any) -> AsyncIterator[Any]:
    resume = Resume(flow)
    while True:
        try:
            async for item in _apages(flow, executor, resume.snapshot):
                if resume.fresh(item):
                    yield item
                    if resume.cap is not None and resume.count >= resume.cap:
                        return
            return
        except CorruptBlobError as torn:
            flow = resume.rebuild(torn)
