"""LangGraph's prebuilt ``ToolNode`` and ``tools_condition`` inside a threadloom
graph: the ReAct shape a port keeps when only ``langgraph.prebuilt`` is left
(threadloom has no prebuilt agents). ``ToolNode`` reads its runtime from
``config["configurable"]["__pregel_runtime"]``, where threadloom puts the task's
``Runtime``; the same tool calls, injected state and store give the same
messages as on LangGraph, sync and async (probe12 #13)."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedState, InjectedStore, ToolNode, tools_condition


@tool
def add(a: int, b: int) -> int:
    """Add two ints."""
    return a + b


@tool
def count_msgs(state: Annotated[dict, InjectedState]) -> int:
    """Count the messages so far."""
    return len(state["messages"])


@tool
def recall(key: str, store: Annotated[Any, InjectedStore()]) -> str:
    """Read a remembered value."""
    item = store.get(("mem",), key)
    return item.value["v"] if item else "nothing"


def _app(lib: str, store: Any) -> Any:
    graph = importlib.import_module(f"{lib}.graph")
    memory = importlib.import_module(f"{lib}.checkpoint.memory")
    turn = {"n": 0}

    def model(state: dict) -> dict:
        turn["n"] += 1
        if turn["n"] == 1:
            calls = [
                {"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"},
                {"name": "count_msgs", "args": {}, "id": "c2"},
                {"name": "recall", "args": {"key": "k"}, "id": "c3"},
            ]
            return {"messages": [AIMessage("", id="ai1", tool_calls=calls)]}
        return {"messages": [AIMessage("done", id="ai2")]}

    builder = graph.StateGraph(graph.MessagesState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([add, count_msgs, recall]))
    builder.add_edge(graph.START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=memory.InMemorySaver(), store=store)


def _store() -> Any:
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    store.put(("mem",), "k", {"v": "remembered"})
    return store


def _shape(messages: list[Any]) -> list[tuple[str, Any]]:
    return [(type(m).__name__, m.content) for m in messages]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_toolnode_in_a_threadloom_graph_matches_langgraph(mode: str) -> None:
    seen = []
    for lib in ("langgraph", "threadloom"):
        app = _app(lib, _store())
        cfg = {"configurable": {"thread_id": "t"}}
        start = {"messages": [HumanMessage("hi", id="h")]}
        out = app.invoke(start, cfg) if mode == "sync" else await app.ainvoke(start, cfg)
        seen.append(_shape(out["messages"]))
    assert seen[0] == seen[1]
    assert seen[1][2:5] == [
        ("ToolMessage", "5"),
        ("ToolMessage", "2"),
        ("ToolMessage", "remembered"),
    ]


def test_node_config_carries_the_runtime() -> None:
    from threadloom.graph import START, StateGraph
    from threadloom.runtime import Runtime

    seen: dict[str, Any] = {}

    def node(state: dict, config: dict) -> dict:
        seen["runtime"] = config["configurable"]["__pregel_runtime"]
        return {}

    builder = StateGraph(dict, context_schema=dict)
    builder.add_node("n", node).add_edge(START, "n")
    builder.compile().invoke({"x": 1}, context={"user": "u"})
    runtime = seen["runtime"]
    assert isinstance(runtime, Runtime) and runtime.context == {"user": "u"}
    assert runtime.server_info is None and runtime.execution_info.task_id
    assert runtime.override(context=None).context is None
    assert runtime.merge(Runtime(store="s")).store == "s"
