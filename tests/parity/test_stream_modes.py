"""Parity: StateGraph stream modes (tasks, debug, and the others) chunk by chunk.

The graph's hidden input node (``__start__``, tagged ``langsmith:hidden``) is not
reported by ``tasks``/``debug``, as in LangGraph.
"""

from __future__ import annotations

import pytest

from tests.parity import helpers as h
from tests.parity.test_subgraph_persistence import CFG, State, child_graph, parent_graph

MODES = ["values", "updates", "tasks", "checkpoints", "debug", "custom"]


def _scrub(chunk):
    """Debug events carry a wall-clock ``timestamp``: keep only that it is there."""
    if isinstance(chunk, tuple):
        return (*chunk[:-1], _scrub(chunk[-1]))
    if isinstance(chunk, dict) and "timestamp" in chunk:
        return {**chunk, "timestamp": "<ts>"}
    return chunk


def _chunks(lib, saver, mode, subgraphs, durability):
    graph = parent_graph(lib, saver, child_graph(lib))
    kw = {"stream_mode": mode, "subgraphs": subgraphs, **h.kw(durability)}
    first = [_scrub(c) for c in graph.stream({"value": []}, CFG, **kw)]
    resumed = [_scrub(c) for c in graph.stream(lib.Command(resume="ok"), CFG, **kw)]
    return [("first", first), ("resumed", resumed)]


@pytest.mark.parametrize("subgraphs", [False, True], ids=["root", "subgraphs"])
@pytest.mark.parametrize("mode", ["tasks", "debug"])
def test_hidden_start_task_not_streamed(mode: str, subgraphs: bool) -> None:
    def sc(lib, saver, durability):
        return _chunks(lib, saver, mode, subgraphs, durability)

    h.run_parity(sc)
    lib = h._lib("threadloom")
    with h.open_saver(lib, "memory") as saver:
        chunks = [c for _, cs in _chunks(lib, saver, mode, subgraphs, None) for c in cs]
    payloads = [c[-1] if subgraphs else c for c in chunks]
    names = [p.get("name") or p.get("payload", {}).get("name") for p in payloads]
    assert "__start__" not in names and "p1" in names


@pytest.mark.parametrize("mode", MODES + [MODES])
def test_stream_mode_chunks(mode) -> None:
    def sc(lib, saver, durability):
        return _chunks(lib, saver, mode, True, durability)

    h.run_parity(sc, "sqlite")


async def test_astream_tasks_and_debug() -> None:
    async def sc(lib, saver, durability):
        graph = parent_graph(lib, saver, child_graph(lib))
        kw = {"stream_mode": ["tasks", "debug"], "subgraphs": True}
        first = [_scrub(c) async for c in graph.astream({"value": []}, CFG, **kw)]
        resumed = [_scrub(c) async for c in graph.astream(lib.Command(resume="ok"), CFG, **kw)]
        return [("first", first), ("resumed", resumed)]

    await h.arun_parity(sc)


def custom_graph(lib, saver):
    """Nodes in the root and in a subgraph emit custom chunks via get_stream_writer()."""
    import importlib

    writer = importlib.import_module(f"{lib.name}.config").get_stream_writer

    def emit(tag):
        def node(state):
            writer()({"from": tag, "seen": list(state["value"])})
            return {"value": [tag]}

        return node

    child = lib.StateGraph(State).add_node("c", emit("c")).add_edge(lib.START, "c").compile()
    return (
        lib.StateGraph(State)
        .add_node("p", emit("p"))
        .add_node("child", child)
        .add_edge(lib.START, "p")
        .add_edge("p", "child")
        .compile(checkpointer=saver)
    )


@pytest.mark.parametrize("subgraphs", [False, True], ids=["root", "subgraphs"])
@pytest.mark.parametrize("mode", ["custom", ["custom", "updates"]], ids=["custom", "mixed"])
def test_custom_stream_writer(mode, subgraphs: bool) -> None:
    def sc(lib, saver, durability):
        graph = custom_graph(lib, saver)
        kw = {"stream_mode": mode, "subgraphs": subgraphs}
        return [("chunks", list(graph.stream({"value": []}, CFG, **kw)))]

    h.run_parity(sc)


async def test_custom_stream_writer_async() -> None:
    async def sc(lib, saver, durability):
        graph = custom_graph(lib, saver)
        kw = {"stream_mode": ["custom", "values"], "subgraphs": True}
        return [("chunks", [c async for c in graph.astream({"value": []}, CFG, **kw)])]

    await h.arun_parity(sc)
