"""Parity: ``get_graph()`` edges, including the implied ``node -> __end__`` edge of a
node that edges lead to but that has no edge of its own."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h


class S(TypedDict):
    x: Annotated[list, operator.add]


def _node(name):
    return lambda s: {"x": [name]}


def _chain(lib):
    g = lib.StateGraph(S)
    for n in "ab":
        g.add_node(n, _node(n))
    g.add_edge(lib.START, "a")
    g.add_edge("a", "b")
    return g


def _pathmap(lib):
    g = lib.StateGraph(S)
    for n in "abc":
        g.add_node(n, _node(n))
    g.add_edge(lib.START, "a")
    g.add_conditional_edges("a", lambda s: "stop", {"go": "b", "stop": lib.END})
    g.add_conditional_edges("b", lambda s: "c", ["a", "c"])
    return g


def _join(lib):
    g = lib.StateGraph(S)
    for n in "abcd":
        g.add_node(n, _node(n))
    g.add_edge(lib.START, "a")
    g.add_edge(lib.START, "b")
    g.add_edge(["a", "b"], "c")
    g.add_edge("c", "d")
    g.add_edge("d", lib.END)
    return g


@pytest.mark.parametrize("build", [_chain, _pathmap, _join])
def test_get_graph_edges(build) -> None:
    def sc(lib, saver, durability):
        graph = build(lib).compile().get_graph()
        edges = sorted((e.source, e.target, e.data, e.conditional) for e in graph.edges)
        return [("edges", edges), ("nodes", sorted(graph.nodes))]

    h.run_parity(sc)
