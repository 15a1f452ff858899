"""Savers for the concurrency and crash tests, described by a picklable *spec* so a
child process can open the very same store (SQLite file, Postgres schema, Redis prefix).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver

KINDS = ["memory", "sqlite", "postgres", "redis"]
PROCESS_KINDS = ["sqlite", "postgres", "redis"]  # memory lives in one process


def make_spec(kind: str, tmp: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """A fresh, isolated store of ``kind`` (skips like pg_url/redis_url when absent)."""
    tag = uuid.uuid4().hex[:10]
    if kind == "memory":
        return {"kind": kind}
    if kind == "sqlite":
        return {"kind": kind, "path": os.path.join(tmp, f"state-{tag}.db")}
    if kind == "postgres":
        url = request.getfixturevalue("pg_url")
        spec = {"kind": kind, "url": url, "schema": f"tl_conc_{tag}"}
        request.addfinalizer(lambda: _drop_schema(url, spec["schema"]))
        return spec
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        spec = {"kind": kind, "url": url, "prefix": f"tlconc-{tag}"}
        request.addfinalizer(lambda: _drop_prefix(url, spec["prefix"]))
        return spec
    raise ValueError(kind)


@contextmanager
def open_saver(spec: dict[str, Any], **options: Any) -> Iterator[Any]:
    """Open (and set up) the saver a spec describes; closes it on exit."""
    kind = spec["kind"]
    if kind == "memory":
        yield InMemorySaver(**options)
    elif kind == "sqlite":
        with SqliteSaver.from_conn_string(spec["path"], **options) as saver:
            yield saver
    elif kind == "postgres":
        from threadloom.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(
            spec["url"], schema=spec["schema"], pool=spec.get("pool", False), **options
        ) as saver:
            saver.setup()
            yield saver
    elif kind == "redis":
        from threadloom.checkpoint.redis import RedisSaver

        with RedisSaver.from_conn_string(spec["url"], key_prefix=spec["prefix"]) as saver:
            yield saver
    else:
        raise ValueError(kind)


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _drop_prefix(url: str, prefix: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        for pattern in (f"{{{prefix}:*", f"{{{prefix}}}:*"):
            keys = list(client.scan_iter(match=pattern))
            if keys:
                client.delete(*keys)
