"""Per-node RetryPolicy and CachePolicy with InMemoryCache / SqliteCache."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from threadloom.cache import InMemoryCache, SqliteCache
from threadloom.channels import LastValue
from threadloom.pregel import NodeBuilder, Pregel
from threadloom.types import CachePolicy, RetryPolicy


def flaky_graph(failures: int, policy: RetryPolicy, calls: Counter) -> Pregel:
    def node(x):
        calls["n"] += 1
        if calls["n"] <= failures:
            raise ConnectionError("transient")
        return x * 2

    return Pregel(
        nodes={
            "n": NodeBuilder().subscribe_only("a").do(node).write_to("b").add_retry_policies(policy)
        },
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )


def test_retry_until_success():
    calls: Counter = Counter()
    app = flaky_graph(2, RetryPolicy(initial_interval=0.001, jitter=False, max_attempts=3), calls)
    assert app.invoke(4) == 8
    assert calls["n"] == 3


def test_retry_gives_up_after_max_attempts():
    calls: Counter = Counter()
    app = flaky_graph(5, RetryPolicy(initial_interval=0.001, jitter=False, max_attempts=2), calls)
    with pytest.raises(ConnectionError):
        app.invoke(1)
    assert calls["n"] == 2


def test_retry_only_matching_exceptions():
    calls: Counter = Counter()
    app = flaky_graph(1, RetryPolicy(initial_interval=0.001, retry_on=KeyError), calls)
    with pytest.raises(ConnectionError):
        app.invoke(1)
    assert calls["n"] == 1


def test_retry_async():
    calls: Counter = Counter()
    app = flaky_graph(1, RetryPolicy(initial_interval=0.001, jitter=False), calls)
    assert asyncio.run(app.ainvoke(3)) == 6


def test_graph_level_retry_policy_is_default():
    calls: Counter = Counter()

    def node(x):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("once")
        return x

    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(node).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        retry_policy=RetryPolicy(initial_interval=0.001, jitter=False),
    )
    assert app.invoke(1) == 1 and calls["n"] == 2


@pytest.mark.parametrize("make_cache", [InMemoryCache, SqliteCache])
def test_cache_policy_skips_repeat_inputs(make_cache):
    calls: Counter = Counter()

    def node(x):
        calls[x] += 1
        return x * 3

    cache = make_cache()
    policy = CachePolicy(key_func=lambda x: str(x))
    app = Pregel(
        nodes={
            "n": NodeBuilder().subscribe_only("a").do(node).write_to("b").add_cache_policy(policy)
        },
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        cache=cache,
    )
    assert app.invoke(2) == 6
    assert app.invoke(2) == 6
    assert app.invoke(5) == 15
    assert calls == Counter({2: 1, 5: 1})
    updates = list(app.stream(2, stream_mode="updates"))
    assert updates == [{"n": {"b": 6}, "__metadata__": {"cached": True}}]
    app.clear_cache(["n"])
    assert app.invoke(2) == 6 and calls[2] == 2
    asyncio.run(app.aclear_cache())
    assert app.invoke(5) == 15 and calls[5] == 2


def test_cache_ttl_expires():
    cache = InMemoryCache()
    cache.set({(("ns",), "k"): ("v", 1)})
    assert cache.get([(("ns",), "k")]) == {(("ns",), "k"): "v"}
    cache._data[("ns",)]["k"] = (*cache._data[("ns",)]["k"][:2], 0.0)
    assert cache.get([(("ns",), "k")]) == {}


def test_cache_async_driver():
    calls: Counter = Counter()

    async def node(x):
        calls[x] += 1
        return x + 1

    app = Pregel(
        nodes={
            "n": NodeBuilder()
            .subscribe_only("a")
            .do(node)
            .write_to("b")
            .add_cache_policy(CachePolicy(key_func=str))
        },
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        cache=SqliteCache(),
    )

    async def go():
        return [await app.ainvoke(1), await app.ainvoke(1)]

    assert asyncio.run(go()) == [2, 2]
    assert calls[1] == 1
