"""A thread whose run holds its lease does not expire mid-run (probeprod).

With ``ttl=1`` and a node running longer than that, the thread's keys used to
expire under the run: its history shrank and the oldest checkpoint left named a
missing parent. The run's lease now keeps the thread's keys alive (acquire,
renewal, every touch while it is held) and re-arms them to the TTL on release.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from typing import Annotated, TypedDict

import pytest
import redis

from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver
from threadloom.graph import END, START, StateGraph

pytestmark = pytest.mark.redis

TTL = 1
NODE_SECONDS = 2.5


class State(TypedDict):
    n: Annotated[list, operator.add]


def graph(slow):
    g = StateGraph(State)
    g.add_node("a", slow)
    g.add_node("b", lambda s: {"n": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


def slow_node(state: State) -> dict:
    if state["n"][-1] == "slow":
        time.sleep(NODE_SECONDS)
    return {"n": ["a"]}


async def aslow_node(state: State) -> dict:
    if state["n"][-1] == "slow":
        await asyncio.sleep(NODE_SECONDS)
    return {"n": ["a"]}


def check_history(history: list, client: redis.Redis, saver) -> None:
    assert [len(s.values.get("n", [])) for s in history] == [6, 5, 4, 3, 3, 2, 1, 0]
    assert history[-1].parent_config is None
    ttls = [client.pttl(k) for k in saver.layout.thread_keys("long") if client.exists(k)]
    assert ttls and all(0 < t <= TTL * 1000 for t in ttls)  # re-armed to the TTL at release


def test_sync_run_longer_than_ttl_keeps_its_thread(redis_client, key_prefix) -> None:
    saver = RedisSaver(redis_client, key_prefix=key_prefix, ttl=TTL)
    app = graph(slow_node).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "long"}}
    app.invoke({"n": ["x"]}, config)
    out = app.invoke({"n": ["slow"]}, config)
    assert out["n"] == ["x", "a", "b", "slow", "a", "b"]
    check_history(list(app.get_state_history(config)), redis_client, saver)


def test_async_run_longer_than_ttl_keeps_its_thread(redis_url, redis_client, key_prefix) -> None:
    async def main() -> None:
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=TTL) as s:
            app = graph(aslow_node).compile(checkpointer=s)
            config = {"configurable": {"thread_id": "long"}}
            await app.ainvoke({"n": ["x"]}, config)
            out = await app.ainvoke({"n": ["slow"]}, config)
            assert out["n"] == ["x", "a", "b", "slow", "a", "b"]
            check_history([h async for h in app.aget_state_history(config)], redis_client, s)

    asyncio.run(main())


def test_thread_without_a_run_still_expires(redis_client, key_prefix) -> None:
    saver = RedisSaver(redis_client, key_prefix=key_prefix, ttl=TTL)
    app = graph(slow_node).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "long"}}
    app.invoke({"n": ["x"]}, config)
    assert redis_client.exists(*saver.layout.thread_keys("long")) > 0
    time.sleep(TTL + 0.5)
    assert redis_client.exists(*saver.layout.thread_keys("long")) == 0


@pytest.mark.parametrize("saver_ttl", [TTL, None])
def test_set_thread_ttl_mid_run_keeps_the_thread_until_the_lease_ends(
    redis_client, key_prefix, saver_ttl
) -> None:
    """set_thread_ttl(t, 1) from another thread while a run holds t's lease: the
    keys take the longer of the new TTL and the lease's remaining life (it set
    every key to 1 s, and the history lost its older checkpoints mid-run)."""
    saver = RedisSaver(redis_client, key_prefix=key_prefix, ttl=saver_ttl)
    app = graph(slow_node).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "long"}}
    app.invoke({"n": ["x"]}, config)
    timer = threading.Timer(0.5, lambda: saver.set_thread_ttl("long", 1))
    timer.start()
    try:
        out = app.invoke({"n": ["slow"]}, config)
    finally:
        timer.join()
    assert out["n"] == ["x", "a", "b", "slow", "a", "b"]
    check_history(list(app.get_state_history(config)), redis_client, saver)
