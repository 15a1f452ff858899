"""Parity: the config a node receives (and ``get_config()``): the caller's tags come
first, and the run's coordinates (``thread_id``, a subgraph's ``checkpoint_ns``) are
in its metadata, as tracers read them there."""

from __future__ import annotations

import importlib
import operator
from typing import Annotated

from typing_extensions import TypedDict

from tests.parity import helpers as h


class S(TypedDict):
    x: Annotated[list, operator.add]


def _seen(config, get_config) -> dict:
    meta = dict(config.get("metadata", {}))
    meta.pop("langgraph_checkpoint_ns", None)  # ids differ: its shape is covered elsewhere
    return {
        "top": sorted(config),
        "conf": sorted(k for k in config.get("configurable", {}) if not k.startswith("__")),
        "meta": meta,
        "tags": config.get("tags"),
        "same": sorted(get_config()) == sorted(config),
        "rl": config.get("recursion_limit"),
    }


def _app(lib, saver, seen):
    get_config = importlib.import_module(f"{lib.name}.config").get_config

    def node(name):
        def fn(state, config):
            seen[name] = _seen(config, get_config)
            return {"x": [name]}

        return fn

    inner = lib.StateGraph(S)
    inner.add_node("ia", node("inner"))
    inner.add_edge(lib.START, "ia")
    sub = lib.StateGraph(S)
    sub.add_node("sa", node("sub"))
    sub.add_node("deep", inner.compile())
    sub.add_edge(lib.START, "sa")
    sub.add_edge("sa", "deep")
    g = lib.StateGraph(S)
    g.add_node("a", node("root"))
    g.add_node("sub", sub.compile())
    g.add_edge(lib.START, "a")
    g.add_edge("a", "sub")
    return g.compile(checkpointer=saver)


def test_node_config_tags_and_metadata() -> None:
    def sc(lib, saver, durability):
        seen: dict = {}
        config = {
            "configurable": {"thread_id": "t", "user_key": "k"},
            "metadata": {"m": 1},
            "tags": ["t1", "t2"],
            "recursion_limit": 9,
        }
        out = _app(lib, saver, seen).invoke({"x": []}, config)
        return [("out", out), ("seen", seen)]

    h.run_parity(sc)
    lib = h._lib("threadloom")
    seen: dict = {}
    _app(lib, None, seen).invoke({"x": []}, {"tags": ["t1"]})
    assert seen["root"]["tags"] == ["t1"] and "thread_id" not in seen["root"]["meta"]
