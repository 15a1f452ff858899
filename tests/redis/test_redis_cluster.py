"""Redis Cluster (opt-in: THREADLOOM_TEST_REDIS_CLUSTER=redis://host:port of one node).

Threads spread over the cluster's nodes while each thread's keys stay in one
slot, so every write is a single-slot script (no CROSSSLOT). CI has no cluster;
e.g. three ``redis-server --cluster-enabled yes`` + ``redis-cli --cluster create``.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tests.redis.conftest import is_op_key
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver
from threadloom.checkpoint.redis.keys import key_slot

pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(
        not os.environ.get("THREADLOOM_TEST_REDIS_CLUSTER"),
        reason="THREADLOOM_TEST_REDIS_CLUSTER not set (opt-in)",
    ),
]
URL = os.environ.get("THREADLOOM_TEST_REDIS_CLUSTER", "")


def grow(saver: RedisSaver, thread: str, n: int) -> None:
    parent = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        versions = {"messages": str(i + 1)}
        cp["channel_values"] = {"messages": [f"m{j}" * 30 for j in range(i + 1)]}
        cp["channel_versions"] = versions
        parent = saver.put(parent, cp, {"step": i, "run_id": thread}, versions)
        saver.put_writes(parent, [("messages", ["w" * 100])], "task")


def test_threads_spread_over_nodes_and_clean_up() -> None:
    from redis.cluster import RedisCluster

    client = RedisCluster.from_url(URL)
    prefix = f"tlcluster-{uuid.uuid4().hex[:8]}"
    saver = RedisSaver(client, key_prefix=prefix, ttl=600)
    threads = [f"t{i}" for i in range(8)]
    for t in threads:
        grow(saver, t, 18)  # enough appends to seal list segments
    nodes = {client.get_node_from_key(saver.layout.tag(t)).name for t in threads}
    assert len(nodes) > 1
    assert all(len({key_slot(k) for k in saver.layout.thread_keys(t)}) == 1 for t in threads)
    assert len(list(saver.list(None, limit=1000))) == 8 * 18
    saver.prune(["t0"], strategy="keep_latest")
    saver.copy_thread("t1", "t1-copy")
    saver.delete_for_runs(["t2"])
    assert (
        len(
            saver.get_tuple({"configurable": {"thread_id": "t1-copy"}}).checkpoint[
                "channel_values"
            ]["messages"]
        )
        == 18
    )
    for t in [*threads, "t1-copy"]:
        saver.delete_thread(t)
    left = list(client.scan_iter(match=f"{{{prefix}*"))
    assert [k for k in left if not is_op_key(k)] == []  # op keys expire by themselves
    client.close()


async def test_async_cluster_client() -> None:
    from redis.asyncio.cluster import RedisCluster

    client = RedisCluster.from_url(URL)
    saver = AsyncRedisSaver(client, key_prefix=f"tlcluster-{uuid.uuid4().hex[:8]}")
    versions = {"a": "1"}
    cp = empty_checkpoint()
    cp["channel_values"] = {"a": "x" * 500}
    cp["channel_versions"] = versions
    config = {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}
    saved = await saver.aput(config, cp, {}, versions)
    assert (await saver.aget_tuple(config)).config == saved
    await saver.adelete_thread("a")
    await client.aclose()
