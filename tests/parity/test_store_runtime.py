"""Parity: ``compile(store=...)`` reaches nodes as ``runtime.store``, ``store=`` and ``get_store()``.

threadloom ships no store; any object with LangGraph's ``BaseStore`` API is handed
through (LangGraph's ``InMemoryStore`` here), to subgraphs too, sync and async.
"""

from __future__ import annotations

import importlib
import operator
from typing import Annotated

import pytest
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t"}}


class S(TypedDict):
    x: Annotated[list, operator.add]


def _nodes(lib):
    get_store = importlib.import_module(f"{lib.name}.config").get_store

    def by_runtime(state, runtime):
        runtime.store.put(("u",), "k", {"v": 1})
        return {"x": [runtime.store.get(("u",), "k").value["v"]]}

    def by_param(state, *, store):
        return {"x": [store.get(("u",), "k").value["v"] + 1]}

    def by_getter(state):
        return {"x": [get_store().get(("u",), "k").value["v"] + 2]}

    async def by_getter_async(state):
        return {"x": [get_store().get(("u",), "k").value["v"] + 3]}

    return by_runtime, by_param, by_getter, by_getter_async


def _chain(lib, nodes, **compile_kw):
    g = lib.StateGraph(S)
    prev = lib.START
    for i, fn in enumerate(nodes):
        g.add_node(f"n{i}", fn)
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    return g.compile(**compile_kw)


def _graph(lib, saver, store, *, sub: bool):
    a, b, c, d = _nodes(lib)
    if not sub:
        return _chain(lib, [a, b, c], checkpointer=saver, store=store)
    child = _chain(lib, [b, c])  # compiled without a store: it uses its parent's
    return _chain(lib, [a, child], checkpointer=saver, store=store)


@pytest.mark.parametrize("sub", [False, True], ids=["root", "subgraph"])
def test_store_reaches_nodes(sub: bool) -> None:
    def sc(lib, saver, durability):
        app = _graph(lib, saver, InMemoryStore(), sub=sub)
        no_store = _graph(lib, saver, None, sub=sub)
        return [
            ("with", h.raises(lambda: app.invoke({"x": []}, CFG), lib)),
            ("none", h.raises(lambda: no_store.invoke({"x": []}, CFG), lib)),
        ]

    h.run_parity(sc)
    lib = h._lib("threadloom")
    with h.open_saver(lib, "memory") as saver:
        out = _graph(lib, saver, InMemoryStore(), sub=sub).invoke({"x": []}, CFG)
    # a subgraph returns its whole state, so the parent's list gets the 1 twice
    assert out == {"x": [1, 1, 2, 3] if sub else [1, 2, 3]}


@pytest.mark.parametrize("sub", [False, True], ids=["root", "subgraph"])
async def test_store_async_nodes(sub: bool) -> None:
    async def sc(lib, saver, durability):
        a, b, _, d = _nodes(lib)
        nodes = [a, _chain(lib, [b, d])] if sub else [a, b, d]
        app = _chain(lib, nodes, checkpointer=saver, store=InMemoryStore())
        return [("run", await app.ainvoke({"x": []}, CFG))]

    await h.arun_parity(sc)


def test_get_store_and_writer_outside_a_run() -> None:
    def sc(lib, saver, durability):
        cfg = importlib.import_module(f"{lib.name}.config")
        return [
            ("store", h.raises(cfg.get_store, lib)),
            ("writer", h.raises(cfg.get_stream_writer, lib)),
        ]

    h.run_parity(sc)


@pytest.mark.parametrize("how", ["runtime", "get_store"])
def test_store_in_update_state_routers(how: str) -> None:
    """update_state(as_node=...) runs the node's routing function, which sees the store.

    Not a parity test: LangGraph raises there (a ValueError for a ``runtime``
    parameter, a KeyError from ``get_store()``).
    """
    from threadloom.checkpoint.memory import InMemorySaver
    from threadloom.config import get_store
    from threadloom.graph import START, StateGraph

    st = InMemoryStore()
    st.put(("u",), "route", {"to": "b"})

    def by_runtime(state, runtime):
        return runtime.store.get(("u",), "route").value["to"]

    def by_getter(state):
        return get_store().get(("u",), "route").value["to"]

    g = StateGraph(S)
    for n in "abc":
        g.add_node(n, lambda s, n=n: {"x": [n]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", by_runtime if how == "runtime" else by_getter, ["b", "c"])
    app = g.compile(checkpointer=InMemorySaver(), store=st)
    app.update_state(CFG, {"x": ["u"]}, as_node="a")
    assert app.get_state(CFG).next == ("b",)
    assert app.invoke(None, CFG) == {"x": ["u", "b"]}
