"""Review fixes (session 8): prefixes with ':', TTL re-arming by cross-thread
listings, the thread index growing with expired threads, a counts hash created
without a TTL, typed errors from ``from_conn_string``.

Expiry is simulated by deleting a thread's keys or shortening their TTL, so no
test sleeps.
"""

from __future__ import annotations

import os

import pytest
import redis

from tests.redis.conftest import keys_left
from tests.redis.test_redis_saver import cfg, put_steps
from threadloom.checkpoint.base import PruneReport, empty_checkpoint
from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver
from threadloom.checkpoint.redis.executor import Call, RedisPlanner
from threadloom.checkpoint.redis.index import live_threads
from threadloom.checkpoint.redis.keys import KeyLayout
from threadloom.errors import ConfigError

pytestmark = pytest.mark.redis


@pytest.fixture
def saver(redis_client: redis.Redis, key_prefix: str) -> RedisSaver:
    return RedisSaver(redis_client, key_prefix=key_prefix, ttl=300)


def put_one(saver: RedisSaver, thread: str) -> dict:
    return saver.put(cfg(thread), empty_checkpoint(), {"step": 0}, {})


def expire_now(client: redis.Redis, saver: RedisSaver, thread: str) -> None:
    """What Redis does when the thread's TTL runs out: all eight keys go."""
    client.delete(*saver.layout.thread_keys(thread))


def ttls(client: redis.Redis, saver: RedisSaver, thread: str) -> dict[str, int]:
    keys = saver.layout.thread_keys(thread)
    return {k: client.ttl(k) for k in keys if client.exists(k)}


# -- 1. a ':' in key_prefix ------------------------------------------------------


@pytest.mark.parametrize("prefix", ["acme:tenant-b", "a:", ":", "", "x{y}"])
def test_prefix_with_colon_or_brace_is_refused(redis_client, prefix: str) -> None:
    with pytest.raises(ConfigError, match="key_prefix"):
        RedisSaver(redis_client, key_prefix=prefix)


def test_prefixes_cannot_share_keys(redis_client, key_prefix) -> None:
    """The review's collision: prefix P + thread 'b:chat' vs prefix 'P:b' + 'chat'."""
    with pytest.raises(ConfigError, match="share keys"):
        RedisSaver(redis_client, key_prefix=f"{key_prefix}:tenant-b")
    other = RedisSaver(redis_client, key_prefix=f"{key_prefix}-tenant-b")
    saver = RedisSaver(redis_client, key_prefix=key_prefix)
    assert not set(other.layout.thread_keys("chat")) & set(saver.layout.thread_keys("b:chat"))
    try:
        put_one(other, "chat")
        put_one(saver, "tenant-b:chat")
        assert saver.get_tuple(cfg("tenant-b:chat")) is not None
        saver.delete_thread("tenant-b:chat")
        assert other.get_tuple(cfg("chat")) is not None
        assert not keys_left(redis_client, key_prefix)  # op keys expire by themselves
    finally:
        other.delete_thread("chat")


# -- 2. list(None) re-arms no thread's TTL ----------------------------------------


def test_cross_thread_list_does_not_rearm_ttl(saver, redis_client) -> None:
    put_steps(saver, "idle", 2)
    for k in saver.layout.thread_keys("idle"):
        redis_client.expire(k, 50)
    assert [t.metadata["step"] for t in saver.list(None, limit=1)] == [1]
    assert len(list(saver.list(None))) == 2
    assert list(saver.list(None, filter={"step": 0}))
    left = ttls(redis_client, saver, "idle")
    assert len(left) == 8 and all(0 < t <= 50 for t in left.values()), left
    assert len(list(saver.list(cfg("idle")))) == 2  # a read of that thread does re-arm
    assert all(t > 200 for t in ttls(redis_client, saver, "idle").values())


# -- 3. the thread index drops expired threads ---------------------------------------


@pytest.mark.parametrize("reader", ["list", "stats", "delete_for_runs"])
def test_index_drops_expired_threads(saver, redis_client, reader: str) -> None:
    for t in ("t0", "t1", "t2"):
        put_one(saver, t)
    expire_now(redis_client, saver, "t0")
    expire_now(redis_client, saver, "t2")
    if reader == "list":
        assert [t.config["configurable"]["thread_id"] for t in saver.list(None)] == ["t1"]
    elif reader == "stats":
        assert saver.stats()["threads"] == 1
    else:
        saver.delete_for_runs(["no-such-run"])
    assert redis_client.smembers(saver.layout.threads()) == {b"t1"}


def test_index_empty_once_every_thread_expired(saver, redis_client) -> None:
    for i in range(5):
        put_one(saver, f"t{i}")
        expire_now(redis_client, saver, f"t{i}")
    assert list(saver.list(None)) == []
    assert not redis_client.exists(saver.layout.threads())


