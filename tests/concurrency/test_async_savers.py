"""Leases through the async savers (AsyncSqliteSaver, AsyncPostgresSaver, AsyncRedisSaver)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from contextlib import asynccontextmanager

import pytest

from tests.concurrency.backends import _drop_prefix, _drop_schema
from tests.concurrency.graphs import chain
from threadloom.errors import ThreadBusyError


@asynccontextmanager
async def _open(kind, tmp_path, request, tag=None):
    """An async saver of ``kind``; the same ``tag`` opens the same store again."""
    tag = tag or uuid.uuid4().hex[:10]
    if kind == "sqlite":
        from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
            yield saver
    elif kind == "postgres":
        from threadloom.checkpoint.postgres import AsyncPostgresSaver

        url, schema = request.getfixturevalue("pg_url"), f"tl_aconc_{tag}"
        request.addfinalizer(lambda: _drop_schema(url, schema))
        async with AsyncPostgresSaver.from_conn_string(url, schema=schema, pool=True) as saver:
            await saver.setup()
            yield saver
    else:
        from threadloom.checkpoint.redis import AsyncRedisSaver

        url, prefix = request.getfixturevalue("redis_url"), f"tlaconc-{tag}"
        request.addfinalizer(lambda: _drop_prefix(url, prefix))
        async with AsyncRedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
            yield saver


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
async def test_async_saver_reject_then_enqueue(kind, tmp_path, request):
    gate, started = threading.Event(), threading.Event()
    async with _open(kind, tmp_path, request) as saver:
        graph = chain(2, gate, started).compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "a"}}
        first = asyncio.create_task(
            graph.ainvoke({"log": []}, {"configurable": {"thread_id": "a", "run_id": "run-A"}})
        )
        assert await asyncio.to_thread(started.wait, 20)
        with pytest.raises(ThreadBusyError) as err:
            await graph.ainvoke({"log": []}, cfg)
        assert err.value.holder == "run-A"
        queued = asyncio.create_task(
            graph.ainvoke({"log": ["B"]}, cfg, multitask_strategy="enqueue")
        )
        gate.set()
        assert await first == {"log": ["s0", "s1"]}
        assert (await queued)["log"] == ["s0", "s1", "B", "s0", "s1"]
