"""Parity: ``version="v2"`` output shapes (LangGraph 1.1+), side by side.

Before session 9 threadloom ignored ``version`` and returned the v1 shapes, so a
ported program written for v2 broke silently. Now stream parts are
``{"type", "ns", "data"}`` dicts (``values`` parts carry ``interrupts``), and
``invoke`` returns ``GraphOutput(value, interrupts)``, as in LangGraph.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated

import pytest

from tests.parity import helpers as h
from tests.parity.test_stream_modes import _scrub
from tests.parity.test_subgraph_persistence import CFG, child_graph, parent_graph

MODES = ["values", "updates", "tasks", "checkpoints", "debug", "custom"]


def _parts(lib, saver, mode, subgraphs):
    graph = parent_graph(lib, saver, child_graph(lib))
    kw = {"stream_mode": mode, "subgraphs": subgraphs, "version": "v2"}
    first = [_scrub_part(p) for p in graph.stream({"value": []}, CFG, **kw)]
    resumed = [_scrub_part(p) for p in graph.stream(lib.Command(resume="ok"), CFG, **kw)]
    return [("first", first), ("resumed", resumed)]


def _scrub_part(part):
    assert set(part) >= {"type", "ns", "data"}, part
    return {**part, "data": _scrub(part["data"])}


@pytest.mark.parametrize("subgraphs", [False, True], ids=["root", "subgraphs"])
@pytest.mark.parametrize("mode", MODES + [MODES, None], ids=[*MODES, "all", "default"])
def test_stream_parts(mode, subgraphs: bool) -> None:
    h.run_parity(lambda lib, saver, durability: _parts(lib, saver, mode, subgraphs))


@pytest.mark.parametrize("mode", ["values", "updates"])
def test_invoke_graph_output(mode: str) -> None:
    def sc(lib, saver, durability):
        graph = parent_graph(lib, saver, child_graph(lib))
        first = graph.invoke({"value": []}, CFG, stream_mode=mode, version="v2")
        resumed = graph.invoke(lib.Command(resume="ok"), CFG, stream_mode=mode, version="v2")
        if mode == "values":
            assert type(first).__name__ == "GraphOutput"
            return [
                ("first", (first.value, first.interrupts)),
                ("resumed", (resumed.value, resumed.interrupts)),
            ]
        return [("first", first), ("resumed", resumed)]

    h.run_parity(sc)


async def test_async_twins() -> None:
    async def sc(lib, saver, durability):
        graph = parent_graph(lib, saver, child_graph(lib))
        kw = {"stream_mode": ["values", "updates"], "subgraphs": True, "version": "v2"}
        parts = [p async for p in graph.astream({"value": []}, CFG, **kw)]
        out = await graph.ainvoke(lib.Command(resume="ok"), CFG, version="v2")
        return [("parts", parts), ("out", (out.value, out.interrupts))]

    await h.arun_parity(sc)


@dataclass
class DState:
    value: Annotated[list, operator.add] = field(default_factory=list)


def _typed_graph(lib, saver, schema):
    def ask(state):
        return {"value": [f"ask:{lib.interrupt('ok?')}"]}

    b = lib.StateGraph(schema)
    b.add_node("a", lambda s: {"value": ["a"]})
    b.add_node("ask", ask)
    b.add_edge(lib.START, "a")
    b.add_edge("a", "ask")
    return b.compile(checkpointer=saver)


@pytest.mark.parametrize("kind", ["dataclass", "pydantic"])
def test_state_classes_come_back_as_classes(kind: str) -> None:
    if kind == "pydantic":
        pydantic = pytest.importorskip("pydantic")

        class PState(pydantic.BaseModel):
            value: Annotated[list, operator.add] = []

        schema = PState
    else:
        schema = DState

    def sc(lib, saver, durability):
        graph = _typed_graph(lib, saver, schema)
        kw = {"stream_mode": ["values", "checkpoints"], "version": "v2"}
        seen = []
        for part in graph.stream({"value": []}, CFG, **kw):
            data = part["data"]
            values = data if part["type"] == "values" else data["values"]
            seen.append((part["type"], type(values).__name__, part.get("interrupts")))
        out = graph.invoke(lib.Command(resume="ok"), CFG, version="v2")
        assert type(out.value) is schema
        return [("parts", seen), ("out", (out.value.value, out.interrupts))]

    h.run_parity(sc)


def test_unknown_version_is_refused() -> None:
    lib = h._lib("threadloom")
    with h.open_saver(lib, "memory") as saver:
        graph = parent_graph(lib, saver, child_graph(lib))
        with pytest.raises(ValueError, match="version"):
            graph.invoke({"value": []}, CFG, version="v9")
        with pytest.raises(ValueError, match="version"):
            list(graph.stream({"value": []}, CFG, version=2))


def test_graph_output_v1_access_warns() -> None:
    from threadloom.types import GraphOutput, Interrupt

    out = GraphOutput(value={"a": 1}, interrupts=(Interrupt("q", id="i"),))
    with pytest.warns(DeprecationWarning):
        assert out["a"] == 1
    with pytest.warns(DeprecationWarning):
        assert out["__interrupt__"] == out.interrupts
    with pytest.warns(DeprecationWarning):
        assert "__interrupt__" in out and "b" not in out
