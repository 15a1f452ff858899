"""A run cancelled at any ``await`` of its Postgres lease acquire leaves the
thread free at once, and a run cancelled anywhere stores every step once.

The case from session 6's notes: the acquire's COMMIT (the pipeline's closing
Sync) has reached the server, which commits it, but the reply is cut off by
the cancel, so the client cannot tell whether it holds the lease. It does not
need to: ``Lease._give_back`` deletes the lease row by the run's own token,
which is a no-op unless the acquire took it, and its transaction takes the
thread's advisory lock first, so on the server it runs after the acquire's
transaction has ended, whichever way that went (a commit still in flight when
the give-back starts is waited for, not overtaken).
:func:`test_a_cancel_after_the_commit_reached_the_server` pins that case down
(and shows the lease stays held without the give-back).
"""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg.waiting
import pytest

from tests.concurrency.backends import _drop_schema
from tests.concurrency.cancelpoints import CancelAt, cancel_each_point, outcome, settle
from tests.concurrency.graphs import chain
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import Lease

GIVE_BACK = Lease._give_back
CONNS = ["single", "pool"]


@pytest.fixture
def calm_loop(monkeypatch: Any) -> None:
    """psycopg yields to the loop after a wait that did not block once the loop
    has been busy for 5 ms (``MAX_BUSY_TIME``): a suspension point that comes
    and goes with the box's load. Off here, so each run has the same points;
    :func:`test_a_cancel_while_a_transaction_opens` turns it on everywhere."""
    monkeypatch.setattr(psycopg.waiting, "MAX_BUSY_TIME", 1e9)


async def _saver(conn: str, request: Any, schema: str, **pool: Any) -> Any:
    from threadloom.checkpoint.postgres import AsyncPostgresSaver

    url = request.getfixturevalue("pg_url")
    request.addfinalizer(lambda: _drop_schema(url, schema))
    opts = ({"max_size": 1, "timeout": 5.0} | pool) if conn == "pool" else False
    app = f"{url}{'&' if '?' in url else '?'}application_name={schema}"
    return AsyncPostgresSaver.from_conn_string(app, schema=schema, pool=opts)


def _schema(request: Any) -> str:
    return f"tl_cpts_{abs(hash(request.node.nodeid)) % 10**10}"


async def _free(saver: Any, thread: str) -> None:
    """Nobody holds ``thread``: another run takes it at once (not after the TTL)."""
    assert await outcome(saver._arun(lo.read_flow(thread), False)) == "done"
    assert await saver._arun(lo.read_flow(thread), False) is None
    other = Lease(saver, thread, "run-B", 60.0)
    assert await other.atry_acquire() is None
    await other.arelease()


@pytest.mark.parametrize("conn", CONNS)
async def test_a_cancel_at_any_await_of_the_acquire_frees_the_thread(conn, request, calm_loop):
    schema = _schema(request)
    async with await _saver(conn, request, schema) as saver:
        await saver.setup()
        n = 0
        while True:
            n += 1
            thread = f"t{n}"
            lease = Lease(saver, thread, "run-A", 60.0)
            call = CancelAt(lease.atry_acquire(), lambda i, n=n: i == n)
            got = await outcome(call)
            if not call.hit:  # past its last await: it ran to the end
                assert got == "done"
                await lease.arelease()
                break
            assert got == "cancelled", (n, got)
            await _free(saver, thread)
        # at least one reply was cut off; how many waits really suspend depends on
        # whether the server's reply is already there (the box's load), so no more
        assert n >= 2


@pytest.mark.parametrize("conn", CONNS)
async def test_a_cancel_at_any_await_of_the_release_still_frees_the_thread(
    conn, request, calm_loop
):
    """A run's release (its ``finally``) cancelled half-way would leave the
    lease held for the TTL: nothing sends it again."""
    schema = _schema(request)
    async with await _saver(conn, request, schema) as saver:
        await saver.setup()
        n = 0
        while True:
            n += 1
            thread = f"t{n}"
            lease = Lease(saver, thread, "run-A", 60.0)
            assert await lease.atry_acquire() is None
            lease.astart_renewal()
            call = CancelAt(lease.arelease(), lambda i, n=n: i == n)
            got = await outcome(call)
            assert got == ("cancelled" if call.hit else "done"), (n, got)
            await _free(saver, thread)
            if not call.hit:
                break
        assert n >= 2


