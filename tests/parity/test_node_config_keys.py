"""Parity: the top-level keys of a node's config (review3 r5). LangGraph's node
sees callbacks, configurable and metadata; tags, ``recursion_limit`` and
``max_concurrency`` only when the caller set them (tags also when the node has
its own); never the caller's ``run_name`` or ``run_id``; any other top-level
key moved into configurable. A LangChain runnable called with the node's config
took the caller's ``run_name`` as its trace name."""

from __future__ import annotations

import asyncio
import operator
import uuid
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableLambda
from typing_extensions import TypedDict

from tests.parity import helpers as h


class S(TypedDict):
    x: Annotated[list, operator.add]


CALLER_CONFIGS = [
    {},
    {"run_name": "R", "run_id": uuid.uuid4(), "tags": [], "user_key": "u"},
    {"run_name": "R", "tags": ["T"], "recursion_limit": 30, "max_concurrency": 2},
    {"recursion_limit": 10_007, "user_key": None, "empty": {}},
]


def _seen(config: dict[str, Any]) -> dict[str, Any]:
    kept = ("tags", "recursion_limit", "max_concurrency", "run_name", "user_key", "empty")
    return {
        "top": sorted(config),
        "values": {k: config[k] for k in kept if k in config},
        "conf": {k: v for k, v in config["configurable"].items() if k in kept},
    }


def _app(lib: Any, saver: Any, seen: dict[str, Any], use_async: bool) -> Any:
    def record(name: str, config: dict[str, Any]) -> dict[str, Any]:
        seen[name] = _seen(config)
        return {"x": [name]}

    async def anode(state, config):  # untyped: LangGraph wants RunnableConfig here
        return record("root", config)

    inner = lib.StateGraph(S)
    inner.add_node("ia", lambda s, config: record("sub", config))
    inner.add_edge(lib.START, "ia")
    g = lib.StateGraph(S)
    g.add_node("a", anode if use_async else (lambda s, config: record("root", config)))
    g.add_node("sub", inner.compile())
    g.add_edge(lib.START, "a")
    g.add_edge("a", "sub")
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("caller", CALLER_CONFIGS)
def test_node_config_keys(caller: dict[str, Any]) -> None:
    def sc(lib, saver, durability):
        seen: dict = {}
        config = {**caller, "configurable": {"thread_id": "t"}}
        _app(lib, saver, seen, False).invoke({"x": []}, config)
        asyncio.run(_app(lib, None, seen_a := {}, True).ainvoke({"x": []}, dict(caller)))
        return [("sync", seen), ("async", seen_a)]

    h.run_parity(sc)


class _Names(BaseCallbackHandler):
    def __init__(self) -> None:
        self.names: list[str] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.names.append(kwargs.get("name") or "")


def test_a_runnable_called_with_the_node_config_traces_under_its_own_name() -> None:
    lib = h._lib("threadloom")
    inner = RunnableLambda(lambda x: x, name="inner")

    def a(state, config):
        return {"x": [inner.invoke("a", config)]}

    g = lib.StateGraph(S)
    g.add_node("a", a)
    g.add_edge(lib.START, "a")
    names = _Names()
    g.compile().invoke({"x": []}, {"run_name": "R", "callbacks": [names]})
    assert "inner" in names.names and "R" not in names.names
