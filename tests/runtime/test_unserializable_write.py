"""A node writes a value no serializer accepts: the run fails, but every step
finished before it stays stored on every backend (as LangGraph keeps them), so
the thread can be fixed and resumed without running finished nodes again.

Under the default ``durability="async"`` the queued steps are saved in one
transaction; the bad value used to roll back the whole batch (probe12 #2)."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.savers.backends import BACKENDS
from threadloom.errors import SerializationError
from threadloom.graph import END, START, StateGraph


class State(TypedDict):
    items: Annotated[list, operator.add]
    out: Any


def _graph(saver: Any, calls: list[str], bad: dict[str, bool]) -> Any:
    def a(state: State) -> dict[str, Any]:
        calls.append("a")
        return {"items": [1]}

    def b(state: State) -> dict[str, Any]:
        calls.append("b")
        return {"out": object() if bad["on"] else "fine"}

    builder = StateGraph(State).add_node("a", a).add_node("b", b)
    builder.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["async", "sync"])
@pytest.mark.parametrize("backend", BACKENDS, ids=[b.name for b in BACKENDS])
async def test_finished_steps_survive_an_unstorable_write(backend, durability, tmp_path, request):
    fixtures = {name: request.getfixturevalue(name) for name in backend.needs}
    cfg = {"configurable": {"thread_id": f"unstorable-{durability}"}}
    calls: list[str] = []
    bad = {"on": True}
    async with backend.open(str(tmp_path), fixtures) as saver:
        app = _graph(saver, calls, bad)
        with pytest.raises(SerializationError, match="out"):
            if backend.sync_api:
                app.invoke({"items": [0]}, cfg, durability=durability)
            else:
                await app.ainvoke({"items": [0]}, cfg, durability=durability)
        history = [
            (s.metadata["step"], s.values, s.next) async for s in app.aget_state_history(cfg)
        ]
        assert history == [
            (1, {"items": [0, 1]}, ("b",)),
            (0, {"items": [0]}, ("a",)),
            (-1, {"items": []}, ("__start__",)),
        ]
        bad["on"] = False
        done = await app.ainvoke(None, cfg, durability=durability)
        assert done == {"items": [0, 1], "out": "fine"}
        assert calls == ["a", "b", "b"]  # a ran once: its step was kept


async def test_cancel_wins_over_a_failed_last_save(tmp_path, monkeypatch) -> None:
    """A cancelled async run whose queued saves hold an unstorable value raises the
    cancel (a caller's timeout sees TimeoutError, as with LangGraph), not the
    SerializationError, which is noted on it; the steps before it are saved
    (review12 F1)."""
    import asyncio
    import sys

    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
    from threadloom.pregel.persist import AsyncPersister

    slow_saves = AsyncPersister._call_all

    async def slow(self: Any, steps: Any) -> None:
        await asyncio.sleep(0.2)  # the run is cancelled while these are queued
        await slow_saves(self, steps)

    monkeypatch.setattr(AsyncPersister, "_call_all", slow)

    async def bad(state: State) -> dict[str, Any]:
        return {"out": object()}

    started = asyncio.Event()

    async def wait(state: State) -> dict[str, Any]:
        started.set()  # bad's step is done and queued
        await asyncio.sleep(5)
        return {}

    builder = StateGraph(State).add_node("bad", bad).add_node("wait", wait)
    builder.add_edge(START, "bad").add_edge("bad", "wait")
    cfg = {"configurable": {"thread_id": "cancelled"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        app = builder.compile(checkpointer=saver)
        run = asyncio.ensure_future(app.ainvoke({"items": []}, cfg, durability="async"))
        await asyncio.wait_for(started.wait(), 10)  # (a fixed sleep lost the race under load)
        run.cancel()
        with pytest.raises(asyncio.CancelledError) as info:
            await run
        if sys.version_info >= (3, 11):
            assert "SerializationError" in "".join(getattr(info.value, "__notes__", []))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(
                app.ainvoke({"items": []}, {"configurable": {"thread_id": "t2"}}), 0.05
            )
        steps = [s.metadata["step"] async for s in app.aget_state_history(cfg)]
        assert steps == [0, -1]  # the step with the unstorable write is the only one lost
