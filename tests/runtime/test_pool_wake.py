"""The pool's hand-off to a worker (``pool.py``): each worker's own mailbox (a job
list and a wake-up pipe), idle workers exiting, and an async run's worker listed
idle before it posts a node's outcome, so the loop's next node goes to that same
warm worker."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from threadloom.pregel.pool import ElasticPool, _Worker


async def _until(ready: Any, deadline: float = 20.0) -> bool:
    """Poll ``ready()`` until true or ``deadline`` seconds passed (a loaded box
    is slow to start and end threads; a fixed count of short sleeps was not)."""
    end = time.monotonic() + deadline
    while not ready() and time.monotonic() < end:
        await asyncio.sleep(0.01)
    return bool(ready())


async def test_an_idle_worker_exits_after_its_timeout_and_a_new_one_starts() -> None:
    """Idle workers are listed, then exit after ``idle_timeout``, then new ones
    start. The listing is checked on a pool whose workers never time out: with
    50 ms, a loaded box could see the first worker leave before the second
    existed, and a submit worker lists itself only after posting its result."""
    loop = asyncio.get_running_loop()
    lasting = ElasticPool(idle_timeout=3600)
    first = await lasting.run_async(loop, threading.get_ident)
    second = await loop.run_in_executor(lasting, threading.get_ident)  # a submit worker
    assert first != second
    assert await _until(lambda: (len(lasting._hand), len(lasting._idle)) == (1, 1))
    for worker in [*lasting._hand, *lasting._idle]:
        worker.put(None)  # what its timeout does: it leaves its list and exits

    pool = ElasticPool(idle_timeout=0.05)
    first = await pool.run_async(loop, threading.get_ident)
    second = await loop.run_in_executor(pool, threading.get_ident)

    def gone() -> bool:
        alive = {t.ident for t in threading.enumerate()}
        return first not in alive and second not in alive

    assert await _until(lambda: not pool._hand and not pool._idle and gone())
    assert (pool._hand, pool._idle) == ([], [])
    assert await pool.run_async(loop, lambda: 7) == 7
    assert pool.submit(pow, 2, 5).result(timeout=5) == 32


def test_a_mailbox_hands_out_its_jobs_in_order_then_times_out() -> None:
    box = _Worker([])
    try:
        box.put("a")
        box.put("b")
        assert box.get(0) == "a"
        assert box.get(0) == "b"
        assert box.get(0.01) is None  # the wake-ups of taken jobs were read
        box.put("c")
        assert box.get(None) == "c"
    finally:
        box.close()


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
    pool._hand = _Recorded(order)
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
    assert await _until(lambda: len(pool._hand) == 2)
