"""``PostgresSaver.conn`` / ``.pipe``: LangGraph's attributes, which code running
its own SQL next to the saver reads (probe12: missing)."""

from __future__ import annotations

from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver


def test_conn_is_the_saver_connection(pg_url: str) -> None:
    with PostgresSaver.from_conn_string(pg_url) as saver:
        assert saver.conn.execute("select 41 + 1").fetchone()[0] == 42
        assert saver.pipe is None


async def test_async_conn(pg_url: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url) as saver:
        cur = await saver.conn.execute("select 7")
        assert (await cur.fetchone())[0] == 7
