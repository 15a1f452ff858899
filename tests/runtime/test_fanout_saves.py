"""Saving a parallel step's writes: finished tasks are still saved while siblings run,
and writes of tasks that finished together share a transaction.

The drivers save finished tasks' writes only when no other event is ready (not
before every task they start), so a fan-out of quick tasks costs a few saves
instead of one per task; a task that is still running never delays the save of
its finished siblings.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.runtime.test_put_step import S, Spy, cfg, fanout
from threadloom.graph import END, START, StateGraph
from threadloom.types import Send

WAIT = 10.0  # seconds a blocked task waits for its sibling's save before giving up


class Watch(Spy):
    """A Spy that signals once task ``w0``'s write has been saved."""

    def __init__(self) -> None:
        super().__init__()
        self.w0_saved = threading.Event()

    def _seen(self, writes: Any) -> None:
        if any(v == ["w0"] for w in writes for _c, v in w[1]):
            self.w0_saved.set()

    def put_step(self, writes: Any, checkpoint: Any = None) -> Any:
        out = super().put_step(writes, checkpoint)
        self._seen(writes)
        return out

    async def aput_step(self, writes: Any, checkpoint: Any = None) -> Any:
        out = await super().aput_step(writes, checkpoint)
        self._seen(writes)
        return out


def slow_sibling(saver: Watch, seen: list[bool]) -> Any:
    """START -> Send(work, 0), Send(work, 1): task 1 runs until task 0's write is saved."""
    b = StateGraph(S)

    def work(item: int) -> dict[str, Any]:
        if item == 1:
            seen.append(saver.w0_saved.wait(WAIT))
        return {"log": [f"w{item}"]}

    b.add_node("work", work)
    b.add_conditional_edges(START, lambda s: [Send("work", i) for i in range(2)])
    b.add_edge("work", END)
    return b.compile(checkpointer=saver)


def test_finished_task_is_saved_while_its_sibling_still_runs():
    saver = Watch()
    seen: list[bool] = []
    slow_sibling(saver, seen).invoke({"log": []}, cfg("s"), durability="sync", lease=False)
    assert seen == [True]
    assert "writes*1" in saver.calls  # task 0 alone, before the step's checkpoint


async def test_async_driver_saves_finished_task_while_its_sibling_still_runs():
    saver = Watch()
    seen: list[bool] = []
    graph = slow_sibling(saver, seen)
    await graph.ainvoke({"log": []}, cfg("s"), durability="sync", lease=False)
    assert seen == [True]


@pytest.mark.parametrize("limit", [1, 3])
def test_limited_concurrency_saves_every_write_once(limit):
    saver = Spy()
    config = {**cfg("m"), "max_concurrency": limit}
    out = fanout(9, saver).invoke({"log": []}, config, durability="sync", lease=False)
    assert sorted(out["log"]) == sorted(f"w{i}" for i in range(9))
    step_writes = list(saver.list(cfg("m")))[1].pending_writes
    assert sorted(v[0] for _, c, v in step_writes if c == "log") == sorted(
        f"w{i}" for i in range(9)
    )
    saved = sum(int(c.split("*")[1]) for c in saver.calls if c.startswith("writes*"))
    assert saved <= 9 and saver.calls.count("step+cp") == 3