def _committed(url: str, schema: str, thread: str) -> bool:
    """Called at one of the acquire's suspensions (the loop waits meanwhile):
    once the server has finished what it was sent (no backend of this saver
    active but waiting for the client), is the lease row committed? Waiting for
    "idle" instead spun 10-20 s at a suspension before the COMMIT, the
    transaction open and its client blocked by this very wait; a cancel then cut
    the pipeline and the schema's DROP at teardown waited for it forever."""
    busy = (
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        " AND state = 'active' AND wait_event IS DISTINCT FROM 'ClientRead'"
    )
    with psycopg.connect(url, autocommit=True) as side:
        for _ in range(2000):
            if side.execute(busy, (schema,)).fetchone() == (0,):
                break
            side.execute("SELECT pg_sleep(0.005)")
        row = side.execute(
            f'SELECT 1 FROM "{schema}".tl_leases WHERE thread_id = %s', (thread,)
        ).fetchone()
    return row is not None


@pytest.mark.parametrize("conn", CONNS)
async def test_a_cancel_after_the_commit_reached_the_server(conn, request, monkeypatch, calm_loop):
    """Cut off the reply of the acquire's COMMIT (the pipeline Sync) after the
    server committed it: without the give-back the lease stays held."""
    schema = _schema(request)
    url = request.getfixturevalue("pg_url")
    async with await _saver(conn, request, schema) as saver:
        await saver.setup()
        dry = CancelAt(Lease(saver, "dry", "run-0", 60.0).atry_acquire(), lambda i: False)
        assert await outcome(dry) == "done"
        last = dry.count  # its last suspension waits for the COMMIT's reply
        for give_back in (False, True):
            if not give_back:  # the bug: nobody releases a lease the acquire took

                async def nothing(self: Lease) -> None:
                    return None

                monkeypatch.setattr(Lease, "_give_back", nothing)
            else:
                monkeypatch.setattr(Lease, "_give_back", GIVE_BACK)
            for attempt in range(20):  # the reply may already be there: no suspension
                thread = f"t-{give_back}-{attempt}"
                seen: list[bool] = []

                # the first suspension from the dry run's last on where the server
                # has committed: a loaded box suspends at more of the acquire's
                # waits than the dry run did, so its n-th one may come earlier
                def at_commit(i: int, thread: str = thread, seen: list[bool] = seen) -> bool:
                    if i < last:
                        return False
                    seen.append(_committed(url, schema, thread))
                    return seen[-1]

                lease = Lease(saver, thread, "run-A", 60.0)
                call = CancelAt(lease.atry_acquire(), at_commit)
                got = await outcome(call)
                if call.hit:
                    break
                assert got == "done"
                await lease.arelease()
            assert got == "cancelled", got
            assert seen[-1]  # committed on the server, the reply not read yet
            info = await saver._arun(lo.read_flow(thread), False)
            if give_back:
                assert info is None
                await _free(saver, thread)
            else:  # the thread would stay busy for the TTL
                assert info is not None and info.token == lease.token
                await lease.arelease()


@pytest.mark.parametrize("conn", CONNS)
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_cancelled_ainvoke_stores_each_step_once(conn, durability, request, calm_loop):
    """Cancel one run at each of its suspension points in turn (acquire, steps,
    saves, release): the thread is free when the cancel reaches the caller, and
    finishing the run afterwards stores each step once."""
    await _each_point(conn, durability, request)


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("conn", ["pool", "single"])
async def test_a_cancel_while_a_transaction_opens(conn, request, monkeypatch):
    """As above, with psycopg yielding to the loop at every wait (a busy loop).
    A cancel while the transaction opened (pipeline enter) left its exit stack
    open: the pool connection was never returned, or a single connection's lock
    stayed held (session 7, lease helper's finding). A cancel on the pipeline
    enter's or exit's own yield left the connection in pipeline mode or with
    its Sync unsent, and psycopg's exit generator suspended: collected later, it
    warned "generator ignored GeneratorExit" (ConnectorBase.settle; see
    test_pg_cancel_leaves_clean)."""
    monkeypatch.setattr(psycopg.waiting, "MAX_BUSY_TIME", 0.0)
    await _each_point(conn, "sync", request, timeout=2.0)


async def _each_point(conn: str, durability: str, request: Any, **opts: Any) -> None:
    schema = _schema(request)
    async with await _saver(conn, request, schema, **opts) as saver:
        await saver.setup()
        graph = chain(3).compile(checkpointer=saver)

        async def check(n: int, cfg: dict[str, Any]) -> None:
            free = outcome(saver._arun(lo.read_flow(f"t{n}"), False))
            assert await free == "done", n
            assert await saver._arun(lo.read_flow(f"t{n}"), False) is None  # free at once
            assert await settle(graph, cfg, durability) == ["s0", "s1", "s2"], n
            ids = [
                s.config["configurable"]["checkpoint_id"]
                async for s in graph.aget_state_history(cfg)
            ]
            assert len(ids) == len(set(ids))

        # the acquire, the steps, the saves
        assert await cancel_each_point(graph, durability, check) >= 5
