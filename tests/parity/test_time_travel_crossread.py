"""Cross-read for update_state: the same stored thread, edited by both libraries.

A thread LangGraph wrote is copied, byte-for-byte in meaning (same checkpoint ids,
versions, pending writes), into a threadloom saver. Then the same update is made
on both copies. Task ids and interrupt ids derive from the checkpoint the update
starts from, so the writes each library stores on that checkpoint must match
exactly (task id, channel, value), and the new checkpoints must agree on metadata,
values, versions (by counter) and what runs next.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

pytest.importorskip("threadloom.pregel.main")

import langgraph.checkpoint.memory as lg_memory
import langgraph.graph as lg_graph
import langgraph.types as lg_types

import threadloom.checkpoint.memory as tl_memory
import threadloom.graph as tl_graph
import threadloom.types as tl_types
from threadloom.checkpoint.ids import version_counter

CFG = {"configurable": {"thread_id": "x"}}


class State(TypedDict):
    value: Annotated[list[str], operator.add]


def build(graph_mod: Any, types_mod: Any, saver: Any) -> Any:
    def ask(state: State) -> dict:
        return {"value": [f"ask:{types_mod.interrupt('ok?')}"]}

    b = graph_mod.StateGraph(State)
    b.add_node("a", lambda s: {"value": ["a"]})
    b.add_node("ask", ask)
    b.add_node("x", lambda s: {"value": ["x"]})
    b.add_node("b", lambda s: {"value": ["b"]})
    b.add_edge(graph_mod.START, "a")
    b.add_edge("a", "ask")
    b.add_edge("a", "x")
    b.add_edge(["ask", "x"], "b")
    return b.compile(checkpointer=saver)


def to_tl(value: Any) -> Any:
    if isinstance(value, lg_types.Interrupt):
        return tl_types.Interrupt(value=to_tl(value.value), id=value.id)
    if isinstance(value, lg_types.Send):
        return tl_types.Send(value.node, to_tl(value.arg))
    if isinstance(value, (list, tuple)):
        return type(value)(to_tl(v) for v in value)
    if isinstance(value, dict):
        return {k: to_tl(v) for k, v in value.items()}
    return value


def copy_thread(src: Any, dst: Any) -> None:
    for tup in sorted(src.list(CFG), key=lambda t: t.config["configurable"]["checkpoint_id"]):
        cid = tup.config["configurable"]["checkpoint_id"]
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        put_cfg = {"configurable": {"thread_id": "x", "checkpoint_ns": "", "checkpoint_id": parent}}
        checkpoint = dict(tup.checkpoint)
        checkpoint["channel_values"] = to_tl(checkpoint["channel_values"])
        dst.put(put_cfg, checkpoint, dict(tup.metadata), dict(checkpoint["channel_versions"]))
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, to_tl(value)))
        at = {"configurable": {"thread_id": "x", "checkpoint_ns": "", "checkpoint_id": cid}}
        for task_id, writes in by_task.items():
            dst.put_writes(at, writes, task_id)


def plain(value: Any) -> Any:
    if type(value).__name__ == "Interrupt":
        return ("interrupt", value.value, value.id)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def stored(saver: Any, config: Any) -> dict[str, Any]:
    """What a saver holds for ``config``'s checkpoint, ids of new checkpoints aside."""
    tup = saver.get_tuple(config)
    ck = tup.checkpoint
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return {
        "parent": parent if parent in _KNOWN else "<new>",
        "metadata": tup.metadata,
        "values": plain(ck["channel_values"]),
        "versions": {k: version_counter(v) for k, v in ck["channel_versions"].items()},
        "seen": {
            n: {c: version_counter(v) for c, v in s.items()} for n, s in ck["versions_seen"].items()
        },
        "writes": sorted(plain([list(w) for w in tup.pending_writes or []]), key=repr),
    }


_KNOWN: set[str] = set()
"""Checkpoint ids both copies share (ids of new checkpoints differ by design)."""


def both() -> tuple[Any, Any, Any, Any]:
    lg_saver = lg_memory.InMemorySaver()
    lg = build(lg_graph, lg_types, lg_saver)
    lg.invoke({"value": []}, CFG)
    _KNOWN.update(t.config["configurable"]["checkpoint_id"] for t in lg_saver.list(CFG))
    tl_saver = tl_memory.InMemorySaver()
    copy_thread(lg_saver, tl_saver)
    return lg, lg_saver, build(tl_graph, tl_types, tl_saver), tl_saver


UPDATES = [
    pytest.param(({"value": ["u"]}, "x"), id="as-finished-node"),
    pytest.param(({"value": ["u"]}, "ask"), id="as-interrupted-node"),
    pytest.param(({"value": ["u"]}, None), id="inferred"),
    pytest.param((None, "__end__"), id="end"),
    pytest.param(({"value": ["u"]}, "__input__"), id="input"),
    pytest.param((None, "__copy__"), id="copy"),
    pytest.param(([({"value": ["u"]}, "x")], "__copy__"), id="copy-then-update"),
]


@pytest.mark.parametrize("update", UPDATES)
@pytest.mark.parametrize("where", ["latest", "older"])
def test_same_update_same_stored_result(update: tuple[Any, Any], where: str) -> None:
    lg, lg_saver, tl, tl_saver = both()
    if where == "latest":
        at = lg.get_state(CFG).config
    else:
        at = next(s for s in lg.get_state_history(CFG) if s.next == ("a",)).config
    values, as_node = update
    new_lg = lg.update_state(at, values, as_node=as_node)
    new_tl = tl.update_state(at, values, as_node=as_node)
    assert stored(tl_saver, at) == stored(lg_saver, at), "writes stored on the source checkpoint"
    assert stored(tl_saver, new_tl) == stored(lg_saver, new_lg), "the new checkpoint"
    assert tl.get_state(new_tl).next == lg.get_state(new_lg).next
    assert [t.name for t in tl.get_state(CFG).tasks] == [t.name for t in lg.get_state(CFG).tasks]
