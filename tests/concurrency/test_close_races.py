"""Races between a saver's close and the runs and calls still using it (review2):
the close never hangs, a run acquiring meanwhile is released by it (or refused),
a call torn by the close gets SaverClosedError, and the Postgres async
connection is closed only between transactions."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import uuid

import pytest

from tests.concurrency.backends import _drop_schema, make_spec, open_saver
from tests.concurrency.graphs import chain
from tests.concurrency.test_async_savers import _open
from tests.concurrency.test_closed_savers import _no_warning
from threadloom.checkpoint.lease import local
from threadloom.checkpoint.lease.lease import Lease
from threadloom.checkpoint.lease.renewer import RENEWER
from threadloom.errors import SaverClosedError

KINDS = ["sqlite", "postgres", "redis"]


def _cfg() -> dict:
    return {"configurable": {"thread_id": f"race-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}


def _thread_is_free(spec: dict, cfg: dict) -> None:
    """A new saver on the same store takes the thread at once (no lease left)."""
    with open_saver(spec) as again:
        graph = chain(1).compile(checkpointer=again)
        assert graph.invoke({"log": []}, cfg, multitask_strategy="reject")["log"][-1] == "s0"


@pytest.mark.parametrize("kind", KINDS)
def test_async_close_under_a_bridged_renewal_does_not_hang(
    kind, tmp_path, request, monkeypatch
) -> None:
    """A sync invoke in another thread writes through an async saver (its loop,
    by the bridge); the shared renewer's renewal of its lease is in flight when
    the ``async with`` ends. The close waited for that renewal on the loop the
    renewal needs: a permanent hang."""
    inflight, halting, errors = threading.Event(), threading.Event(), []
    gate, started = threading.Event(), threading.Event()
    renew, remove = Lease.renew, RENEWER.remove

    def slow_renew(self: Lease) -> None:
        inflight.set()
        halting.wait(10)  # in flight until the close stops the renewals
        renew(self)

    def watched_remove(lease: Lease) -> None:
        if lease.closed_by is not None:
            halting.set()
        remove(lease)

    monkeypatch.setattr(Lease, "renew", slow_renew)
    monkeypatch.setattr(RENEWER, "remove", watched_remove)

    async def main() -> None:
        async with _open(kind, tmp_path, request) as saver:
            saver.lease_ttl = 0.3  # a renewal falls due 0.1 s into the step
            graph = chain(2, gate, started).compile(checkpointer=saver)
            worker = threading.Thread(target=run, args=(graph,), daemon=True)
            worker.start()
            await asyncio.to_thread(started.wait, 10)
            await asyncio.to_thread(inflight.wait, 10)
        gate.set()
        await asyncio.to_thread(worker.join, 10)

    def run(graph) -> None:
        try:
            graph.invoke({"log": []}, _cfg(), durability="sync")
        except Exception as exc:
            errors.append(exc)

    closer = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    closer.start()
    closer.join(10)
    hung = closer.is_alive()
    halting.set()
    gate.set()
    assert not hung, "the async saver's close hung under a renewal in flight"
    assert [type(e) for e in errors] == [SaverClosedError]


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_acquiring_during_close_is_released_by_it(
    kind, tmp_path, request, monkeypatch
) -> None:
    """The run's acquire commits while the close is under way, after the close
    listed the runs to release: its lease stayed for the TTL, and its own
    release warned. Now the close waits for the run to be recorded."""
    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    acquired, listed, errors = threading.Event(), threading.Event(), []
    try_acquire, through = Lease.try_acquire, local._through

    def slow_acquire(self: Lease):
        info = try_acquire(self)
        acquired.set()
        while not listed.wait(0.01) and not getattr(self.saver, "_closing", False):
            pass
        return info

    def watched_through(saver):
        if sys._getframe(1).f_code.co_name == "close_runs":
            listed.set()
        return through(saver)

    monkeypatch.setattr(Lease, "try_acquire", slow_acquire)
    monkeypatch.setattr(local, "_through", watched_through)

    def run(graph) -> None:
        try:
            graph.invoke({"log": []}, cfg, durability="sync")
        except Exception as exc:
            errors.append(exc)

    gate = threading.Event()  # the run's first step waits for the close to end
    with _no_warning(RuntimeWarning):
        with open_saver(spec) as saver:
            graph = chain(2, gate).compile(checkpointer=saver)
            worker = threading.Thread(target=run, args=(graph,))
            worker.start()
            assert acquired.wait(10)
        gate.set()
        worker.join(10)
    monkeypatch.undo()
    assert [type(e) for e in errors] == [SaverClosedError]
    assert cfg["configurable"]["thread_id"] in str(errors[0])
    _thread_is_free(spec, cfg)


def test_update_state_under_a_close_has_its_lease_released(tmp_path, request) -> None:
    """``update_state`` holds the thread's lease for its writes; a close landing
    meanwhile did not know it: the lease stayed and its release warned."""
    from threadloom.pregel import multitask

    spec, cfg = make_spec("sqlite", str(tmp_path), request), _cfg()
    with _no_warning(RuntimeWarning):
        with open_saver(spec) as saver:
            graph = chain(1).compile(checkpointer=saver)
            graph.invoke({"log": []}, cfg)
            with multitask.state_lease(graph, cfg) as fenced:
                saver.close()
                with pytest.raises(SaverClosedError, match=cfg["configurable"]["thread_id"]):
                    fenced.update_state(cfg, {"log": ["x"]})
    _thread_is_free(spec, cfg)


def _torn(started: threading.Event, closed: threading.Event):
    def one(call):
        started.set()
        closed.wait(10)
        raise ValueError("I/O operation on closed file.")  # redis-py on a torn socket

    return one


def test_a_redis_command_torn_by_the_close_is_saver_closed(tmp_path, request) -> None:
    """The close disconnects a client another thread is mid-command on: the
    caller got redis-py's raw ValueError / AttributeError / OSError."""
    spec, cfg = make_spec("redis", str(tmp_path), request), _cfg()
    started, closed, errors = threading.Event(), threading.Event(), []

    def read(saver) -> None:
        try:
            saver.get_tuple(cfg)
        except Exception as exc:
            errors.append(exc)

    with open_saver(spec) as saver:
        saver.cluster, saver._one = True, _torn(started, closed)  # every call through _one
        reader = threading.Thread(target=read, args=(saver,))
        reader.start()
        assert started.wait(10)
    closed.set()
    reader.join(10)
    assert [type(e) for e in errors] == [SaverClosedError]


