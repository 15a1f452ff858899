"""The async twin of :class:`~.executor.SqliteExecutor` on ``aiosqlite``: the same
plans, memo and lazy BEGINs, with ``await``."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from threadloom.checkpoint.sqlite import queries
from threadloom.checkpoint.sqlite.durability import (
    LEVEL,
    RELAX,
    RELAXED,
    check_relaxed,
    restore_sql,
    strict_mode,
)
from threadloom.checkpoint.sqlite.executor import (
    Tracer,
    _migrations,
    setup_statements,
    storage_error,
)
from threadloom.checkpoint.sqlite.memo import DATA_VERSION, KNOWN, Memo
from threadloom.checkpoint.sqlite.schema import MIGRATIONS_TABLE
from threadloom.checkpoint.storage.ops import Op

__all__ = ["AsyncSqliteExecutor"]


class AsyncSqliteExecutor:
    """Async executor over one ``aiosqlite.Connection`` guarded by an asyncio lock."""

    def __init__(self, conn: Any, where: str, tracer: Tracer | None = None) -> None:
        self.conn = conn
        self.where = where
        self.tracer = tracer
        self.lock = asyncio.Lock()
        self._depth = 0
        self._lazy = False  # a read transaction whose BEGIN waits for a statement
        self.memo = Memo()  # answers this connection knows (sqlite/memo.py)
        self.strict: str | None = None  # FULL/EXTRA: its PRAGMA (sqlite/durability.py)
        self._wlazy = False  # a write transaction whose BEGIN waits for its first op
        self._relaxed: str | None = None  # relaxed: the PRAGMA restoring the level

    def forget_cached(self) -> None:
        """Forget the memo (``StorageSaver.forget_cached``)."""
        self.memo.forget()

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
                self.strict = strict_mode(pragmas)
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
            own = not self.conn.in_transaction
            if own:
                begin = "BEGIN IMMEDIATE" if write else "BEGIN"
                commit, rollback = "COMMIT", "ROLLBACK"
            else:
                begin, commit, rollback = "SAVEPOINT tl", "RELEASE tl", "ROLLBACK TO tl; RELEASE tl"
            if own and not write:
                self._lazy = True  # BEGIN with the first statement (none: no BEGIN)
            elif own and self.strict is not None:
                self._wlazy = True  # BEGIN with the first op: it may be relaxed
            else:
                await self._script(begin)
            self.memo.begin(own)
            self._depth += 1
            try:
                try:
                    yield
                except BaseException:
                    self._depth -= 1
                    self.memo.end(False, 0)
                    if self._lazy or self._wlazy:
                        self._lazy = self._wlazy = False
                    elif not own or self.conn.in_transaction:  # (not when BEGIN failed)
                        await self._script(rollback)
                    raise
                self._depth -= 1
                try:
                    if self._lazy or self._wlazy:
                        self._lazy = self._wlazy = False
                    else:
                        await self._script(commit)
                except BaseException:
                    self.memo.end(False, 0)
                    raise
            finally:
                if self._relaxed:
                    await self._restore()
            self.memo.end(True, self.conn.total_changes)

    async def _restore(self) -> None:
        """Back to FULL/EXTRA after a relaxed transaction (see the sync twin)."""
        sql, self._relaxed = self._relaxed, None
        if self.conn.in_transaction:
            await self._script("ROLLBACK")
        await self._script(sql or "PRAGMA synchronous = FULL")

    async def _begin_write(self, op: Any) -> None:
        """BEGIN IMMEDIATE of a lazy write transaction (see the sync twin)."""
        self._wlazy = False
        if type(op) in RELAXED:
            try:
                async with self.conn.execute(LEVEL) as cur:
                    restore = restore_sql((await cur.fetchone())[0])
            except sqlite3.DatabaseError as exc:
                raise storage_error(exc, self.where) from exc
            if restore is not None:
                await self._script(RELAX)
                self._relaxed = restore
        await self._script("BEGIN IMMEDIATE")

    async def _script(self, sql: str) -> None:
        try:
            for part in sql.split("; "):
                async with self.conn.execute(part):
                    pass
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, self.where) from exc

    async def aexecute(self, op: Op) -> Any:
        if self._lazy:
            self._lazy = False
            await self._script("BEGIN")
        elif self._wlazy:
            await self._begin_write(op)
        elif self._relaxed:
            check_relaxed(op, self.where)
        send = queries.plan(op).send
        result = None
        conn, memo, tracer = self.conn, self.memo, self.tracer
        try:
            while True:
                try:
                    sql, params, mode = send(result)
                except StopIteration as stop:
                    return stop.value
                if mode in KNOWN and self._depth:
                    if not memo.checked:
                        await self._validate()
                    if (hit := memo.rows.get((mode, *params))) is not None:
                        result = hit  # this connection already knows the answer
                        continue
                if tracer is not None:
                    tracer(sql, params)
                if mode == "many":
                    cur = await conn.executemany(sql, params)
                    result = cur.rowcount
                    await cur.close()
                    continue
                if mode == "each":  # one statement per row, each row's rowcount
                    result = []
                    for row in params:
                        async with conn.execute(sql, row) as cur:
                            result.append(cur.rowcount)
                    continue
                async with conn.execute(sql, params) as cur:
                    if mode == "all":
                        result = await cur.fetchall()
                    elif mode == "one":
                        result = await cur.fetchone()
                    elif mode in KNOWN:
                        result = await (cur.fetchall() if mode == "thread" else cur.fetchone())
                        if self._depth:
                            memo.learn(mode, params, result)
                    else:
                        result = cur.rowcount
                        if mode != "count":
                            memo.wrote(mode, params)
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, self.where) from exc

    async def _validate(self) -> None:
        if self.tracer is not None:
            self.tracer(DATA_VERSION, ())
        async with self.conn.execute(DATA_VERSION) as cur:
            version = (await cur.fetchone())[0]
        self.memo.validate(version, self.conn.total_changes)
