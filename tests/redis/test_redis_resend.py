"""A write script re-sent after its reply was lost changes nothing twice (once.py).

redis-py retries a command whose connection failed, also after the server ran
it: the same EVALSHA arrives again. Each test runs a write script twice with
the same arguments (as the retry does), directly or by dropping one reply on
the wire, and checks the store is what one run leaves: refcounts equal the
references actually held, every checkpoint reads, the re-send gets the same
reply as the first run. On the old scripts a re-sent ``adjust`` counted twice
(a decrement twice deleted a blob a kept checkpoint still used).
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest
import redis

from tests.redis.test_redis_saver import blob_accounting, cfg, put_steps
from threadloom.checkpoint.redis import RedisSaver
from threadloom.checkpoint.redis.fields import blob_row
from threadloom.checkpoint.redis.saver import SHAS
from threadloom.graph import START, StateGraph

pytestmark = pytest.mark.redis

WRITE_SCRIPTS = ("save", "writes", "insert", "adjust", "drop", "delete", "delete_refs")


class State(TypedDict):
    log: Annotated[list, operator.add]


def chain() -> StateGraph:
    g = StateGraph(State)
    prev = START
    for name in ("a", "b", "c"):
        g.add_node(name, lambda s, name=name: {"log": [name * 400]})
        g.add_edge(prev, name)
        prev = name
    return g


def base(call: Any) -> str | None:
    return call.script.split(":")[0] if call.script else None


def resend_each(saver: RedisSaver, name: str) -> Counter:
    """Every call of script ``name`` runs once more first, its reply dropped
    (as when the connection fails after the server ran it): the saver then
    sends the very same call, as redis-py's retry does. Returns call counts;
    asserts the re-send got the first run's reply."""
    real, seen = saver._send, Counter()

    def send(calls: list[Any]) -> list[Any]:
        first = {i: real([c])[0] for i, c in enumerate(calls) if base(c) == name}
        results = real(calls)
        for i, reply in first.items():
            seen[name] += 1
            assert results[i] == reply, f"re-sent {name} answered {results[i]!r}, not {reply!r}"
        return results

    saver._send = send  # type: ignore[method-assign]
    return seen


def assert_exact(saver: RedisSaver, client: redis.Redis, thread: str, messages: int) -> None:
    stored, held = blob_accounting(client, saver.layout, thread)
    assert stored == held, f"refcounts of {thread!r} differ from the references held"
    tuples = list(saver.list(cfg(thread)))
    assert tuples, thread
    for t in tuples:
        assert saver.get_tuple(t.config) is not None
    latest = saver.get_tuple(cfg(thread)).checkpoint["channel_values"]
    assert len(latest["messages"]) == messages


