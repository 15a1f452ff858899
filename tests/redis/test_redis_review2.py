"""Second-review fixes (session 8, /tmp/s8/review2): retention flows re-arming
TTLs, the thread index losing a live thread after a delete, the own-TTL field
colliding with a write index, a move_prefix that could not resume, an infinite
set_thread_ttl.

Time passing is simulated by shortening the keys' TTL, so no test sleeps.
"""

from __future__ import annotations

import math

import pytest
import redis

from tests.redis.test_redis_expiry import old_saver
from tests.redis.test_redis_saver import cfg
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver
from threadloom.checkpoint.redis.upgrade import move_prefix
from threadloom.errors import ConfigError, StorageError

pytestmark = pytest.mark.redis

SHORT = 30  # what is left of a thread's TTL "later"


@pytest.fixture
def saver(redis_client: redis.Redis, key_prefix: str) -> RedisSaver:
    return RedisSaver(redis_client, key_prefix=key_prefix, ttl=3000)


def history(saver: RedisSaver, thread: str, n: int = 4, runs: int = 1) -> None:
    config = cfg(thread)
    for i in range(n):
        meta = {"step": i, "run_id": f"r{i % runs}"}
        config = saver.put(config, empty_checkpoint(), meta, {})


def age(client: redis.Redis, saver: RedisSaver, thread: str) -> list[str]:
    """Shorten the thread's keys' TTL to SHORT; returns the keys that exist."""
    keys = [k for k in saver.layout.thread_keys(thread) if client.exists(k)]
    for k in keys:
        client.expire(k, SHORT)
    return keys


def rearmed(client: redis.Redis, keys: list[str]) -> list[str]:
    return [k for k in keys if client.ttl(k) > SHORT]


# -- 1. retention flows re-arm no TTL -------------------------------------------------


@pytest.mark.parametrize("dry_run", [True, False])
def test_prune_keeps_no_idle_thread_alive(saver, redis_client, dry_run) -> None:
    history(saver, "t1")
    keys = age(redis_client, saver, "t1")
    report = saver.prune(["t1"], strategy="keep_latest", dry_run=dry_run)
    assert report.checkpoints == 3
    assert rearmed(redis_client, keys) == []
    assert all(0 < redis_client.ttl(k) <= SHORT for k in keys if redis_client.exists(k))


def test_delete_for_runs_keeps_no_idle_thread_alive(saver, redis_client) -> None:
    history(saver, "t1", runs=2)
    keys = age(redis_client, saver, "t1")
    saver.delete_for_runs(["r1"])
    assert rearmed(redis_client, keys) == []
    assert len(list(saver.list(cfg("t1")))) == 2  # a read: re-arms (checked last)


def test_copy_thread_arms_the_target_not_the_source(saver, redis_client) -> None:
    history(saver, "src")
    keys = age(redis_client, saver, "src")
    saver.copy_thread("src", "dst")
    assert rearmed(redis_client, keys) == []
    dst = [k for k in saver.layout.thread_keys("dst") if redis_client.exists(k)]
    assert dst and all(redis_client.ttl(k) > SHORT for k in dst)


def test_reading_a_thread_still_rearms_it(saver, redis_client) -> None:
    history(saver, "t1")
    keys = age(redis_client, saver, "t1")
    assert len(list(saver.list(cfg("t1")))) == 4
    assert set(rearmed(redis_client, keys)) >= {k for k in keys if k.endswith((":ck", ":row"))}


async def test_async_prune_dry_run_keeps_no_idle_thread_alive(
    redis_url, redis_client, key_prefix
) -> None:
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=3000) as s:
        config = cfg("t1")
        for i in range(3):
            config = await s.aput(config, empty_checkpoint(), {"step": i}, {})
        keys = age(redis_client, s, "t1")
        report = await s.aprune(["t1"], strategy="keep_latest", dry_run=True)
        assert report.checkpoints == 2
        assert rearmed(redis_client, keys) == []


# -- 2. delete_thread and a put racing it: the thread stays in the index --------------


def test_put_between_delete_and_index_cleanup_stays_indexed(saver, key_prefix) -> None:
    other = RedisSaver(saver.client, key_prefix=key_prefix)  # another process
    saver.put(cfg("t1"), empty_checkpoint(), {"step": 0, "run_id": "r1"}, {})
    send = saver._send

    def put_first(calls):  # the other put lands just before the SREM
        if calls and calls[0].args[0] == "SREM":
            other.put(cfg("t1"), empty_checkpoint(), {"step": 0, "run_id": "r2"}, {})
        return send(calls)

    saver._send = put_first
    saver.delete_thread("t1")
    saver._send = send
    assert saver.get_tuple(cfg("t1")) is not None
    assert "t1" in {t.config["configurable"]["thread_id"] for t in saver.list(None)}
    other.delete_for_runs(["r2"])
    assert saver.get_tuple(cfg("t1")) is None


def test_delete_thread_still_leaves_the_index(saver, redis_client) -> None:
    history(saver, "t1")
    saver.delete_thread("t1")
    assert not redis_client.sismember(saver.layout.threads(), "t1")


# -- 3. the own-TTL field cannot be a write index ------------------------------------


