"""A process-wide, elastic thread pool for running sync nodes and background saves.

LangGraph opens a new executor per ``invoke`` (half its per-run overhead). This
pool is shared and keeps idle threads for reuse; it grows instead of queueing
so nested graphs waiting on their own tasks can never deadlock it. Idle
threads exit after ``idle_timeout`` seconds.

Worker threads run as ``SCHED_BATCH`` where Linux allows it: same CPU share,
but a woken worker does not preempt the thread that woke it. An async run hands
each sync node to a worker while the event-loop thread holds the GIL; a
preempting worker could only find the GIL taken and sleep again, so every hop
cost the loop thread up to three involuntary switches (perf sched: prev_state=R
three times per hop), each a chance to wait behind other processes on a busy
box. Not preempted, the worker runs once the loop thread blocks and the GIL is
free. Threads a node starts inherit the policy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["POOL", "ElasticPool"]

logger = logging.getLogger("threadloom.pregel")


class _Worker:
    __slots__ = ("jobs",)

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()


class ElasticPool(Executor):
    """Executor that reuses an idle thread or starts a new one; never queues work."""

    def __init__(self, idle_timeout: float = 30.0) -> None:
        self._idle: list[_Worker] = []
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
        self._dispatch((None, _settle_later, (loop, afut, fn), {}))
        return afut

    def _dispatch(self, job: tuple[Any, Any, Any, Any]) -> None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is not None:
            worker.jobs.put(job)
        else:
            worker = _Worker()
            worker.jobs.put(job)
            threading.Thread(
                target=self._work, args=(worker,), daemon=True, name="threadloom-worker"
            ).start()

    def _work(self, worker: _Worker) -> None:
        _no_wake_preemption()
        while True:
            try:
                job = worker.jobs.get(timeout=self._timeout)
            except queue.Empty:
                with self._lock:
                    if worker in self._idle:
                        self._idle.remove(worker)
                        return
                job = worker.jobs.get()  # someone handed us a job meanwhile
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

    def _idle_again(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """The shared pool is never shut down; idle threads exit on their own."""


def _logged(fn: Callable[[], None]) -> None:
    try:
        fn()
    except BaseException:
        logger.exception("threadloom pool job %r failed", fn)


def _no_wake_preemption() -> None:
    """Make the calling pool thread ``SCHED_BATCH`` (see the module docstring);
    a no-op where the platform has no such policy or refuses it."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        pass


def _settle_later(
    loop: asyncio.AbstractEventLoop,
    afut: Any,
    fn: Callable[[], Any],
    idle_again: Callable[[_Worker], None],
    worker: _Worker,
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
