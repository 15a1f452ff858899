"""A process-wide, elastic thread pool for running sync nodes and background saves.

LangGraph opens a new executor per ``invoke`` (half its per-run overhead). This
pool is shared and keeps idle threads for reuse; it grows instead of queueing
so nested graphs waiting on their own tasks can never deadlock it. Idle
threads exit after ``idle_timeout`` seconds.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["POOL", "ElasticPool"]


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
        job = (fut, fn, args, kwargs)
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
        return fut

    def _work(self, worker: _Worker) -> None:
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
            if fut.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    fut.set_exception(exc)
                else:
                    fut.set_result(result)
            del job, fut, fn, args, kwargs
            with self._lock:
                self._idle.append(worker)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """The shared pool is never shut down; idle threads exit on their own."""


POOL = ElasticPool()
