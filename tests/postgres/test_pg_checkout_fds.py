"""Taking a pooled connection works in a process with > 1,024 open files, and a
connection taken always goes back to the pool (reviewpg).

``is_dead`` used ``select.select()``, which raises ValueError for a descriptor
>= 1024; it ran between ``getconn()`` and the block that gives the connection
back, so every call failed and leaked a connection until the pool was empty.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadloom.checkpoint.postgres import checkout
from threadloom.checkpoint.postgres.checkout import alive_from_pool, live_from_pool

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import asyncio, operator, os, resource, sys
    from typing import Annotated, TypedDict
    from threadloom.checkpoint.postgres import PostgresSaver
    from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
    from threadloom.graph import END, START, StateGraph

    url, schema = sys.argv[1], sys.argv[2]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        print("SKIP hard limit", hard); sys.exit(0)
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096 if hard == resource.RLIM_INFINITY else min(hard, 4096), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    assert max(held) >= 1024

    class State(TypedDict):
        n: Annotated[list, operator.add]

    g = StateGraph(State)
    g.add_node("a", lambda s: {"n": ["a"]})
    g.add_edge(START, "a"); g.add_edge("a", END)
    pool = {"min_size": 2, "max_size": 2, "timeout": 3}
    with PostgresSaver.from_conn_string(url, schema=schema, pool=pool) as saver:
        saver.setup()
        app = g.compile(checkpointer=saver)
        for i in range(4):
            assert app.invoke({"n": []}, {"configurable": {"thread_id": f"s{i}"}}) == {"n": ["a"]}
        print("sync", saver.connector.conn.get_stats().get("pool_available"))
    with PostgresSaver.from_conn_string(url, schema=schema) as saver:
        g.compile(checkpointer=saver).invoke({"n": []}, {"configurable": {"thread_id": "one"}})
        print("single ok")

    async def main():
        async with AsyncPostgresSaver.from_conn_string(url, schema=schema, pool=pool) as saver:
            app = g.compile(checkpointer=saver)
            for i in range(4):
                await app.ainvoke({"n": []}, {"configurable": {"thread_id": f"a{i}"}})
            print("async", saver.connector.conn.get_stats().get("pool_available"))

    asyncio.run(main())
    """
)


def test_a_process_with_more_than_1024_open_files(pg_url: str, fresh_schema: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, pg_url, fresh_schema],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    if proc.stdout.startswith("SKIP"):
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:3] == ["sync 2", "single ok", "async 2"], proc.stdout


class Boom(Exception):
    pass


def test_a_failing_look_gives_the_connection_back(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(conn: object) -> bool:
        raise Boom

    with ConnectionPool(pg_url, min_size=1, max_size=1, timeout=2, open=True) as pool:
        pool.wait()
        monkeypatch.setattr(checkout, "is_dead", boom)
        for _ in range(3):  # one connection: a leak would time out the second
            with pytest.raises(Boom):
                with live_from_pool(pool):
                    pass
        monkeypatch.undo()
        with live_from_pool(pool) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert pool.get_stats()["pool_available"] == 1


def test_an_interrupted_close_of_a_dead_one_gives_it_back(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ConnectionPool(pg_url, min_size=1, max_size=1, timeout=3, open=True) as pool:
        pool.wait()
        monkeypatch.setattr(checkout, "is_dead", lambda conn: True)

        def interrupted_close(conn: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(psycopg.Connection, "close", interrupted_close)
        with pytest.raises(KeyboardInterrupt):
            with live_from_pool(pool):
                pass
        monkeypatch.undo()
        assert pool.get_stats()["pool_available"] == 1  # given back, not lost
        with live_from_pool(pool) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


async def test_async_a_failing_look_or_a_cancel_gives_it_back(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncConnectionPool(pg_url, min_size=1, max_size=1, timeout=2, open=False) as pool:
        await pool.wait()
        for exc in (Boom, asyncio.CancelledError):

            def raising(conn: object, exc: type[BaseException] = exc) -> bool:
                raise exc

            monkeypatch.setattr(checkout, "is_dead", raising)
            for _ in range(2):
                with pytest.raises(exc):
                    async with alive_from_pool(pool):
                        pass
        monkeypatch.undo()
        async with alive_from_pool(pool) as conn:
            assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
        assert pool.get_stats()["pool_available"] == 1