async def test_an_async_redis_command_torn_by_the_close_is_saver_closed(tmp_path, request):
    started, closed = asyncio.Event(), asyncio.Event()

    async def one(call):
        started.set()
        await closed.wait()
        raise ConnectionError("Connection closed by server.")

    async with _open("redis", tmp_path, request) as saver:
        saver.cluster, saver._one = True, one
        read = asyncio.create_task(saver.aget_tuple(_cfg()))
        await started.wait()
    closed.set()
    with pytest.raises(SaverClosedError):
        await read


async def test_async_pg_close_waits_for_the_transaction_in_flight(request) -> None:
    """AsyncPgConnector.aclose closed a single connection under another task's
    transaction (its commit: "lost the connection"); the sync twin waits for
    the connector's lock, and so does it now."""
    from threadloom.checkpoint.postgres import AsyncPostgresSaver

    url, schema = request.getfixturevalue("pg_url"), f"tl_race_{uuid.uuid4().hex[:8]}"
    request.addfinalizer(lambda: _drop_schema(url, schema))
    async with AsyncPostgresSaver.from_conn_string(url, schema=schema) as saver:
        await saver.setup()
        connector = saver.connector
        async with connector.lock:  # a transaction in flight holds it
            closing = asyncio.create_task(connector.aclose())
            for _ in range(20):
                await asyncio.sleep(0)
            open_meanwhile = not connector.conn.closed
        await closing
        assert open_meanwhile
        assert connector.conn.closed