def test_checkpoint_named_ttl_keeps_the_thread_working(saver, redis_client) -> None:
    cp = empty_checkpoint()
    cp["id"] = "ttl"
    saved = saver.put(cfg("t1"), cp, {"step": 0}, {})
    saver.put_writes(saved, [("ch", 1)], "task-1")
    saver.set_thread_ttl("t1", 600)
    tup = saver.get_tuple(cfg("t1"))
    assert tup.checkpoint["id"] == "ttl"
    assert tup.pending_writes == [("task-1", "ch", 1)]
    keys = saver.layout.thread_keys("t1")
    assert all(0 < redis_client.ttl(k) <= 600 for k in keys if redis_client.exists(k))


# -- 4. move_prefix resumes ----------------------------------------------------------


class _Flaky(redis.Redis):
    """Loses the connection at the n-th DEL."""

    fail_at = 4
    calls = 0

    def delete(self, *keys):
        type(self).calls += 1
        if type(self).calls == self.fail_at:
            raise redis.ConnectionError("connection lost")
        return super().delete(*keys)


def test_move_prefix_stopped_midway_finishes_on_rerun(redis_url, redis_client, key_prefix):
    old, new = f"{key_prefix}:tenant", f"{key_prefix}-tenant"
    writer = old_saver(redis_client, old, ttl=600)
    for t in ("a", "b", "c"):
        history(writer, t, n=2)
    flaky = _Flaky.from_url(redis_url)
    with pytest.raises(StorageError, match="call it again") as info:
        move_prefix(flaky, old, new)
    assert isinstance(info.value.__cause__, redis.ConnectionError)
    flaky.close()
    moved = move_prefix(redis_client, old, new)
    assert moved > 0
    assert not [k for p in writer.layout.patterns() for k in redis_client.scan_iter(match=p)]
    saver = RedisSaver(redis_client, key_prefix=new)
    for t in ("a", "b", "c"):
        assert len(list(saver.list(cfg(t)))) == 2
    assert redis_client.get(f"{{{new}}}:moving-from") is None
    with pytest.raises(ConfigError, match="exist already"):
        move_prefix(redis_client, old, new)


def test_move_prefix_refuses_a_prefix_in_use(redis_client, key_prefix) -> None:
    old, new = f"{key_prefix}:tenant", f"{key_prefix}-tenant"
    history(old_saver(redis_client, old, ttl=600), "a", n=1)
    history(RedisSaver(redis_client, key_prefix=new), "b", n=1)
    with pytest.raises(ConfigError, match="exist already"):
        move_prefix(redis_client, old, new)
    redis_client.set(f"{{{new}}}:moving-from", b"elsewhere")
    with pytest.raises(ConfigError, match="unfinished move"):
        move_prefix(redis_client, old, new)


def test_move_prefix_to_a_prefix_whose_threads_were_deleted(redis_client, key_prefix) -> None:
    """Only op keys of deleted threads left under the target (they expire within
    minutes): not data, so the move goes ahead (it was refused as in use)."""
    old, new = f"{key_prefix}:tenant", f"{key_prefix}-tenant"
    history(old_saver(redis_client, old, ttl=600), "a", n=1)
    target = RedisSaver(redis_client, key_prefix=new)
    history(target, "gone", n=2)
    target.delete_thread("gone")
    assert any(b"}:op:" in k for k in redis_client.scan_iter(match=f"{{{new}:*"))
    assert move_prefix(redis_client, old, new) > 0
    assert RedisSaver(redis_client, key_prefix=new).get_tuple(cfg("a")) is not None


# -- 5. set_thread_ttl(inf) ----------------------------------------------------------


def test_infinite_thread_ttl_means_never(saver, redis_client) -> None:
    history(saver, "t1", n=1)
    saver.set_thread_ttl("t1", math.inf)
    saver.put(cfg("t1"), empty_checkpoint(), {"step": 9}, {})
    keys = [k for k in saver.layout.thread_keys("t1") if redis_client.exists(k)]
    assert keys and all(redis_client.ttl(k) == -1 for k in keys)
    saver.set_thread_ttl("t1", 1e300)  # beyond what EXPIRE takes: never, too
    assert all(redis_client.ttl(k) == -1 for k in keys)


@pytest.mark.parametrize("bad", [-math.inf, -1, math.nan, 0])
def test_bad_thread_ttl_is_a_config_error(saver, bad) -> None:
    with pytest.raises(ConfigError):
        saver.set_thread_ttl("t1", bad)


def test_saver_ttl_reads_as_the_sql_savers(redis_client, key_prefix) -> None:
    assert RedisSaver(redis_client, key_prefix=key_prefix, ttl=math.inf).ttl is None
    assert RedisSaver(redis_client, key_prefix=key_prefix, ttl=0.5).ttl == 1  # rounded up
    assert RedisSaver(redis_client, key_prefix=key_prefix, ttl="60").ttl == 60
    for bad in (math.nan, -1, 0, True, "soon"):
        with pytest.raises(ConfigError, match="ttl must be"):
            RedisSaver(redis_client, key_prefix=key_prefix, ttl=bad)
