"""Cross-read: LangGraph reads checkpoints threadloom wrote and plans the same next tasks.

Stronger than comparing two runs: the very checkpoints (ids, versions,
versions_seen, pending writes) threadloom stored are copied into a LangGraph
saver, and LangGraph's ``get_state`` on the same graph must compute the same
``next``, the same task ids and paths, and the same interrupts as threadloom's.
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

CFG = {"configurable": {"thread_id": "x"}}


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    n: int


def build(graph_mod: Any, types_mod: Any, saver: Any) -> Any:
    """Fan-out, a join, a Send, a Command and an interrupt in one graph."""

    def plan(state: State) -> dict:
        return {"log": ["plan"], "n": state["n"] + 1}

    def fan(state: State) -> list:
        return [types_mod.Send("item", {"log": [f"i{i}"], "n": i}) for i in range(2)] + ["check"]

    def item(state: State) -> dict:
        return {"log": [f"item{state['n']}"]}

    def check(state: State):
        return types_mod.Command(update={"log": ["check"]}, goto="review")

    def review(state: State) -> dict:
        answer = types_mod.interrupt("approve?")
        return {"log": [f"review:{answer}"]}

    b = graph_mod.StateGraph(State)
    b.add_node("plan", plan)
    b.add_node("item", item)
    b.add_node("check", check, destinations=("review",))
    b.add_node("review", review)
    b.add_node("side", lambda s: {"log": ["side"]})
    b.add_node("final", lambda s: {"log": ["final"]})
    b.add_edge(graph_mod.START, "plan")
    b.add_edge(graph_mod.START, "side")
    b.add_conditional_edges("plan", fan, ["item", "check"])
    b.add_edge(["review", "side"], "final")
    return b.compile(checkpointer=saver)


def to_lg(value: Any) -> Any:
    """threadloom's Interrupt/Send values as LangGraph's (the stored shapes are the same)."""
    if isinstance(value, tl_types.Interrupt):
        return lg_types.Interrupt(value=to_lg(value.value), id=value.id)
    if isinstance(value, tl_types.Send):
        return lg_types.Send(value.node, to_lg(value.arg))
    if isinstance(value, (list, tuple)):
        return type(value)(to_lg(v) for v in value)
    if isinstance(value, dict):
        return {k: to_lg(v) for k, v in value.items()}
    return value


def copy_thread(src: Any, dst: Any) -> list[str]:
    """Put every root checkpoint and its pending writes of ``src`` into ``dst``."""
    ids = []
    for tup in sorted(src.list(CFG), key=lambda t: t.config["configurable"]["checkpoint_id"]):
        if tup.config["configurable"].get("checkpoint_ns"):
            continue
        cid = tup.config["configurable"]["checkpoint_id"]
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        put_cfg = {"configurable": {"thread_id": "x", "checkpoint_ns": "", "checkpoint_id": parent}}
        checkpoint = dict(tup.checkpoint)
        checkpoint["channel_values"] = to_lg(checkpoint["channel_values"])
        dst.put(put_cfg, checkpoint, dict(tup.metadata), dict(checkpoint["channel_versions"]))
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, to_lg(value)))
        at = {"configurable": {"thread_id": "x", "checkpoint_ns": "", "checkpoint_id": cid}}
        for task_id, writes in by_task.items():
            dst.put_writes(at, writes, task_id)
        ids.append(cid)
    return ids


def view(snapshot: Any) -> dict[str, Any]:
    return {
        "values": snapshot.values,
        "next": snapshot.next,
        "tasks": [(t.id, t.name, t.path, [i.id for i in t.interrupts]) for t in snapshot.tasks],
        "interrupts": [(i.id, i.value) for i in snapshot.interrupts],
    }


def test_langgraph_plans_the_same_tasks_from_our_checkpoints() -> None:
    ours = tl_memory.InMemorySaver()
    tl = build(tl_graph, tl_types, ours)
    tl.invoke({"log": [], "n": 0}, CFG)
    tl.invoke(tl_types.Command(resume="yes"), CFG)
    theirs = lg_memory.InMemorySaver()
    lg = build(lg_graph, lg_types, theirs)
    ids = copy_thread(ours, theirs)
    assert len(ids) >= 6
    for cid in ids:
        cfg = {"configurable": {"thread_id": "x", "checkpoint_id": cid}}
        assert view(tl.get_state(cfg)) == view(lg.get_state(cfg)), f"checkpoint {cid}"
    assert view(tl.get_state(CFG)) == view(lg.get_state(CFG))
    assert tl.get_state(CFG).values["log"][-1] == "final"


def test_langgraph_resumes_a_thread_threadloom_paused() -> None:
    ours = tl_memory.InMemorySaver()
    tl = build(tl_graph, tl_types, ours)
    tl.invoke({"log": [], "n": 0}, CFG)
    theirs = lg_memory.InMemorySaver()
    lg = build(lg_graph, lg_types, theirs)
    copy_thread(ours, theirs)
    done_lg = lg.invoke(lg_types.Command(resume="yes"), CFG)
    done_tl = tl.invoke(tl_types.Command(resume="yes"), CFG)
    assert sorted(done_lg["log"]) == sorted(done_tl["log"])
    assert done_tl["log"][-1] == "final"
