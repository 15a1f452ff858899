"""Between sync and async: an async saver's sync methods, a sync saver's async ones.

``run_sync``: the sync methods of an async saver run the coroutine on the saver's loop.

An async saver's connection belongs to the event loop it was opened on, so
its sync methods (``get_tuple``, ``put``, ... which LangGraph's API also has on
async savers) hand the work to that loop from another thread and wait. Called
*on* that loop, waiting would block the very loop that has to do the work:
LangGraph deadlocks there (issue 7857); we raise :class:`StorageError` saying
to use the ``a*`` methods. Shared by the SQLite, Postgres and Redis async savers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
from collections.abc import Callable, Coroutine
from typing import Any

from threadloom.errors import EventLoopCallError, StorageError

__all__ = ["in_thread", "run_sync"]


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``await asyncio.to_thread(fn, *args)``, except that a cancel returns only
    once ``fn`` has ended.

    A thread cannot be stopped: with plain ``to_thread`` a cancelled caller goes on
    (e.g. gives its thread lease back) while a sync saver's flow still runs in the
    worker, and that flow's acquire can then land after the release, leaving the
    thread leased to nobody until the lease expires. The sync savers' ``a*``
    methods go through here so a ``CancelledError`` means the work is over.
    """
    # a plain future, not a Task: shutdown code that cancels every task (asyncio.run
    # leaving ``main``) must not cancel the waiting below (to_thread is a coroutine,
    # so ensure_future would make it one)
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    work = loop.run_in_executor(None, call)
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await asyncio.wait([work])
        if not work.cancelled():
            work.exception()  # its own outcome is moot now; do not log it as unretrieved
        raise


def run_sync(
    coro: Coroutine[Any, Any, Any],
    loop: asyncio.AbstractEventLoop | None,
    saver: str,
    standalone: bool = False,
) -> Any:
    """Run ``coro`` on ``loop`` (the saver's) from the calling thread and return its result.

    Args:
        coro: the async work (closed unrun when refused).
        loop: the loop the saver was created on (None: created outside any loop).
        saver: the saver's class name, for the error message.
        standalone: when ``loop`` is None or not running, run ``coro`` in a fresh
            loop of this thread (a saver whose connections are not tied to a
            running loop, e.g. created before ``asyncio.run``); otherwise refuse.

    Raises:
        StorageError: called on the saver's own loop (it would deadlock), or the
            loop is not running and ``standalone`` is False.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None and (loop is None or running is loop):
        coro.close()
        raise EventLoopCallError(
            f"{saver}'s sync methods were called from its own event loop, which would"
            " deadlock: call them from another thread while its event loop runs, or use"
            " the async methods (await saver.aget_tuple(...), saver.alist(...),"
            " await saver.aput(...))"
        )
    if loop is None or not loop.is_running():
        if standalone:
            return asyncio.run(coro)
        coro.close()
        raise EventLoopCallError(
            f"{saver}'s sync methods must be called from another thread while its event"
            " loop runs; otherwise use the async methods (await saver.aget_tuple(...))"
        )
    # the future exists before the work is handed over, so a Ctrl-C arriving at any
    # point after that (even before the waiting starts) is seen by the handler below
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    call = _Call(saver)
    try:
        loop.call_soon_threadsafe(_start, coro, loop, future, call)
        return _result(future, loop, coro, call)
    except BaseException as exc:
        if isinstance(exc, Exception) or future.done():
            raise
        # Ctrl-C stops only this thread's waiting: cancel the work on the loop and
        # let it end before the caller reacts (a lease acquire still running there
        # would otherwise commit after the caller gave its lease back)
        loop.call_soon_threadsafe(_stop, coro, future, call)
        while not concurrent.futures.wait([future], _SLICE).done and loop.is_running():
            pass
        raise


_SLICE = 0.25  # seconds between looks at whether the saver's loop still runs


class _Call:
    """One bridged call: its task once started, and whether the caller stopped it."""

    __slots__ = ("saver", "stopped", "task")

    def __init__(self, saver: str) -> None:
        self.saver = saver
        self.task: asyncio.Task[Any] | None = None
        self.stopped = False


def _result(
    future: concurrent.futures.Future[Any],
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, Any],
    call: _Call,
) -> Any:
    """Wait for the work's outcome, unless the saver's loop stops first (closed
    while shutting down): nothing would ever run it, and waiting would hang."""
    while True:
        try:
            return future.result(_SLICE)
        except concurrent.futures.TimeoutError:
            if loop.is_running() or future.done():
                continue
        if call.task is None and future.cancel():  # ``_start`` closes it if ever run
            if not loop.is_running():  # and it cannot be running now: close it here
                coro.close()
            raise StorageError(
                f"{call.saver}'s event loop stopped before it ran the call: nothing was done"
            ) from None
        raise StorageError(
            f"{call.saver}'s event loop stopped while it ran the call: its outcome is unknown"
        ) from None


def _start(
    coro: Coroutine[Any, Any, Any],
    loop: asyncio.AbstractEventLoop,
    future: concurrent.futures.Future[Any],
    call: _Call,
) -> None:
    """On the loop: run ``coro`` as a task whose outcome completes ``future``."""
    if future.cancelled():  # the caller gave up: the loop had stopped (``_result``)
        coro.close()
        return
    call.task = loop.create_task(coro)
    call.task.add_done_callback(lambda done: _settle(done, future, call))


def _settle(task: asyncio.Task[Any], future: concurrent.futures.Future[Any], call: _Call) -> None:
    if future.done():  # the caller already gave up on it
        return
    if task.cancelled():
        if call.stopped:  # the caller's own Ctrl-C (``_stop``)
            _cancel(future)
        else:  # e.g. asyncio.run ending cancels every task of its loop
            future.set_exception(
                StorageError(
                    f"{call.saver}'s event loop cancelled the call (shutting down?): its outcome"
                    " is unknown"
                )
            )
    elif (exc := task.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(task.result())


def _stop(
    coro: Coroutine[Any, Any, Any],
    future: concurrent.futures.Future[Any],
    call: _Call,
) -> None:
    """On the loop: cancel the bridged task. Callbacks run in the order they were
    handed over, so if ``_start`` has not run by now it never will (the Ctrl-C
    cut the hand-over itself): close the coroutine unrun and end the waiting."""
    if call.task is not None:
        call.stopped = True
        call.task.cancel()
    elif not future.done():
        coro.close()
        _cancel(future)


def _cancel(future: concurrent.futures.Future[Any]) -> None:
    # cancel() alone wakes result() but not concurrent.futures.wait()'s waiters
    future.cancel()
    future.set_running_or_notify_cancel()
