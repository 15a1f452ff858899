"""Postgres: a run's lease acquire reads the thread's latest checkpoint row in
the acquire's own batch (postgres/leaseread.py, lease/lease.py
``_pg_acquire_flow``): one round trip fewer per invoke, and the run gets
exactly what ``get_tuple`` returns (sync and async savers)."""

from __future__ import annotations

import uuid

import pytest

from tests.concurrency.graphs import counting_chain
from tests.postgres.test_pg_round_trips import relay_url
from threadloom.checkpoint.lease import lease as lease_mod
from threadloom.checkpoint.lease.lease import NOT_READ, FencedSaver, Lease
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.checkpoint.storage import flows
from threadloom.errors import CorruptBlobError

pytestmark = pytest.mark.postgres


def _conf(thread_id: str, **more: str) -> dict:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **more}}


def _tid() -> str:
    return f"lr-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def saver(pg_url: str, pg_schema: str):
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as s:
        s.setup()
        yield s


def _with_pending_writes(saver, tid: str) -> None:
    """A thread whose latest checkpoint has values and pending writes (one a blob)."""
    counting_chain(2).compile(checkpointer=saver).invoke(
        {"count": 1}, _conf(tid), durability="sync"
    )
    latest = saver.get_tuple(_conf(tid)).config
    saver.put_writes(latest, [("count", 7), ("big", "x" * 900)], "task-a")


def test_the_prefetched_tuple_is_what_get_tuple_returns(saver) -> None:
    tid = _tid()
    _with_pending_writes(saver, tid)
    plain = PostgresSaver(saver.connector.conn, schema=saver.sql.schema)  # cold caches
    lease = Lease(saver, tid, "me")
    assert lease.prefetch == "postgres" and lease.try_acquire() is None
    assert lease.first == plain.get_tuple(_conf(tid))
    assert len(lease.first.pending_writes) == 2
    assert lease.first.checkpoint["channel_values"]["count"] == 3
    fenced = FencedSaver(saver, lease)
    assert fenced.get_tuple(_conf(tid)) == plain.get_tuple(_conf(tid))
    assert lease.first is NOT_READ  # served once
    lease.release()


def test_a_new_thread_prefetches_none_and_a_busy_lease_nothing(saver) -> None:
    tid = _tid()
    lease = Lease(saver, tid, "me")
    assert lease.try_acquire() is None and lease.first is None
    other = Lease(saver, tid, "other")
    assert other.try_acquire() is not None  # busy: the row read is ignored
    assert other.first is NOT_READ
    assert FencedSaver(saver, lease).get_tuple(_conf(tid)) is None
    lease.release()


def test_a_read_that_fails_to_decode_falls_back_to_the_plain_read(saver, monkeypatch) -> None:
    tid = _tid()
    _with_pending_writes(saver, tid)

    def broken(codec, rows, remember=False):
        raise CorruptBlobError(f"blob of thread {tid!r} is corrupt")
        yield  # a generator, as build_tuples

    monkeypatch.setattr(flows, "build_tuples", broken)
    lease = Lease(saver, tid, "me")
    assert lease.try_acquire() is None  # the acquire still commits
    assert lease.first is NOT_READ  # the run's get_tuple reads (and raises) as always
    monkeypatch.undo()
    assert FencedSaver(saver, lease).get_tuple(_conf(tid)) == saver.get_tuple(_conf(tid))
    lease.release()


def test_an_invoke_costs_one_round_trip_fewer(pg_url, pg_schema, monkeypatch) -> None:
    url, relay = relay_url(pg_url)
    try:
        with PostgresSaver.from_conn_string(url, schema=pg_schema) as s:
            s.setup()
            graph = counting_chain(3).compile(checkpointer=s)
            tid = _tid()
            graph.invoke({"count": 0}, _conf(tid), durability="sync")

            def trips() -> int:
                """The fewest turns of three invokes: a pipelined message sent
                while the server is answering can count as a turn of its own."""
                counts = []
                for _ in range(3):
                    run = lambda: graph.invoke({"count": 0}, _conf(tid), durability="sync")  # noqa: E731
                    n, out = relay.count(run)
                    assert out == {"count": 3}
                    counts.append(n)
                return min(counts)

            graph.invoke({"count": 0}, _conf(tid), durability="sync")  # warm caches
            with_read = trips()
            monkeypatch.setattr(lease_mod, "_prefetches", lambda saver: None)
            without = trips()
            assert with_read <= without - 1, (with_read, without)
    finally:
        relay.listener.close()


def test_no_prefetch_with_a_thread_ttl_or_a_custom_read(pg_url, pg_schema) -> None:
    class Custom(PostgresSaver):
        def get_tuple(self, config):
            return super().get_tuple(config)

    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema, ttl=60.0) as ttl:
        assert not Lease(ttl, "t", "me").prefetch
    with Custom.from_conn_string(pg_url, schema=pg_schema) as custom:
        custom.setup()
        lease = Lease(custom, _tid(), "me")
        assert not lease.prefetch and lease.try_acquire() is None
        assert lease.first is NOT_READ
        lease.release()


async def test_the_async_saver_prefetches_the_same_tuple(pg_url, pg_schema) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as s:
        await s.setup()
        tid = _tid()
        graph = counting_chain(2).compile(checkpointer=s)
        assert await graph.ainvoke({"count": 0}, _conf(tid), durability="sync") == {"count": 2}
        latest = (await s.aget_tuple(_conf(tid))).config
        await s.aput_writes(latest, [("count", 9), ("big", "y" * 900)], "task-b")
        lease = Lease(s, tid, "me")
        assert lease.prefetch == "postgres" and await lease.atry_acquire() is None
        first = lease.first
        assert await FencedSaver(s, lease).aget_tuple(_conf(tid)) is first
        await lease.arelease()
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as cold:
        assert first == await cold.aget_tuple(_conf(tid))
        assert len(first.pending_writes) == 2
        graph = counting_chain(2).compile(checkpointer=cold)  # (``s`` is closed now)
        assert await graph.ainvoke({"count": 1}, _conf(tid), durability="sync") == {"count": 3}
