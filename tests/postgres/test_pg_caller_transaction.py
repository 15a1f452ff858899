"""A caller's open transaction is joined: the saver's writes commit with it.

On a non-autocommit connection a query of the caller's leaves a transaction
psycopg opened implicitly. The saver's writes join it (as LangGraph's do) and
are durable when the caller commits: psycopg's ``with connect()`` block commits
at its exit, so ``conn.execute("SET ..."); graph.invoke(...)`` inside it stores
the run (7baafcd refused these writes, breaking that idiom; reviewpg). A
rollback discards them with the caller's own work.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from tests.appending import appending
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver

pytestmark = pytest.mark.postgres


def cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def stored(pg_url: str, schema: str, thread: str) -> bool:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return PostgresSaver(conn, schema=schema).get_tuple(cfg(thread)) is not None


@pytest.fixture
def schema(pg_url: str, fresh_schema: str) -> str:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as own:
        own.setup()
    return fresh_schema


def graph():
    return appending("a")


def test_the_with_connect_idiom_stores_the_run(pg_url: str, schema: str) -> None:
    with psycopg.connect(pg_url) as conn:  # autocommit off
        conn.execute("SET statement_timeout = '30s'")  # psycopg opened a transaction
        out = (
            graph()
            .compile(checkpointer=PostgresSaver(conn, schema=schema))
            .invoke({"n": []}, cfg("idiom"))
        )
        assert out == {"n": ["a"]}
        assert conn.info.transaction_status == TransactionStatus.INTRANS  # joined, not ended
        assert not stored(pg_url, schema, "idiom")  # durable only with the caller's commit
    assert stored(pg_url, schema, "idiom")  # the block committed at its exit


def test_a_rollback_discards_the_joined_writes(pg_url: str, schema: str) -> None:
    with psycopg.connect(pg_url) as conn:
        saver = PostgresSaver(conn, schema=schema)
        conn.execute("SELECT 1")
        saver.put(cfg("undone"), empty_checkpoint(), {"step": 0}, {})
        conn.rollback()
        assert not stored(pg_url, schema, "undone")
        saver.put(cfg("own"), empty_checkpoint(), {"step": 0}, {})  # no transaction open
        assert conn.info.transaction_status == TransactionStatus.IDLE  # committed its own
    assert stored(pg_url, schema, "own")
    conn = psycopg.connect(pg_url)
    try:
        conn.execute("SELECT 1")
        PostgresSaver(conn, schema=schema).put(cfg("closed"), empty_checkpoint(), {"step": 0}, {})
    finally:
        conn.close()  # without commit: discarded, as the caller's own work
    assert not stored(pg_url, schema, "closed")


def test_a_transaction_block_of_the_caller_is_joined(pg_url: str, schema: str) -> None:
    with psycopg.connect(pg_url) as conn:
        saver = PostgresSaver(conn, schema=schema)
        with conn.transaction():
            saver.put(cfg("block"), empty_checkpoint(), {"step": 0}, {})
            assert not stored(pg_url, schema, "block")
        assert stored(pg_url, schema, "block")
        with conn.transaction(force_rollback=True):
            saver.put(cfg("rolled"), empty_checkpoint(), {"step": 0}, {})
    assert not stored(pg_url, schema, "rolled")


async def test_async_implicit_transaction_is_joined(pg_url: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        saver = AsyncPostgresSaver(conn, schema=schema)
        await conn.execute("SET statement_timeout = '30s'")
        await graph().compile(checkpointer=saver).ainvoke({"n": []}, cfg("aidiom"))
        assert not stored(pg_url, schema, "aidiom")
        await saver.aput(cfg("aundone"), empty_checkpoint(), {"step": 0}, {})
    assert stored(pg_url, schema, "aidiom")
    assert stored(pg_url, schema, "aundone")
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        await conn.execute("SELECT 1")
        await AsyncPostgresSaver(conn, schema=schema).aput(
            cfg("arolled"), empty_checkpoint(), {"step": 0}, {}
        )
        await conn.rollback()
    assert not stored(pg_url, schema, "arolled")
