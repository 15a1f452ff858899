"""StateGraph declarations and their validation errors."""

from __future__ import annotations

import operator
from typing import Annotated, Literal

import pytest
from typing_extensions import TypedDict

from threadloom.errors import ThreadloomError
from threadloom.graph import END, START, InvalidGraphError, StateGraph


class S(TypedDict):
    x: int
    log: Annotated[list[str], operator.add]


def a(state: S) -> dict:
    return {"x": state["x"] + 1}


def b(state: S) -> dict:
    return {"log": ["b"]}


def test_error_is_typed_and_a_value_error() -> None:
    assert issubclass(InvalidGraphError, ThreadloomError)
    assert issubclass(InvalidGraphError, ValueError)


def test_duplicate_and_reserved_names() -> None:
    g = StateGraph(S).add_node("a", a)
    with pytest.raises(InvalidGraphError, match="'a' already present"):
        g.add_node("a", a)
    for bad in (START, END, "__pregel_tasks", "x:y", "x|y"):
        with pytest.raises(InvalidGraphError):
            g.add_node(bad, a)


def test_node_name_from_function() -> None:
    g = StateGraph(S).add_node(a)
    assert list(g.nodes) == ["a"]


def test_unknown_nodes_in_edges() -> None:
    g = StateGraph(S).add_node("a", a)
    with pytest.raises(InvalidGraphError, match="unknown node 'nope'"):
        g.add_edge(["a", "nope"], "a")
    g.add_edge(START, "a").add_edge("a", "ghost")
    with pytest.raises(InvalidGraphError, match="ending at unknown node 'ghost'"):
        g.validate()


def test_edges_to_and_from_reserved_ends() -> None:
    g = StateGraph(S).add_node("a", a)
    with pytest.raises(InvalidGraphError, match="END cannot be the start"):
        g.add_edge(END, "a")
    with pytest.raises(InvalidGraphError, match="START cannot be the end"):
        g.add_edge("a", START)


def test_no_entry_point() -> None:
    g = StateGraph(S).add_node("a", a)
    with pytest.raises(InvalidGraphError, match="no entry point"):
        g.validate()


def test_branch_targets_checked() -> None:
    g = StateGraph(S).add_node("a", a).add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "x", {"x": "missing"})
    with pytest.raises(InvalidGraphError, match="targets unknown node 'missing'"):
        g.validate()


def test_duplicate_branch_name() -> None:
    def route(s: S) -> str:
        return END

    g = StateGraph(S).add_node("a", a).add_conditional_edges("a", route)
    with pytest.raises(InvalidGraphError, match="branch 'route' already exists for node 'a'"):
        g.add_conditional_edges("a", route)


def test_literal_return_gives_branch_ends() -> None:
    def route(s: S) -> Literal["a", "b", "__end__"]:
        return "b"

    g = StateGraph(S).add_node("a", a).add_node("b", b).add_conditional_edges("a", route)
    assert g.branches["a"]["route"].ends == {"a": "a", "b": "b", END: END}


def test_add_sequence_chains_nodes() -> None:
    g = StateGraph(S).add_sequence([a, ("second", b)])
    assert list(g.nodes) == ["a", "second"]
    assert ("a", "second") in g.edges


def test_interrupt_nodes_validated() -> None:
    g = StateGraph(S).add_node("a", a).add_edge(START, "a")
    with pytest.raises(InvalidGraphError, match="interrupt node 'zz'"):
        g.validate(interrupt=["zz"])


def test_conflicting_reducers_rejected() -> None:
    class Other(TypedDict):
        log: Annotated[list[str], lambda x, y: y]

    g = StateGraph(S)
    with pytest.raises(InvalidGraphError, match="'log' is declared twice"):
        g.add_node("n", a, input_schema=Other)
