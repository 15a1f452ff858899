"""Torn reads: what the driver keeps to run a read flow again (see :mod:`.drive`).

A store whose reads are not one snapshot (Postgres autocommit statements, Redis
commands) can have a delete or prune commit between two statements of one
read: the read found the checkpoint row, then not what it references. The
driver notices a :class:`~threadloom.errors.CorruptBlobError` (a missing blob,
list manifest or diff base) and runs the flow once more from its arguments with
:func:`snapshot_wanted` true.

Ref rows or write rows that vanished (a delete committed between the row
lookup and the refs or writes lookup) cannot be told from channels without a
value or a checkpoint without pending writes. The executors of such stores
catch them instead: write rows are deleted only with their checkpoint row, and
ref rows only with every checkpoint row holding them, so the writes lookup
(which every read sends, a warm re-read included) and the refs lookup both
check that the rows the read found still exist (Postgres: in the same
statement, so the same snapshot; Redis: read right after, in the same
pipeline). A missing row raises ``CorruptBlobError``, which this re-run
answers (postgres/seenrows.py, redis/seenrows.py). A store that reads every
flow in one snapshot (Postgres ``connector.snapshot_reads``, one round trip
more per read) has no torn reads at all.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterator
from contextvars import ContextVar
from types import FunctionType
from typing import Any

__all__ = ["Reread", "Resume", "rebuild", "rebuildable", "run_once", "snapshot_wanted", "tears"]

Flow = Generator[Any, Any, Any]

FLAGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
PLAIN = frozenset({dict, str, bytes, int, float, bool, type(None)})

RUN_ONCE: dict[int, Any] = {}
"""The code objects of the flow functions marked :func:`run_once`, by ``id``
(a code object's own hash walks its constants and names; the dict keeps them
alive, so an id is never reused)."""


def run_once(fn: Any) -> Any:
    """Mark a flow function whose flows the driver must run exactly once: no
    optimistic first run that a refusal would start over (drive.py), no re-run
    of a torn read. For a flow whose second run would not be the same as its
    first, e.g. one that stores what it read on an object passed in (the
    Postgres lease acquire's ``Lease.first``, whose pending writes an optimistic
    run would guess). Returns ``fn`` unchanged."""
    RUN_ONCE[id(fn.__code__)] = fn.__code__
    return fn


def rebuildable(code: Any) -> bool:
    """Whether a flow of ``code`` may be built again from its arguments: not
    marked :func:`run_once`, no closure (its free variables cannot be
    rebuilt), no ``*args``/``**kwargs``."""
    return not (code.co_freevars or code.co_flags & FLAGS or id(code) in RUN_ONCE)


def rebuild(code: Any, globals_: Any, args: dict[str, Any]) -> Flow:
    """A new flow of the generator function ``code`` (with ``globals_``) called
    with ``args`` by name: the one way a flow is built again (:class:`Reread`,
    ``drive._Restart``)."""
    return FunctionType(code, globals_)(**args)


def consumable(value: Any, depth: int) -> bool:
    """Whether ``value`` is, or holds in nested lists/tuples, a one-shot iterator."""
    kind = type(value)
    if kind in PLAIN:
        return False
    if kind is list or kind is tuple:
        if depth:
            for item in value:
                if consumable(item, depth - 1):
                    return True
        return False
    known = _ITERATOR.get(kind)
    if known is None:
        known = isinstance(value, Iterator)
        if value.__class__ is kind:  # (a proxy may claim another class)
            if len(_ITERATOR) >= 512:  # classes made on the fly stay bounded
                _ITERATOR.clear()
            _ITERATOR[kind] = known
    return known


_ITERATOR: dict[type, bool] = {}
"""Whether a type is an :class:`~collections.abc.Iterator` (the ABC check, a
few hundred instructions, ran for every argument of every write flow; it
looks at the class only; a class registered as one later is not seen)."""


SNAPSHOT: ContextVar[bool] = ContextVar("threadloom_snapshot_read", default=False)


def snapshot_wanted() -> bool:
    """Whether the read transaction being opened re-runs a torn read and should
    see one snapshot (an executor reads this when it opens a transaction)."""
    return SNAPSHOT.get()


def tears(executor: Any) -> bool:
    """Whether reads on ``executor`` may see a delete committed mid-read: it (or
    its ``connector``) sets ``torn_reads``. Only those reads pay the ~1 us of
    remembering how to build the flow again."""
    if getattr(executor, "torn_reads", False):
        return True
    return getattr(getattr(executor, "connector", None), "torn_reads", False) is True


def joined(executor: Any) -> bool:
    in_transaction = getattr(executor, "in_transaction", None)
    return in_transaction is not None and bool(in_transaction())


class Reread:
    """A read flow's function and arguments, taken before it starts, to build
    it again after a torn read (cheaper than ``drive._restarter``; the checks it
    makes up front run here only when a read tore)."""

    __slots__ = ("code", "globals", "args")

    def __init__(self, flow: Any) -> None:
        frame = flow.gi_frame
        self.code, self.globals = flow.gi_code, frame.f_globals
        self.args = dict(frame.f_locals)

    def build(self, torn: BaseException, **changes: Any) -> Flow | None:
        """The flow again (None when it cannot be rebuilt), the torn thread's
        cached rows dropped from its ``codec``."""
        if not rebuildable(self.code):
            return None
        if any(inspect.isgenerator(v) or consumable(v, 4) for v in self.args.values()):
            return None
        forget = getattr(self.args.get("codec"), "forget_thread", None)
        if forget is not None:
            forget(getattr(torn, "thread_id", None))
        return rebuild(self.code, self.globals, {**self.args, **changes})


class Resume:
    """Where a lazy read stands, to go on after a torn page: the flow is built
    again (its pages then each one snapshot), the items up to the last one
    yielded are skipped by their place in the order (``list`` is newest first),
    and its ``limit`` is counted here (what was skipped does not count)."""

    __slots__ = ("again", "last", "mark", "count", "cap", "snapshot")

    def __init__(self, flow: Flow) -> None:
        self.again = Reread(flow)
        self.last: Any = None
        self.mark: tuple[str, str, str] | None = None  # skip items at or before this place
        self.count, self.cap, self.snapshot = 0, None, False

    def rebuild(self, torn: BaseException) -> Flow:
        """The flow again; re-raises ``torn`` when a re-run cannot fix it."""
        changes: dict[str, Any] = {}
        if self.count:
            self.mark = _place(self.last)
            limit = self.again.args.get("limit")
            if type(limit) is int:
                self.cap, changes["limit"] = limit, None
        flow = None
        if not self.snapshot and (not self.count or self.mark is not None):
            flow = self.again.build(torn, **changes)
        if flow is None:
            raise torn
        self.snapshot = True
        return flow

    def fresh(self, item: Any) -> bool:
        """Whether to yield ``item`` (False: yielded before the re-run)."""
        if self.mark is not None:
            place = _place(item)
            if place is not None and place >= self.mark:
                return False
            self.mark = None  # past it: the rest is new
        self.count += 1
        self.last = item
        return True


def _place(item: Any) -> tuple[str, str, str] | None:
    """A listed checkpoint's place in ``list``'s order (checkpoint id, thread, namespace)."""
    conf = (getattr(item, "config", None) or {}).get("configurable") or {}
    cid = conf.get("checkpoint_id")
    if cid is None:
        return None
    return (cid, conf.get("thread_id", ""), conf.get("checkpoint_ns", ""))
