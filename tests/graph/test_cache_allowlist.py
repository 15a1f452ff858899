"""The node cache trusts the graph's classes as its saver does.

A cached node returning a model of the state schema raised "not registered" on
every run and cached nothing: the cache serialized with the default serializer,
which never got the compiled graph's classes (LangGraph caches it).
"""

from __future__ import annotations

import asyncio
import enum
from typing import TypedDict

import pydantic
import pytest

from threadloom.cache.memory import InMemoryCache
from threadloom.cache.sqlite import SqliteCache
from threadloom.checkpoint.serde import default_serializer
from threadloom.graph import END, START, StateGraph
from threadloom.types import CachePolicy


class Status(str, enum.Enum):
    PENDING = "pending"


class Ticket(pydantic.BaseModel):
    title: str
    status: str = Status.PENDING


class S(TypedDict):
    q: str
    t: Ticket


class Other(pydantic.BaseModel):
    n: int


class OS(TypedDict):
    o: Other


def _graph(calls: list) -> StateGraph:
    def mk(state: S) -> dict:
        calls.append(1)
        return {"t": Ticket(title=state["q"])}

    b = StateGraph(S)
    b.add_node("mk", mk, cache_policy=CachePolicy())
    b.add_edge(START, "mk")
    b.add_edge("mk", END)
    return b


@pytest.mark.parametrize("make", [InMemoryCache, SqliteCache])
def test_a_cached_node_returning_a_schema_model_is_cached(make):
    calls: list = []
    cache = make()
    app = _graph(calls).compile(cache=cache)
    assert app.cache is cache  # widened in place: the user's object is the graph's
    for _ in range(2):
        out = app.invoke({"q": "x"})
        assert out["t"] == Ticket(title="x") and out["t"].status is Status.PENDING
    assert len(calls) == 1


def test_async_run_caches_too():
    calls: list = []
    app = _graph(calls).compile(cache=InMemoryCache())

    async def main() -> None:
        for _ in range(2):
            out = await app.ainvoke({"q": "y"})
            assert out["t"].title == "y"

    asyncio.run(main())
    assert len(calls) == 1


def test_a_shared_cache_trusts_each_graphs_classes_and_leaves_serializers_alone():
    shared = default_serializer()
    cache = InMemoryCache(serde=shared)
    _graph([]).compile(cache=cache)
    b = StateGraph(OS)
    b.add_node("n", lambda s: {"o": Other(n=1)}, cache_policy=CachePolicy())
    b.add_edge(START, "n")
    app = b.compile(cache=cache)
    assert app.invoke({"o": Other(n=0)})["o"] == Other(n=1)
    assert app.invoke({"o": Other(n=0)})["o"] == Other(n=1)
    assert cache.serde is not shared  # a widened copy; the user's serializer is not changed
    from threadloom.errors import SerializationError

    with pytest.raises(SerializationError, match="not registered"):
        shared.dumps_typed(Other(n=1))
    cache.serde.dumps_typed(Ticket(title="x"))  # the first graph's classes stay trusted


def test_a_subgraph_called_from_a_node_caches_in_its_parents_cache():
    calls: list = []
    sub = _graph(calls).compile()

    def call_sub(state: OS) -> dict:
        sub.invoke({"q": "z"})
        return {}

    b = StateGraph(OS)
    b.add_node("n", call_sub)
    b.add_edge(START, "n")
    parent = b.compile(cache=InMemoryCache())
    for _ in range(2):
        parent.invoke({"o": Other(n=0)})
    assert len(calls) == 1
