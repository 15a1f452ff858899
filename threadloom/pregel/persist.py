"""[5] Getting checkpoints and writes to the saver, in order, per durability mode.

- ``sync``: every save runs inline, before the loop moves on.
- ``async``: saves go to a FIFO drained by one pool thread (or one asyncio
  task), so they reach the saver in order while the next step runs. The queue
  is bounded: producers wait when ``max_pending`` saves are outstanding, so a
  slow saver cannot grow memory without limit.
- ``exit``: the loop submits nothing until it exits.

The first error a background save raises is re-raised by ``flush()``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import deque
from typing import Any

from threadloom.pregel.pool import POOL

__all__ = ["AsyncPersister", "SyncPersister", "accepts_task_path"]

MAX_PENDING = 16


_TASK_PATH: dict[Any, bool] = {}  # plain function of a saver method -> its answer


def accepts_task_path(saver: Any, method: str = "put_writes") -> bool:
    """Whether the saver's ``put_writes`` takes a 4th ``task_path`` argument.

    Asked once per run; ``inspect.signature`` costs as much as several saves, so the
    answer is kept per underlying function (a bound method's ``__func__``).
    """
    bound = getattr(saver, method)
    func = getattr(bound, "__func__", None)
    if func is not None and func in _TASK_PATH:
        return _TASK_PATH[func]
    try:
        params = inspect.signature(bound).parameters
    except (TypeError, ValueError):
        return False
    answer = "task_path" in params or len(params) >= 4
    if func is not None:
        _TASK_PATH[func] = answer
    return answer


class SyncPersister:
    """Runs saver calls inline (``sync``) or on a background FIFO (``async``)."""

    def __init__(self, saver: Any, durability: str, max_pending: int = MAX_PENDING) -> None:
        self.saver = saver
        self.inline = durability != "async"
        self._task_path = accepts_task_path(saver)
        self._queue: deque[tuple[Any, ...]] = deque()
        self._cond = threading.Condition()
        self._draining = False
        self._max = max_pending
        self._error: BaseException | None = None

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> None:
        self._submit(("put", config, checkpoint, metadata, new_versions))

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str) -> None:
        self._submit(("writes", config, writes, task_id, task_path))

    def _call(self, op: tuple[Any, ...]) -> None:
        if op[0] == "put":
            self.saver.put(*op[1:])
        elif self._task_path:
            self.saver.put_writes(*op[1:])
        else:
            self.saver.put_writes(*op[1:4])

    def _submit(self, op: tuple[Any, ...]) -> None:
        if self.inline:
            self._call(op)
            return
        with self._cond:
            while len(self._queue) >= self._max and self._error is None:
                self._cond.wait()
            self._queue.append(op)
            if not self._draining:
                self._draining = True
                POOL.submit(self._drain)

    def _drain(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._draining = False
                    self._cond.notify_all()
                    return
                op = self._queue[0]
            try:
                if self._error is None:
                    self._call(op)
            except BaseException as exc:
                self._error = exc
            with self._cond:
                self._queue.popleft()
                self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every submitted save reached the saver; raise the first failure."""
        if not self.inline:
            with self._cond:
                while self._queue or self._draining:
                    self._cond.wait()
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class AsyncPersister:
    """Async twin: ``aput``/``aput_writes`` run by one drain task, in order."""

    def __init__(self, saver: Any, durability: str, max_pending: int = MAX_PENDING) -> None:
        self.saver = saver
        self.inline = durability != "async"
        self._task_path = accepts_task_path(saver, "aput_writes")
        self._queue: deque[tuple[Any, ...]] = deque()
        self._drainer: asyncio.Task[None] | None = None
        self._max = max_pending
        self._error: BaseException | None = None

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> None:
        self._submit(("put", config, checkpoint, metadata, new_versions))

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str) -> None:
        self._submit(("writes", config, writes, task_id, task_path))

    def _submit(self, op: tuple[Any, ...]) -> None:
        self._queue.append(op)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    async def _call(self, op: tuple[Any, ...]) -> None:
        if op[0] == "put":
            await self.saver.aput(*op[1:])
        elif self._task_path:
            await self.saver.aput_writes(*op[1:])
        else:
            await self.saver.aput_writes(*op[1:4])

    async def _drain(self) -> None:
        while self._queue:
            op = self._queue[0]
            try:
                if self._error is None:
                    await self._call(op)
            except BaseException as exc:
                self._error = exc
            self._queue.popleft()

    async def throttle(self) -> None:
        """Wait for the saves: all of them (sync), or enough to get under the bound (async)."""
        if self.inline or len(self._queue) > self._max:
            await self.flush()

    async def flush(self) -> None:
        if self._drainer is not None:
            if not self._drainer.done():
                await asyncio.shield(self._drainer)
            while self._queue:  # submitted after the drainer finished
                await self._drain()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
