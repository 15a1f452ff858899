"""Postgres test fixtures: one private schema per test session, dropped at the end.

Several test runs may share the server, so nothing here touches ``public``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from threadloom.checkpoint.storage import drive

psycopg = pytest.importorskip("psycopg")


def drop_schema(url: str, schema: str) -> None:
    """Remove a test schema and everything in it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def pg_schema(pg_url: str) -> Iterator[str]:
    """A schema name unique to this test session."""
    name = f"tl_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield name
    drop_schema(pg_url, name)


@pytest.fixture
def fresh_schema(pg_url: str) -> Iterator[str]:
    """A schema unique to one test (for migration/setup tests)."""
    name = f"tl_t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(pg_url, name)


@pytest.fixture
def refusals(monkeypatch: pytest.MonkeyPatch) -> list[frozenset[str]]:
    """The threads of every refused optimistic transaction (in this process)."""
    seen: list[frozenset[str]] = []
    forget = drive._forget

    def counting(restart: Any, conflict: drive.OptimisticConflict) -> None:
        seen.append(conflict.threads)
        forget(restart, conflict)

    monkeypatch.setattr(drive, "_forget", counting)
    return seen


def schema_at(url: str, schema: str, version: int) -> None:
    """Create ``schema`` as setup() left it after migrations ``0 .. version - 1``
    (an earlier threadloom's database, for upgrade tests)."""
    from threadloom.checkpoint.postgres.queries import MIGRATIONS, quote_ident

    s = quote_ident(schema)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {s}")
        for v in range(version):
            conn.execute(MIGRATIONS[v].format(s=s))
            conn.execute(f"INSERT INTO {s}.checkpoint_migrations (v) VALUES (%s)", (v,))
