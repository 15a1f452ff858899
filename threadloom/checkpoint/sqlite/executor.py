"""Run :mod:`.queries` plans on a ``sqlite3`` connection: ``SqliteSaver``
directly, ``AsyncSqliteSaver`` on aiosqlite's worker thread (:mod:`.worker`,
one hop per flow), so both savers share every statement, row mapping and the
migration logic. Transactions: writers take
``BEGIN IMMEDIATE`` (the write lock up front, so two processes queue on
``busy_timeout`` instead of failing mid-transaction); readers use a deferred
``BEGIN`` for a consistent snapshot, sent with their first statement (a read
that needs none, like the end of a ``list``, costs nothing). If the caller's
connection is already in a transaction, a SAVEPOINT is used instead so theirs
is never committed. At ``synchronous`` FULL/EXTRA a writer's BEGIN also waits
for its first op: a lease op alone commits without fsync (``durability.py``).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
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
from threadloom.checkpoint.sqlite.lgfile import warn_if_langgraph_data
from threadloom.checkpoint.sqlite.memo import ABSENT, DATA_VERSION, KNOWN, Memo, Reads, read_key
from threadloom.checkpoint.sqlite.schema import MIGRATIONS, MIGRATIONS_TABLE
from threadloom.checkpoint.storage.ops import Op
from threadloom.errors import SaverClosedError, StorageError

__all__ = ["SqliteExecutor", "setup_statements", "storage_error"]

logger = logging.getLogger("threadloom.checkpoint.sqlite")

Tracer = Callable[[str, Any], None]

# statement modes answered by the rowcount of one execution; all but ``count``
# tell the memo what they wrote (sqlite/memo.py)
ROWCOUNT = frozenset({"count", "saved", "drop", "leased", "unlease"})


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


def check_layout(conn: sqlite3.Connection, current: int, where: str) -> None:
    """Refuse a file whose tables do not match the version it claims. Builds of
    threadloom from before 2026-11-21 (never released) wrote version 1 with
    thread ids in every row and no ``tl_threads``; migrating that from 1 fails
    on the first statement that expects the released layout."""
    if current < 1:
        return
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tl_threads'").fetchone() is None:
        raise StorageError(
            f"{where} says threadloom schema version {current} but has no tl_threads table:"
            " it was written by a pre-release threadloom build (before 2026-11-21) whose"
            " layout cannot be migrated; nothing was changed. Read it with that build"
            " (threads can be copied over with the public saver API) or start a new file"
        )


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
        self._lazy = False  # a read transaction whose BEGIN waits for a statement
        self.memo = Memo()  # answers this connection knows (sqlite/memo.py)
        self.reads = Reads()  # results of repeated reads (sqlite/memo.py)
        self._reading = False  # in our own read transaction: reads may be served from ``reads``
        self.strict: str | None = None  # FULL/EXTRA: its PRAGMA (sqlite/durability.py)
        self._wlazy = False  # a write transaction whose BEGIN waits for its first op
        self._relaxed: str | None = None  # relaxed: the PRAGMA restoring the level
        self._writing = False  # the outermost transaction is our own write
        # after each own write COMMIT, with total_changes (sqlite/walck.py)
        self.on_commit: Callable[[int], None] | None = None
        self._cur: sqlite3.Cursor | None = None  # see ``_cursor``
        # the saver's class name once it closed its own connection (under the
        # lock): a transaction of another thread starting later is refused
        self.closed: str | None = None

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
                pending = _migrations(current)
                if pending:
                    # all or nothing: a migration failing half-way used to leave
                    # the file at a version whose layout it did not have, which
                    # neither this threadloom nor the one that wrote it could open
                    with self.transaction(True):
                        self._migrate(pending)
                # after the migrations: they run on the connection directly and
                # need their BEGIN at once, not at a first op
                self.strict = None if busy else strict_mode(pragmas)
                warn_if_langgraph_data(self.conn, self.where)
            except sqlite3.DatabaseError as exc:
                raise storage_error(exc, self.where) from exc

    def _migrate(self, pending: list[tuple[int, tuple[str, ...]]]) -> None:
        """Apply ``pending`` inside the caller's write transaction. The version is
        read again under the write lock: another process may have migrated since."""
        current = self.conn.execute("SELECT coalesce(max(v), 0) FROM tl_migrations").fetchone()[0]
        check_layout(self.conn, current, self.where)
        for version, statements in pending:
            if version <= current:
                continue
            for sql in statements:
                self.conn.execute(sql)
            self.conn.execute("INSERT OR IGNORE INTO tl_migrations (v) VALUES (?)", (version,))

    def forget_cached(self) -> None:
        """Forget the memo and kept read rows (``StorageSaver.forget_cached``)."""
        self.memo.forget()
        self.reads.clear()

    def transaction(self, write: bool) -> _Transaction:
        """One transaction (a context manager; a class, not a generator: every
        read and write enters one, see :class:`_Transaction`)."""
        return _Transaction(self, write)

    def _enter(self, write: bool) -> tuple[bool, str, str]:
        """Start a transaction (the lock is held); ``(nested, commit, rollback)``."""
        nested = self._depth > 0
        own = not nested and not self.conn.in_transaction
        if own:
            begin = "BEGIN IMMEDIATE" if write else "BEGIN"
            commit, rollback = "COMMIT", "ROLLBACK"
        else:
            begin, commit, rollback = "SAVEPOINT tl", "RELEASE tl", "ROLLBACK TO tl; RELEASE tl"
        if not nested:
            self._writing = own and write
        if self._lazy:  # a read we nest in: its BEGIN first
            self._begin_read()
        elif self._wlazy:  # a write we nest in: its BEGIN, never relaxed
            self._begin_write(None)
        self._reading = own and not write
        if self._reading:
            self._lazy = True  # BEGIN with the first statement (none: no BEGIN)
        elif own and self.strict is not None:
            self._wlazy = True  # BEGIN with the first op: it may be relaxed
        else:
            self._exec_script(begin)
        self._depth += 1
        self._memo_begin(nested, own)
        return nested, commit, rollback

    def _leave(self, nested: bool, end: str, ok: bool) -> None:
        """End the transaction ``_enter`` started: ``end`` is its COMMIT when
        ``ok``, else its ROLLBACK (the lock is still held)."""
        self._depth -= 1
        self._reading = False
        if not ok:
            self._memo_end(nested, False)
        try:
            if self._lazy or self._wlazy:
                self._lazy = self._wlazy = False
            elif ok:
                try:
                    self._exec_script(end)
                except BaseException:
                    self._memo_end(nested, False)
                    self._abandon(end)
                    raise
                if self._writing and not nested and self.on_commit is not None:
                    self._committed()
            elif nested or self.conn.in_transaction:  # (not when its BEGIN failed)
                self._exec_script(end)
        finally:
            if self._relaxed and not nested:
                self._restore()
        if ok:
            self._memo_end(nested, True)

    def _abandon(self, end: str) -> None:
        """After a failed COMMIT: roll back what it left open (SQLITE_BUSY in a
        rollback-journal mode keeps the transaction), or every later transaction
        would be a SAVEPOINT inside it and never commit. The COMMIT's error is
        what the caller sees."""
        if end == "COMMIT" and self.conn.in_transaction:
            try:
                self._exec_script("ROLLBACK")
            except StorageError:
                pass

    def _committed(self) -> None:
        """Tell ``on_commit`` (background WAL checkpoints, an optimisation): a
        committed write must not raise because of it."""
        try:
            self.on_commit(self.conn.total_changes)  # type: ignore[misc]
        except Exception:  # logged: else WAL checkpoints stop unseen and the WAL grows
            logger.warning(
                "on_commit hook failed after a committed write on %s (the commit stands)",
                self.where,
                exc_info=True,
            )

    def _restore(self) -> None:
        """Back to FULL/EXTRA after a relaxed transaction (a failed COMMIT's
        transaction is rolled back first: the PRAGMA cannot run inside one)."""
        sql, self._relaxed = self._relaxed, None
        try:
            if self.conn.in_transaction:
                self._exec_script("ROLLBACK")
        finally:
            self._exec_script(sql or "PRAGMA synchronous = FULL")

    def _begin_write(self, op: Any) -> None:
        """BEGIN IMMEDIATE of a lazy write transaction, at synchronous NORMAL
        when ``op`` is a lease op (sqlite/durability.py)."""
        self._wlazy = False
        if type(op) in RELAXED:
            try:
                restore = restore_sql(*self.conn.execute(LEVEL).fetchone())
            except sqlite3.DatabaseError as exc:
                raise storage_error(exc, self.where) from exc
            if restore is not None:
                self._relaxed = restore  # first: restored even if RELAX fails midway
                self._exec_script(RELAX)
        self._exec_script("BEGIN IMMEDIATE")

    def _begin_read(self) -> None:
        """BEGIN, then (our own read) the snapshot's data_version: whether the
        stored read results still hold (sqlite/memo.py, ``Reads``)."""
        self._lazy = False
        self._exec_script("BEGIN")
        if self._reading and self.reads.skip(self.conn.total_changes):
            self._reading = False  # right after our own write: checking would not pay
        if self._reading:
            if self.tracer is not None:
                self.tracer(DATA_VERSION, ())
            try:
                version = self._cursor().execute(DATA_VERSION).fetchone()[0]
            except sqlite3.DatabaseError as exc:
                raise storage_error(exc, self.where) from exc
            self.reads.validate(version, self.conn.total_changes)

    def _memo_begin(self, nested: bool, own: bool) -> None:
        if nested:  # our own savepoint: may roll back alone
            self.memo.forget()
        else:
            self.memo.begin(own)

    def _memo_end(self, nested: bool, committed: bool) -> None:
        if nested:
            self.memo.forget()
        else:
            self.memo.end(committed, self.conn.total_changes)

    def _cursor(self) -> sqlite3.Cursor:
        """One cursor for the statements that return no rows (BEGIN, COMMIT, the
        hot writes) and ``PRAGMA data_version`` (one row, read at once):
        ``conn.execute`` builds and frees a cursor per statement (~1.3k
        instructions each, 5 statements a step). Statements whose rows are read
        later, or not all, keep their own cursor, so none is left pending here.
        Made on first use, on the thread that runs the statements (aiosqlite's
        worker: its connection may check the thread), and again when ``conn``
        was replaced (``AsyncSqliteSaver.setup``)."""
        cur = self._cur
        if cur is None or cur.connection is not self.conn:
            cur = self._cur = self.conn.cursor()
        return cur

    def _exec_script(self, sql: str) -> None:
        try:
            run = self._cursor().execute
            if "; " in sql:
                for part in sql.split("; "):
                    run(part)
            else:
                run(sql)
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, self.where) from exc

    def execute(self, op: Op) -> Any:
        if self._lazy:
            self._begin_read()
        elif self._wlazy:
            self._begin_write(op)
        elif self._relaxed:
            check_relaxed(op, self.where)
        if self._reading and (key := read_key(op)) is not None:
            found = self.reads.get(key)
            if found is ABSENT:
                found = self._execute(op)
                self.reads.put(key, found)
            return found
        return self._execute(op)

    def _execute(self, op: Op) -> Any:
        send = queries.plan(op).send
        result = None
        conn, memo, tracer = self.conn, self.memo, self.tracer
        try:
            while True:
                try:
                    sql, params, mode = send(result)
                except StopIteration as stop:
                    return stop.value
                if mode in KNOWN:  # a lookup the memo may answer (sqlite/memo.py)
                    if self._depth:
                        if not memo.checked:
                            self._validate()
                        if (hit := memo.rows.get((mode, *params))) is not None:
                            result = hit  # this connection already knows the answer
                            continue
                    if tracer is not None:
                        tracer(sql, params)
                    cur = conn.execute(sql, params)
                    result = cur.fetchall() if mode == "thread" else cur.fetchone()
                    if self._depth:
                        memo.learn(mode, params, result)
                    continue
                if tracer is not None:
                    tracer(sql, params)
                if mode in ROWCOUNT:  # the hot writes: one statement, its rowcount
                    result = self._cursor().execute(sql, params).rowcount
                    if mode != "count":
                        memo.wrote(mode, params)
                elif mode == "all":
                    result = conn.execute(sql, params).fetchall()
                elif mode == "one":
                    result = conn.execute(sql, params).fetchone()
                elif mode == "many":
                    result = conn.executemany(sql, params).rowcount
                elif mode == "each":  # one statement per row, each row's rowcount
                    run = conn.cursor().execute  # (one cursor for all: DML leaves none open)
                    result = [run(sql, row).rowcount for row in params]
                else:  # any other mode: the rowcount, as for ``count``
                    result = conn.execute(sql, params).rowcount
        except sqlite3.DatabaseError as exc:
            raise storage_error(exc, self.where) from exc

    def _validate(self) -> None:
        if self.tracer is not None:
            self.tracer(DATA_VERSION, ())
        version = self._cursor().execute(DATA_VERSION).fetchone()[0]
        self.memo.validate(version, self.conn.total_changes)


class _Transaction:
    """:meth:`SqliteExecutor.transaction`: holds the executor's lock from
    enter to exit; commits on success, rolls back on an exception (which
    propagates)."""

    __slots__ = ("ex", "write", "nested", "commit", "rollback")

    def __init__(self, ex: SqliteExecutor, write: bool) -> None:
        self.ex, self.write = ex, write

    def __enter__(self) -> None:
        ex = self.ex
        ex.lock.acquire()
        if ex.closed is not None:
            ex.lock.release()
            raise SaverClosedError(ex.closed)
        try:
            self.nested, self.commit, self.rollback = ex._enter(self.write)
        except BaseException as exc:
            ex.lock.release()
            if isinstance(exc, sqlite3.ProgrammingError):  # e.g. the connection was closed
                raise StorageError(f"the saver's SQLite connection cannot be used: {exc}") from exc
            raise

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        try:
            if kind is None:
                self.ex._leave(self.nested, self.commit, True)
            else:
                self.ex._leave(self.nested, self.rollback, False)
        finally:
            self.ex.lock.release()
