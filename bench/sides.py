"""The two module sets the workloads run against: LangGraph and threadloom.

Every workload is written once against a :class:`Side`, which resolves names
like ``StateGraph`` or ``Send`` from either package. A name or saver a side
does not have yet raises :class:`NotAvailable`, which the harness turns into an
``n/a: <reason>`` cell instead of a crash, so the bench keeps working while
threadloom is still being built.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any

__all__ = [
    "SAVER_KINDS",
    "NotAvailable",
    "Side",
    "check_sync",
    "construct_pg_saver",
    "pg_connect_kwargs",
    "pg_schema_name",
    "pg_url",
    "sides",
    "sqlite_conn_of",
    "sqlite_sync",
]

SAVER_KINDS = ("none", "memory", "sqlite-full", "sqlite-normal", "postgres")

# what ``PRAGMA synchronous`` reads back for each level the bench sets
_SYNC_LEVEL = {"FULL": 2, "NORMAL": 1}

# name -> candidate (module, attribute) pairs, first importable wins
_NAMES: dict[str, tuple[tuple[str, str], ...]] = {
    "StateGraph": (("{p}.graph", "StateGraph"), ("{p}.graph.state", "StateGraph")),
    "START": (("{p}.graph", "START"), ("{p}.constants", "START")),
    "END": (("{p}.graph", "END"), ("{p}.constants", "END")),
    "Send": (("{p}.types", "Send"),),
    "add_messages": (("{p}.graph", "add_messages"), ("{p}.graph.message", "add_messages")),
    "MessagesState": (("{p}.graph", "MessagesState"), ("{p}.graph.message", "MessagesState")),
    "InMemorySaver": (("{p}.checkpoint.memory", "InMemorySaver"),),
    "SqliteSaver": (("{p}.checkpoint.sqlite", "SqliteSaver"),),
    "PostgresSaver": (("{p}.checkpoint.postgres", "PostgresSaver"),),
    "empty_checkpoint": (("{p}.checkpoint.base", "empty_checkpoint"),),
    "uuid6": (("{p}.checkpoint.ids", "uuid6"), ("{p}.checkpoint.base.id", "uuid6")),
    # the wrapper a run saves through while it holds the thread's lease (threadloom only)
    "FencedSaver": (("{p}.checkpoint.lease.lease", "FencedSaver"),),
}


class NotAvailable(Exception):
    """A side lacks a feature a workload needs; the cell is reported as n/a."""


def pg_url() -> str | None:
    """The PostgreSQL URL to bench against, or None when Postgres is not enabled."""
    return os.environ.get("THREADLOOM_BENCH_PG") or os.environ.get("THREADLOOM_TEST_PG")


def sqlite_sync(kind: str) -> str:
    """The ``PRAGMA synchronous`` level of a SQLite saver kind (FULL or NORMAL)."""
    return "FULL" if kind == "sqlite-full" else "NORMAL"


def check_sync(sync: str, got: Any) -> None:
    """Raise NotAvailable unless ``got`` (read back from a saver's connection) is
    ``sync``: a saver that reset the PRAGMA would be timed at another level."""
    if got != _SYNC_LEVEL[sync]:
        raise NotAvailable(f"saver did not keep PRAGMA synchronous={sync} (got {got})")


def pg_schema_name(tag: str) -> str:
    """A fresh schema name for one saver: each saver starts empty, and the name
    (``tlbench_<tag>_<pid>_<rand>``) says which run left it if a drop failed."""
    return f"tlbench_{tag}_{os.getpid()}_{uuid.uuid4().hex[:6]}"


def pg_connect_kwargs(schema: str) -> dict[str, Any]:
    """How the bench connects a Postgres saver (sync or async, and the commit
    floor): autocommit, no server-side prepares, dict rows, ``schema`` first
    on the search path, as LangGraph's own ``from_conn_string`` connects."""
    from psycopg.rows import dict_row

    return {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "options": f"-c search_path={schema}",
    }


def construct_pg_saver(cls: Any, conn: Any, schema: str) -> Any:
    """``cls`` on ``conn`` in ``schema``, for a saver that takes a schema
    argument (threadloom); LangGraph's relies on the search path."""
    try:
        return cls(conn, schema=schema)
    except TypeError:
        return cls(conn)


class Side:
    """One implementation under test, with lazily resolved names and saver factories."""

    def __init__(self, name: str, package: str, dist: str) -> None:
        self.name = name
        self.package = package
        self.dist = dist
        self._cache: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Side({self.name})"

    @property
    def version(self) -> str:
        try:
            return metadata.version(self.dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    def get(self, name: str) -> Any:
        """Resolve ``name`` from this side's package or raise NotAvailable naming why."""
        if name in self._cache:
            return self._cache[name]
        errors = []
        for mod_fmt, attr in _NAMES[name]:
            mod_name = mod_fmt.format(p=self.package)
            try:
                value = getattr(importlib.import_module(mod_name), attr)
            except (ImportError, AttributeError) as exc:
                errors.append(f"{mod_name}.{attr}: {type(exc).__name__}: {exc}")
                continue
            self._cache[name] = value
            return value
        raise NotAvailable(f"{name} missing ({errors[0][:120]})")

    def new_id(self) -> str:
        """A checkpoint id from this side's uuid6, falling back to uuid4."""
        try:
            return str(self.get("uuid6")())
        except NotAvailable:
            return str(uuid.uuid4())

    @contextmanager
    def saver(self, kind: str, workdir: str) -> Iterator[Any]:
        """Yield a fresh, empty checkpointer of ``kind`` (None for "none"); clean up after."""
        if kind == "none":
            yield None
        elif kind == "memory":
            yield self.get("InMemorySaver")()
        elif kind.startswith("sqlite"):
            path = os.path.join(workdir, f"{self.name}-{uuid.uuid4().hex[:8]}.db")
            with _sqlite_saver(self.get("SqliteSaver"), path, sqlite_sync(kind)) as saver:
                yield saver
        elif kind == "postgres":
            url = pg_url()
            if not url:
                raise NotAvailable("Postgres disabled (set THREADLOOM_BENCH_PG)")
            with _pg_saver(self.get("PostgresSaver"), url, self.name) as saver:
                yield saver
        else:
            raise ValueError(f"unknown saver kind {kind!r}")


def _setup(saver: Any) -> None:
    setup = getattr(saver, "setup", None)
    if callable(setup):
        setup()


def sqlite_conn_of(saver: Any) -> sqlite3.Connection | None:
    """The saver's own sqlite3 connection (where the bench sets and checks its
    PRAGMAs, and times the commit floor), or None."""
    for attr in ("conn", "_conn", "connection"):
        conn = getattr(saver, attr, None)
        if isinstance(conn, sqlite3.Connection):
            return conn
    return None


@contextmanager
def _sqlite_saver(cls: Any, path: str, sync: str) -> Iterator[Any]:
    """Open ``cls`` on a file with ``PRAGMA synchronous=<sync>``, verified after setup.

    A saver whose ``from_conn_string`` takes ``synchronous=`` opens its own
    connection the way it is meant to be used; otherwise (LangGraph) we open the
    connection like its ``from_conn_string`` does and set the PRAGMA ourselves.
    Either way the value is read back from the saver's connection.
    """
    try:
        ctx = cls.from_conn_string(path, synchronous=sync)
    except TypeError:
        ctx = None
    if ctx is not None:
        with ctx as saver:
            yield _apply_sync(saver, sync, path)
        return
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute(f"PRAGMA synchronous={sync}")
    try:
        yield _apply_sync(cls(conn), sync, path)
    finally:
        conn.close()


def _apply_sync(saver: Any, sync: str, path: str) -> Any:
    _setup(saver)
    conn = sqlite_conn_of(saver)
    if conn is None:
        raise NotAvailable("cannot reach the saver's sqlite3 connection to set synchronous")
    conn.execute(f"PRAGMA synchronous={sync}")
    check_sync(sync, conn.execute("PRAGMA synchronous").fetchone()[0])
    saver.bench_sqlite_path = path
    return saver


@contextmanager
def _pg_saver(cls: Any, url: str, side: str) -> Iterator[Any]:
    """A saver on a dedicated, freshly created schema that is dropped afterwards."""
    import psycopg

    schema = pg_schema_name(side)
    admin = psycopg.connect(url, autocommit=True)
    admin.execute(f'CREATE SCHEMA "{schema}"')
    conn = psycopg.connect(url, **pg_connect_kwargs(schema))
    try:
        saver = construct_pg_saver(cls, conn, schema)
        _setup(saver)
        saver.bench_pg_schema = schema
        saver.bench_pg_admin = admin
        yield saver
    finally:
        conn.close()
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


def sides() -> list[Side]:
    """LangGraph first (the reference), then threadloom."""
    return [
        Side("langgraph", "langgraph", "langgraph"),
        Side("threadloom", "threadloom", "threadloom"),
    ]
