"""Drawing a StateGraph: its nodes and edges as data, and as Mermaid text.

Built from the builder's declarations, not from running anything, so it works
for any compiled graph. Conditional edges (branches, ``Command`` destinations)
are dotted in Mermaid; edges into a join are plain edges from each start.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadloom.constants import END, START

if TYPE_CHECKING:
    from threadloom.graph.state import StateGraph

__all__ = ["DrawableGraph", "Edge", "Node", "graph_of"]


@dataclass(frozen=True)
class Node:
    """A drawn node; ``data`` is the runnable (or ``None`` for START/END)."""

    id: str
    name: str
    data: Any = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class Edge:
    """A drawn edge; ``conditional`` edges exist only when a branch picks them."""

    source: str
    target: str
    data: str | None = None
    conditional: bool = False


@dataclass
class DrawableGraph:
    """What ``CompiledStateGraph.get_graph()`` returns."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    def add_edge(
        self, source: str, target: str, data: str | None = None, conditional: bool = False
    ) -> None:
        edge = Edge(source, target, data, conditional)
        if edge not in self.edges:
            self.edges.append(edge)

    def first_node(self) -> Node | None:
        """The one node no edge leads to (START), or None when there is not exactly one."""
        targets = {e.target for e in self.edges}
        found = [n for n in self.nodes.values() if n.id not in targets]
        return found[0] if len(found) == 1 else None

    def last_node(self) -> Node | None:
        """The one node no edge leaves (END), or None when there is not exactly one."""
        sources = {e.source for e in self.edges}
        found = [n for n in self.nodes.values() if n.id not in sources]
        return found[0] if len(found) == 1 else None

    def draw_mermaid(
        self,
        *,
        with_styles: bool = True,
        curve_style: Any = "linear",
        node_colors: Any = None,
        wrap_label_n_words: int = 9,
        frontmatter_config: dict[str, Any] | None = None,
    ) -> str:
        """Mermaid flowchart text (paste into mermaid.live or a Markdown fence).

        The keywords are LangChain's ``Graph.draw_mermaid`` ones: ``curve_style``
        a name or a ``CurveStyle``; ``node_colors`` an object or dict with
        ``default``/``first``/``last`` fill colours; edge labels wrapped every
        ``wrap_label_n_words`` words; ``frontmatter_config`` merged into the
        Mermaid front matter (theme, look, ...)."""
        lines: list[str] = []
        curve = getattr(curve_style, "value", curve_style)
        if with_styles:
            front = dict(frontmatter_config or {})
            config = dict(front.get("config") or {})
            config["flowchart"] = {**(config.get("flowchart") or {}), "curve": curve}
            front["config"] = config
            lines += ["---", *_yaml(front, 0), "---"]
        lines.append("graph TD;")
        for node in self.nodes.values():
            label = _escape(node.name)
            if node.id == START:
                lines.append(f"\t{_safe_id(node.id)}([<p>{label}</p>]):::first")
            elif node.id == END:
                lines.append(f"\t{_safe_id(node.id)}([<p>{label}</p>]):::last")
            else:
                lines.append(f"\t{_safe_id(node.id)}({label})")
        for edge in self.edges:
            src, dst = _safe_id(edge.source), _safe_id(edge.target)
            data = _wrap(_escape(edge.data), wrap_label_n_words) if edge.data else None
            if edge.conditional:
                arrow = f" -. &nbsp;{data}&nbsp; .-> " if data else " -.-> "
            else:
                arrow = f" -- &nbsp;{data}&nbsp; --> " if data else " --> "
            lines.append(f"\t{src}{arrow}{dst};")
        if with_styles:
            colors = _colors(node_colors)
            lines += [
                f"\tclassDef default {colors['default']}",
                f"\tclassDef first {colors['first']}",
                f"\tclassDef last {colors['last']}",
            ]
        return "\n".join(lines) + "\n"

    def draw_mermaid_png(self, **options: Any) -> bytes:
        """The Mermaid drawing as PNG bytes, rendered by the mermaid.ink web API
        (LangChain's default way; it needs the network). Takes
        :meth:`draw_mermaid`'s keywords and ``output_file_path``,
        ``background_color``, ``max_retries``, ``retry_delay``, ``base_url``
        (see :mod:`threadloom.graph.draw_png`)."""
        from threadloom.graph.draw_png import render_png

        keys = ("with_styles", "curve_style", "node_colors", "wrap_label_n_words")
        text = self.draw_mermaid(
            **{k: options.pop(k) for k in (*keys, "frontmatter_config") if k in options}
        )
        return render_png(text, **options)

    def to_json(self) -> dict[str, Any]:
        """Plain-data form: ``{"nodes": [{"id", "name"}], "edges": [{...}]}``."""
        return {
            "nodes": [{"id": n.id, "name": n.name} for n in self.nodes.values()],
            "edges": [
                {
                    "source": e.source,
                    "target": e.target,
                    "data": e.data,
                    "conditional": e.conditional,
                }
                for e in self.edges
            ],
        }


_COLORS = {
    "default": "fill:#f2f0ff,line-height:1.2",
    "first": "fill-opacity:0",
    "last": "fill:#bfb6fc",
}


def _colors(node_colors: Any) -> dict[str, str]:
    """classDef styles: LangChain's ``NodeStyles`` (or a dict) over the defaults."""
    if node_colors is None:
        return _COLORS
    get = (
        node_colors.get
        if isinstance(node_colors, dict)
        else lambda k: getattr(node_colors, k, None)
    )
    return {k: get(k) or v for k, v in _COLORS.items()}


def _wrap(text: str, n: int) -> str:
    words = text.split()
    if n <= 0 or len(words) <= n:
        return text
    return "&nbsp<br>&nbsp".join(" ".join(words[i : i + n]) for i in range(0, len(words), n))


