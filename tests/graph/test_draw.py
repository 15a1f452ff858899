"""get_graph()-style drawing from the builder."""

from __future__ import annotations

from typing_extensions import TypedDict

from threadloom.graph import END, START, StateGraph
from threadloom.graph.draw import graph_of


class S(TypedDict):
    x: int


def n(state: S) -> dict:
    return {}


def test_nodes_edges_and_mermaid() -> None:
    g = StateGraph(S)
    for name in ("a", "b", "c"):
        g.add_node(name, n)
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "b", {"go": "b", "stop": END})
    g.add_edge(["a", "b"], "c")
    drawn = graph_of(g)
    assert list(drawn.nodes) == [START, "a", "b", "c", END]
    pairs = {(e.source, e.target, e.conditional) for e in drawn.edges}
    assert (START, "a", False) in pairs and ("a", "c", False) in pairs
    assert ("a", "b", True) in pairs and ("a", END, True) in pairs
    text = drawn.draw_mermaid()
    assert "graph TD;" in text
    assert "\t__start__ --> a;" in text
    assert "\ta -. &nbsp;go&nbsp; .-> b;" in text
    assert "__end__([<p>__end__</p>]):::last" in text
