"""Pooled connections the server closed while idle are passed over, not handed out.

A killed backend sends a FATAL message, then closes the socket; the first look
used to read only the FATAL and call the connection alive, so with two or more
dead pooled connections a call failed with StorageError (probeprod).
"""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from tests.appending import appending
from tests.postgres.sessions import terminate
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.checkpoint.postgres.health import is_dead

pytestmark = pytest.mark.postgres


def graph():
    return appending("a", "b")


def test_killed_connection_is_dead_on_first_look(pg_url: str) -> None:
    app = f"tl-dead-first-{time.monotonic_ns()}"
    conn = psycopg.connect(f"{pg_url}?application_name={app}", autocommit=True)
    try:
        conn.execute("SELECT 1")
        assert terminate(pg_url, app) == 1
        assert is_dead(conn)
    finally:
        conn.close()


def test_idle_connection_with_a_notification_waiting_is_alive(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("LISTEN tl_dead_probe")
        with psycopg.connect(pg_url, autocommit=True) as other:
            other.execute("NOTIFY tl_dead_probe, 'x'")
        time.sleep(0.2)  # input waiting on the socket that is not a death
        got: list[str] = []
        conn.add_notify_handler(lambda n: got.append(n.payload))
        assert not is_dead(conn)
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert got == ["x"]  # parsed by the check, still delivered


def test_pool_with_every_connection_killed_still_invokes(pg_url: str, pg_schema: str) -> None:
    app = f"tl-dead-pool-{pg_schema}"
    url = f"{pg_url}?application_name={app}"
    with PostgresSaver.from_conn_string(url, schema=pg_schema, pool={"min_size": 4}) as saver:
        saver.setup()
        saver.connector.conn.wait()
        app_graph = graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "dead-pool"}}
        assert app_graph.invoke({"n": ["x"]}, config)["n"] == ["x", "a", "b"]
        assert terminate(pg_url, app) >= 4
        assert app_graph.invoke({"n": ["y"]}, config)["n"] == ["x", "a", "b", "y", "a", "b"]


def test_async_pool_with_every_connection_killed_still_invokes(pg_url: str, pg_schema: str) -> None:
    app = f"tl-dead-apool-{pg_schema}"
    url = f"{pg_url}?application_name={app}"

    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(
            url, schema=pg_schema, pool={"min_size": 4}
        ) as saver:
            await saver.setup()
            await saver.connector.conn.wait()
            app_graph = graph().compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "dead-apool"}}
            assert (await app_graph.ainvoke({"n": ["x"]}, config))["n"] == ["x", "a", "b"]
            assert await asyncio.to_thread(terminate, pg_url, app) >= 4
            out = await app_graph.ainvoke({"n": ["y"]}, config)
            assert out["n"] == ["x", "a", "b", "y", "a", "b"]

    asyncio.run(main())