def test_pg_checks_closed_once_per_transaction(request, monkeypatch) -> None:
    from threadloom.checkpoint.postgres import PostgresSaver

    url, schema = request.getfixturevalue("pg_url"), f"tl_race_{uuid.uuid4().hex[:8]}"
    request.addfinalizer(lambda: _drop_schema(url, schema))
    with PostgresSaver.from_conn_string(url, schema=schema) as saver:
        saver.setup()
        calls = []
        check = type(saver.connector).check_open
        monkeypatch.setattr(saver.connector, "check_open", lambda: calls.append(check))
        saver.get_tuple(_cfg())  # one transaction
        assert len(calls) == 1


def test_an_exit_stream_closed_after_its_saver_says_what_it_lost(tmp_path, request) -> None:
    """Under durability="exit" a run stores nothing before its end: closing its
    stream after the saver closed raises SaverClosedError for that exit save
    (docs/concurrency.md: close the stream inside the saver's block)."""
    spec, cfg = make_spec("sqlite", str(tmp_path), request), _cfg()
    with open_saver(spec) as saver:
        stream = chain(3).compile(checkpointer=saver).stream({"log": []}, cfg, durability="exit")
        assert next(stream) == {"s0": {"log": ["s0"]}}
    with pytest.raises(SaverClosedError, match=cfg["configurable"]["thread_id"]):
        stream.close()
    with open_saver(spec) as again:
        assert chain(3).compile(checkpointer=again).get_state(cfg).values == {}


def test_a_sync_close_on_a_loop_does_not_wait_for_that_loops_acquire(
    tmp_path, request, monkeypatch
) -> None:
    """A sync saver closed (``with`` block) inside async code while a task of
    the same loop is acquiring through it: that task can only go on once the
    close returns, so waiting for it would hang the loop for good."""
    spec, cfg = make_spec("sqlite", str(tmp_path), request), _cfg()
    atry_acquire, events, outcome = Lease.atry_acquire, {}, []

    async def held_acquire(self: Lease):
        events["entered"].set()
        await events["proceed"].wait()
        return await atry_acquire(self)

    monkeypatch.setattr(Lease, "atry_acquire", held_acquire)

    async def main() -> None:
        events.update(entered=asyncio.Event(), proceed=asyncio.Event())
        with open_saver(spec) as saver:
            graph = chain(1).compile(checkpointer=saver)
            task = asyncio.create_task(graph.ainvoke({"log": []}, cfg))
            await events["entered"].wait()
        events["proceed"].set()
        outcome.extend(await asyncio.gather(task, return_exceptions=True))

    closer = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    closer.start()
    closer.join(10)
    assert not closer.is_alive(), "the sync close hung its own event loop"
    assert [type(e) for e in outcome] == [SaverClosedError]


def test_a_read_torn_by_the_close_names_the_runs_thread(tmp_path, request, monkeypatch) -> None:
    """A run's read that passed the closed check as its saver closed reports the
    close naming the run's thread, as a write does (was the saver-only error)."""
    from threadloom.pregel import multitask

    spec, cfg = make_spec("sqlite", str(tmp_path), request), _cfg()
    with open_saver(spec) as saver:
        graph = chain(1).compile(checkpointer=saver)
        graph.invoke({"log": []}, cfg)
        with multitask.state_lease(graph, cfg) as fenced:
            fenced.checkpointer.get_tuple(cfg)  # the read the acquire made, served

            def torn(config):
                saver.close()
                raise SaverClosedError(type(saver).__name__)

            monkeypatch.setattr(saver, "get_tuple", torn)
            with pytest.raises(SaverClosedError, match=cfg["configurable"]["thread_id"]):
                fenced.checkpointer.get_tuple(cfg)


