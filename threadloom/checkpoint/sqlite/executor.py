"""Run :mod:`.queries` plans on a connection: ``sqlite3`` (sync) or ``aiosqlite``.

Both executors share every statement, every row mapping and the migration
logic; they differ only in ``await``. Transactions: writers take
``BEGIN IMMEDIATE`` (the write lock up front, so two processes queue on
``busy_timeout`` instead of failing mid-transaction); readers use a deferred
``BEGIN`` for a consistent snapshot. If the caller's connection is already in
a transaction, a SAVEPOINT is used instead so theirs is never committed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from threadloom.checkpoint.sqlite import queries
from threadloom.checkpoint.sqlite.schema import MIGRATIONS, MIGRATIONS_TABLE
from threadloom.checkpoint.storage.ops import Op
from threadloom.errors import StorageError

__all__ = ["SqliteExecutor", "AsyncSqliteExecutor", "setup_statements", "storage_error"]

Tracer = Callable[[str, Any], None]


def storage_error(exc: sqlite3.DatabaseError, where: str) -> StorageError:
    """A clear StorageError for the classic failures (not a database, locked)."""
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return StorageError(f"{where} is not a threadloom SQLite database: {text}")
    if "locked" in text or "busy" in text:
        return StorageError(f"{where} stayed locked past busy_timeout: {text}")
    return StorageError(f"SQLite error on {where}: {text}")


def setup_statements(current: int, journal_wal: bool, pragmas: list[str]) -> list[str]:
    """PRAGMAs and the migrations still to apply from schema version ``current``."""
    if current > len(MIGRATIONS):
        raise StorageError(
            f"database schema version {current} is newer than this threadloom"
            f" ({len(MIGRATIONS)}); upgrade threadloom"
        )
    statements = ["PRAGMA journal_mode = WAL"] if journal_wal else []
    statements.extend(pragmas)
    return statements


_MEMO = frozenset({"thread", "base"})
"""Statement modes whose positive answer holds for the rest of the write lock's
transaction (nothing else can write meanwhile): ``thread`` (rows of a thread id
lookup) and ``base`` (one row: does a checkpoint exist). ``saved`` (a
checkpoint row written: it exists) feeds ``base``; ``drop`` (rows deleted)
forgets everything. Every transaction boundary clears the memo."""


def _remember(memo: dict[tuple, Any], stmt: Any) -> None:
    if stmt.mode == "saved":
        memo[("base", *stmt.params[:3])] = (1,)
    elif stmt.mode == "drop":
        memo.clear()


def _migrations(current: int) -> list[tuple[int, tuple[str, ...]]]:
    return [(v + 1, MIGRATIONS[v]) for v in range(current, len(MIGRATIONS))]


class SqliteExecutor:
    """Sync executor over one ``sqlite3.Connection`` guarded by a lock."""

    def __init__(self, conn: sqlite3.Connection, where: str, tracer: Tracer | None = None) -> None:
        self.conn = conn
        self.where = where
        self.tracer = tracer
        self.lock = threading.RLock()
        self._depth = 0
        self._memo: dict[tuple, Any] = {}  # see _MEMO; this transaction only

    def setup(self, journal_wal: bool, pragmas: list[str]) -> None:
        with self.lock:
            try:
                self.conn.execute(MIGRATIONS_TABLE)
                current = self.conn.execute(
                    "SELECT coalesce(max(v), 0) FROM tl_migrations"
                ).fetchone()[0]
                busy = self.conn.in_transaction  # the caller's: journal/sync PRAGMAs can't run
                for sql in setup_statements(current, journal_wal and not busy, pragmas):
                    if not busy or "busy_timeout" in sql:
                        self.conn.execute(sql)
                for version, statements in _migrations(current):
                    with self.transaction(True):
                        for sql in statements:
                            self.conn.execute(sql)
                        self.conn.execute(
                            "INSERT OR IGNORE INTO tl_migrations (v) VALUES (?)", (version,)
                        )
            except sqlite3.DatabaseError as exc:
                raise storage_error(exc, self.where) from exc

    @contextmanager
    def transaction(self, write: bool) -> Iterator[None]:
        with self.lock:
            if self._depth or self.conn.in_transaction:
                begin, commit, rollback = "SAVEPOINT tl", "RELEASE tl", "ROLLBACK TO tl; RELEASE tl"
            else:
                begin = "BEGIN IMMEDIATE" if write else "BEGIN"
                commit, rollback = "COMMIT", "ROLLBACK"
            self._exec_script(begin)
            self._depth += 1
            self._memo.clear()
            try:
                yield
            except BaseException:
                self._depth -= 1
                self._memo.clear()
                self._exec_script(rollback)
                raise
            self._depth -= 1
            self._memo.clear()
            self._exec_script(commit)

    def _exec_script(self, sql: str) -> None:
        try:
            for part in sql.split("; "):
                self.conn.execute(part)
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, self.where) from exc

    def execute(self, op: Op) -> Any:
        gen = queries.plan(op)
        result = None
        conn = self.conn
        try:
            while True:
                try:
                    stmt = gen.send(result)
                except StopIteration as stop:
                    return stop.value
                mode = stmt.mode
                if mode in _MEMO and self._depth and (hit := self._memo.get((mode, *stmt.params))):
                    result = hit  # this transaction already knows the answer
                    continue
                if self.tracer is not None:
                    self.tracer(stmt.sql, stmt.params)
                if mode == "many":
                    result = conn.executemany(stmt.sql, stmt.params).rowcount
                    continue
                if mode == "each":  # one statement per row, each row's rowcount
                    sql = stmt.sql
                    result = [conn.execute(sql, row).rowcount for row in stmt.params]
                    continue
                cur = conn.execute(stmt.sql, stmt.params)
                if mode in _MEMO:
                    result = cur.fetchall() if mode == "thread" else cur.fetchone()
                    if result and result[0]:
                        self._memo[(mode, *stmt.params)] = result
                    continue
                _remember(self._memo, stmt)
                result = (
                    cur.fetchall()
                    if mode == "all"
                    else cur.fetchone()
                    if mode == "one"
                    else cur.rowcount
                )
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, self.where) from exc


class AsyncSqliteExecutor:
    """Async executor over one ``aiosqlite.Connection`` guarded by an asyncio lock."""

    def __init__(self, conn: Any, where: str, tracer: Tracer | None = None) -> None:
        self.conn = conn
        self.where = where
        self.tracer = tracer
        self.lock = asyncio.Lock()
        self._depth = 0
        self._memo: dict[tuple, Any] = {}  # see _MEMO; this transaction only

    async def setup(self, journal_wal: bool, pragmas: list[str]) -> None:
        async with self.lock:
            try:
                await self.conn.execute(MIGRATIONS_TABLE)
                async with self.conn.execute(
                    "SELECT coalesce(max(v), 0) FROM tl_migrations"
                ) as cur:
                    current = (await cur.fetchone())[0]
                for sql in setup_statements(current, journal_wal, pragmas):
                    await self.conn.execute(sql)
                for version, statements in _migrations(current):
                    await self._script("BEGIN IMMEDIATE")
                    try:
                        for sql in statements:
                            await self.conn.execute(sql)
                        await self.conn.execute(
                            "INSERT OR IGNORE INTO tl_migrations (v) VALUES (?)", (version,)
                        )
                    except BaseException:
                        await self._script("ROLLBACK")
                        raise
                    await self._script("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise storage_error(exc, self.where) from exc

    @asynccontextmanager
    async def atransaction(self, write: bool) -> AsyncIterator[None]:
        async with self.lock:
            if self.conn.in_transaction:
                begin, commit, rollback = "SAVEPOINT tl", "RELEASE tl", "ROLLBACK TO tl; RELEASE tl"
            else:
                begin = "BEGIN IMMEDIATE" if write else "BEGIN"
                commit, rollback = "COMMIT", "ROLLBACK"
            await self._script(begin)
            self._memo.clear()
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                self._memo.clear()
                await self._script(rollback)
                raise
            self._depth -= 1
            self._memo.clear()
            await self._script(commit)

    async def _script(self, sql: str) -> None:
        try:
            for part in sql.split("; "):
                async with self.conn.execute(part):
                    pass
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, self.where) from exc

    async def aexecute(self, op: Op) -> Any:
        gen = queries.plan(op)
        result = None
        conn = self.conn
        try:
            while True:
                try:
                    stmt = gen.send(result)
                except StopIteration as stop:
                    return stop.value
                mode = stmt.mode
                if mode in _MEMO and self._depth and (hit := self._memo.get((mode, *stmt.params))):
                    result = hit  # this transaction already knows the answer
                    continue
                if self.tracer is not None:
                    self.tracer(stmt.sql, stmt.params)
                if mode == "many":
                    cur = await conn.executemany(stmt.sql, stmt.params)
                    result = cur.rowcount
                    await cur.close()
                    continue
                if mode == "each":  # one statement per row, each row's rowcount
                    result = []
                    for row in stmt.params:
                        async with conn.execute(stmt.sql, row) as cur:
                            result.append(cur.rowcount)
                    continue
                _remember(self._memo, stmt)
                async with conn.execute(stmt.sql, stmt.params) as cur:
                    if mode in _MEMO:
                        result = await (cur.fetchall() if mode == "thread" else cur.fetchone())
                        if result and result[0]:
                            self._memo[(mode, *stmt.params)] = result
                    elif mode == "all":
                        result = await cur.fetchall()
                    elif mode == "one":
                        result = await cur.fetchone()
                    else:
                        result = cur.rowcount
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, self.where) from exc
