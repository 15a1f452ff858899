"""RedisSaver / AsyncRedisSaver: TTL, prefixes, hash tags, no orphan keys."""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot as redis_key_slot

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver
from threadloom.checkpoint.redis.keys import THREAD_PARTS, KeyLayout, key_slot
from threadloom.errors import ConfigError, StorageError

pytestmark = pytest.mark.redis


def cfg(thread: str, ns: str = "") -> dict:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}


def put_steps(saver: RedisSaver, thread: str, n: int, ns: str = "", run: str = "r1") -> list:
    """n checkpoints appending to a list (delta chunks), a big value and a write each."""
    configs, parent = [], cfg(thread, ns)
    for i in range(n):
        cp = empty_checkpoint()
        versions = {"messages": str(i + 1), "doc": "1"}
        cp["channel_values"] = {"messages": [f"m{j}" * 20 for j in range(i + 1)], "doc": "d" * 300}
        cp["channel_versions"] = versions
        new = versions if i == 0 else {"messages": str(i + 1)}
        parent = saver.put(parent, cp, {"step": i, "run_id": run}, new)
        saver.put_writes(parent, [("messages", ["w" * 200]), ("__error__", "e")], f"task{i}")
        configs.append(parent)
    return configs


@pytest.fixture
def saver(redis_url: str, key_prefix: str):
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as s:
        yield s


def test_round_trip(saver: RedisSaver) -> None:
    configs = put_steps(saver, "rt", 5)
    latest = saver.get_tuple(cfg("rt"))
    assert latest.config == configs[-1]
    assert len(latest.checkpoint["channel_values"]["messages"]) == 5
    assert latest.pending_writes == [
        ("task4", "__error__", "e"),
        ("task4", "messages", ["w" * 200]),
    ]
    assert saver.get_tuple(configs[1]).checkpoint["channel_values"]["messages"] == [
        "m0" * 20,
        "m1" * 20,
    ]
    assert [t.config for t in saver.list(cfg("rt"))] == configs[::-1]
    assert [t.config for t in saver.list(cfg("rt"), before=configs[3], limit=2)] == [
        configs[2],
        configs[1],
    ]
    assert [t.metadata["step"] for t in saver.list(None, filter={"step": 2})] == [2]


def test_keys_of_a_thread_share_one_slot(saver, redis_client, key_prefix, scan_keys) -> None:
    weird = "user:{42}%7B"
    put_steps(saver, weird, 3, ns="child:abc")
    keys = [k for k in scan_keys(redis_client, key_prefix) if not k.endswith(b":threads")]
    assert sorted(keys) == sorted(k.encode() for k in saver.layout.thread_keys(weird))
    slots = {key_slot(k) for k in keys}
    assert slots == {redis_key_slot(k) for k in keys}  # our CRC16 agrees with redis-py's
    assert len(slots) == 1
    assert len(THREAD_PARTS) == 8
    other = KeyLayout(key_prefix).thread_keys("user:")  # a prefix of the weird id
    assert not set(other) & set(saver.layout.thread_keys(weird))


def test_ttl_is_set_and_refreshed_on_read(redis_url, redis_client, key_prefix) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=300) as s:
        put_steps(s, "ttl", 2)
        keys = s.layout.thread_keys("ttl")
        present = [k for k in keys if redis_client.exists(k)]
        assert len(present) == 8
        assert all(0 < redis_client.ttl(k) <= 300 for k in present)
        for k in present:
            redis_client.expire(k, 5)
        assert s.get_tuple(cfg("ttl")) is not None
        assert all(redis_client.ttl(k) > 200 for k in present)
    with pytest.raises(ConfigError):
        RedisSaver(redis_client, ttl=0)


def test_key_prefix_isolates_savers(redis_url, redis_client, key_prefix, scan_keys) -> None:
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as a,
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix + "-b") as b,
    ):
        try:
            put_steps(a, "same", 2)
            assert b.get_tuple(cfg("same")) is None
            put_steps(b, "same", 1)
            b.delete_thread("same")
            assert len(list(a.list(cfg("same")))) == 2
            assert list(b.list(None)) == []
        finally:
            b.delete_thread("same")
    assert scan_keys(redis_client, key_prefix + "-b") == []


def blob_accounting(client: redis.Redis, layout: KeyLayout, thread: str) -> tuple[dict, dict]:
    """(stored refcounts, references actually held by refs, writes and manifests)."""
    from threadloom.checkpoint.redis.executor import _unpack
    from threadloom.checkpoint.storage.rows import unpack

    ck, ids, row, ref, blob, rc, w, wi = layout.thread_keys(thread)
    held: dict[bytes, int] = {}
    for packed in client.hgetall(ref).values():
        for h in unpack(_unpack(packed)[3]):
            held[h] = held.get(h, 0) + 1
    for packed in client.hgetall(w).values():
        for h in unpack(_unpack(packed)[2]):
            held[h] = held.get(h, 0) + 1
    blobs = client.hgetall(blob)
    for packed in blobs.values():
        for h in unpack(_unpack(packed)[2]):
            held[h] = held.get(h, 0) + 1
    stored = {h: int(client.hget(rc, h) or 0) for h in blobs}
    return stored, {h: n for h, n in held.items() if h in blobs}


