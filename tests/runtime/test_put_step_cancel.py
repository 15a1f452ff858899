"""Cancelling an async run while a step's save is in flight loses nothing.

With ``durability="sync"`` the saves run in the run's own task, so the
cancellation lands inside the save; the save stays queued and the flush at exit
sends it again (a save is one transaction: it rolled back or committed, and
saving the same checkpoint twice stores it once).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.runtime.test_put_step import chain
from threadloom.checkpoint.memory import InMemorySaver


class SlowSaver(InMemorySaver):
    """The ``slow_on``-th write transaction waits, so a cancel lands inside it."""

    def __init__(self, slow_on: int) -> None:
        super().__init__()
        self.slow_on, self.calls = slow_on, 0
        self.started = asyncio.Event()

    async def _arun(self, flow: Any, write: bool = False) -> Any:
        if write:
            self.calls += 1
            if self.calls == self.slow_on:
                self.started.set()
                await asyncio.sleep(0.2)
        return await super()._arun(flow, write)


@pytest.mark.parametrize("slow_on", [1, 2])  # input + START in one save, then n0's
async def test_cancel_during_a_save_keeps_the_step(slow_on: int) -> None:
    saver = SlowSaver(slow_on)
    graph = chain(2, saver)
    cfg = {"configurable": {"thread_id": "t"}}
    run = asyncio.create_task(graph.ainvoke({"log": ["in"]}, cfg, durability="sync", lease=False))
    await saver.started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    steps = [h.metadata["step"] async for h in graph.aget_state_history(cfg)]
    state = await graph.aget_state(cfg)
    # the step whose save was cancelled is stored, with everything before it
    assert steps == list(range(slow_on - 1, -2, -1))
    assert state.values["log"] == ["in", "n0"][:slow_on]
    # and the run resumes from there to the same end as an uncancelled run
    final = await graph.ainvoke(None, cfg, lease=False)
    assert final == {"log": ["in", "n0", "n1"]}
