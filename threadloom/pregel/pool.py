"""A process-wide, elastic thread pool for running sync nodes and background saves.

LangGraph opens a new executor per ``invoke`` (half its per-run overhead). This
pool is shared and keeps idle threads for reuse; it grows instead of queueing
so nested graphs waiting on their own tasks can never deadlock it. Idle
threads exit after ``idle_timeout`` seconds.

An async run's sync node (``run_async``) reaches its own set of workers
through each worker's pipe: the ``os.write`` that wakes the worker releases the
GIL, so the worker takes it and runs the node at once, often before the
event-loop thread even awaits it. Woken by a ``SimpleQueue.put`` instead, the
worker found the GIL held by the loop thread and slept again, and each hop
cost the loop thread three involuntary switches (perf sched: prev_state=R
three times per hop), each a chance to wait behind other processes on a busy
box. ``submit``/``spawn`` keep the queue: a background save then starts once
the submitting thread blocks, and batches what queued meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import select
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["POOL", "ElasticPool"]

logger = logging.getLogger("threadloom.pregel")


class _Worker:
    """A hand-off worker's mailbox (``run_async``): its jobs, and a pipe that wakes it."""

    __slots__ = ("home", "jobs", "_read", "_write", "_poll")

    def __init__(self, home: list[Any]) -> None:
        self.home = home  # the idle list it goes back to
        self.jobs: deque[Any] = deque()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self._poll = select.poll()
        self._poll.register(self._read, select.POLLIN)

    def put(self, job: Any) -> None:
        self.jobs.append(job)
        os.write(self._write, b"\0")  # the GIL is free while this wakes the worker

    def get(self, timeout: float | None) -> Any:
        """The next job, or None after ``timeout`` seconds without one. A job is
        taken before the wake-ups are read: reading releases the GIL, which a
        worker just woken by ``put`` holds and needs."""
        while True:
            if self.jobs:
                return self.jobs.popleft()
            try:
                while os.read(self._read, 512):  # wake-ups of jobs already taken
                    pass
            except BlockingIOError:
                pass
            if self.jobs:
                return self.jobs.popleft()
            if not self._poll.poll(None if timeout is None else timeout * 1000):
                return None

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


class _Queued:
    """A ``submit``/``spawn`` worker's mailbox. Its wake-up keeps the GIL: a
    background drain then starts once the submitting thread blocks, with more
    saves queued for one batch, and never competes with it on a busy GIL."""

    __slots__ = ("home", "jobs")

    def __init__(self, home: list[Any]) -> None:
        self.home = home
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def put(self, job: Any) -> None:
        self.jobs.put(job)

    def get(self, timeout: float | None) -> Any:
        try:
            return self.jobs.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        pass


class ElasticPool(Executor):
    """Executor that reuses an idle thread or starts a new one; never queues work."""

    def __init__(self, idle_timeout: float = 30.0) -> None:
        self._idle: list[Any] = []  # _Queued workers
        self._hand: list[Any] = []  # _Worker (hand-off) workers
        self._lock = threading.Lock()
        self._timeout = idle_timeout

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self._dispatch((fut, fn, args, kwargs))
        return fut

    def spawn(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on a pool thread, with no ``Future`` to report to: for jobs
        that keep their own outcome (a background persister's drain, every async
        run). An exception escaping ``fn`` is logged, the thread lives on."""
        self._dispatch((None, _logged, (fn,), {}))

    def run_async(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> Any:
        """``fn()`` on a pool thread, as an asyncio future of ``loop``.

        What ``loop.run_in_executor(self, fn)`` does, without the concurrent
        ``Future`` and the callbacks chaining it to an asyncio one: the worker
        hands the outcome straight to ``loop`` (an async run's sync node pays
        this hop every step). A future cancelled before its job starts skips it.
        """
        afut = loop.create_future()
        self._dispatch((None, _settle_later, (loop, afut, fn), {}), self._hand)
        return afut

    def _dispatch(self, job: tuple[Any, Any, Any, Any], idle: list[Any] | None = None) -> None:
        idle = self._idle if idle is None else idle
        with self._lock:
            worker = idle.pop() if idle else None
        if worker is not None:
            worker.put(job)
        else:
            worker = _Worker(idle) if idle is self._hand else _Queued(idle)
            worker.put(job)
            threading.Thread(
                target=self._work, args=(worker,), daemon=True, name="threadloom-worker"
            ).start()

    def _work(self, worker: Any) -> None:
        while True:
            job = worker.get(self._timeout)
            if job is None:
                with self._lock:
                    if worker in worker.home:
                        worker.home.remove(worker)
                        worker.close()
                        return
                continue  # someone is handing us a job
            fut, fn, args, kwargs = job
            if fn is _settle_later:  # lists the worker idle itself, before it posts
                fn(*args, self._idle_again, worker)
                del job, fut, fn, args, kwargs
                continue
            if fut is None:  # spawn: the job keeps its own outcome
                fn(*args)
            elif fut.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    fut.set_exception(exc)
                else:
                    fut.set_result(result)
            del job, fut, fn, args, kwargs
            self._idle_again(worker)

    def _idle_again(self, worker: Any) -> None:
        with self._lock:
            worker.home.append(worker)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """The shared pool is never shut down; idle threads exit on their own."""


def _logged(fn: Callable[[], None]) -> None:
    try:
        fn()
    except BaseException:
        logger.exception("threadloom pool job %r failed", fn)


def _settle_later(
    loop: asyncio.AbstractEventLoop,
    afut: Any,
    fn: Callable[[], Any],
    idle_again: Callable[[Any], None],
    worker: Any,
) -> None:
    """A ``run_async`` job. The worker is listed idle before the outcome is posted:
    the loop thread, woken by the post, hands the run's next node to this warm
    worker (already on its way back to its queue) instead of a second thread."""
    if afut.cancelled():
        idle_again(worker)
        return
    result, error = None, None
    try:
        result = fn()
    except BaseException as exc:
        error = exc
    idle_again(worker)
    try:
        loop.call_soon_threadsafe(_settle, afut, result, error)
    except RuntimeError:  # the loop is closed: nobody waits for the outcome
        pass


def _settle(afut: Any, result: Any, error: BaseException | None) -> None:
    if afut.done():  # cancelled meanwhile
        return
    if error is None:
        afut.set_result(result)
        return
    if type(error) is concurrent.futures.CancelledError:  # as run_in_executor converts it
        error = asyncio.CancelledError(*error.args)
    elif isinstance(error, StopIteration):  # a future cannot hold one (PEP 479)
        wrapped = RuntimeError(f"node raised StopIteration: {error!r}")
        wrapped.__cause__ = error
        error = wrapped
    afut.set_exception(error)


POOL = ElasticPool()