_PLAIN_YAML = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_YAML_WORDS = {"null", "true", "false", "yes", "no", "on", "off", "y", "n", "~"}


def _yaml(value: dict[str, Any], depth: int) -> list[str]:
    """Front matter as YAML: nested mappings in block style, other values as
    YAML scalars (a plain word stays plain, anything YAML could read otherwise,
    a list included, is written as JSON, which YAML reads as written). Keys
    sorted, as PyYAML's ``dump`` sorts them."""
    out: list[str] = []
    pad = "  " * depth
    for key in sorted(value, key=str):
        item = value[key]
        name = _yaml_scalar(key)
        if isinstance(item, dict) and item:
            out.append(f"{pad}{name}:")
            out.extend(_yaml(item, depth + 1))
        else:
            out.append(f"{pad}{name}: {_yaml_scalar(item)}")
    return out


def _yaml_scalar(item: Any) -> str:
    item = getattr(item, "value", item)  # an enum (CurveStyle)
    if isinstance(item, bool):
        return "true" if item else "false"
    if item is None:
        return "null"
    if isinstance(item, float):
        if not math.isfinite(item):
            return ".nan" if item != item else (".inf" if item > 0 else "-.inf")
        text = repr(item)  # YAML's float needs a dot in the mantissa: 1e-05 -> 1.0e-05
        mantissa, _, exponent = text.partition("e")
        return text if "." in mantissa or not exponent else f"{mantissa}.0e{exponent}"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, (list, tuple)):
        return "[" + ", ".join(_yaml_scalar(x) for x in item) + "]"
    if isinstance(item, dict):
        pairs = (f"{_yaml_scalar(k)}: {_yaml_scalar(v)}" for k, v in item.items())
        return "{" + ", ".join(pairs) + "}"
    if isinstance(item, str):
        plain = _PLAIN_YAML.fullmatch(item) and item.lower() not in _YAML_WORDS
        return item if plain else _quoted(json.dumps(item, ensure_ascii=False))
    return _quoted(json.dumps(item, ensure_ascii=False, default=str))


_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _quoted(text: str) -> str:
    """JSON text YAML reads as written: the characters YAML will not take raw
    (DEL, C1 controls, line/paragraph separators, BOM) escaped as ``\\u``."""
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _safe_id(node_id: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", lambda m: f"_{ord(m.group())}_", node_id)


def _escape(text: str) -> str:
    return text.replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;") if text else text


def graph_of(builder: StateGraph, xray: bool | int = False) -> DrawableGraph:
    """Nodes and edges of a builder, START first and END last.

    ``xray`` (True or a depth) draws compiled subgraphs inline, their nodes
    named ``<parent node>:<child node>``.
    """
    graph = _flat_graph(builder)
    depth = 1 if xray is True else int(xray or 0)
    if depth > 0:
        for name, spec in builder.nodes.items():
            sub = getattr(spec.runnable, "builder", None)
            if sub is not None and hasattr(sub, "nodes"):
                graph = _inline(graph, name, graph_of(sub, depth - 1))
    return graph


def _inline(graph: DrawableGraph, name: str, sub: DrawableGraph) -> DrawableGraph:
    """Replace node ``name`` by ``sub``'s nodes, rewiring edges through its START/END."""
    out = DrawableGraph()
    entries = [e.target for e in sub.edges if e.source == START]
    exits = [e.source for e in sub.edges if e.target == END]
    for node_id, node in graph.nodes.items():
        if node_id != name:
            out.nodes[node_id] = node
            continue
        for sub_id, sub_node in sub.nodes.items():
            if sub_id not in (START, END):
                full = f"{name}:{sub_id}"
                out.nodes[full] = Node(full, full, sub_node.data, sub_node.metadata)
    for e in graph.edges:
        sources = [f"{name}:{x}" for x in exits] if e.source == name else [e.source]
        targets = [f"{name}:{x}" for x in entries] if e.target == name else [e.target]
        for src in sources:
            for dst in targets:
                out.add_edge(src, dst, e.data, e.conditional)
    for e in sub.edges:
        if e.source != START and e.target != END:
            out.add_edge(f"{name}:{e.source}", f"{name}:{e.target}", e.data, e.conditional)
    return out


def _flat_graph(builder: StateGraph) -> DrawableGraph:
    graph = DrawableGraph()
    graph.nodes[START] = Node(START, START)
    for name, spec in builder.nodes.items():
        graph.nodes[name] = Node(name, name, spec.runnable, spec.metadata)
    for start, end in sorted(builder.edges):
        graph.add_edge(start, end)
    for starts, end in sorted(builder.waiting_edges):
        for start in starts:
            graph.add_edge(start, end)
    for start, branches in builder.branches.items():
        for branch in branches.values():
            if branch.ends:
                for label, end in branch.ends.items():
                    graph.add_edge(start, end, None if str(label) == end else str(label), True)
            else:  # unknown targets: any node may follow
                for end in [*builder.nodes, END]:
                    if end != start:
                        graph.add_edge(start, end, conditional=True)
    for name, spec in builder.nodes.items():
        if isinstance(spec.ends, dict):
            for end, label in spec.ends.items():
                graph.add_edge(name, end, label, True)
        elif spec.ends:
            for end in spec.ends:
                graph.add_edge(name, end, conditional=True)
    # a node that edges lead to but that leads nowhere ends the run: draw that edge
    # (as LangGraph does), so the picture shows where runs finish
    sources = {e.source for e in graph.edges}
    for node in sorted({e.target for e in graph.edges} - sources - {END}):
        graph.add_edge(node, END)
    if any(e.target == END for e in graph.edges):
        graph.nodes[END] = Node(END, END)
    return graph
