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

A pipe costs two file descriptors for as long as its worker lives (idle ones
too, for ``idle_timeout``), so at most ``PIPE_WORKERS`` workers own one: past
that, or when ``os.pipe()`` fails (EMFILE), a ``run_async`` job goes to a
queue-woken worker instead. A node never fails because the pool ran out of
descriptors, and the warm path (one worker per run) needs only a few pipes.

A forked child inherits the idle lists but none of their threads, and the
parent's pipes: an at-fork hook empties the child's lists and closes its
copies of the pipes, so the child starts its own workers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import select
import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["POOL", "ElasticPool"]

logger = logging.getLogger("threadloom.pregel")

PIPE_WORKERS = 32
"""At most this many hand-off workers own a pipe (2 fds each) at once."""


class _Worker:
    """A hand-off worker's mailbox (``run_async``): its jobs, and a pipe that wakes it."""

    __slots__ = ("home", "jobs", "_read", "_write", "_poll")

    def __init__(self, home: list[Any]) -> None:
        self.home = home  # the idle list it goes back to
        self.jobs: deque[Any] = deque()
        self._read, self._write = os.pipe()
        try:
            os.set_blocking(self._read, False)
            self._poll = select.poll()
            self._poll.register(self._read, select.POLLIN)
        except BaseException:
            self.close()
            raise

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
        """Close the pipe once (a second call, e.g. in a forked child, is a no-op)."""
        read, write, self._read, self._write = self._read, self._write, -1, -1
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)


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

    def __init__(self, idle_timeout: float = 30.0, pipe_workers: int = PIPE_WORKERS) -> None:
        self._idle: list[Any] = []  # _Queued workers
        self._hand: list[Any] = []  # _Worker (hand-off) workers
        self._spill: list[Any] = []  # _Queued workers for run_async past the pipe cap
        self._pipes: set[_Worker] = set()  # every live _Worker, idle or busy
        self._pipe_cap = pipe_workers
        self._lock = threading.Lock()
        self._timeout = idle_timeout
        _POOLS.add(self)

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
        self._dispatch((None, _settle_later, (loop, afut, fn), {}), hand=True)
        return afut

    def _dispatch(self, job: tuple[Any, Any, Any, Any], hand: bool = False) -> None:
        with self._lock:
            if not hand:
                worker = self._idle.pop() if self._idle else None
            elif self._hand:  # a pipe worker first: the warm path
                worker = self._hand.pop()
            else:
                worker = self._spill.pop() if self._spill else None
            new = worker is None
            if new:
                worker = self._new_hand_worker() if hand else _Queued(self._idle)
        worker.put(job)  # outside the lock: the woken worker may want it at once
        if new:
            self._start(worker)

    def _start(self, worker: Any) -> None:
        try:
            threading.Thread(
                target=self._work, args=(worker,), daemon=True, name="threadloom-worker"
            ).start()
        except BaseException:  # no thread (RLIMIT_NPROC): give its pipe back, not a slot
            with self._lock:
                self._pipes.discard(worker)
            worker.close()
            raise

    def _new_hand_worker(self) -> Any:
        """A pipe worker while fewer than the cap own one and ``os.pipe()``
        succeeds; else a queue-woken one (a slower wake-up, never a failed node)."""
        if len(self._pipes) < self._pipe_cap:
            try:
                worker = _Worker(self._hand)
            except OSError as exc:  # EMFILE/ENFILE: out of descriptors
                logger.debug("threadloom pool: no pipe for a worker (%s), using a queue", exc)
            else:
                self._pipes.add(worker)
                return worker
        return _Queued(self._spill)

    def _work(self, worker: Any) -> None:
        while True:
            job = worker.get(self._timeout)
            if job is None:
                with self._lock:
                    if worker in worker.home:
                        worker.home.remove(worker)
                        self._pipes.discard(worker)  # before its fds close: see _after_fork
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

    def _after_fork(self) -> None:
        """In a forked child: no worker thread survived the fork, so forget them
        all (a job handed to one would wait forever) and close the child's copies
        of their pipes (the parent's own stay open: only the child's fds close)."""
        self._lock = threading.Lock()  # a parent thread may have held it
        pipes = list(self._pipes)
        for home in (self._idle, self._hand, self._spill):
            home.clear()
        self._pipes.clear()
        for worker in pipes:
            try:
                worker.close()
            except OSError:
                pass


_POOLS: weakref.WeakSet[ElasticPool] = weakref.WeakSet()


def _reset_pools_in_child() -> None:
    for pool in list(_POOLS):
        pool._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pools_in_child)


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
