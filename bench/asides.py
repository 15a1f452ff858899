"""Async savers for the ``asuperstep`` workload: each side's own async
checkpointer, opened the way its users open it, with the same PRAGMAs and the
same kind of Postgres connection as the sync savers in :mod:`bench.sides`."""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bench.sides import (
    NotAvailable,
    Side,
    check_sync,
    construct_pg_saver,
    pg_connect_kwargs,
    pg_schema_name,
    pg_url,
    sqlite_sync,
)

__all__ = ["asaver"]


def _cls(side: Side, module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(f"{side.package}.{module}"), name)
    except (ImportError, AttributeError) as exc:
        raise NotAvailable(f"{side.package}.{module}.{name} missing ({exc})") from None


@asynccontextmanager
async def asaver(side: Side, kind: str, workdir: str) -> AsyncIterator[Any]:
    """Yield a fresh, empty async checkpointer of ``kind`` (None for "none")."""
    if kind == "none":
        yield None
    elif kind == "memory":
        yield side.get("InMemorySaver")()
    elif kind.startswith("sqlite"):
        sync = sqlite_sync(kind)
        path = os.path.join(workdir, f"{side.name}-{uuid.uuid4().hex[:8]}.db")
        cls = _cls(side, "checkpoint.sqlite.aio", "AsyncSqliteSaver")
        async with cls.from_conn_string(path) as saver:
            await saver.setup()
            await _pragma(saver.conn, f"PRAGMA synchronous={sync}")
            check_sync(sync, await _pragma(saver.conn, "PRAGMA synchronous"))
            yield saver
    elif kind == "postgres":
        async with _apg_saver(side) as saver:
            yield saver
    else:
        raise ValueError(f"unknown saver kind {kind!r}")


async def _pragma(conn: Any, sql: str) -> Any:
    async with conn.execute(sql) as cur:
        row = await cur.fetchone()
    return row[0] if row else None


@asynccontextmanager
async def _apg_saver(side: Side) -> AsyncIterator[Any]:
    """An async saver on a fresh schema, dropped afterwards (as ``_pg_saver``)."""
    import psycopg

    url = pg_url()
    if not url:
        raise NotAvailable("Postgres disabled (set THREADLOOM_BENCH_PG)")
    cls = _cls(side, "checkpoint.postgres.aio", "AsyncPostgresSaver")
    schema = pg_schema_name(f"a{side.name}")
    admin = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    conn = await psycopg.AsyncConnection.connect(url, **pg_connect_kwargs(schema))
    try:
        saver = construct_pg_saver(cls, conn, schema)
        await saver.setup()
        yield saver
    finally:
        await conn.close()
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()
