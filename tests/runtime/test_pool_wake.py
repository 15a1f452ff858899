"""The pool's hand-off to a worker (``pool.py``): workers do not preempt the thread
that woke them, and an async run's worker is listed idle before it posts a node's
outcome, so the loop's next node goes to that same warm worker."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

from threadloom.pregel.pool import ElasticPool


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="no SCHED_BATCH here")
async def test_workers_run_as_sched_batch() -> None:
    loop = asyncio.get_running_loop()
    pool = ElasticPool()
    policy = await pool.run_async(loop, lambda: os.sched_getscheduler(0))
    assert policy == os.SCHED_BATCH
    assert pool.submit(os.sched_getscheduler, 0).result(timeout=5) == os.SCHED_BATCH
    assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the caller's thread is left alone


class _Recorded(list):  # type: ignore[type-arg]
    def __init__(self, order: list[str]) -> None:
        super().__init__()
        self.order = order

    def append(self, item: Any) -> None:
        self.order.append("idle")
        super().append(item)


async def test_worker_is_idle_before_the_loop_sees_the_outcome() -> None:
    loop = asyncio.get_running_loop()
    order: list[str] = []
    pool = ElasticPool()
    pool._idle = _Recorded(order)
    post = loop.call_soon_threadsafe

    def recording_post(*args: Any) -> Any:
        if threading.get_ident() != threading.main_thread().ident:
            order.append("post")
        return post(*args)

    loop.call_soon_threadsafe = recording_post  # type: ignore[method-assign]
    try:
        first = await pool.run_async(loop, threading.get_ident)
        second = await pool.run_async(loop, threading.get_ident)
    finally:
        del loop.call_soon_threadsafe
    assert order == ["idle", "post", "idle", "post"]
    assert first == second  # the warm worker took the next hop


async def test_a_job_cancelled_before_it_starts_leaves_its_worker_idle() -> None:
    loop = asyncio.get_running_loop()
    pool = ElasticPool()
    gate = threading.Event()
    blocker = pool.run_async(loop, gate.wait)
    skipped = pool.run_async(loop, lambda: None)  # a second worker
    skipped.cancel()
    gate.set()
    await blocker
    for _ in range(200):
        if len(pool._idle) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(pool._idle) == 2
