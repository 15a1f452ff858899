"""The async persister: saves in the run's task (``sync``/``exit``) or in one
drain task (``async``), in order (see :mod:`threadloom.pregel.persist`)."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from threadloom.errors import SerializationError
from threadloom.pregel.persist import _CLOSE_WAIT, MAX_PENDING, _Buffer, apart

__all__ = ["AsyncPersister"]


class AsyncPersister(_Buffer):
    """Async twin: ``aput_step`` (or ``aput_writes``/``aput``) run by one drain task, in order."""

    def __init__(self, saver: Any, durability: str, max_pending: int = MAX_PENDING) -> None:
        self._setup(saver, durability, True)
        self._holds = durability == "sync" and self._steps  # as SyncPersister
        self._drainer: asyncio.Task[None] | None = None
        self._max = max_pending
        self._loop = asyncio.get_running_loop()  # the run's: where its saves may run
        # one drain at a time: the drain task, the run's own (sync/exit) and a
        # close's or a stopped run's last save would otherwise take the same steps
        self._draining = asyncio.Lock()

    def send_held(self) -> None:
        """Queue a held input checkpoint, alone; the next ``throttle()`` saves it."""
        held, self._held = self._held, None
        if held is not None:
            self._queue.append(held)

    def _submit(self, op: tuple[list[Any], Any]) -> None:
        """Queue a save. ``async`` durability: a drain task runs it in the background.
        ``sync``/``exit``: the driver's next ``throttle()``/``flush()`` runs it in the
        run's own task (no task per save, and the lease fence then counts as the
        run's own for the step boundary check). A held input checkpoint goes first:
        the drain sends both in one ``aput_steps``."""
        self.send_held()
        self._queue.append(op)
        if not self.inline and (self._drainer is None or self._drainer.done()):
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    async def _call_all(self, steps: list[tuple[list[Any], Any]]) -> None:
        """:meth:`SyncPersister._call_all`'s twin."""
        if len(steps) == 1:
            await self._call(*steps[0])
        elif not self._steps:
            await self._apart(steps, False)
        else:
            try:
                await self.saver.aput_steps(steps, **self._release(steps[-1][1]))
            except SerializationError:
                await self._apart(steps, False)

    async def _call(self, writes: list[Any], checkpoint: Any) -> None:
        try:
            await self._call_once(writes, checkpoint)
        except SerializationError:
            await self._apart([(writes, checkpoint)], True)

    async def _apart(self, steps: list[tuple[list[Any], Any]], tried: bool) -> None:
        """:meth:`SyncPersister._apart`'s twin."""
        walk, failed = apart(steps, tried), None
        while True:
            try:
                piece = walk.send(failed)
            except StopIteration:
                return
            try:
                await self._call_once(*piece)
                failed = None
            except SerializationError as exc:
                failed = exc

    async def _call_once(self, writes: list[Any], checkpoint: Any) -> None:
        saver = self.saver
        if self._step:
            await saver.aput_step(writes, checkpoint, **self._release(checkpoint))
            return
        for w in writes:
            await (saver.aput_writes(*w) if self._task_path else saver.aput_writes(*w[:3]))
        if checkpoint is not None:
            await saver.aput(*checkpoint)

    async def _drain(self) -> None:
        async with self._draining:
            await self._drain_queue()

    async def _drain_queue(self) -> None:
        while self._queue:
            n, steps = self._take()
            try:
                if self._error is None:
                    await self._call_all(steps)
            except asyncio.CancelledError:
                # The task running the save was cancelled (the run itself, for
                # sync/exit durability): keep the saves queued so the flush at
                # exit sends them again. A save is one transaction, so it either
                # rolled back or committed, and saving the same checkpoint and
                # writes twice stores them once.
                raise
            except BaseException as exc:
                self._error = exc
            for _ in range(n):
                self._queue.popleft()

    async def asave_queued(self, deadline: float | None = None) -> None:
        """Async twin of :meth:`SyncPersister.save_queued`: on the run's loop, wait
        for the drain task, then save what is still queued (queued after it
        ended, or the run's own save a cancel cut short: the one save of
        ``durability="exit"``); from another loop running in another thread, wait
        for the drain task until ``deadline``."""
        if self._loop is not asyncio.get_running_loop():
            drainer = self._drainer
            if drainer is not None and not drainer.done():
                await asyncio.to_thread(self.save_queued, deadline)
            return
        drainer = self._drainer
        if drainer is not None and not drainer.done():
            try:
                await asyncio.shield(drainer)
            except Exception:  # the drain keeps its failure for the run
                pass
        if self._queue and self._error is None:
            await self._drain()

    def save_queued(self, deadline: float | None = None) -> None:
        """A close from another thread than the run's loop: wait for the drain
        task there, until ``deadline`` (``time.monotonic()``; default: 10 s from
        now; a close of many runs shares one). On the run's own loop nothing can
        drain while the close blocks it: an async close (``aclose``) saves the
        queue instead."""
        drainer = self._drainer
        if drainer is None or drainer.done() or sys.is_finalizing():
            return
        loop = drainer.get_loop()
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is here or loop.is_closed() or not loop.is_running():
            return
        if deadline is None:
            deadline = time.monotonic() + _CLOSE_WAIT
        done = asyncio.run_coroutine_threadsafe(self.asave_queued(), loop)
        try:
            done.result(max(0.0, deadline - time.monotonic()))
        except Exception:  # a timeout or the drain's failure: the run reports its own
            pass

    async def throttle(self) -> None:
        """Wait for the submitted saves: all of them (sync), or enough to get under
        the bound (async). Buffered writes stay buffered."""
        if self.inline or len(self._queue) > self._max:
            await self._wait()

    async def _wait(self) -> None:
        if self._drainer is not None and not self._drainer.done():
            await asyncio.shield(self._drainer)
        while self._queue:  # inline saves, or submitted after the drainer finished
            await self._drain()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    async def flush(self) -> None:
        """Save the buffered writes and wait for every save; raise the first failure."""
        self.send_held()
        self.save_writes()
        await self._wait()
