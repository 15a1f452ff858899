"""The async twin of :class:`~.executor.SqliteExecutor` on ``aiosqlite``: the same
plans, memo and lazy BEGINs, with ``await``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Coroutine
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
from threadloom.errors import StorageError

__all__ = ["AsyncSqliteExecutor"]

logger = logging.getLogger("threadloom.checkpoint.sqlite")


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
        # after each own write COMMIT, with total_changes (sqlite/walck.py)
        self.on_commit: Callable[[int], None] | None = None

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
                    try:
                        await self._control("BEGIN IMMEDIATE")
                        for sql in statements:
                            await self.conn.execute(sql)
                        await self.conn.execute(
                            "INSERT OR IGNORE INTO tl_migrations (v) VALUES (?)", (version,)
                        )
                    except BaseException:
                        if self.conn.in_transaction:
                            await self._control("ROLLBACK")
                        raise
                    await self._control("COMMIT")
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
            self.memo.begin(own)
            self._depth += 1
            began = False  # our SAVEPOINT exists (an own transaction: in_transaction says)
            try:
                try:
                    if own and not write:
                        self._lazy = True  # BEGIN with the first statement (none: no BEGIN)
                    elif own and self.strict is not None:
                        self._wlazy = True  # BEGIN with the first op: it may be relaxed
                    else:
                        try:
                            await self._control(begin)
                        except asyncio.CancelledError:
                            began = True  # it has run all the same (_control)
                            raise
                        began = True
                    yield
                except BaseException:
                    self._depth -= 1
                    self.memo.end(False, 0)
                    self._lazy = self._wlazy = False
                    # every control statement has run (_control): in_transaction is true
                    if self.conn.in_transaction if own else began:
                        await self._control(rollback)
                    raise
                self._depth -= 1
                try:
                    if self._lazy or self._wlazy:
                        self._lazy = self._wlazy = False
                    else:
                        await self._control(commit)
                        if own and write and self.on_commit is not None:
                            self._committed()
                except BaseException:
                    self.memo.end(False, 0)
                    if own and self.conn.in_transaction:  # left open (see the sync twin)
                        with contextlib.suppress(StorageError):
                            await self._control("ROLLBACK")
                    raise
            finally:
                if self._relaxed:
                    await self._restore()
            self.memo.end(True, self.conn.total_changes)

    def _committed(self) -> None:
        """Tell ``on_commit`` (background WAL checkpoints, an optimisation): a
        committed write must not raise because of it, but a broken hook is logged
        (else WAL checkpoints stop silently and the WAL file grows)."""
        try:
            self.on_commit(self.conn.total_changes)  # type: ignore[misc]
        except Exception:
            logger.warning(
                "on_commit hook failed after a committed write on %s (the commit stands)",
                self.where,
                exc_info=True,
            )

    async def _restore(self) -> None:
        """Back to FULL/EXTRA after a relaxed transaction (see the sync twin)."""
        sql, self._relaxed = self._relaxed, None
        try:
            if self.conn.in_transaction:
                await self._control("ROLLBACK")
        finally:
            await self._control(sql or "PRAGMA synchronous = FULL")

    async def _begin_write(self, op: Any) -> None:
        """BEGIN IMMEDIATE of a lazy write transaction (see the sync twin)."""
        self._wlazy = False
        if type(op) in RELAXED:
            try:
                async with self.conn.execute(LEVEL) as cur:
                    restore = restore_sql(*(await cur.fetchone()))
            except sqlite3.DatabaseError as exc:
                raise storage_error(exc, self.where) from exc
            if restore is not None:
                self._relaxed = restore  # first: the PRAGMA runs even if this await is cancelled
                await self._control(RELAX)
        await self._control("BEGIN IMMEDIATE")

    async def _control(self, sql: str) -> None:
        """A transaction-control statement (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, a
        synchronous PRAGMA) that has run when this returns or raises, even when
        the awaiting task is cancelled: aiosqlite's worker thread runs a queued
        statement anyway, so deciding on ``in_transaction`` or the level before
        it ran would leave a transaction open or the connection relaxed."""
        if "; " in sql:  # several statements: all of them, whatever happens
            await _settled(self._script(sql))
            return
        try:
            await self._script(sql)  # no task on the usual path
        except asyncio.CancelledError:
            # it is queued: the worker runs its queue in order, so it has run
            # once a statement queued after it has
            await _settled(self._script("SELECT 1"))
            raise

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
            await self._control("BEGIN")
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


async def _settled(coro: Coroutine[Any, Any, None]) -> None:
    """Await ``coro`` to its end even when this task is cancelled meanwhile
    (then raise CancelledError once it ended)."""
    task = asyncio.ensure_future(coro)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = cancelled or not task.done()
        except BaseException:
            if not cancelled:
                raise
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller sees
        raise asyncio.CancelledError
    task.result()
