"""A caller's implicit transaction is refused for writes, not joined silently (probeprod).

On a non-autocommit connection the caller's own query leaves a transaction open;
the saver used to write inside it as a savepoint and commit nothing, so its
checkpoints vanished when the caller closed the connection. A caller's
``with conn.transaction():`` block is still joined (documented).
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres


def cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def stored(pg_url: str, schema: str, thread: str) -> bool:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return PostgresSaver(conn, schema=schema).get_tuple(cfg(thread)) is not None


def test_write_in_an_implicit_transaction_is_refused(pg_url: str, pg_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as own:
        own.setup()
    with psycopg.connect(pg_url) as conn:  # autocommit off
        saver = PostgresSaver(conn, schema=pg_schema)
        conn.execute("SELECT 1")  # the caller's query: psycopg opened a transaction
        assert saver.get_tuple(cfg("implicit")) is None  # a read may join it
        with pytest.raises(StorageError, match="transaction open .*INTRANS"):
            saver.put(cfg("implicit"), empty_checkpoint(), {"step": 0}, {})
        assert conn.info.transaction_status == TransactionStatus.INTRANS  # left as it was
        conn.commit()
        saver.put(cfg("implicit"), empty_checkpoint(), {"step": 0}, {})
        assert conn.info.transaction_status == TransactionStatus.IDLE
    assert stored(pg_url, pg_schema, "implicit")


def test_a_transaction_block_of_the_caller_is_still_joined(pg_url: str, pg_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as own:
        own.setup()
    with psycopg.connect(pg_url) as conn:
        saver = PostgresSaver(conn, schema=pg_schema)
        with conn.transaction():
            conn.execute("SELECT 1")
            saver.put(cfg("block"), empty_checkpoint(), {"step": 0}, {})
            assert not stored(pg_url, pg_schema, "block")  # not committed yet: joined
        assert stored(pg_url, pg_schema, "block")
        with conn.transaction(force_rollback=True):
            saver.put(cfg("undone"), empty_checkpoint(), {"step": 0}, {})
    assert not stored(pg_url, pg_schema, "undone")


async def test_async_write_in_an_implicit_transaction_is_refused(
    pg_url: str, pg_schema: str
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as own:
        await own.setup()
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        saver = AsyncPostgresSaver(conn, schema=pg_schema)
        await conn.execute("SELECT 1")
        with pytest.raises(StorageError, match="transaction open"):
            await saver.aput(cfg("aimplicit"), empty_checkpoint(), {"step": 0}, {})
        await conn.rollback()
        await saver.aput(cfg("aimplicit"), empty_checkpoint(), {"step": 0}, {})
    assert stored(pg_url, pg_schema, "aimplicit")