@pytest.mark.parametrize("name", WRITE_SCRIPTS)
def test_every_write_script_resent_changes_the_store_once(
    name: str, redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        seen = resend_each(saver, name)
        configs = put_steps(saver, "a", 40)  # long enough for list manifests (children)
        # the same task again: the merging put_writes (compare-and-set, then counts)
        saver.put_writes(configs[-1], [("messages", ["w" * 200]), ("extra", "x" * 300)], "task39")
        saver.copy_thread("a", "b")
        saver.prune(["a"], strategy="keep_latest")
        app = chain().compile(checkpointer=saver)  # a run: lease-fenced scripts
        for _ in range(2):
            app.invoke({"log": ["in" * 200]}, {"configurable": {"thread_id": "g"}})
        put_steps(saver, "gone", 2)
        saver.delete_thread("gone")
        assert seen[name] > 0, f"the workload never ran {name}"
        assert_exact(saver, redis_client, "a", 40)
        assert_exact(saver, redis_client, "b", 40)
        assert len(list(saver.list(cfg("b")))) == 40
        state = app.get_state({"configurable": {"thread_id": "g"}})
        assert state.values["log"] == ["in" * 200, "a" * 400, "b" * 400, "c" * 400] * 2
        stored, held = blob_accounting(redis_client, saver.layout, "g")
        assert stored == held
        assert saver.get_tuple(cfg("gone")) is None
        writes = saver.get_tuple(configs[-1]).pending_writes  # the kept latest
        assert ("task39", "extra", "x" * 300) in writes
        assert ("task39", "messages", ["w" * 200]) in writes


def _blob_held_once(saver: RedisSaver, client: redis.Redis, thread: str) -> bytes:
    stored, held = blob_accounting(client, saver.layout, thread)
    return next(h for h, n in stored.items() if n == 1 and held.get(h) == 1)


def test_drop_resent_after_the_same_blob_came_back_keeps_it(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    """drop ran, a put stored the same value again (counted 0 until its adjust),
    then the re-sent drop arrived: it must not delete the new blob."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        put_steps(saver, "t", 3)
        blob, rc = saver.layout.thread_keys("t")[4:6]
        h = _blob_held_once(saver, redis_client, "t")
        packed = redis_client.hget(blob, h)
        saver._send([saver.planner.lua("adjust", "t", h, -1)])
        drop = saver.planner.lua("drop", "t", h)
        (first,) = saver._send([drop])
        row = blob_row(h, packed)  # drop answers hash, children, size (not the bytes)
        assert first == [h, row.children, len(row.data)]
        assert not redis_client.hexists(blob, h)
        redis_client.hset(blob, h, packed)  # another client's save of the same value
        redis_client.hset(rc, h, 0)
        (again,) = saver._send([drop])  # the retry of the first drop
        assert again == first
        assert redis_client.hget(blob, h) == packed


def test_delete_resent_after_a_new_put_keeps_it(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    """delete_thread's scripts ran, another client put a checkpoint, then the
    re-sent delete arrived: the new checkpoint and its refs stay."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        put_steps(saver, "t", 2)
        delete = saver.planner.lua("delete", "t", "", "1")
        refs = saver.planner.lua("delete_refs", "t", "thread", "")
        first = saver._send([delete, refs])
        assert saver.get_tuple(cfg("t")) is None
        with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as other:
            put_steps(other, "t", 3)
        assert saver._send([delete, refs]) == first  # the retry of the first calls
        assert_exact(saver, redis_client, "t", 3)


def test_delete_refs_resent_after_the_ref_came_back_keeps_it(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        put_steps(saver, "t", 2)
        ref = saver.layout.thread_keys("t")[3]
        field, packed = next(iter(redis_client.hgetall(ref).items()))
        call = saver.planner.lua("delete_refs", "t", "keys", "", field)
        saver._send([call])
        redis_client.hset(ref, field, packed)  # another client stored that ref again
        saver._send([call])
        assert redis_client.hget(ref, field) == packed


def test_adjust_reply_lost_on_the_wire_is_retried_once(
    redis_url: str, redis_client: redis.Redis, key_prefix: str, monkeypatch
) -> None:
    """End to end: the connection fails after the server ran a refcount decrement
    (prune releasing references); redis-py's retry sends it again. Every kept
    checkpoint still reads and every refcount is exact."""
    adjust = {sha for name, sha in SHAS.items() if name.split(":")[0] == "adjust"}
    real = redis.Redis._send_command_parse_response
    dropped: list[Any] = []

    def lossy(self, conn, command_name, *args, **options):
        reply = real(self, conn, command_name, *args, **options)
        deltas = [a for a in args[2:] if isinstance(a, int) and a < 0]
        if command_name == "EVALSHA" and args[1] in adjust and deltas and not dropped:
            dropped.append(args)
            conn.disconnect()  # the server ran it; its reply is lost with the socket
            raise redis.ConnectionError("connection lost before the reply")
        return reply

    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        put_steps(saver, "t", 40)
        saver.copy_thread("t", "keep")
        monkeypatch.setattr(redis.Redis, "_send_command_parse_response", lossy)
        report = saver.prune(["t"], strategy="keep_latest")
        monkeypatch.undo()
        assert dropped, "no refcount decrement was sent"
        assert report.checkpoints == 39
        assert_exact(saver, redis_client, "t", 40)
        assert_exact(saver, redis_client, "keep", 40)
        put_steps(saver, "t", 2)  # the thread goes on from the pruned store
        assert_exact(saver, redis_client, "t", 2)


def test_acquire_resent_after_a_stop_request_keeps_it(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    """A run's acquire ran, another client asked the run to stop, then the
    re-sent acquire arrived: the stop request stays (it used to be cleared)."""
    from threadloom.checkpoint.lease import ops as lo
    from threadloom.checkpoint.redis.executor import Scope

    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        put_steps(saver, "t", 1)

        def run(op: Any) -> Any:
            return saver._drive(saver.planner.plan(op, Scope()))

        acquire = lo.AcquireLease("t", "run-1", "token-1", 60_000)
        assert run(acquire) is None
        assert run(lo.RequestStop("t", "interrupt")).stop == "interrupt"
        assert run(acquire) is None  # the retry: same arguments, the lease is ours
        lease = saver.planner.key("t", "lease")
        assert redis_client.hmget(lease, "token", "stop") == [b"token-1", b"interrupt"]


def test_op_keys_share_the_threads_slot_and_expire(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    from threadloom.checkpoint.redis.keys import key_slot
    from threadloom.checkpoint.redis.once import OP_TTL_MS

    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        put_steps(saver, "user:{1}", 2)
        ops = list(redis_client.scan_iter(match=f"{{{key_prefix}:*}}:op:*"))
        assert ops
        slot = key_slot(saver.layout.thread_keys("user:{1}")[0])
        assert {key_slot(k) for k in ops} == {slot}
        assert all(0 < redis_client.pttl(k) <= OP_TTL_MS for k in ops)


def test_set_ttl_resent_after_delete_thread_recreates_nothing(
    redis_url: str, redis_client: redis.Redis, key_prefix: str, scan_keys
) -> None:
    """set_thread_ttl(t, None) ran, another client deleted t, then the re-sent
    set_ttl arrived: it used to recreate t's ``wi`` key with no expiry, and a new
    thread reusing the id then never expired, whatever the saver's ttl."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=60) as saver:
        put_steps(saver, "t", 2)
        call = saver.planner.lua("set_ttl", "t", -1)
        saver._send([call])
        saver.delete_thread("t")
        saver._send([call])  # the retry of the first call
        assert scan_keys(redis_client, key_prefix) == []
        put_steps(saver, "t", 1)  # a new conversation reusing the id
        ttls = [redis_client.pttl(k) for k in saver.layout.thread_keys("t")]
        assert all(0 < t <= 60_000 for t in ttls if t != -2)
