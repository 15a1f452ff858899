"""A saver that closed what it opened refuses every call (SaverClosedError, no
reconnect), and a run still streaming when its saver's block ends loses only
its future saves: the close released its lease (the thread is free at once for
a new saver) and its own release is then a no-op (no RuntimeWarning)."""

from __future__ import annotations

import threading
import uuid
import warnings
from contextlib import contextmanager

import pytest

from tests.concurrency.backends import make_spec, open_saver
from tests.concurrency.graphs import chain
from tests.concurrency.test_async_savers import _open
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.errors import SaverClosedError

KINDS = ["sqlite", "postgres", "redis"]


def _cfg() -> dict:
    return {"configurable": {"thread_id": f"closed-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}


@contextmanager
def _no_warning(kind: type[Warning]):
    """Fails when a ``kind`` warning (ResourceWarning: a leaked connection;
    RuntimeWarning: a lease that could not be released) is raised inside."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield
    assert [str(w.message) for w in seen if issubclass(w.category, kind)] == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_call_after_close_is_refused(kind, tmp_path, request) -> None:
    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    with open_saver(spec) as saver:
        graph = chain(2).compile(checkpointer=saver)
        graph.invoke({"log": []}, cfg)
        latest = saver.get_tuple(cfg).config  # names its checkpoint: a valid put_writes
    name = type(saver).__name__
    with _no_warning(ResourceWarning):
        calls = [
            lambda: saver.get_tuple(cfg),
            lambda: list(saver.list(cfg)),
            lambda: saver.put(cfg, empty_checkpoint(), {}, {}),
            lambda: saver.put_writes(latest, [("log", ["x"])], "task-1"),
            lambda: graph.invoke({"log": []}, cfg),
        ]
        for call in calls:
            with pytest.raises(SaverClosedError, match=name):
                call()


@pytest.mark.parametrize("kind", KINDS)
async def test_every_async_call_after_close_is_refused(kind, tmp_path, request) -> None:
    cfg = _cfg()
    async with _open(kind, tmp_path, request) as saver:
        graph = chain(2).compile(checkpointer=saver)
        await graph.ainvoke({"log": []}, cfg)
        latest = (await saver.aget_tuple(cfg)).config
    with _no_warning(ResourceWarning):
        with pytest.raises(SaverClosedError, match=type(saver).__name__):
            await saver.aget_tuple(cfg)
        with pytest.raises(SaverClosedError):
            [c async for c in saver.alist(cfg)]
        with pytest.raises(SaverClosedError):
            await saver.aput(cfg, empty_checkpoint(), {}, {})
        with pytest.raises(SaverClosedError):
            await saver.aput_writes(latest, [("log", ["x"])], "task-1")
        with pytest.raises(SaverClosedError):
            await graph.ainvoke({"log": []}, cfg)


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_open_across_close_releases_its_thread(
    kind, durability, tmp_path, request
) -> None:
    """Under durability="async" the step streamed was only queued for saving:
    the close saves the run's queue before it releases the lease."""
    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    tid = cfg["configurable"]["thread_id"]
    with open_saver(spec) as saver:
        graph = chain(3).compile(checkpointer=saver)
        it = graph.stream({"log": []}, cfg, stream_mode="updates", durability=durability)
        assert next(it) == {"s0": {"log": ["s0"]}}
    with _no_warning(RuntimeWarning):
        with pytest.raises(SaverClosedError, match=tid):
            next(it)
        it.close()
    with open_saver(spec) as again:
        graph = chain(3).compile(checkpointer=again)
        assert graph.get_state(cfg).values == {"log": ["s0"]}  # saved before close
        out = graph.invoke({"log": ["B"]}, cfg, multitask_strategy="reject")
        assert out == {"log": ["s0", "B", "s0", "s1", "s2"]}


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
async def test_an_async_stream_open_across_close_releases_its_thread(
    kind, durability, tmp_path, request
) -> None:
    cfg, tag = _cfg(), uuid.uuid4().hex[:10]
    tid = cfg["configurable"]["thread_id"]
    async with _open(kind, tmp_path, request, tag) as saver:
        graph = chain(3).compile(checkpointer=saver)
        it = graph.astream({"log": []}, cfg, stream_mode="updates", durability=durability)
        assert await it.__anext__() == {"s0": {"log": ["s0"]}}
    with _no_warning(RuntimeWarning):
        with pytest.raises(SaverClosedError, match=tid):
            await it.__anext__()
        await it.aclose()
    async with _open(kind, tmp_path, request, tag) as again:
        graph = chain(3).compile(checkpointer=again)
        assert (await graph.aget_state(cfg)).values == {"log": ["s0"]}
        out = await graph.ainvoke({"log": ["B"]}, cfg, multitask_strategy="reject")
        assert out == {"log": ["s0", "B", "s0", "s1", "s2"]}


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_dropped_before_close_saves_its_step(kind, tmp_path, request) -> None:
    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    with _no_warning(RuntimeWarning), open_saver(spec) as saver:
        graph = chain(3).compile(checkpointer=saver)
        for _chunk in graph.stream({"log": []}, cfg, stream_mode="updates"):
            break
    with open_saver(spec) as again:
        graph = chain(3).compile(checkpointer=again)
        assert graph.get_state(cfg).values == {"log": ["s0"]}
        graph.invoke(None, cfg, multitask_strategy="reject")  # resumes: the thread is free
        assert graph.get_state(cfg).values == {"log": ["s0", "s1", "s2"]}


@pytest.mark.parametrize("kind", KINDS)
async def test_an_async_stream_dropped_before_close_saves_its_step(kind, tmp_path, request) -> None:
    cfg, tag = _cfg(), uuid.uuid4().hex[:10]
    with _no_warning(RuntimeWarning):
        async with _open(kind, tmp_path, request, tag) as saver:
            graph = chain(3).compile(checkpointer=saver)
            async for _chunk in graph.astream({"log": []}, cfg, stream_mode="updates"):
                break
    async with _open(kind, tmp_path, request, tag) as again:
        graph = chain(3).compile(checkpointer=again)
        assert (await graph.aget_state(cfg)).values == {"log": ["s0"]}
        await graph.ainvoke(None, cfg, multitask_strategy="reject")
        assert (await graph.aget_state(cfg)).values == {"log": ["s0", "s1", "s2"]}


def test_a_run_mid_step_in_another_thread_survives_the_close(tmp_path, request) -> None:
    """SQLite: the close takes the executor's lock; the other thread's run gets
    SaverClosedError at its next save (never a crash on a closed connection)."""
    spec, cfg = make_spec("sqlite", str(tmp_path), request), _cfg()
    gate, started, errors = threading.Event(), threading.Event(), []

    def run() -> None:
        try:
            graph.invoke({"log": []}, cfg, durability="sync")
        except Exception as exc:
            errors.append(exc)

    with open_saver(spec) as saver:
        graph = chain(2, gate, started).compile(checkpointer=saver)
        worker = threading.Thread(target=run)
        worker.start()
        assert started.wait(20)
    gate.set()
    worker.join(20)
    assert [type(e) for e in errors] == [SaverClosedError]
    assert cfg["configurable"]["thread_id"] in str(errors[0])
    with open_saver(spec) as again:
        graph = chain(2).compile(checkpointer=again)
        assert graph.invoke({"log": []}, cfg, multitask_strategy="reject")["log"][-2:] == [
            "s0",
            "s1",
        ]


def _own_connection(kind, spec):
    if kind == "sqlite":
        import sqlite3

        from threadloom.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(spec["path"], check_same_thread=False, isolation_level=None)
        return conn, SqliteSaver(conn), lambda: conn.execute("SELECT 1").fetchone()
    if kind == "postgres":
        import psycopg

        from threadloom.checkpoint.postgres import PostgresSaver
        from threadloom.checkpoint.postgres.pool import connect_kwargs

        conn = psycopg.Connection.connect(spec["url"], **connect_kwargs(None))
        saver = PostgresSaver(conn, schema=spec["schema"])
        saver.setup()
        return conn, saver, lambda: conn.execute("SELECT 1").fetchone()
    import redis

    from threadloom.checkpoint.redis import RedisSaver

    client = redis.Redis.from_url(spec["url"])
    return client, RedisSaver(client, key_prefix=spec["prefix"]), client.ping


@pytest.mark.parametrize("kind", KINDS)
def test_close_leaves_a_callers_connection_usable(kind, tmp_path, request) -> None:
    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    conn, saver, ping = _own_connection(kind, spec)
    try:
        graph = chain(2).compile(checkpointer=saver)
        graph.invoke({"log": []}, cfg)
        saver.close()
        assert ping()
        assert saver.get_tuple(cfg) is not None  # the saver keeps working on it
        assert graph.invoke({"log": []}, cfg)["log"] == ["s0", "s1", "s0", "s1"]
    finally:
        conn.close()
