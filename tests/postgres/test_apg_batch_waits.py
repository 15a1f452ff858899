"""AsyncPgConnector._send queues a pipelined batch in one wait on the connection."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres

SET = "SELECT set_config(%s, %s, true)"


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count psycopg's waits on an async connection (one per ``await cur.execute``)."""
    calls: list[int] = []
    wait = psycopg.AsyncConnection.wait

    async def counting_wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await wait(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "wait", counting_wait)
    return calls


async def test_a_pipelined_batch_is_queued_in_one_wait(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        connector = saver.connector
        batch = [
            Stmt(SET, ("threadloom.a", "1")),
            Stmt(SET, ("threadloom.b", "2")),
            Stmt(SET, ("threadloom.c", "3")),
            Stmt(
                "SELECT current_setting('threadloom.a') || current_setting('threadloom.c')",
                (),
                "one",
            ),
            Stmt("SELECT current_setting('threadloom.b')", (), "all"),
        ]
        async with connector.atransaction(write=True):
            await connector.aexecute([Stmt("SELECT 1", (), "one")])  # enters the pipeline
            assert connector.current.get().conn._pipeline is not None
            calls = counted(monkeypatch)
            results = await connector.aexecute(batch)
            monkeypatch.undo()
        # five statements queued in one wait, then one more to fetch the first
        # answer (the second has arrived with it); one wait each made it 6
        assert len(calls) <= 2
        assert results == [None, None, None, ("13",), [("2",)]]


async def test_an_error_in_a_queued_batch_fails_the_transaction_only(
    pg_url: str, pg_schema: str
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        connector = saver.connector
        batch = [Stmt(SET, ("threadloom.a", "1")), Stmt("SELECT 1/0", (), "one")]
        with pytest.raises(StorageError, match="division by zero"):
            async with connector.atransaction(write=True):
                await connector.aexecute(batch)
        async with connector.atransaction(write=True):
            again = await connector.aexecute([Stmt("SELECT 40 + 2", (), "one")])
        assert again == [(42,)]


async def test_a_batch_nobody_reads_leaves_with_the_next_one(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        connector = saver.connector
        async with connector.atransaction(write=True):
            calls = counted(monkeypatch)
            assert await connector.aexecute([Stmt(SET, ("threadloom.a", "7"))]) == [None]
            assert calls == []  # queued, nothing sent yet
            read = Stmt("SELECT current_setting('threadloom.a')", (), "one")
            assert await connector.aexecute([read]) == [("7",)]  # sent first, in order
            monkeypatch.undo()


async def test_what_is_still_queued_is_sent_before_the_commit(
    pg_url: str, fresh_schema: str
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        connector = saver.connector
        table = f'"{fresh_schema}".queued'
        async with connector.atransaction(write=True):
            await connector.aexecute([Stmt(f'CREATE SCHEMA IF NOT EXISTS "{fresh_schema}"')])
            await connector.aexecute([Stmt(f"CREATE TABLE {table} (v int)")])
            await connector.aexecute([Stmt(f"INSERT INTO {table} VALUES (%s)", (5,))])
        async with connector.atransaction(write=False):
            got = await connector.aexecute([Stmt(f"SELECT v FROM {table}", (), "all")])
        assert got == [[(5,)]]


async def test_a_queued_batch_is_replayed_on_a_new_connection(
    pg_url: str, fresh_schema: str
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        connector = saver.connector
        table = f'"{fresh_schema}".replayed'
        async with connector.atransaction(write=True):
            await connector.aexecute([Stmt(f'CREATE SCHEMA IF NOT EXISTS "{fresh_schema}"')])
            await connector.aexecute([Stmt(f"CREATE TABLE {table} (v int)")])
        async with connector.atransaction(write=True):
            await connector.aexecute([Stmt(f"INSERT INTO {table} VALUES (%s)", (1,))])
            pid = connector.current.get().conn.info.backend_pid
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
                await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            count = Stmt(f"SELECT count(*) FROM {table}", (), "one")
            assert await connector.aexecute([count]) == [(1,)]  # the insert was replayed
        async with connector.atransaction(write=False):
            got = await connector.aexecute([Stmt(f"SELECT v FROM {table}", (), "all")])
        assert got == [[(1,)]]


async def test_a_batch_leaves_in_one_exchange_with_the_server(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg's ``execute`` flushes each statement alone (a write per statement);
    a queued batch is handed to libpq whole and flushed once."""
    from psycopg._pipeline_base import BasePipeline

    exchanges: list[int] = []
    communicate = BasePipeline._communicate_gen

    def counting(self: Any) -> Any:
        exchanges.append(1)
        return (yield from communicate(self))

    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        connector = saver.connector
        batch = [Stmt(SET, ("threadloom.a", str(k))) for k in range(4)]
        async with connector.atransaction(write=True):
            monkeypatch.setattr(BasePipeline, "_communicate_gen", counting)
            await connector.aexecute(batch)
            read = Stmt("SELECT current_setting('threadloom.a')", (), "one")
            assert await connector.aexecute([read]) == [("3",)]
            monkeypatch.undo()
        assert len(exchanges) == 1  # five statements (one per statement: 5)
