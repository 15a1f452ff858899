"""Per-thread TTL under a real graph run (fenced writes through the thread lease)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from tests.savers.test_ttl import Clock
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.graph import END, START, StateGraph


class State(TypedDict):
    log: Annotated[list, operator.add]


def _graph(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("step", lambda s: {"log": ["x"]})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=saver)


def _run_twice(saver: Any, clock: Clock) -> None:
    graph, config = _graph(saver), {"configurable": {"thread_id": "chat"}}
    assert graph.invoke({"log": ["in"]}, config)["log"] == ["in", "x"]
    clock.now += 50
    assert graph.invoke({"log": ["in"]}, config)["log"] == ["in", "x", "in", "x"]
    clock.now += 150  # idle longer than the ttl: the thread starts afresh
    assert graph.get_state(config).values == {}
    assert graph.invoke({"log": ["in"]}, config)["log"] == ["in", "x"]
    assert len(list(graph.get_state_history(config))) == 3  # input, loop, end: no old rows
    assert saver.sweep_expired().checkpoints == 0


def test_graph_thread_expires_and_restarts_in_memory() -> None:
    clock = Clock()
    _run_twice(InMemorySaver(ttl=100, clock=clock), clock)


def test_graph_thread_expires_and_restarts_on_sqlite(tmp_path: Any) -> None:
    clock = Clock()
    with SqliteSaver.from_conn_string(str(tmp_path / "g.db"), ttl=100, clock=clock) as saver:
        _run_twice(saver, clock)


async def test_graph_thread_expires_and_restarts_async() -> None:
    clock = Clock()
    saver = InMemorySaver(ttl=100, clock=clock)
    graph, config = _graph(saver), {"configurable": {"thread_id": "chat"}}
    assert (await graph.ainvoke({"log": ["in"]}, config))["log"] == ["in", "x"]
    clock.now += 150
    assert (await graph.ainvoke({"log": ["in"]}, config))["log"] == ["in", "x"]
    assert len([s async for s in graph.aget_state_history(config)]) == 3
