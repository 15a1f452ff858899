"""Cancel a coroutine at a chosen suspension point, as ``Task.cancel()`` would
when it lands while the coroutine waits there (a timeout, a client gone, a
``TaskGroup`` sibling failing).

The wrapper drives the coroutine itself: at each suspension it asks
``cancel_here(n)`` (n counts from 1) and, when true, cancels the running task
just before handing the awaited future to the loop, so the ``CancelledError``
arrives exactly at that ``await``. Enumerating n = 1, 2, ... until the coroutine
finishes uncancelled visits every suspension point of one run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class CancelAt:
    """Await ``coro``; cancel the running task at the first suspension where
    ``cancel_here(n)`` is true. ``hit``: the suspension cancelled (0: none)."""

    def __init__(self, coro: Coroutine[Any, Any, Any], cancel_here: Callable[[int], bool]) -> None:
        self.coro, self.cancel_here = coro, cancel_here
        self.count = self.hit = 0

    def __await__(self) -> Any:
        inner = self.coro.__await__()
        send: Any = inner.send
        value: Any = None
        while True:
            try:
                future = send(value)
            except StopIteration as stop:
                return stop.value
            self.count += 1
            if not self.hit and self.cancel_here(self.count):
                self.hit = self.count
                current = asyncio.current_task()
                assert current is not None
                current.cancel()
            try:
                value, send = (yield future), inner.send
            except BaseException as exc:  # the loop threw in (the cancel): pass it on
                value, send = exc, inner.throw


async def outcome(awaitable: Any, guard: float = 20.0) -> str:
    """Run ``awaitable`` in a task: "done", "cancelled", "error: ..." or
    "hung" (still running after ``guard`` seconds: a deadlock, never a slow
    server; the task is left to the loop's teardown)."""

    async def run() -> Any:
        return await awaitable

    task = asyncio.ensure_future(run())
    done, _ = await asyncio.wait([task], timeout=guard)
    if not done:
        return "hung"
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    return "done" if exc is None else f"error: {type(exc).__name__}: {exc}"


async def settle(graph: Any, cfg: dict[str, Any], durability: str) -> list[str]:
    """Finish a run that a cancel cut short (resume it, or start it if it never
    saved anything) and return its final log."""
    state = await graph.aget_state(cfg)
    if state.next:
        await graph.ainvoke(None, cfg, durability=durability)
    elif not state.values.get("log"):
        await graph.ainvoke({"log": []}, cfg, durability=durability)
    return (await graph.aget_state(cfg)).values["log"]


async def cancel_each_point(graph: Any, durability: str, check: Any) -> int:
    """Run ``graph.ainvoke`` once per suspension point n = 1, 2, ..., on thread
    ``t<n>``, cancelled at its n-th suspension, until a run ends uncancelled;
    each must end as cancelled exactly when the cancel landed, then
    ``await check(n, cfg)``. Returns the number of runs."""
    n = 0
    while True:
        n += 1
        cfg = {"configurable": {"thread_id": f"t{n}"}}
        run = graph.ainvoke({"log": []}, cfg, durability=durability)
        call = CancelAt(run, lambda i, n=n: i == n)
        got = await outcome(call)
        assert got == ("cancelled" if call.hit else "done"), (n, got)
        await check(n, cfg)
        if not call.hit:
            return n
