"""This process's own run leases, so an acquire can wait for a local run that is only finishing.

``async for chunk in graph.astream(...): break`` drops the stream generator
without closing it. asyncio's async-generator finalizer then schedules its
``aclose()`` as a task: only when that task runs does the run save what it
owes and release the thread's lease. A run started right after the ``break``,
in the same task, used to find the thread held and (``multitask_strategy=
"reject"``) raise ``ThreadBusyError``, although nothing could write the thread
any more. LangGraph, with no leases, lets that run in.

Every lease a root run of this process holds is recorded here by its token,
with two ways to tell that its run will take no further step:

* ``gen``: a weak reference to the run's async stream generator; dead once the
  caller dropped it (no one can iterate it again, it can only be closed);
* ``ending``: the run stopped iterating its driver (it finished, failed or was
  closed) and is saving its last state and releasing.

An acquire that finds its thread held under the token of such a holder waits
(bounded) for that release and tries once more, unless the holder is an async
run whose event loop stopped or closed (``loop.run_until_complete(main())``
where ``main`` left its stream early): its ``aclose()`` task would only run if
that loop ran again, so the waiter is answered at once (a closed loop's entry is
forgotten). The loop is known by a weak reference, so the record never keeps a
caller's loop alive. Any other holder, a stream
still referenced and not closed, a concurrent ``invoke``, a run of another
process, is answered by the strategy as before: one writer per thread holds.

A saver closing the connection it opened (``with Saver.from_conn_string(...)``
left while a stream is still open) first lets its finishing runs save and
release (:func:`settle_saver`), then releases every live run's lease itself
(:func:`close_runs`): closed under them, those runs could not release, and the
thread stayed held for the lease's TTL. Such a run's later saves raise
``SaverClosedError`` naming its thread; its own release is then a no-op. A run
acquiring meanwhile is waited for (:func:`enter`) or refused.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "Holding",
    "afinishing",
    "asettle",
    "asettle_saver",
    "await_release",
    "drop",
    "finishing",
    "hold",
    "settle",
    "settle_saver",
    "wait",
    "aclose_runs",  # noqa: F822 (lazy: module __getattr__)
    "close_runs",  # noqa: F822 (lazy: module __getattr__)
    "enter",  # noqa: F822 (lazy: module __getattr__)
    "leave",  # noqa: F822 (lazy: module __getattr__)
]

_HELD: dict[str, Holding] = {}
_THREADS: dict[str, list[Holding]] = {}  # thread id -> local holders (any saver)
_SETTLE_TIMEOUT = 5.0  # a read waits at most this long for a dropped run's last save
_LOCK = threading.Lock()  # orders a release against a sync waiter creating its event
_FAST_TURNS = 8  # loop turns first: a dropped generator's aclose() is already scheduled
_POLL_MAX = 0.05


class Holding:
    """One lease held by a root run of this process."""

    __slots__ = (
        "token",
        "thread",
        "saver",
        "lease",
        "_loop",
        "gen",
        "ending",
        "released",
        "_event",
    )

    def __init__(self) -> None:
        self.token = ""
        self.thread: str | None = None
        self.saver: Callable[[], Any] | None = None  # (weakly) the saver it writes through
        # (weakly: its renewal task would keep a closed loop alive) the run's
        # Lease, which the saver's close releases
        self.lease: Callable[[], Any] | None = None
        self._loop: Callable[[], asyncio.AbstractEventLoop | None] | None = None  # async runs
        self.gen: weakref.ref[Any] | None = None  # the async run's stream generator
        self.ending = False
        self.released = False
        self._event: threading.Event | None = None  # made by a sync waiter only (~5 us)

    def finishing(self) -> bool:
        """True once the run can take no further step (closing, or dropped)."""
        return self.ending or (self.gen is not None and self.gen() is None)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The async run's event loop (None for a sync run, or once collected)."""
        return None if self._loop is None else self._loop()

    def stranded(self) -> bool:
        """True when an async run's loop is collected, closed or not running:
        nothing will run its ``aclose()`` task (if ever) before that loop runs
        again, so waiting for its release would only burn the timeout."""
        if self._loop is None:
            return False
        loop = self._loop()
        return loop is None or loop.is_closed() or not loop.is_running()


def hold(
    holding: Holding,
    token: str,
    loop: asyncio.AbstractEventLoop | None = None,
    thread: str | None = None,
    saver: Any = None,
    lease: Any = None,
) -> None:
    """Record that ``holding``'s run now holds the lease ``token`` (of ``thread``,
    through ``saver``; ``lease``: its Lease, which that saver's close releases)."""
    holding.token = token
    if lease is not None:
        holding.lease = weakref.ref(lease)
    if saver is not None:
        try:
            holding.saver = weakref.ref(saver)
        except TypeError:
            holding.saver = None
    if thread is not None:
        holding.thread = thread
        _THREADS.setdefault(thread, []).append(holding)
    if loop is not None:
        try:
            holding._loop = weakref.ref(loop)
        except TypeError:  # a loop class without weak references
            holding._loop = lambda: loop
    _HELD[token] = holding


def drop(holding: Holding) -> None:
    """The run released its lease (or gave up on it): wake whoever waits."""
    _HELD.pop(holding.token, None)
    _forget_thread(holding)
    with _LOCK:
        holding.released = True
        event = holding._event
    if event is not None:
        event.set()


def finishing(token: str) -> Holding | None:
    """The local holder of ``token`` if its run only has its release left, else None."""
    holding = _HELD.get(token)
    if holding is None or not holding.finishing() or _stranded(holding):
        return None
    return holding


