"""``push_message`` (``langgraph.graph.message``): a node streams a message before
it returns and writes it to the state; same stream and state as LangGraph."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage


def _run(lib: str) -> list[Any]:
    graph = importlib.import_module(f"{lib}.graph")
    message = importlib.import_module(f"{lib}.graph.message")
    saver = importlib.import_module(f"{lib}.checkpoint.memory").InMemorySaver

    def node(state: dict) -> dict:
        message.push_message(AIMessage("pushed", id="p1"))
        message.push_message(AIMessage("streamed only", id="p2"), state_key=None)
        return {"messages": [AIMessage("returned", id="r1")]}

    builder = graph.StateGraph(graph.MessagesState).add_node("n", node)
    app = builder.add_edge(graph.START, "n").compile(checkpointer=saver())
    cfg = {"configurable": {"thread_id": "1"}}
    seen: list[Any] = []
    start = {"messages": [HumanMessage("hi", id="h")]}
    for mode, chunk in app.stream(start, cfg, stream_mode=["messages", "updates"]):
        if mode == "messages":
            seen.append((mode, chunk[0].content, chunk[1]["langgraph_node"]))
        else:
            seen.append((mode, repr(chunk)))
    seen.append([m.content for m in app.get_state(cfg).values["messages"]])
    return seen


def test_push_message_matches_langgraph() -> None:
    assert _run("threadloom") == _run("langgraph")


def test_push_message_needs_an_id_and_a_node() -> None:
    from threadloom.graph import START, MessagesState, StateGraph
    from threadloom.graph.message import push_message

    with pytest.raises(RuntimeError, match="inside a node"):
        push_message({"role": "assistant", "content": "x", "id": "1"})

    def node(state: dict) -> dict:
        push_message({"role": "assistant", "content": "no id"})
        return {}

    app = StateGraph(MessagesState).add_node("n", node).add_edge(START, "n").compile()
    with pytest.raises(ValueError, match="Message ID is required"):
        app.invoke({"messages": []})


def test_push_message_with_plain_dicts() -> None:
    from threadloom.graph import START, MessagesState, StateGraph
    from threadloom.graph.message import push_message

    def node(state: dict) -> dict:
        push_message({"role": "assistant", "content": "partial", "id": "a1"})
        return {}

    app = StateGraph(MessagesState).add_node("n", node).add_edge(START, "n").compile()
    chunks = list(app.stream({"messages": []}, stream_mode="messages"))
    assert [(m["content"], meta["langgraph_node"]) for m, meta in chunks] == [("partial", "n")]
    assert app.invoke({"messages": []})["messages"][0]["id"] == "a1"
