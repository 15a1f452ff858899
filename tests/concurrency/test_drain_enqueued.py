"""A run waiting for a busy thread (``multitask_strategy="enqueue"``) stops waiting
as soon as its ``RunControl`` asks it to drain: ``GraphDrained`` at once, nothing
written, instead of waiting for the lease, saving its input and only then
draining (review12 F3). Sync and async."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from typing_extensions import TypedDict

from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.errors import GraphDrained
from threadloom.graph import START, StateGraph
from threadloom.runtime import RunControl


class State(TypedDict):
    who: str


def _graph(saver, gate: threading.Event):
    def hold(state: State) -> dict:
        gate.wait(30)  # the first run holds the thread until the test lets it go
        return {}

    return (
        StateGraph(State).add_node("hold", hold).add_edge(START, "hold").compile(checkpointer=saver)
    )


def test_enqueued_run_drains_without_waiting(tmp_path) -> None:
    gate, cfg = threading.Event(), {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "q.db")) as saver:
        app = _graph(saver, gate)
        first = threading.Thread(target=app.invoke, args=({"who": "A"}, cfg))
        first.start()
        while app.get_state(cfg).next != ("hold",):
            time.sleep(0.01)
        control = RunControl()
        threading.Timer(0.1, control.request_drain, ("deploy",)).start()
        with pytest.raises(GraphDrained, match="deploy"):
            app.invoke({"who": "B"}, cfg, multitask_strategy="enqueue", control=control)
        assert gate.is_set() is False  # it did not wait for A
        gate.set()
        first.join()
        assert app.get_state(cfg).values == {"who": "A"}  # B wrote nothing
        assert len(list(app.get_state_history(cfg))) == 3


async def test_enqueued_async_run_drains_without_waiting(tmp_path) -> None:
    gate, cfg = threading.Event(), {"configurable": {"thread_id": "t"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        app = _graph(saver, gate)
        first = asyncio.ensure_future(app.ainvoke({"who": "A"}, cfg))
        while (await app.aget_state(cfg)).next != ("hold",):
            await asyncio.sleep(0.01)
        control = RunControl()
        asyncio.get_running_loop().call_later(0.1, control.request_drain, "deploy")
        with pytest.raises(GraphDrained, match="deploy"):
            await app.ainvoke({"who": "B"}, cfg, multitask_strategy="enqueue", control=control)
        gate.set()
        await first
        assert (await app.aget_state(cfg)).values == {"who": "A"}


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_a_drained_run_stops_no_one(tmp_path, strategy: str) -> None:
    """A run asked to drain before it got the thread does not ask the holder to
    stop (a rollback would delete the holder's work for a run that then saves
    nothing; review2 F3)."""
    gate, cfg = threading.Event(), {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "r.db")) as saver:
        app = _graph(saver, gate)
        first = threading.Thread(target=app.invoke, args=({"who": "A"}, cfg))
        first.start()
        while app.get_state(cfg).next != ("hold",):
            time.sleep(0.01)
        control = RunControl()
        control.request_drain("deploy")
        with pytest.raises(GraphDrained):
            app.invoke({"who": "B"}, cfg, multitask_strategy=strategy, control=control)
        gate.set()
        first.join()
        assert app.get_state(cfg).values == {"who": "A"}
        assert len(list(app.get_state_history(cfg))) == 3  # A's run whole, nothing of B
