"""get_graph()-style drawing from the builder."""

from __future__ import annotations

import pytest
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


def _drawn():
    g = StateGraph(S)
    g.add_node("a", n)
    g.add_node("b", n)
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "b", {"one two three four five": "b", "end": END})
    g.add_edge("b", END)
    return g.compile().get_graph()


def test_langchain_draw_mermaid_keywords_and_first_last_node() -> None:
    drawn = _drawn()
    assert drawn.first_node().id == START and drawn.last_node().id == END
    text = drawn.draw_mermaid(
        curve_style="basis",
        node_colors={"first": "fill:#000"},
        wrap_label_n_words=2,
        frontmatter_config={"config": {"theme": "neutral", "flowchart": {"htmlLabels": True}}},
    )
    assert text.startswith(
        "---\nconfig:\n  flowchart:\n    curve: basis\n    htmlLabels: true\n  theme: neutral\n---\n"
    )
    assert "one two&nbsp<br>&nbspthree four&nbsp<br>&nbspfive" in text
    assert "\tclassDef first fill:#000" in text
    assert "\tclassDef last fill:#bfb6fc" in text  # the others keep their defaults


def test_draw_mermaid_png_asks_mermaid_ink(monkeypatch, tmp_path) -> None:
    import base64
    import urllib.error

    from threadloom.graph import draw_png

    seen = []

    class Reply:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return b"\x89PNG..."

    def urlopen(url, timeout):
        seen.append(url)
        return Reply()

    monkeypatch.setattr(draw_png.urllib.request, "urlopen", urlopen)
    drawn = _drawn()
    out = tmp_path / "g.png"
    assert drawn.draw_mermaid_png(output_file_path=str(out)) == b"\x89PNG..."
    assert out.read_bytes() == b"\x89PNG..."
    encoded = seen[0].split("/img/")[1].split("?")[0]
    assert base64.b64decode(encoded).decode() == drawn.draw_mermaid()
    assert seen[0].endswith("?type=png&bgColor=!white")
    drawn.draw_mermaid_png(background_color="light blue")
    assert seen[-1].endswith("&bgColor=!light%20blue")  # quoted: was http.client.InvalidURL

    def offline(url, timeout):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(draw_png.urllib.request, "urlopen", offline)
    import pytest

    with pytest.raises(draw_png.MermaidRenderError, match="mermaid.live"):
        drawn.draw_mermaid_png(max_retries=0)
    with pytest.raises(NotImplementedError, match="mermaid.ink"):
        drawn.draw_mermaid_png(draw_method="pyppeteer")


def test_frontmatter_is_yaml_that_reads_back_as_given() -> None:
    yaml = pytest.importorskip("yaml")
    given = {
        "title": "Bob's graph: v2",
        "tags": ["a", "b"],
        "x": "null",
        "y": "1.5",
        "w": "a #b",
        "z": "- dash",
        "nan": float("inf"),
        "empty": {},
        1: "int key",
        "ctl": "a\x7fb\x85c",
        "emoji": "ok\U0001f600",
        "config": {"theme": "neutral"},
    }
    text = _drawn().draw_mermaid(frontmatter_config=given)
    front = yaml.safe_load(text.split("---\n")[1])
    assert front == {**given, "config": {"theme": "neutral", "flowchart": {"curve": "linear"}}}
