"""A saver on a caller's connection set up the way benchmarks and apps often do it
(``autocommit=True, prepare_threshold=0, row_factory=dict_row`` and a
``search_path``), on a fresh schema: ``setup()`` then many saves and reads.

``prepare_threshold=0`` prepares every statement the first time it runs, so a
statement whose prepared plan goes stale (a migration altering a table the
statement reads) or a prepared-statement cache that drifts from the server
(a statement that fails inside a pipeline) shows up here as
"prepared statement _pg3_N does not exist" or "cached plan must not change
result type" instead of passing silently.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.postgres.conftest import drop_schema
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.ids import uuid6
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver

psycopg = pytest.importorskip("psycopg")
psycopg_pool = pytest.importorskip("psycopg_pool")
from psycopg.rows import dict_row  # noqa: E402

TURNS = 12


@pytest.fixture
def bench_schema(pg_url: str) -> Iterator[str]:
    """A fresh, empty schema created by the caller (as the bench does)."""
    name = f"tl_cc_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{name}"')
    yield name
    drop_schema(pg_url, name)


def _bench_kwargs(schema: str) -> dict[str, Any]:
    return {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "options": f"-c search_path={schema}",
    }


def _checkpoint(step: int, messages: list[str]) -> tuple[dict, dict, dict]:
    ckpt = empty_checkpoint()
    ckpt["id"] = str(uuid6())
    ckpt["channel_values"] = {"messages": list(messages), "step": step}
    ckpt["channel_versions"] = {"messages": f"{step:032}.1", "step": f"{step:032}.2"}
    return ckpt, {"source": "loop", "step": step}, {"messages": f"{step:032}.1"}


def _turns(saver: Any, thread: str) -> list[str]:
    """Many puts, put_writes and reads on one thread; returns the ids written."""
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages: list[str] = []
    ids = []
    for step in range(TURNS):
        messages.append(f"message {step} " + "x" * 300)  # big enough to become a blob
        ckpt, meta, new = _checkpoint(step, messages)
        config = saver.put(config, ckpt, meta, new)
        ids.append(ckpt["id"])
        saver.put_writes(config, [("messages", [f"w{step}" * 100])], f"task-{step}")
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["channel_values"]["messages"] == messages
        assert got.pending_writes and got.pending_writes[0][1] == "messages"
    whole = {"configurable": {"thread_id": thread}}
    listed = [t.config["configurable"]["checkpoint_id"] for t in saver.list(whole)]
    assert listed == ids[::-1]
    return ids


async def _aturns(saver: Any, thread: str) -> list[str]:
    """Async twin of :func:`_turns`."""
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages: list[str] = []
    ids = []
    for step in range(TURNS):
        messages.append(f"message {step} " + "x" * 300)
        ckpt, meta, new = _checkpoint(step, messages)
        config = await saver.aput(config, ckpt, meta, new)
        ids.append(ckpt["id"])
        await saver.aput_writes(config, [("messages", [f"w{step}" * 100])], f"task-{step}")
        got = await saver.aget_tuple(config)
        assert got is not None and got.checkpoint["channel_values"]["messages"] == messages
    whole = {"configurable": {"thread_id": thread}}
    listed = [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(whole)]
    assert listed == ids[::-1]
    return ids


def test_bench_style_connection_setup_then_saves(pg_url, bench_schema):
    with psycopg.connect(pg_url, **_bench_kwargs(bench_schema)) as conn:
        saver = PostgresSaver(conn, schema=bench_schema)
        saver.setup()
        _turns(saver, "t1")
        saver.setup()  # again on the same connection: nothing to apply, nothing breaks
        _turns(saver, "t2")


def test_bench_style_pool_setup_then_saves(pg_url, bench_schema):
    pool = psycopg_pool.ConnectionPool(
        pg_url, min_size=2, max_size=2, kwargs=_bench_kwargs(bench_schema), open=True
    )
    with pool:
        saver = PostgresSaver(pool, schema=bench_schema)
        saver.setup()
        for i in range(3):  # every pooled connection gets used
            _turns(saver, f"t{i}")


async def test_bench_style_async_connection_setup_then_saves(pg_url, bench_schema):
    conn = await psycopg.AsyncConnection.connect(pg_url, **_bench_kwargs(bench_schema))
    async with conn:
        saver = AsyncPostgresSaver(conn, schema=bench_schema)
        await saver.setup()
        await _aturns(saver, "t1")
        await saver.setup()
        await _aturns(saver, "t2")
