"""Cancelling an async run while a step's save is in flight loses nothing.

With ``durability="sync"`` the saves run in the run's own task, so the
cancellation lands inside the save; the save stays queued and the flush at exit
sends it again (a save is one transaction: it rolled back or committed, and
saving the same checkpoint twice stores it once).
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.graph import END, START, StateGraph


class S(TypedDict):
    log: Annotated[list[str], operator.add]


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


@pytest.mark.parametrize("slow_on", [2, 3])
async def test_cancel_during_a_save_keeps_the_step(slow_on: int) -> None:
    b = StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_node("b", lambda s: {"log": ["b"]})
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", END)
    saver = SlowSaver(slow_on)
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    run = asyncio.create_task(graph.ainvoke({"log": ["in"]}, cfg, durability="sync", lease=False))
    await saver.started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    steps = [h.metadata["step"] async for h in graph.aget_state_history(cfg)]
    state = await graph.aget_state(cfg)
    # the step whose save was cancelled is stored, with everything before it
    assert steps == list(range(slow_on - 2, -2, -1))
    assert state.values["log"] == ["in", "a"][: slow_on - 1]
    # and the run resumes from there to the same end as an uncancelled run
    final = await graph.ainvoke(None, cfg, lease=False)
    assert final == {"log": ["in", "a", "b"]}
