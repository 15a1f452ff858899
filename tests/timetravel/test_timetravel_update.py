"""threadloom-only behaviour of update_state / bulk_update_state: error messages
that name what is wrong, and all-or-nothing bulk updates."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import ConfigError, InvalidUpdateError
from threadloom.graph import START, StateGraph
from threadloom.types import StateUpdate, interrupt

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    value: Annotated[list[str], operator.add]


def chain(saver: Any, *names: str) -> Any:
    builder = StateGraph(State)
    for name in names:
        builder.add_node(name, lambda s, _n=name: {"value": [_n]})
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=saver)


def count(graph: Any) -> int:
    return len(list(graph.get_state_history(CFG)))


def test_unknown_node_names_it_and_lists_valid_ones() -> None:
    graph = chain(InMemorySaver(), "alpha", "beta")
    graph.invoke({"value": []}, CFG)
    with pytest.raises(InvalidUpdateError) as info:
        graph.update_state(CFG, {"value": ["x"]}, as_node="gamma")
    message = str(info.value)
    assert "'gamma'" in message and "'alpha'" in message and "'beta'" in message


def test_ambiguous_update_lists_nodes() -> None:
    graph = (
        StateGraph(State)
        .add_node("x", lambda s: {"value": ["x"]})
        .add_node("y", lambda s: {"value": ["y"]})
        .add_edge(START, "x")
        .add_edge(START, "y")
        .compile(checkpointer=InMemorySaver())
    )
    graph.invoke({"value": []}, CFG)
    with pytest.raises(InvalidUpdateError, match="as_node") as info:
        graph.update_state(CFG, {"value": ["?"]})
    assert "'x'" in str(info.value) and "'y'" in str(info.value)


def test_ambiguous_update_names_the_nodes_that_ran_last() -> None:
    """The choices that make sense come first: 'a' and 'b' ran last together,
    not every node of the graph (the message used to list only all of them)."""
    graph = (
        StateGraph(State)
        .add_node("a", lambda s: {"value": ["a"]})
        .add_node("b", lambda s: {"value": ["b"]})
        .add_node("c", lambda s: {"value": ["c"]})
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge(["a", "b"], "c")
        .compile(checkpointer=InMemorySaver(), interrupt_before=["c"])
    )
    graph.invoke({"value": []}, CFG)
    with pytest.raises(InvalidUpdateError, match="'a', 'b' ran last together"):
        graph.update_state(CFG, {"value": ["?"]})


def test_unknown_state_key_is_rejected() -> None:
    """threadloom's StateGraph rejects undeclared keys (docs/graph.md), updates included."""
    graph = chain(InMemorySaver(), "a")
    graph.invoke({"value": []}, CFG)
    before = count(graph)
    with pytest.raises(InvalidUpdateError):
        graph.update_state(CFG, {"nope": 1}, as_node="a")
    assert count(graph) == before


@pytest.mark.parametrize(
    "bad",
    [
        [StateUpdate({"value": ["x"]}, "nope")],
        [StateUpdate({"value": ["x"]}), StateUpdate({"value": ["y"]})],
        [StateUpdate({"nope": 1}, "a")],
        [StateUpdate({"value": ["x"]}, "__copy__"), StateUpdate({"value": ["y"]}, "a")],
    ],
    ids=["unknown-node", "no-as-node", "unknown-key", "copy-with-more"],
)
def test_bulk_update_is_all_or_nothing(bad: list[StateUpdate]) -> None:
    graph = chain(InMemorySaver(), "a", "b")
    graph.invoke({"value": []}, CFG)
    before, state = count(graph), graph.get_state(CFG)
    good = [StateUpdate({"value": ["ok1"]}, "a")]
    with pytest.raises(InvalidUpdateError):
        graph.bulk_update_state(CFG, [good, good, bad])
    assert count(graph) == before
    assert graph.get_state(CFG).config == state.config


async def test_async_bulk_update_is_all_or_nothing() -> None:
    graph = chain(InMemorySaver(), "a", "b")
    await graph.ainvoke({"value": []}, CFG)
    before = count(graph)
    with pytest.raises(InvalidUpdateError):
        await graph.abulk_update_state(
            CFG, [[StateUpdate({"value": ["x"]}, "a")], [StateUpdate({"value": ["y"]}, "zz")]]
        )
    assert count(graph) == before


def test_bulk_update_chains_checkpoints() -> None:
    graph = chain(InMemorySaver(), "a", "b")
    cfg = graph.bulk_update_state(
        CFG,
        [
            [StateUpdate({"value": ["in"]}, "__input__")],
            [StateUpdate({"value": ["a"]}, "a")],
            [StateUpdate({"value": ["b"]}, "b")],
        ],
    )
    history = list(graph.get_state_history(CFG))
    assert [s.metadata["source"] for s in history] == ["update", "update", "input"]
    assert [s.metadata["step"] for s in history] == [1, 0, -1]
    assert (
        history[0].config["configurable"]["checkpoint_id"] == cfg["configurable"]["checkpoint_id"]
    )
    assert history[0].parent_config == history[1].config
    # as in LangGraph: the input sits in __start__ until START runs, which it never did
    assert graph.get_state(CFG).values == {"value": ["a", "b"]}


def test_update_unknown_subgraph_namespace_is_config_error() -> None:
    graph = chain(InMemorySaver(), "a")
    graph.invoke({"value": []}, CFG)
    cfg = {"configurable": {"thread_id": "t1", "checkpoint_ns": "ghost:123"}}
    with pytest.raises(ConfigError, match="ghost"):
        graph.update_state(cfg, {"value": ["x"]}, as_node="a")


def test_update_state_then_resume_sees_the_update() -> None:
    def ask(state: State) -> dict:
        return {"value": [f"{interrupt('ok?')}:{len(state['value'])}"]}

    graph = (
        StateGraph(State)
        .add_node("a", lambda s: {"value": ["a"]})
        .add_node("ask", ask)
        .add_edge(START, "a")
        .add_edge("a", "ask")
        .compile(checkpointer=InMemorySaver())
    )
    graph.invoke({"value": []}, CFG)
    graph.update_state(CFG, {"value": ["edited"]}, as_node="a")
    from threadloom.types import Command

    assert graph.invoke(Command(resume="yes"), CFG) == {"value": ["a", "edited", "yes:2"]}
