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


def test_xray_inlines_subgraphs() -> None:
    sub = StateGraph(S)
    sub.add_node("s1", n)
    sub.add_node("s2", n)
    sub.add_edge(START, "s1")
    sub.add_edge("s1", "s2")
    sub.add_edge("s2", END)
    g = StateGraph(S)
    g.add_node("pre", n)
    g.add_node("inner", sub.compile())
    g.add_edge(START, "pre")
    g.add_edge("pre", "inner")
    g.add_edge("inner", END)
    flat = graph_of(g)
    assert "inner" in flat.nodes
    xr = graph_of(g, xray=True)
    assert "inner" not in xr.nodes and {"inner:s1", "inner:s2"} <= set(xr.nodes)
    pairs = {(e.source, e.target) for e in xr.edges}
    assert {("pre", "inner:s1"), ("inner:s1", "inner:s2"), ("inner:s2", END)} <= pairs
    assert "inner_58_s1" in xr.draw_mermaid()  # ':' escaped in mermaid ids
