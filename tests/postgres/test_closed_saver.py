"""A Postgres saver closed on purpose (``from_conn_string`` left) refuses further
calls with a clear error instead of reconnecting on a connection nobody closes."""

from __future__ import annotations

import pytest

from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.errors import StorageError

CONF = {"configurable": {"thread_id": "closed-saver", "checkpoint_ns": ""}}


def test_a_closed_saver_refuses_calls(pg_url: str, fresh_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        assert saver.get_tuple(CONF) is None
    with pytest.raises(StorageError, match="the saver is closed"):
        saver.get_tuple(CONF)
    assert saver.connector.conn.closed  # nothing reopened behind the caller's back


async def test_a_closed_async_saver_refuses_calls(pg_url: str, fresh_schema: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        await saver.setup()
        assert await saver.aget_tuple(CONF) is None
    with pytest.raises(StorageError, match="the saver is closed"):
        await saver.aget_tuple(CONF)
    assert saver.connector.conn.closed


def test_a_caller_owned_connection_is_left_alone(pg_url: str, fresh_schema: str) -> None:
    import psycopg

    from threadloom.checkpoint.postgres.pool import connect_kwargs

    with psycopg.Connection.connect(pg_url, **connect_kwargs(None)) as conn:
        saver = PostgresSaver(conn, schema=fresh_schema)
        saver.setup()
        saver.close()  # not the saver's connection: not closed, still usable
        assert saver.get_tuple(CONF) is None