def _stranded(holding: Holding) -> bool:
    """:meth:`Holding.stranded`; an entry whose loop is gone or closed can never
    be released by its run, so it leaves the registry too."""
    if not holding.stranded():
        return False
    loop = holding.loop
    if loop is None or loop.is_closed():
        _HELD.pop(holding.token, None)
    return True


async def afinishing(token: str) -> Holding | None:
    """:func:`finishing`, once the loop has had a few turns when the holder is a
    live run on this very loop: a dropped generator that wrapped the run's
    stream (``async for c in graph.astream(...): yield c``) is closed by the
    loop's finalizer in a task of its own, which only then drops the stream."""
    holding = _HELD.get(token)
    if holding is None or _stranded(holding):
        return None
    if not holding.finishing() and holding.loop is asyncio.get_running_loop():
        for _ in range(_FAST_TURNS):
            await asyncio.sleep(0)
            if holding.finishing():
                break
    return holding if holding.finishing() else None


def wait(holding: Holding, timeout: float) -> bool:
    """Block until ``holding`` released, at most ``timeout`` seconds. False at
    once when the holder's event loop is this thread's running loop (blocking
    it would keep the holder's ``aclose()`` from ever running), or as soon as
    that loop is not running (then nothing runs it)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    loop = holding.loop
    if loop is not None and loop is running:
        return False
    with _LOCK:
        if holding.released:
            return True
        if holding._event is None:
            holding._event = threading.Event()
        event = holding._event
    if holding._loop is None:  # a sync run: its release sets the event
        return event.wait(max(0.0, timeout))
    deadline = time.monotonic() + max(0.0, timeout)
    while not _stranded(holding):  # the loop (another thread's) may stop meanwhile
        left = deadline - time.monotonic()
        if event.wait(max(0.0, min(left, _POLL_MAX))):
            return True
        if left <= _POLL_MAX:
            return False
    return holding.released


async def await_release(holding: Holding, timeout: float) -> bool:
    """Async twin of :func:`wait`: lets the loop run (the holder's ``aclose()``
    task usually sits on this very loop) until the release, at most ``timeout``."""
    deadline = time.monotonic() + max(0.0, timeout)
    turns, delay = 0, 0.001
    while not holding.released:
        if time.monotonic() >= deadline or _stranded(holding):
            return False
        if turns < _FAST_TURNS:
            turns += 1
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(delay)
            delay = min(_POLL_MAX, delay * 2)
    return True


def _forget_thread(holding: Holding) -> None:
    holders = _THREADS.get(holding.thread) if holding.thread is not None else None
    if holders is not None:
        try:
            holders.remove(holding)
        except ValueError:  # another thread forgot it first
            pass
        if not holders:
            _THREADS.pop(holding.thread, None)


def _holders(thread_id: Any) -> list[Holding]:
    """This process's holders of ``thread_id`` (any saver: a same-named thread of
    another store costs a read at most a brief wait); holders whose loop is gone
    (nothing will release them) are forgotten."""
    holders = _THREADS.get(str(thread_id)) if _THREADS and thread_id is not None else None
    if not holders:
        return []
    for holding in list(holders):
        if _stranded(holding) and holding.token not in _HELD:  # its loop is closed or gone
            _forget_thread(holding)
    return list(holders)


def settle(thread_id: Any) -> None:
    """Before a read of ``thread_id``'s latest state: when a run of this process
    that holds the thread was dropped or is closing (``for c in graph.stream(...):
    break``), wait (at most a few seconds) for it to save what it streamed, so
    the read shows it. Free when no local run holds the thread."""
    deadline = time.monotonic() + _SETTLE_TIMEOUT
    for holding in _holders(thread_id):
        if finishing(holding.token) is not None:
            wait(holding, deadline - time.monotonic())


def _through(saver: Any) -> list[Holding]:
    """The holders whose run writes through ``saver``."""
    return [h for h in list(_HELD.values()) if h.saver is not None and h.saver() is saver]


def settle_saver(saver: Any) -> None:
    """Before a saver closes: runs of this process that write through it and
    were dropped mid-stream or are finishing (another thread's run ending) get
    to save and release their leases first (at most a few seconds)."""
    deadline = time.monotonic() + _SETTLE_TIMEOUT
    for holding in _through(saver):
        if finishing(holding.token) is not None:
            wait(holding, deadline - time.monotonic())


async def asettle_saver(saver: Any) -> None:
    """Async twin of :func:`settle_saver` (``async for ... break`` inside
    ``async with Saver.from_conn_string(...)``: the dropped stream's ``aclose()``
    task gets to run). Closed under them, such runs could not release, and the
    thread stayed held for the lease's TTL."""
    for holding in _through(saver):
        if await afinishing(holding.token) is not None:
            await await_release(holding, _SETTLE_TIMEOUT)


async def asettle(thread_id: Any) -> None:
    """Async twin of :func:`settle` (lets the loop run the dropped stream's
    ``aclose()``, usually a task on this very loop)."""
    deadline = time.monotonic() + _SETTLE_TIMEOUT
    for holding in _holders(thread_id):
        if await afinishing(holding.token) is not None:
            await await_release(holding, deadline - time.monotonic())


_CLOSING = frozenset({"aclose_runs", "close_runs", "enter", "leave"})


def __getattr__(name: str) -> Any:
    """A saver's close of its runs (closing.py, which imports this module),
    reachable here where the savers always found it; lazily, so importing
    closing.py first is not circular."""
    if name in _CLOSING:
        from threadloom.checkpoint.lease import closing

        return getattr(closing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if hasattr(os, "register_at_fork"):  # a child holds none of its parent's leases
    os.register_at_fork(after_in_child=lambda: (_HELD.clear(), _THREADS.clear()))
