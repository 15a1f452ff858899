"""A transaction whose statements all wait for the commit sends them with the
Sync in one write, straight through libpq (threadloom/checkpoint/postgres/lean.py):
no psycopg pipeline, honoured ``prepare_threshold``, a cut exchange closes the
connection, a statement's error (the backend killed while it waited) is a
transaction that surely did not commit and is replayed."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from psycopg._pipeline_base import BasePipeline

from tests.postgres.steps import count_parent, count_steps
from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver, lean
from threadloom.checkpoint.postgres.optimistic import thread_lock_key

pytestmark = pytest.mark.postgres


def _counted(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """(writes of a lean commit, psycopg pipelines entered)."""
    writes: list[int] = []
    pipelines: list[int] = []
    send, enter = lean.send, BasePipeline._enter_gen

    def counting_send(pgconn: Any) -> Any:
        writes.append(1)
        return (yield from send(pgconn))

    def counting_enter(self: Any) -> Any:
        pipelines.append(1)
        return (yield from enter(self))

    monkeypatch.setattr(lean, "send", counting_send)
    monkeypatch.setattr(BasePipeline, "_enter_gen", counting_enter)
    return writes, pipelines


def test_a_step_commits_in_one_write_without_a_psycopg_pipeline(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        parent = count_parent(saver, "lean-one-write")
        writes, pipelines = _counted(monkeypatch)
        parent = count_steps(saver, parent)
        monkeypatch.undo()
        assert writes == [1, 1, 1] and pipelines == []
        assert saver.get_tuple(parent).checkpoint["channel_values"] == {"count": 2}


async def test_an_async_step_commits_in_one_write(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        await saver.setup()
        parent = {"configurable": {"thread_id": "lean-async", "checkpoint_ns": ""}}
        from threadloom.checkpoint.base import empty_checkpoint

        parent = await saver.aput(parent, empty_checkpoint(), {"step": -1}, {})
        writes, pipelines = _counted(monkeypatch)
        await saver.aput_writes(parent, [("n", 1)], "task")
        monkeypatch.undo()
        assert writes == [1] and pipelines == []
        assert (await saver.aget_tuple(parent)).pending_writes == [("task", "n", 1)]


@pytest.mark.parametrize("threshold", [None, 0], ids=["never", "always"])
def test_prepare_threshold_is_honoured(pg_url: str, pg_schema: str, threshold: Any) -> None:
    """A connection that prepares nothing prepares nothing through the lean
    commit either; one that prepares everything gets its statements prepared."""
    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=threshold) as conn:
        saver = PostgresSaver(conn, schema=pg_schema)
        saver.setup()
        parent = count_steps(saver, count_parent(saver, f"lean-prep-{threshold}"))
        names = conn.execute("SELECT name FROM pg_prepared_statements", prepare=False).fetchall()
        assert saver.get_tuple(parent).checkpoint["channel_values"] == {"count": 2}
    assert (names == []) == (threshold is None)


def test_an_exchange_cut_short_closes_the_connection(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the replies are read: the connection would stay in pipeline
    mode with replies nobody reads; it is closed, and the next call reconnects."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        parent = count_parent(saver, "lean-cut")

        def interrupted(pgconn: Any) -> Any:
            raise KeyboardInterrupt
            yield  # a generator, as fetch_many

        conn = saver.connector.conn
        monkeypatch.setattr(lean, "fetch_many", interrupted)
        with pytest.raises(KeyboardInterrupt):
            saver.put_writes(parent, [("n", "cut")], "task")
        monkeypatch.undo()
        assert conn.closed
        saver.put_writes(parent, [("n", "again")], "task-2")
        assert ("task-2", "n", "again") in saver.get_tuple(parent).pending_writes


@pytest.mark.parametrize("pool", [False, {"max_size": 1, "timeout": 3.0}], ids=["single", "pool"])
def test_a_backend_killed_while_its_commit_waits_is_replayed(
    pg_url: str, pg_schema: str, pool: Any
) -> None:
    """The step waits on its thread's lock (held elsewhere); its backend is
    killed: the error comes back as a statement's reply, so the transaction
    surely did not commit, and it is replayed on a new connection."""
    app = f"tl-lean-kill-{bool(pool)}"
    url = f"{pg_url}?application_name={app}"
    with PostgresSaver.from_conn_string(url, schema=pg_schema, pool=pool) as saver:
        saver.setup()
        thread = f"lean-kill-{bool(pool)}"
        parent = count_parent(saver, thread)
        key = thread_lock_key(saver.sql, thread)
        errors: list[BaseException] = []

        def write() -> None:
            try:
                saver.put_writes(parent, [("n", "late")], "task")
            except BaseException as exc:
                errors.append(exc)

        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_advisory_lock(%s)", (key,))
            worker = threading.Thread(target=write)
            worker.start()
            waiting = "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'"
            for _ in range(200):
                pids = [r[0] for r in admin.execute(waiting, (app,))]
                if pids:
                    break
                time.sleep(0.02)
            assert pids, "the step never waited on the thread's lock"
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pids[0],))
            admin.execute("SELECT pg_advisory_unlock(%s)", (key,))
            worker.join(10)
        assert errors == []
        assert saver.get_tuple(parent).pending_writes == [("task", "n", "late")]