def test_index_expires_keys_an_older_version_left_without_ttl(saver, redis_client) -> None:
    """Stores written before this fix: an expired thread whose counts hash had no
    TTL (the ADJUST defect below) loses it once a reader finds the thread dead."""
    put_one(saver, "old")
    expire_now(redis_client, saver, "old")
    rc = saver.layout.thread_keys("old")[5]
    redis_client.hset(rc, b"h" * 16, 1)  # as the old ADJUST left it: no TTL
    assert redis_client.ttl(rc) == -1
    assert list(saver.list(None)) == []
    assert 0 < redis_client.ttl(rc) <= 300
    assert not redis_client.sismember(saver.layout.threads(), "old")


def test_index_keeps_a_thread_recreated_during_the_check(key_prefix) -> None:
    """Between the check and the SREM a put may bring the thread back: it is re-added."""
    planner = RedisPlanner(KeyLayout(key_prefix), 300)
    plan = live_threads(planner)
    assert plan.send(None)[0].args[0] == "SMEMBERS"
    checks = plan.send([{b"a", b"b"}])
    assert [c.script for c in checks] == ["reap", "reap"]
    srem, *again = plan.send([0, 0])  # newest first: "b", "a"; both dead
    assert srem.args[0] == "SREM" and sorted(srem.args[2:]) == ["a", "b"]
    assert [c.script for c in again] == ["reap", "reap"]
    sadd = plan.send([2, 1, 0])  # "b" came back in between
    assert sadd == [Call(("SADD", planner.layout.threads(), "b"))]
    with pytest.raises(StopIteration) as stop:
        plan.send([1])
    assert stop.value.value == ["b"]


# -- 4. the counts hash gets the thread's TTL ----------------------------------------------


def test_rc_created_by_adjust_expires_with_the_thread(saver, redis_client) -> None:
    """A task's second put_writes of a large value on a thread holding no blob yet:
    the counts hash is first created by ADJUST, which must give it an expiry."""
    config = put_one(saver, "t")
    saver.put_writes(config, [("__error__", "x")], "task-1")
    saver.put_writes(config, [("__error__", os.urandom(2000).hex())], "task-1")
    rc = saver.layout.thread_keys("t")[5]
    assert redis_client.exists(rc)
    left = ttls(redis_client, saver, "t")
    assert all(0 < t <= 300 for t in left.values()), left
    blob = saver.layout.thread_keys("t")[4]
    if int(redis_client.info()["redis_version"].split(".")[0]) >= 7:  # PEXPIRETIME
        deadline = redis_client.execute_command("PEXPIRETIME", rc)
        assert deadline == redis_client.execute_command("PEXPIRETIME", blob)


# -- 5. from_conn_string: connection options and typed errors ----------------------------


def test_from_conn_string_passes_client_options(redis_url, key_prefix) -> None:
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, ttl=60, socket_timeout=5, client_name="tl-test"
    ) as saver:
        kwargs = saver.client.connection_pool.connection_kwargs
        assert (kwargs["socket_timeout"], saver.ttl) == (5, 60)
        assert saver.client.client_getname() == "tl-test"
        put_one(saver, "t")
        assert saver.get_tuple(cfg("t")) is not None
        saver.delete_thread("t")


async def test_async_from_conn_string_passes_client_options(redis_url, key_prefix) -> None:
    async with AsyncRedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, socket_timeout=5
    ) as saver:
        assert saver.client.connection_pool.connection_kwargs["socket_timeout"] == 5
        assert await saver.aget_tuple(cfg("nothing")) is None


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("http://127.0.0.1:6379/0", {}, "scheme 'http'"),
        ("user:secret@127.0.0.1", {}, "no scheme"),
        ("redis://127.0.0.1:notaport/0", {}, "Port"),
        ("redis://127.0.0.1:6379/0", {"no_such_option": 1}, "no_such_option"),
        ("redis://127.0.0.1:6379/0", {"decode_responses": True}, "decode_responses"),
        ("redis://127.0.0.1:6379/0", {"key_prefix": "a:b"}, "key_prefix"),
    ],
)
async def test_from_conn_string_typed_errors(url, options, match) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        with RedisSaver.from_conn_string(url, **options):
            pass
    assert "secret" not in str(err.value)
    with pytest.raises(ConfigError, match=match):
        async with AsyncRedisSaver.from_conn_string(url, **options):
            pass


# -- upgrading a store written under a prefix with ':' ------------------------------------


def old_saver(client: redis.Redis, prefix: str, ttl: int | None) -> RedisSaver:
    """A saver writing as versions before the ':' check did (same layout, any prefix)."""
    saver = RedisSaver(client, ttl=ttl)
    layout = KeyLayout.__new__(KeyLayout)
    layout.prefix = prefix
    saver.layout = saver.planner.layout = layout
    return saver


