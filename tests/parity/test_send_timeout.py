"""Parity: ``Send(node, arg, timeout=...)`` (LangGraph 1.2) limits that one pushed
task, over the node's own ``add_node(timeout=)``; a Send with a timeout is stored
and read back with it, and threadloom reads the ones LangGraph stored.

No timing assertions: a task that must time out waits on an event that never
fires; one that must finish returns at once.
"""

from __future__ import annotations

import asyncio
import importlib
import operator
from datetime import timedelta
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity.test_node_timeouts import _text

LIBS = ("langgraph", "threadloom")


class State(TypedDict):
    items: list[str]
    done: Annotated[list[str], operator.add]


def _lib(name: str) -> SimpleNamespace:
    mod = lambda sub: importlib.import_module(f"{name}.{sub}")  # noqa: E731
    return SimpleNamespace(
        StateGraph=mod("graph").StateGraph,
        START=mod("graph").START,
        Send=mod("types").Send,
        TimeoutPolicy=mod("types").TimeoutPolicy,
        saver=mod("checkpoint.memory").InMemorySaver,
    )


async def _work(arg: dict[str, Any]) -> dict[str, Any]:
    if arg["item"].startswith("slow"):
        await asyncio.Event().wait()
    return {"done": [arg["item"]]}


def _graph(lib: SimpleNamespace, send_timeout: Any, node_timeout: Any = None, **compile_kw):
    fan = lambda s: [lib.Send("work", {"item": i}, timeout=send_timeout) for i in s["items"]]  # noqa: E731
    kw = {"timeout": node_timeout} if node_timeout is not None else {}
    builder = lib.StateGraph(State).add_node("work", _work, **kw)
    builder.add_conditional_edges(lib.START, fan, ["work"])
    return builder.compile(checkpointer=lib.saver(), **compile_kw)


async def _outcome(graph: Any, items: list[str], thread: str) -> dict[str, Any]:
    cfg = {"configurable": {"thread_id": thread}}
    try:
        result: Any = await graph.ainvoke({"items": items, "done": []}, cfg)
    except Exception as exc:  # the error is the observation
        result = (type(exc).__name__, _text(str(exc)))
    snap = await graph.aget_state(cfg)
    return {"result": result, "next": snap.next, "done": snap.values.get("done")}


@pytest.mark.parametrize(
    "send_timeout, node_timeout, items",
    [
        (0.05, None, ["fast", "slow"]),  # the Send's limit fires
        (timedelta(milliseconds=50), 30.0, ["slow"]),  # and wins over the node's
        (30.0, 0.05, ["fast"]),  # a generous Send limit lets a fast task finish
        (None, 0.05, ["slow"]),  # no Send limit: the node's applies
    ],
)
async def test_send_timeout_matches_langgraph(send_timeout, node_timeout, items) -> None:
    seen = [await _outcome(_graph(_lib(n), send_timeout, node_timeout), items, "t") for n in LIBS]
    assert seen[0] == seen[1], f"langgraph: {seen[0]}\nthreadloom: {seen[1]}"


async def test_stored_send_keeps_its_timeout() -> None:
    """Paused before the pushed tasks run, the stored Sends carry their limits, and
    the resumed run finishes them."""
    seen = []
    for name in LIBS:
        lib = _lib(name)
        graph = _graph(lib, 1.5, interrupt_before=["work"])
        cfg = {"configurable": {"thread_id": "p"}}
        await graph.ainvoke({"items": ["a", "b"], "done": []}, cfg)
        stored = graph.checkpointer.get_tuple(cfg).checkpoint["channel_values"]["__pregel_tasks"]
        limits = [(s.node, s.arg, s.timeout.run_timeout, s.timeout.refresh_on) for s in stored]
        seen.append((limits, (await graph.ainvoke(None, cfg))["done"]))
    assert seen[0] == seen[1]
    assert seen[1] == (
        [("work", {"item": "a"}, 1.5, "auto"), ("work", {"item": "b"}, 1.5, "auto")],
        ["a", "b"],
    )


def test_send_value_semantics_match_langgraph() -> None:
    ours, theirs = _lib("threadloom"), _lib("langgraph")
    for lib in (ours, theirs):
        a = lib.Send("n", 1, timeout=2)
        assert a == lib.Send("n", 1, timeout=2.0) and hash(a) == hash(lib.Send("n", 1, timeout=2.0))
        assert a != lib.Send("n", 1) and lib.Send("n", 1).timeout is None
    assert repr(ours.Send("n", 1)) == repr(theirs.Send("n", 1))
    with pytest.raises(ValueError, match="greater than 0"):
        ours.Send("n", 1, timeout=0)


def test_reads_langgraphs_stored_send_with_timeout() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from threadloom.checkpoint.serde import MsgpackSerializer

    stored = JsonPlusSerializer().dumps_typed(
        _lib("langgraph").Send(
            "w", {"x": 1}, timeout=_lib("langgraph").TimeoutPolicy(idle_timeout=3)
        )
    )
    send = MsgpackSerializer().loads_typed(stored)
    types = importlib.import_module("threadloom.types")
    assert send == types.Send("w", {"x": 1}, timeout=types.TimeoutPolicy(idle_timeout=3))
    again = MsgpackSerializer().loads_typed(MsgpackSerializer().dumps_typed(send))
    assert again == send and again.timeout.idle_timeout == 3.0
