"""Op keys store replies, never checkpoint values (checkpoint/redis/once.py).

Each write script stores its reply in an op key for minutes. ``drop`` answered
with the payload of every blob it deleted, so a prune of 835 KB left a 918 KB op
key (Redis memory went up; under ``noeviction`` a prune meant to free memory
kept Redis full), and the pruned values stayed readable under ``{p:t}:op:*``
after ``delete_thread``. ``drop`` now answers hash, children and size.
"""

from __future__ import annotations

import os

import pytest
import redis

from tests.redis.conftest import is_op_key, keys_under
from tests.redis.test_redis_saver import blob_accounting, cfg, put_steps
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.redis import RedisSaver
from threadloom.checkpoint.redis.fields import blob_row

pytestmark = pytest.mark.redis


def blobs(client: redis.Redis, saver: RedisSaver, thread: str) -> dict[bytes, bytes]:
    """hash -> stored data of every blob of ``thread``."""
    key = saver.layout.thread_keys(thread)[4]
    return {h: blob_row(h, p).data for h, p in client.hgetall(key).items()}


def op_values(client: redis.Redis, prefix: str) -> list[bytes]:
    return [client.get(k) or b"" for k in keys_under(client, prefix) if is_op_key(k)]


def test_pruned_and_deleted_values_stay_in_no_op_key(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        put_steps(saver, "t", 30)  # appended lists: manifests whose segments cascade
        parent = saver.get_tuple(cfg("t")).config
        for i in range(10):  # large values, each its own blob
            cp = {**saver.get_tuple(parent).checkpoint, "id": empty_checkpoint()["id"]}
            cp["channel_values"]["doc"] = os.urandom(5000).hex()
            cp["channel_versions"]["doc"] = str(100 + i)
            parent = saver.put(parent, cp, {"step": 30 + i}, {"doc": str(100 + i)})
        before = blobs(redis_client, saver, "t")
        dry = saver.prune(["t"], strategy="keep_latest", dry_run=True)  # reads the blobs
        report = saver.prune(["t"], strategy="keep_latest")
        after = blobs(redis_client, saver, "t")
        gone = {h: d for h, d in before.items() if h not in after}
        assert gone and report.blobs == len(gone) == dry.blobs
        assert report.bytes_freed == dry.bytes_freed  # the sizes drop answers are right
        stored, held = blob_accounting(redis_client, saver.layout, "t")
        assert stored == held  # children came back right: the cascade counted exactly
        saver.delete_thread("t")
        values = op_values(redis_client, key_prefix)
        assert values
        for data in before.values():
            if len(data) >= 64:
                assert not any(data[:64] in v for v in values), "an op key holds value bytes"
        assert sum(len(v) for v in values) < 20_000  # replies: hashes and counts


def test_drop_of_a_damaged_blob_counts_its_stored_length(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    """A blob value not of the packed shape is dropped with no children."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        cp = empty_checkpoint()
        cp["channel_values"] = {"doc": "d" * 300}
        cp["channel_versions"] = {"doc": "1"}
        saver.put(cfg("t"), cp, {"step": 0}, {"doc": "1"})
        blob, rc = saver.layout.thread_keys("t")[4:6]
        h = next(iter(redis_client.hkeys(blob)))
        redis_client.hset(blob, h, b"not msgpack at all")
        redis_client.hset(rc, h, 0)
        (reply,) = saver._send([saver.planner.lua("drop", "t", h)])
        assert reply == [h, b"", len(b"not msgpack at all")]
