"""AsyncPostgresSaver with held-back batches (0aba2c5): a client-side error in a
held batch fails the transaction only; a connection killed while only held
batches are pending is replayed at the commit (review3, session 7)."""

import asyncio

import psycopg
import pytest

from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres
CONNS = [False, {"max_size": 1, "timeout": 3.0}]


async def _table(connector, schema, name):
    t = f'"{schema}".{name}'
    async with connector.atransaction(write=True):
        await connector.aexecute([Stmt(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')])
        await connector.aexecute([Stmt(f"CREATE TABLE {t} (v text)")])
    return t


async def _rows(connector, t):
    async with connector.atransaction(write=False):
        [got] = await connector.aexecute([Stmt(f"SELECT v FROM {t} ORDER BY v", (), "all")])
    return [r[0] for r in got]


@pytest.mark.parametrize("pool", CONNS, ids=["single", "pool"])
async def test_client_side_error_in_queued_batch(pg_url, fresh_schema, pool):
    """A NUL byte (psycopg refuses it while dumping) in a queued batch."""
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema, pool=pool) as saver:
        c = saver.connector
        t = await _table(c, fresh_schema, "nul")
        try:
            async with c.atransaction(write=True):
                await c.aexecute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("ok",))])
                await c.aexecute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("a\x00b",))])
                await c.aexecute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("after",))])
        except Exception as exc:
            assert isinstance(exc, StorageError), type(exc)
        else:
            pytest.fail("no error")
        assert await _rows(c, t) == []
        async with c.atransaction(write=True):
            await c.aexecute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("z",))])
        assert await _rows(c, t) == ["z"]


@pytest.mark.parametrize("pool", CONNS, ids=["single", "pool"])
async def test_kill_with_only_queued_then_commit(pg_url, fresh_schema, pool):
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema, pool=pool) as saver:
        c = saver.connector
        t = await _table(c, fresh_schema, "killq")
        async with c.atransaction(write=True):
            await c.aexecute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("1",))])
            await c.aexecute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("2",))])
            pid = c.current.get().conn.info.backend_pid
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
                await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await asyncio.sleep(0.2)
        assert await _rows(c, t) == ["1", "2"]
