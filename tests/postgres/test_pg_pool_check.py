"""A pool's own ``check`` does not make the saver sleep on dead connections (reviewpg).

psycopg_pool runs a pool's ``check`` inside ``getconn()`` and sleeps 1, 2, 4... s
after each connection that fails it: with four pooled connections killed while
idle, the documented ``pool={"check": ConnectionPool.check_connection}`` made the
next call take ~7 s (0.04 s without a check). The saver wraps the check: on its
own checkouts a connection ``is_dead`` calls dead skips it and is replaced by the
checkout loop at once; live ones still get the check, and the pool's other users
see the check unchanged.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from tests.appending import appending
from tests.postgres.sessions import terminate
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver

pytestmark = pytest.mark.postgres

# psycopg_pool sleeps 1, 2, 4... s after each connection its check rejects: the
# tests assert that no check rejected one on the saver's checkouts (no timing)


def spying(check: Any, failed: list[BaseException]) -> Any:
    """``check``, recording what it raised (a rejection psycopg_pool sleeps after)."""
    if asyncio.iscoroutinefunction(check):

        async def acheck(conn: Any) -> None:
            try:
                await check(conn)
            except BaseException as exc:
                failed.append(exc)
                raise

        return acheck

    def scheck(conn: Any) -> None:
        try:
            check(conn)
        except BaseException as exc:
            failed.append(exc)
            raise

    return scheck


def app_url(pg_url: str) -> tuple[str, str]:
    app = f"tl-pool-check-{uuid.uuid4().hex[:10]}"
    return f"{pg_url}?application_name={app}", app


def graph():
    return appending("a")


def test_documented_check_on_a_saver_pool(pg_url: str, pg_schema: str) -> None:
    url, app = app_url(pg_url)
    failed: list[BaseException] = []
    pool = {"min_size": 4, "check": spying(ConnectionPool.check_connection, failed)}
    with PostgresSaver.from_conn_string(url, schema=pg_schema, pool=pool) as saver:
        saver.setup()
        saver.connector.conn.wait()
        app_graph = graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "doc-check"}}
        app_graph.invoke({"n": []}, config)
        assert terminate(pg_url, app) >= 4
        assert app_graph.invoke({"n": []}, config)["n"] == ["a", "a"]
        assert failed == []  # no dead connection reached the pool's check


def test_a_pool_of_yours_with_its_own_check(pg_url: str, pg_schema: str) -> None:
    url, app = app_url(pg_url)
    checked: list[Any] = []

    def check(conn: Any) -> None:
        checked.append(conn)
        conn.execute("SELECT 1")

    failed: list[BaseException] = []
    check = spying(check, failed)
    with ConnectionPool(
        url, min_size=4, max_size=4, timeout=20, check=check, kwargs={"autocommit": True}
    ) as pool:
        pool.wait()
        saver = PostgresSaver(pool, schema=pg_schema)
        saver.setup()
        app_graph = graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "user-check"}}
        app_graph.invoke({"n": []}, config)
        assert terminate(pg_url, app) == 4
        checked.clear()
        assert app_graph.invoke({"n": []}, config)["n"] == ["a", "a"]
        assert failed == []  # no dead connection reached the pool's check
        assert checked  # the live replacements still got the pool's check
        # the pool's other users: a dead connection gets the check as before
        assert terminate(pg_url, app) == 4
        conn = pool._getconn_unchecked(5.0)
        try:
            with pytest.raises(psycopg.OperationalError):
                pool._check(conn)
        finally:
            pool.putconn(conn)


def test_an_async_pool_of_yours_with_its_own_check(pg_url: str, pg_schema: str) -> None:
    url, app = app_url(pg_url)
    checked: list[Any] = []

    async def check(conn: Any) -> None:
        checked.append(conn)
        await conn.execute("SELECT 1")

    failed: list[BaseException] = []
    check = spying(check, failed)

    async def main() -> None:
        async with AsyncConnectionPool(
            url, min_size=4, max_size=4, timeout=20, check=check, kwargs={"autocommit": True}
        ) as pool:
            await pool.wait()
            saver = AsyncPostgresSaver(pool, schema=pg_schema)
            await saver.setup()
            app_graph = graph().compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "auser-check"}}
            await app_graph.ainvoke({"n": []}, config)
            assert await asyncio.to_thread(terminate, pg_url, app) == 4
            checked.clear()
            assert (await app_graph.ainvoke({"n": []}, config))["n"] == ["a", "a"]
            assert failed == []
            assert checked

    asyncio.run(main())


def test_async_documented_check(pg_url: str, pg_schema: str) -> None:
    url, app = app_url(pg_url)
    failed: list[BaseException] = []
    pool = {"min_size": 4, "check": spying(AsyncConnectionPool.check_connection, failed)}

    async def main() -> None:
        async with AsyncPostgresSaver.from_conn_string(url, schema=pg_schema, pool=pool) as saver:
            await saver.setup()
            await saver.connector.conn.wait()
            app_graph = graph().compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "adoc-check"}}
            await app_graph.ainvoke({"n": []}, config)
            assert await asyncio.to_thread(terminate, pg_url, app) >= 4
            assert (await app_graph.ainvoke({"n": []}, config))["n"] == ["a", "a"]
            assert failed == []

    asyncio.run(main())