def test_prune_and_delete_leave_no_orphans(saver, redis_client, key_prefix, scan_keys) -> None:
    put_steps(saver, "p", 40)  # enough appends to seal list segments into manifests
    report = saver.prune(["p"], strategy="keep_latest")
    assert report.checkpoints == 39
    stored, held = blob_accounting(redis_client, saver.layout, "p")
    assert stored == held and all(n > 0 for n in stored.values())
    assert len(saver.get_tuple(cfg("p")).checkpoint["channel_values"]["messages"]) == 40
    saver.copy_thread("p", "p2")
    saver.delete_thread("p")
    stored, held = blob_accounting(redis_client, saver.layout, "p2")
    assert stored == held
    assert len(saver.get_tuple(cfg("p2")).checkpoint["channel_values"]["messages"]) == 40
    saver.delete_thread("p2")
    assert scan_keys(redis_client, key_prefix) == []


def test_delete_for_runs_cleans_up(saver, redis_client, key_prefix, scan_keys) -> None:
    put_steps(saver, "runs", 3, run="gone")
    saver.delete_for_runs(["gone"])
    assert saver.get_tuple(cfg("runs")) is None
    assert scan_keys(redis_client, key_prefix) == []


def test_decode_responses_client_is_refused(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with pytest.raises(ConfigError, match="decode_responses"):
        RedisSaver(client)
    client.close()


def test_unreachable_server_names_host_and_port() -> None:
    with RedisSaver.from_conn_string("redis://127.0.0.1:1/0") as s:
        with pytest.raises(StorageError, match=r"127\.0\.0\.1:1"):
            s.get_tuple(cfg("x"))


async def test_async_saver(redis_url, key_prefix, redis_client, scan_keys) -> None:
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=60) as s:
        parent = cfg("a")
        for i in range(3):
            cp = empty_checkpoint()
            versions = {"messages": str(i + 1)}
            cp["channel_values"] = {"messages": list(range(i + 1))}
            cp["channel_versions"] = versions
            parent = await s.aput(parent, cp, {"step": i}, versions)
        await s.aput_writes(parent, [("messages", [5])], "t")
        tup = await s.aget_tuple(cfg("a"))
        assert tup.checkpoint["channel_values"]["messages"] == [0, 1, 2]
        assert tup.pending_writes == [("t", "messages", [5])]
        assert len([t async for t in s.alist(cfg("a"))]) == 3
        assert (await s.astats("a"))["checkpoints"] == 3
        await s.adelete_thread("a")
    assert scan_keys(redis_client, key_prefix) == []


def test_writes_without_a_stored_checkpoint_are_deleted_too(
    saver, redis_client, key_prefix, scan_keys
):
    config = {"configurable": {"thread_id": "w", "checkpoint_ns": "", "checkpoint_id": "nope"}}
    saver.put_writes(config, [("x", "y" * 500)], "task")
    put_steps(saver, "w", 1)
    saver.delete_thread("w")
    assert scan_keys(redis_client, key_prefix) == []


def test_scripts_are_reloaded_after_script_flush(saver, redis_client) -> None:
    put_steps(saver, "flush", 1)
    redis_client.script_flush()  # as after a restart or failover to a fresh replica
    put_steps(saver, "flush2", 2)
    assert len(list(saver.list(cfg("flush2")))) == 2


def test_first_put_writes_take_their_references_in_one_script(
    saver, redis_client, key_prefix, scan_keys
) -> None:
    """A task's first put_writes is one WRITES call that also holds its blobs
    (SaveWrites.add_refs); merging into a row written elsewhere stays exact."""
    config = put_steps(saver, "w", 1)[0]
    big = "pending write " * 20
    calls: list = []
    execute = saver.client.execute_command

    def counting(*args, **kwargs):
        calls.append(args[0])
        return execute(*args, **kwargs)

    saver.client.execute_command = counting
    try:
        saver.put_writes(config, [("a", big), ("b", big)], "t1", "~p")
    finally:
        del saver.client.execute_command
    assert calls == ["EVALSHA"]
    saver.put_writes(config, [("a", big)], "t2", "~p")
    saver.codec.tasks.clear()  # as if another process had written t1's row
    saver.put_writes(config, [("a", "x"), ("b", "y"), ("c", big + "!")], "t1", "~p")
    stored, held = blob_accounting(redis_client, saver.layout, "w")
    assert stored == held and 3 in stored.values()  # big: twice in t1, once in t2
    got = saver.get_tuple(config).pending_writes
    mine = [(t, c, v) for t, c, v in got if t in ("t1", "t2")]
    assert mine == [("t1", "a", big), ("t1", "b", big), ("t1", "c", big + "!"), ("t2", "a", big)]
    saver.delete_thread("w")
    assert scan_keys(redis_client, key_prefix) == []