@pytest.mark.parametrize("kind", KINDS)
async def test_two_concurrent_async_closes_release_a_live_runs_lease(
    kind, tmp_path, request
) -> None:
    """review4 M2: the second of two concurrent ``aclose()`` calls found the
    first's run already marked released and closed the connection under the
    first's release: the thread stayed locked for the lease's TTL."""
    cfg, tag = _cfg(), uuid.uuid4().hex[:10]
    tid = cfg["configurable"]["thread_id"]
    async with _open(kind, tmp_path, request, tag) as saver:
        graph = chain(3).compile(checkpointer=saver)
        it = graph.astream({"log": []}, cfg, stream_mode="updates", durability="async")
        assert await it.__anext__() == {"s0": {"log": ["s0"]}}
        with _no_warning(RuntimeWarning):
            await asyncio.gather(saver.aclose(), saver.aclose())
    with _no_warning(RuntimeWarning):
        with pytest.raises(SaverClosedError, match=tid):
            await it.__anext__()
        await it.aclose()
    async with _open(kind, tmp_path, request, tag) as again:
        graph = chain(3).compile(checkpointer=again)
        assert (await graph.aget_state(cfg)).values == {"log": ["s0"]}
        out = await graph.ainvoke({"log": ["B"]}, cfg, multitask_strategy="reject")
        assert out["log"][-1] == "s2"


@pytest.mark.parametrize("kind", KINDS)
def test_two_concurrent_sync_closes_release_a_live_runs_lease(kind, tmp_path, request) -> None:
    """The sync twin: two threads close the saver a live stream writes through."""
    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    with open_saver(spec) as saver:
        graph = chain(3).compile(checkpointer=saver)
        it = graph.stream({"log": []}, cfg, stream_mode="updates", durability="async")
        assert next(it) == {"s0": {"log": ["s0"]}}
        with _no_warning(RuntimeWarning):
            closers = [threading.Thread(target=saver.close) for _ in range(2)]
            for t in closers:
                t.start()
            for t in closers:
                t.join(30)
            assert not any(t.is_alive() for t in closers)
    with _no_warning(RuntimeWarning):
        with pytest.raises(SaverClosedError):
            next(it)
        it.close()
    _thread_is_free(spec, cfg)


def test_a_close_called_from_inside_the_close_does_not_wait_for_itself(
    tmp_path, request, monkeypatch
) -> None:
    spec, nested = make_spec("sqlite", str(tmp_path), request), []
    with open_saver(spec) as saver:
        runs = type(saver)._close_runs

        def close_runs(self) -> None:
            self.close()  # e.g. a finalizer or a callback reaching the saver again
            nested.append(True)
            runs(self)

        monkeypatch.setattr(type(saver), "_close_runs", close_runs)
    assert nested == [True] and saver._closed


async def test_an_aclose_awaited_from_inside_the_aclose_does_not_wait_for_itself(
    tmp_path, request, monkeypatch
) -> None:
    nested = []
    async with _open("sqlite", tmp_path, request) as saver:
        runs = type(saver)._aclose_runs

        async def aclose_runs(self) -> None:
            await self.aclose()
            nested.append(True)
            await runs(self)

        monkeypatch.setattr(type(saver), "_aclose_runs", aclose_runs)
    assert nested == [True] and saver._closed


_FORK_CLOSE = """
import os, sys, threading, time
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.lease import closing
real = closing.close_runs
def slow(saver):
    time.sleep(1.0)
    real(saver)
closing.close_runs = slow
cm = SqliteSaver.from_conn_string(sys.argv[1])
saver = cm.__enter__()
t = threading.Thread(target=saver.close)
t.start()
time.sleep(0.3)
pid = os.fork()
if pid == 0:
    threading.Timer(10, lambda: os._exit(3)).start()
    saver.close()
    os._exit(0)
_, status = os.waitpid(pid, 0)
t.join()
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_a_close_closes_its_own_copy(tmp_path) -> None:
    """review13: the child inherited the parent's close-in-progress marker and
    its close() waited forever for a close that runs only in the parent."""
    out = subprocess.run(
        [sys.executable, "-c", _FORK_CLOSE, str(tmp_path / "f.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "0", out.stderr


def test_a_saver_subclass_that_is_not_hashable_closes(tmp_path) -> None:
    """review13b: defining ``__eq__`` makes a class unhashable; the close's
    bookkeeping of savers being closed raised TypeError, left the connection
    open, and a second close waited forever."""
    from threadloom.checkpoint.sqlite import SqliteSaver

    class Named(SqliteSaver):
        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named)

    with Named.from_conn_string(str(tmp_path / "n.db")) as saver:
        saver.list(None)
    assert saver._closed
    saver.close()  # a second close returns
