"""A run's lease acquire reads the thread's latest checkpoint in the same
transaction (lease/lease.py ``Lease._acquire_flow``): one transaction fewer per
invoke, and the run gets exactly what ``get_tuple`` would have returned."""

from __future__ import annotations

import pytest

from tests.concurrency.graphs import counting_chain
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import NOT_READ, FencedSaver, Lease
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.errors import StorageError


def _conf(thread_id: str = "t", **more: str) -> dict:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **more}}


@pytest.fixture(params=["NORMAL", "FULL"])
def saver(tmp_path, request):
    path = str(tmp_path / "r.db")
    with SqliteSaver.from_conn_string(path, synchronous=request.param) as s:
        yield s


def _transactions(trace: list[str]) -> list[list[str]]:
    """The traced statements cut at each COMMIT."""
    out, cur = [], []
    for sql in trace:
        cur.append(sql)
        if sql == "COMMIT":
            out.append(cur)
            cur = []
    return out


def test_a_resumed_run_reads_its_checkpoint_in_the_lease_transaction(saver) -> None:
    graph = counting_chain(3).compile(checkpointer=saver)
    assert graph.invoke({"count": 0}, _conf(), durability="sync") == {"count": 3}
    trace: list[str] = []
    saver.conn.set_trace_callback(trace.append)
    assert graph.invoke({"count": 5}, _conf(), durability="sync") == {"count": 8}
    saver.conn.set_trace_callback(None)
    txs = _transactions(trace)
    first = " ".join(txs[0])
    assert "INSERT OR REPLACE INTO tl_leases" in first and "v_checkpoints" in first
    assert "BEGIN" not in [s for tx in txs for s in tx]  # no read transaction of its own
    assert len(txs) == 5  # the lease (+ read); the input with the START step; 3 nodes


def test_the_prefetched_tuple_is_what_get_tuple_returns(saver) -> None:
    graph = counting_chain(2).compile(checkpointer=saver)
    graph.invoke({"count": 1}, _conf(), durability="sync")
    lease = Lease(saver, "t", "me")
    assert lease.prefetch and lease.try_acquire() is None
    assert lease.first == saver.get_tuple(_conf())
    assert lease.first.checkpoint["channel_values"]["count"] == 3
    lease.release()


def test_a_new_thread_prefetches_none_and_it_is_served(saver) -> None:
    lease = Lease(saver, "fresh", "me")
    assert lease.try_acquire() is None
    assert lease.first is None
    fenced = FencedSaver(saver, lease)
    assert fenced.get_tuple(_conf("fresh")) is None
    assert lease.first is NOT_READ  # served once
    lease.release()


def test_only_a_read_of_exactly_the_latest_root_checkpoint_is_served(saver) -> None:
    graph = counting_chain(2).compile(checkpointer=saver)
    graph.invoke({"count": 0}, _conf(), durability="sync")
    cid = saver.get_tuple(_conf()).config["configurable"]["checkpoint_id"]
    lease = Lease(saver, "t", "me")
    lease.try_acquire()
    prefetched = lease.first
    assert lease.take_first(_conf("other")) is NOT_READ
    assert lease.take_first(_conf(checkpoint_id=cid)) is NOT_READ
    assert (
        lease.take_first({"configurable": {"thread_id": "t", "checkpoint_ns": "sub"}}) is NOT_READ
    )
    assert lease.first is prefetched  # still there for the read it answers
    assert lease.take_first(_conf()) is prefetched
    assert lease.take_first(_conf()) is NOT_READ
    lease.release()


def test_a_write_through_the_fenced_saver_drops_the_prefetched_read(saver) -> None:
    lease = Lease(saver, "t", "me")
    lease.try_acquire()
    fenced = FencedSaver(saver, lease)
    fenced.put(_conf(), empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert lease.first is NOT_READ
    assert fenced.get_tuple(_conf()) is not None  # read from the database, not the prefetch
    lease.release()


def test_other_saver_methods_drop_the_prefetched_read(saver) -> None:
    lease = Lease(saver, "t", "me")
    lease.try_acquire()
    fenced = FencedSaver(saver, lease)
    assert fenced.conn is saver.conn  # the inner saver's own API (may write)
    assert lease.first is NOT_READ
    lease.release()


def test_no_prefetch_with_a_thread_ttl_or_a_custom_read(tmp_path) -> None:
    class Custom(SqliteSaver):
        def get_tuple(self, config):
            return super().get_tuple(config)

    with SqliteSaver.from_conn_string(str(tmp_path / "a.db"), ttl=60.0) as ttl:
        assert not Lease(ttl, "t", "me").prefetch
    with Custom.from_conn_string(str(tmp_path / "b.db")) as custom:
        lease = Lease(custom, "t", "me")
        assert not lease.prefetch and lease.try_acquire() is None
        assert lease.first is NOT_READ
        lease.release()


def test_a_relaxed_transaction_still_refuses_a_write_after_its_reads(tmp_path) -> None:
    from threadloom.checkpoint.storage.flows import get_tuple_flow

    path = str(tmp_path / "f.db")
    with SqliteSaver.from_conn_string(path, synchronous="FULL") as s:

        def flow():
            yield lo.AcquireLease("t", "me", "tok", 60_000)
            yield from get_tuple_flow(s.codec, _conf())
            yield lo.CheckLease("t", "tok", 60_000)  # may UPDATE: not a read

        with pytest.raises(StorageError, match="without fsync"):
            s._run(flow(), True)
        assert s._run(lo.read_flow("t")) is None  # rolled back
        assert s.conn.execute("PRAGMA synchronous").fetchone()[0] == 2


async def test_the_async_saver_prefetches_too(tmp_path) -> None:
    path = str(tmp_path / "a.db")
    async with AsyncSqliteSaver.from_conn_string(path, synchronous="FULL") as s:
        graph = counting_chain(2).compile(checkpointer=s)
        assert await graph.ainvoke({"count": 0}, _conf(), durability="sync") == {"count": 2}
        trace: list[str] = []
        await s.conn.set_trace_callback(trace.append)
        assert await graph.ainvoke({"count": 1}, _conf(), durability="sync") == {"count": 3}
        await s.conn.set_trace_callback(None)
        assert "BEGIN" not in trace
        first = " ".join(_transactions(trace)[0])
        assert "tl_leases" in first and "v_checkpoints" in first
