"""A cancel that lands while a transaction opens leaves the connection as it
found it: out of pipeline mode, with no transaction open on the server.

psycopg's pipeline enter switches libpq to pipeline mode without I/O and then
may yield to the loop once (``MAX_BUSY_TIME``); a cancel landing on that yield
ended the enter with the connection in pipeline mode but nobody to leave it.
The pool took the connection back (it looked idle) and every later
transaction on it ran inside that pipeline: writes no longer pipelined nor
optimistic, nesting one more level per such cancel, autocommit reads kept in
an implicit transaction until the next Sync.
"""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg.waiting
import pytest
from psycopg import pq

from tests.concurrency.cancelpoints import CancelAt, outcome
from tests.concurrency.test_pg_cancel_points import CONNS, _saver, _schema
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import Lease


async def _state(saver: Any) -> tuple[Any, ...]:
    """(in a pipeline, libpq pipeline status, transaction state) of the saver's
    one connection, between transactions (after a read, which reopens a single
    connection that was closed)."""
    assert await saver._arun(lo.read_flow("nobody"), False) is None
    connector = saver.executor.connector
    if connector.is_pool:
        async with connector.conn.connection() as conn:
            return _of(conn)
    return _of(connector.conn)


def _of(conn: Any) -> tuple[Any, ...]:
    return (conn._pipeline is not None, conn.pgconn.pipeline_status, conn.info.transaction_status)


CLEAN = (False, pq.PipelineStatus.OFF, pq.TransactionStatus.IDLE)


def _open_transactions(url: str, schema: str) -> int:
    """How many of the saver's backends are inside a transaction, once those
    of closed connections have exited (the server ends them on its own time)."""
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
        "AND xact_start IS NOT NULL AND pid <> pg_backend_pid()"
    )
    with psycopg.connect(url, autocommit=True) as side:
        for _ in range(400):
            (count,) = side.execute(sql, (schema,)).fetchone()
            if not count:
                break
            side.execute("SELECT pg_sleep(0.005)")
    return count


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("conn", CONNS)
async def test_a_cancel_at_each_await_of_an_acquire_leaves_the_connection_clean(
    conn, request, monkeypatch
):
    """Cancel a lease acquire (a write transaction) at each of its suspensions
    with psycopg yielding at every wait; after each, the connection is clean
    and the next write is pipelined again (the "sql" plan)."""
    monkeypatch.setattr(psycopg.waiting, "MAX_BUSY_TIME", 0.0)
    schema, url = _schema(request), request.getfixturevalue("pg_url")
    async with await _saver(conn, request, schema) as saver:
        await saver.setup()
        plans: list[tuple[bool, str]] = []
        connector = saver.executor.connector
        plan = connector.plan
        monkeypatch.setattr(connector, "plan", lambda *a: plans.append(plan(*a)) or plans[-1])
        n = 0
        while True:
            n += 1
            lease = Lease(saver, f"t{n}", "run-A", 60.0)
            call = CancelAt(lease.atry_acquire(), lambda i, n=n: i == n)
            got = await outcome(call)
            assert got == ("cancelled" if call.hit else "done"), (n, got)
            assert _open_transactions(url, schema) == 0, n  # no locks left held
            assert await _state(saver) == CLEAN, n
            if not call.hit:  # past its last await: it took the lease
                await lease.arelease()
            plans.clear()
            other = Lease(saver, f"t{n}", "run-B", 60.0)
            assert await other.atry_acquire() is None, n  # the thread is free
            assert plans == [(True, "sql")], (n, plans)  # pipelined, implicit transaction
            await other.arelease()
            assert await saver._arun(lo.read_flow(f"t{n}"), False) is None
            assert _open_transactions(url, schema) == 0, n  # no locks left held
            assert await _state(saver) == CLEAN, n
            if not call.hit:
                break
        assert n >= 3


def _checkpoint(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    cp = empty_checkpoint()
    versions = {"a": f"{n:032}.0"}
    cp["channel_values"], cp["channel_versions"] = {"a": n}, versions
    return cp, versions


def _acquire(saver: Any, thread: str) -> Any:
    """A lease acquire's own transaction, without the give-back that
    :meth:`Lease.atry_acquire` runs after a cancel."""
    lease = Lease(saver, thread, "run-A", 60.0)
    op = lo.AcquireLease(thread, lease.holder, lease.token, lease.ttl_ms)
    return saver._arun(lease._acquire_flow(op), True)


async def _put(saver: Any, thread: str) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"], cp["channel_versions"] = {"a": thread}, {"a": "1"}
    cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return await saver.aput(cfg, cp, {}, {"a": "1"})


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("conn", CONNS)
@pytest.mark.parametrize("call", [_acquire, _put])
async def test_a_cancel_leaves_no_transaction_open(call, conn, request, monkeypatch):
    """Without a give-back on the same connection right after the cancel
    (``atry_acquire`` runs one, which committed what a cut-off commit left
    pending): a cancel on the commit's first yield left the server inside the
    transaction, its locks held, until the connection's next user."""
    monkeypatch.setattr(psycopg.waiting, "MAX_BUSY_TIME", 0.0)
    schema, url = _schema(request), request.getfixturevalue("pg_url")
    async with await _saver(conn, request, schema) as saver:
        await saver.setup()
        n = 0
        while True:
            n += 1
            run = CancelAt(call(saver, f"t{n}"), lambda i, n=n: i == n)
            got = await outcome(run)
            assert got == ("cancelled" if run.hit else "done"), (n, got)
            assert _open_transactions(url, schema) == 0, n
            assert await _state(saver) == CLEAN, n
            if not run.hit:
                break
        assert (
            n >= 2
        )  # at least one suspension hit: an optimistic put on one connection now commits in one exchange (postgres/lean.py)
