"""Saver backends the conformance suite runs against.

To add a backend (Postgres, Redis, ...), append a :class:`Backend` to
``BACKENDS``: an async context manager factory yielding a fresh, empty saver,
whether its sync API can be used from test code, and ``raw_counts`` that reads
the backend's own tables (used to prove erasure leaves no orphan rows).
Fixtures that need a server (``pg_url``/``redis_url`` from tests/conftest.py)
can be requested through ``needs``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

Factory = Callable[[str, dict[str, Any]], Any]  # (tmp_dir, fixtures) -> async CM of a saver


@dataclass(frozen=True)
class Backend:
    name: str
    open: Factory
    raw_counts: Callable[[Any], Awaitable[dict[str, int]]]
    sync_api: bool = True
    needs: tuple[str, ...] = field(default=())


async def _memory_counts(saver: InMemorySaver) -> dict[str, int]:
    ex = saver.executor
    return {
        "checkpoints": sum(len(v) for v in ex.checkpoints.values()),
        "refs": sum(len(v) for v in ex.refs.values()),
        "blobs": len(ex.blobs),
        "writes": sum(len(v) for v in ex.writes.values()),
    }


_TABLES = {
    "checkpoints": "tl_checkpoints",
    "refs": "tl_refs",
    "blobs": "tl_blobs",
    "writes": "tl_writes",
}


async def _sqlite_counts(saver: SqliteSaver) -> dict[str, int]:
    with saver.executor.lock:
        return {
            k: saver.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for k, t in _TABLES.items()
        }


async def _asqlite_counts(saver: AsyncSqliteSaver) -> dict[str, int]:
    counts = {}
    for key, table in _TABLES.items():
        async with saver.conn.execute(f"SELECT count(*) FROM {table}") as cur:
            counts[key] = (await cur.fetchone())[0]
    return counts


@asynccontextmanager
async def _memory(tmp: str, fixtures: dict[str, Any]) -> AsyncIterator[Any]:
    yield InMemorySaver()


@asynccontextmanager
async def _sqlite_file(tmp: str, fixtures: dict[str, Any]) -> AsyncIterator[Any]:
    with SqliteSaver.from_conn_string(os.path.join(tmp, "state.db")) as saver:
        yield saver


@asynccontextmanager
async def _sqlite_memory(tmp: str, fixtures: dict[str, Any]) -> AsyncIterator[Any]:
    with SqliteSaver.from_conn_string(":memory:", compact_every=4, keyframe_every=4) as saver:
        yield saver


@asynccontextmanager
async def _sqlite_async(tmp: str, fixtures: dict[str, Any]) -> AsyncIterator[Any]:
    async with AsyncSqliteSaver.from_conn_string(os.path.join(tmp, "state.db")) as saver:
        yield saver


BACKENDS: list[Backend] = [
    Backend("memory", _memory, _memory_counts),
    Backend("sqlite-file", _sqlite_file, _sqlite_counts),
    Backend("sqlite-memory", _sqlite_memory, _sqlite_counts),
    Backend("sqlite-async", _sqlite_async, _asqlite_counts, sync_api=False),
]
