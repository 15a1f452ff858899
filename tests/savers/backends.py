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
        saver.codec.fanout = 2  # exercise two-level manifests early
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


# -- PostgreSQL and Redis (need servers: pg_url / redis_url from tests/conftest.py) --------
# Each open gets its own schema / key prefix, removed on exit, so runs sharing a
# server never see each other's data.


def _unique(prefix: str) -> str:
    import uuid

    return f"{prefix}{uuid.uuid4().hex[:12]}"


async def _pg_counts(saver: Any) -> dict[str, int]:
    import psycopg

    tables = {"checkpoints": "checkpoints", "refs": "checkpoint_refs"}
    tables.update(blobs="checkpoint_blobs", writes="checkpoint_writes")
    schema = saver.sql.schema
    async with await psycopg.AsyncConnection.connect(saver.connector.url) as conn:
        counts = {}
        for key, table in tables.items():
            cur = await conn.execute(f'SELECT count(*) FROM "{schema}".{table}')
            counts[key] = (await cur.fetchone())[0]
        return counts


def _pg(pool: bool = False, pipeline: bool = False, async_: bool = False) -> Factory:
    @asynccontextmanager
    async def open_pg(tmp: str, fixtures: dict[str, Any]) -> AsyncIterator[Any]:
        import psycopg

        from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver

        url, schema = fixtures["pg_url"], _unique("tl_savers_")
        options = {"schema": schema, "pool": pool, "pipeline": pipeline}
        try:
            if async_:
                async with AsyncPostgresSaver.from_conn_string(url, **options) as saver:
                    await saver.setup()
                    yield saver
            else:
                with PostgresSaver.from_conn_string(url, **options) as saver:
                    saver.setup()
                    yield saver
        finally:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return open_pg


async def _redis_counts(saver: Any) -> dict[str, int]:
    """Rows under the saver's prefix. Redis keeps blobs per thread (cluster slot
    locality, docs/redis.md; ``shares_blobs_across_threads`` is False): ``blobs``
    counts the per-thread copies actually stored."""
    import redis

    parts = {"checkpoints": ":row", "refs": ":ref", "writes": ":w"}
    url = "redis://{host}:{port}/{db}".format(**saver.client.connection_pool.connection_kwargs)
    with redis.Redis.from_url(url) as client:
        keys = [k.decode() for p in saver.layout.patterns() for k in client.scan_iter(match=p)]
        counts = {
            name: sum(client.hlen(k) for k in keys if k.endswith(suffix))
            for name, suffix in parts.items()
        }
        counts["blobs"] = sum(client.hlen(k) for k in keys if k.endswith(":blob"))
        return counts


def _redis(async_: bool = False) -> Factory:
    @asynccontextmanager
    async def open_redis(tmp: str, fixtures: dict[str, Any]) -> AsyncIterator[Any]:
        import redis

        from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver

        url, prefix = fixtures["redis_url"], _unique("tlsavers-")
        try:
            if async_:
                async with AsyncRedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
                    yield saver
            else:
                with RedisSaver.from_conn_string(url, key_prefix=prefix, ttl=3600) as saver:
                    yield saver
        finally:
            with redis.Redis.from_url(url) as client:
                for pattern in (f"{{{prefix}:*", f"{{{prefix}}}:*"):
                    keys = list(client.scan_iter(match=pattern))
                    if keys:
                        client.delete(*keys)

    return open_redis


BACKENDS += [
    Backend("postgres", _pg(), _pg_counts, needs=("pg_url",)),
    Backend("postgres-pool-pipeline", _pg(pool=True, pipeline=True), _pg_counts, needs=("pg_url",)),
    Backend("postgres-async", _pg(pool=True, async_=True), _pg_counts, False, ("pg_url",)),
    Backend("redis", _redis(), _redis_counts, needs=("redis_url",)),
    Backend("redis-async", _redis(async_=True), _redis_counts, False, ("redis_url",)),
]