def test_move_prefix_makes_an_old_store_readable(redis_client, key_prefix) -> None:
    from threadloom.checkpoint.redis.upgrade import move_prefix

    old, new = f"{key_prefix}:tenant", f"{key_prefix}-tenant"
    writer = old_saver(redis_client, old, ttl=600)
    configs = put_steps(writer, "user:1", 3)
    put_steps(writer, "t2", 1)
    before = [t.checkpoint for t in writer.list(cfg("user:1"))]
    with pytest.raises(ConfigError):
        RedisSaver(redis_client, key_prefix=old)
    with pytest.raises(ConfigError, match="prefix"):
        move_prefix(redis_client, old, f"{key_prefix}:bad")
    moved = move_prefix(redis_client, old, new)
    assert moved == 8 + 8 + 1  # two threads and the index
    assert not [k for p in writer.layout.patterns() for k in redis_client.scan_iter(match=p)]
    saver = RedisSaver(redis_client, key_prefix=new, ttl=600)
    assert saver.get_tuple(cfg("user:1")).config == configs[-1]
    assert [t.checkpoint for t in saver.list(cfg("user:1"))] == before
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"user:1", "t2"}
    assert all(0 < t <= 600 for t in ttls(redis_client, saver, "t2").values())
    with pytest.raises(ConfigError, match="exist already"):
        move_prefix(redis_client, old, new)
    for t in ("user:1", "t2"):
        saver.delete_thread(t)


# -- 6. set_thread_ttl / sweep_expired ------------------------------------------------------


def test_set_thread_ttl_wins_over_ttl_and_is_kept_by_later_writes(saver, redis_client) -> None:
    put_steps(saver, "short", 2)
    put_one(saver, "other")
    saver.set_thread_ttl("short", 20)
    assert all(0 < t <= 20 for t in ttls(redis_client, saver, "short").values())
    put_steps(saver, "short", 1)  # new keys and re-armed ones: the thread's own TTL
    assert saver.get_tuple(cfg("short")) is not None
    assert all(0 < t <= 20 for t in ttls(redis_client, saver, "short").values())
    assert all(t > 200 for t in ttls(redis_client, saver, "other").values())
    for k in saver.layout.thread_keys("short"):
        redis_client.expire(k, 5)
    assert len(list(saver.list(None))) == 4  # a listing across threads re-arms nothing
    assert all(0 < t <= 5 for t in ttls(redis_client, saver, "short").values())
    saver.set_thread_ttl("short", None)  # never
    put_steps(saver, "short", 1)
    left = ttls(redis_client, saver, "short")
    assert len(left) == 8 and set(left.values()) == {-1}
    saver.delete_thread("short")  # the setting goes with the thread
    assert ttls(redis_client, saver, "short") == {}
    put_one(saver, "short")
    assert all(t > 200 for t in ttls(redis_client, saver, "short").values())


def test_set_thread_ttl_without_saver_ttl(redis_client, key_prefix) -> None:
    saver = RedisSaver(redis_client, key_prefix=key_prefix)
    saver.set_thread_ttl("b", 30)
    put_steps(saver, "a", 1)
    put_steps(saver, "b", 1)
    assert set(ttls(redis_client, saver, "a").values()) == {-1}
    assert all(0 < t <= 30 for t in ttls(redis_client, saver, "b").values())
    for bad in (0, -1, True, "60"):
        with pytest.raises(ConfigError, match="seconds"):
            saver.set_thread_ttl("b", bad)
    with pytest.raises(ConfigError, match="thread id"):
        saver.set_thread_ttl("", 5)
    saver.delete_thread("a")
    saver.delete_thread("b")


def test_sweep_expired_drops_expired_ids_from_the_index(saver, redis_client) -> None:
    put_one(saver, "gone")
    put_one(saver, "kept")
    expire_now(redis_client, saver, "gone")
    assert saver.sweep_expired() == PruneReport()
    assert redis_client.smembers(saver.layout.threads()) == {b"kept"}


async def test_async_set_thread_ttl_and_sweep(redis_url, redis_client, key_prefix) -> None:
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        await saver.aput(cfg("t"), empty_checkpoint(), {"step": 0}, {})
        await saver.aput(cfg("gone"), empty_checkpoint(), {"step": 0}, {})
        await saver.aset_thread_ttl("t", 40)
        assert all(0 < t <= 40 for t in ttls(redis_client, saver, "t").values())
        expire_now(redis_client, saver, "gone")
        assert await saver.asweep_expired() == PruneReport()
        assert redis_client.smembers(saver.layout.threads()) == {b"t"}
        await saver.adelete_thread("t")
