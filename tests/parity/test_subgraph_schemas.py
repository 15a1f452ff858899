"""Parity: a compiled subgraph node whose state has keys the parent does not declare.

The child returns its whole state (private keys included); the parent keeps only the
keys it declares, as LangGraph does. Function nodes keep threadloom's strict
unknown-key error (docs/graph.md), checked at the end.
"""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t1"}}


class Parent(TypedDict):
    value: Annotated[list[str], operator.add]
    topic: str


class Child(TypedDict):
    value: Annotated[list[str], operator.add]
    topic: str
    draft: str  # private to the child
    notes: Annotated[list[str], operator.add]  # private, with a reducer


def child_graph(lib, *, ask: bool = False, checkpointer=None):
    """START -> write -> (ask) -> read: private keys flow between child nodes only."""

    def write(state: Child) -> dict:
        return {"draft": f"about {state['topic']}", "notes": ["w"], "value": ["c:write"]}

    def ask_node(state: Child) -> dict:
        return {"notes": [f"ok={lib.interrupt('go?')}"]}

    def read(state: Child) -> dict:
        return {"value": [f"c:read {state['draft']} {state['notes']}"], "notes": ["r"]}

    builder = lib.StateGraph(Child).add_node("write", write).add_node("read", read)
    builder.add_edge(lib.START, "write")
    if ask:
        builder.add_node("ask", ask_node).add_edge("write", "ask").add_edge("ask", "read")
    else:
        builder.add_edge("write", "read")
    return builder.compile(checkpointer=checkpointer)


def parent_graph(lib, saver, child):
    """START -> p1 -> sub -> p2"""
    return (
        lib.StateGraph(Parent)
        .add_node("p1", lambda s: {"value": ["p1"], "topic": "tides"})
        .add_node("sub", child)
        .add_node("p2", lambda s: {"value": [f"p2 saw {sorted(s)}"]})
        .add_edge(lib.START, "p1")
        .add_edge("p1", "sub")
        .add_edge("sub", "p2")
        .compile(checkpointer=saver)
    )


def history(graph, config=CFG):
    return [(s.values, s.next, s.metadata["source"]) for s in graph.get_state_history(config)]


def sc_private_keys(lib, saver, durability):
    graph = parent_graph(lib, saver, child_graph(lib))
    obs = [("invoke", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("state", graph.get_state(CFG).values))
    obs.append(("history", history(graph)))
    updates = list(
        graph.stream({"value": []}, {"configurable": {"thread_id": "t2"}}, stream_mode="updates")
    )
    obs.append(("updates", updates))
    return obs


def sc_private_keys_interrupted(lib, saver, durability):
    graph = parent_graph(lib, saver, child_graph(lib, ask=True))
    obs = [("first", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    child_cfg = graph.get_state(CFG).tasks[0].state
    obs.append(("child state", graph.get_state(child_cfg).values))
    obs.append(("resume", graph.invoke(lib.Command(resume="yes"), CFG, **h.kw(durability))))
    obs.append(("history", history(graph)))
    return obs


def sc_private_keys_own_checkpointer(lib, saver, durability):
    graph = parent_graph(lib, saver, child_graph(lib, checkpointer=True))
    obs = [("run 1", graph.invoke({"value": []}, CFG))]
    obs.append(("run 2", graph.invoke({"value": ["again"]}, CFG)))
    obs.append(("history", history(graph)))
    return obs


SCENARIOS = [sc_private_keys, sc_private_keys_interrupted, sc_private_keys_own_checkpointer]


@pytest.mark.parametrize("saver", h.SAVERS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__[3:])
def test_subgraph_private_keys(scenario, saver: str) -> None:
    h.run_parity(scenario, saver)


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_subgraph_private_keys_durability(durability: str) -> None:
    h.run_parity(sc_private_keys_interrupted, "sqlite", durability)


async def asc_private_keys(lib, saver, durability):
    graph = parent_graph(lib, saver, child_graph(lib, ask=True))
    obs = [("first", await graph.ainvoke({"value": []}, CFG))]
    obs.append(("resume", await graph.ainvoke(lib.Command(resume="yes"), CFG)))
    chunks = [
        c
        async for c in graph.astream(
            {"value": []}, {"configurable": {"thread_id": "t2"}}, stream_mode="updates"
        )
    ]
    obs.append(("astream", chunks))
    obs.append(("history", [(s.values, s.next) async for s in graph.aget_state_history(CFG)]))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
async def test_subgraph_private_keys_async(saver: str) -> None:
    await h.arun_parity(asc_private_keys, saver)


def test_function_node_unknown_key_still_raises() -> None:
    """Deliberate difference kept: a function node's stray key is a typo, not a drop."""
    from threadloom.errors import InvalidUpdateError
    from threadloom.graph import START, StateGraph

    graph = (
        StateGraph(Parent)
        .add_node("sub", child_graph(h._lib("threadloom")))
        .add_node("typo", lambda s: {"draft": "x"})
        .add_edge(START, "sub")
        .add_edge("sub", "typo")
        .compile()
    )
    with pytest.raises(InvalidUpdateError, match=r"node 'typo' returned unknown state key"):
        graph.invoke({"value": [], "topic": "t"})
