"""Getting a PostgreSQL connection, running a batch of statements, mapping failures.

The savers never hold session state: every batch runs on whatever connection
the pool (or the single connection) hands out, statements are not prepared
unless asked (``prepare_threshold``), and nothing survives between batches.
That is what makes them safe behind PgBouncer-style transaction poolers.

A batch is a list of :class:`Stmt`. A writing batch runs in one transaction,
pipelined when libpq supports it, so a superstep (checkpoint row, its new
blobs and refs) costs one round trip. When the connection turns out to be dead
(``pg_terminate_backend``, a restarted server, an idle timeout) and the saver
can get a new one (a pool, or a connection it opened itself), the batch is
retried once on a fresh connection: every statement the savers send is
idempotent (``ON CONFLICT``), so a retry after a lost acknowledgement is safe.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg import AsyncConnection, AsyncPipeline, Connection, Pipeline, pq
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from threadloom.errors import StorageError

__all__ = [
    "Stmt",
    "PgConnector",
    "AsyncPgConnector",
    "connect_kwargs",
    "describe_target",
    "pool_kwargs",
    "storage_error",
]

Fetch = Literal["none", "one", "all", "many"]


@dataclass(frozen=True)
class Stmt:
    """One statement of a batch.

    ``fetch="many"`` runs ``executemany`` over ``params`` (a list of rows) and
    returns nothing; ``"one"``/``"all"`` return the first row / all rows.
    """

    sql: str
    params: Any = ()
    fetch: Fetch = "none"


def connect_kwargs(prepare_threshold: int | None) -> dict[str, Any]:
    """Settings for connections the saver opens itself (never for the caller's)."""
    return {"autocommit": True, "prepare_threshold": prepare_threshold}


def pool_kwargs(
    url: str, options: dict[str, Any] | bool, prepare_threshold: int | None, async_: bool
) -> dict[str, Any]:
    """ConnectionPool arguments: checked connections, small by default, overridable.

    ``check`` validates a connection each time it leaves the pool, so a backend
    killed by an idle timeout or a failover is replaced instead of failing the
    next call.
    """
    cls = AsyncConnectionPool if async_ else ConnectionPool
    merged: dict[str, Any] = {
        "min_size": 1,
        "max_size": 10,
        "max_idle": 300.0,
        "timeout": 30.0,
        "check": cls.check_connection,
    }
    if isinstance(options, dict):
        merged.update(options)
    kwargs = dict(merged.pop("kwargs", None) or {})
    kwargs = {**connect_kwargs(prepare_threshold), **kwargs}
    return {"conninfo": url, "kwargs": kwargs, "open": False, **merged}


def describe_target(url_or_conn: Any) -> str:
    """``host:port/dbname`` of a URL or connection, for error messages (no password)."""
    try:
        if isinstance(url_or_conn, str):
            info = conninfo_to_dict(url_or_conn)
            host, port, db = info.get("host"), info.get("port"), info.get("dbname")
        else:
            pinfo = url_or_conn.info
            host, port, db = pinfo.host, pinfo.port, pinfo.dbname
    except Exception:  # a description must never raise
        return "PostgreSQL"
    return f"PostgreSQL at {host or 'localhost'}:{port or 5432}/{db or ''}".rstrip("/")


def storage_error(exc: BaseException, target: str, schema: str | None = None) -> StorageError:
    """A StorageError that says what failed in words, chained to the driver's error."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, pg_errors.UndefinedTable):
        where = f" in schema {schema!r}" if schema else ""
        msg = f"threadloom tables are missing{where} on {target}: call saver.setup() first"
    elif isinstance(exc, PoolTimeout):
        msg = f"no connection to {target} available within the pool timeout ({exc})"
    elif isinstance(exc, psycopg.OperationalError):
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"cannot reach {target}: {reason}"
    else:
        msg = f"{target} refused the operation: {type(exc).__name__}: {exc}".strip()
    err = StorageError(msg)
    err.__cause__ = exc
    return err


def is_connection_lost(exc: BaseException, conn: Any) -> bool:
    """True when the failure was the connection going away, not the statement."""
    if conn is not None and (conn.closed or conn.broken):
        return True
    return isinstance(exc, psycopg.OperationalError) and not isinstance(
        exc, pg_errors.QueryCanceled
    )


def in_caller_transaction(conn: Any) -> bool:
    """Whether the caller left a transaction open that our batch must join."""
    return conn.info.transaction_status != pq.TransactionStatus.IDLE


def use_pipeline(conn: Any, want: bool) -> bool:
    """Pipeline a batch when libpq can and the connection is not already in one."""
    return want and conn._pipeline is None and psycopg.Capabilities().has_pipeline()


class _ConnectorBase:
    """What the sync and async connectors share: no I/O, only decisions.

    Args:
        conn: what to run on. A single connection is used under a lock (one
            batch at a time); a pool hands out one connection per batch.
        pipe: a caller's open pipeline on ``conn``; it is synced after writes.
        url: set when the saver opened ``conn`` itself, so it may reconnect.
        prepare_threshold: used when reconnecting.
        pipeline: also pipeline reads (writes are pipelined anyway).
        schema: named in the "call setup()" error.
    """

    _pool_type: type
    _pipe_type: type

    def __init__(
        self,
        conn: Any,
        *,
        pipe: Any = None,
        url: str | None = None,
        prepare_threshold: int | None = None,
        pipeline: bool = False,
        schema: str | None = None,
    ) -> None:
        if isinstance(conn, self._pipe_type):
            pipe, conn = conn, conn._conn
        if isinstance(conn, self._pool_type) and pipe is not None:
            raise StorageError("a Pipeline belongs to one Connection; do not pass it with a pool")
        self.conn = conn
        self.pipe = pipe
        self.url = url
        self.prepare_threshold = prepare_threshold
        self.pipeline = pipeline
        self.schema = schema
        self.is_pool = isinstance(conn, self._pool_type)
        self.target = describe_target(url or (conn.conninfo if self.is_pool else conn))

    @property
    def can_reconnect(self) -> bool:
        """A pool replaces dead connections; a connection we opened can be reopened."""
        return self.is_pool or (self.url is not None and self.pipe is None)

    def _owns_single(self) -> bool:
        return not self.is_pool and self.url is not None and self.pipe is None

    def _plan(self, conn: Any, batch: Sequence[Stmt], write: bool) -> tuple[bool, bool]:
        """(pipelined, in_transaction) for running ``batch`` on ``conn``."""
        pipelined = use_pipeline(conn, write or self.pipeline)
        needs_tx = (write and len(batch) > 1) or not (
            conn.autocommit or in_caller_transaction(conn)
        )
        return pipelined, needs_tx

    def _error(self, exc: BaseException) -> StorageError:
        return storage_error(exc, self.target, self.schema)

    def _retryable(self, exc: BaseException) -> bool:
        return self.can_reconnect and is_connection_lost(exc, None)


class PgConnector(_ConnectorBase):
    """Runs statement batches on a Connection, a ConnectionPool or a Pipeline."""

    _pool_type = ConnectionPool
    _pipe_type = Pipeline

    def __init__(self, conn: Connection | ConnectionPool | Pipeline, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self.lock = threading.RLock()

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        if self.is_pool:
            with self.conn.connection() as conn:
                yield conn
            return
        with self.lock:
            if self.conn.closed and self._owns_single():
                self.conn = Connection.connect(self.url, **connect_kwargs(self.prepare_threshold))
            yield self.conn

    def run(self, batch: Sequence[Stmt], *, write: bool) -> list[Any]:
        """Run ``batch`` (in one transaction if ``write``); return each statement's rows."""
        try:
            return self._run_once(batch, write)
        except (psycopg.Error, PoolTimeout) as exc:
            if not self._retryable(exc):
                raise self._error(exc) from exc
        try:  # the connection died under us: once more on a fresh one
            return self._run_once(batch, write)
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._error(exc) from exc

    def _run_once(self, batch: Sequence[Stmt], write: bool) -> list[Any]:
        with self._connection() as conn:
            try:
                return self._execute(conn, batch, write)
            except psycopg.Error:
                if self._owns_single() and (conn.closed or conn.broken):
                    conn.close()  # reopened by the next _connection()
                raise

    def _execute(self, conn: Connection, batch: Sequence[Stmt], write: bool) -> list[Any]:
        pipelined, needs_tx = self._plan(conn, batch, write)
        cursors = []
        with conn.pipeline() if pipelined else nullcontext():
            with conn.transaction() if needs_tx else nullcontext():
                for stmt in batch:
                    cur = conn.cursor(row_factory=tuple_row)
                    if stmt.fetch != "many":
                        cur.execute(stmt.sql, stmt.params)
                    elif stmt.params:
                        cur.executemany(stmt.sql, stmt.params)
                    cursors.append(cur)
        if self.pipe is not None and write:
            self.pipe.sync()
        return [fetch(cur, stmt) for cur, stmt in zip(cursors, batch)]

    def close(self) -> None:
        """Close the connection or pool, only if the saver opened it."""
        if self.url is not None:
            self.conn.close()


class AsyncPgConnector(_ConnectorBase):
    """Async twin of :class:`PgConnector` (AsyncConnection / AsyncConnectionPool)."""

    _pool_type = AsyncConnectionPool
    _pipe_type = AsyncPipeline

    def __init__(self, conn: Any, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self.lock = asyncio.Lock()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        if self.is_pool:
            async with self.conn.connection() as conn:
                yield conn
            return
        async with self.lock:
            if self.conn.closed and self._owns_single():
                self.conn = await AsyncConnection.connect(
                    self.url, **connect_kwargs(self.prepare_threshold)
                )
            yield self.conn

    async def run(self, batch: Sequence[Stmt], *, write: bool) -> list[Any]:
        """Run ``batch`` (in one transaction if ``write``); return each statement's rows."""
        try:
            return await self._run_once(batch, write)
        except (psycopg.Error, PoolTimeout) as exc:
            if not self._retryable(exc):
                raise self._error(exc) from exc
        try:
            return await self._run_once(batch, write)
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._error(exc) from exc

    async def _run_once(self, batch: Sequence[Stmt], write: bool) -> list[Any]:
        async with self._connection() as conn:
            try:
                return await self._execute(conn, batch, write)
            except psycopg.Error:
                if self._owns_single() and (conn.closed or conn.broken):
                    await conn.close()
                raise

    async def _execute(
        self, conn: AsyncConnection, batch: Sequence[Stmt], write: bool
    ) -> list[Any]:
        pipelined, needs_tx = self._plan(conn, batch, write)
        cursors = []
        async with conn.pipeline() if pipelined else anullcontext():
            async with conn.transaction() if needs_tx else anullcontext():
                for stmt in batch:
                    cur = conn.cursor(row_factory=tuple_row)
                    if stmt.fetch != "many":
                        await cur.execute(stmt.sql, stmt.params)
                    elif stmt.params:
                        await cur.executemany(stmt.sql, stmt.params)
                    cursors.append(cur)
        if self.pipe is not None and write:
            await self.pipe.sync()
        return [await afetch(cur, stmt) for cur, stmt in zip(cursors, batch)]

    async def close(self) -> None:
        """Close the connection or pool, only if the saver opened it."""
        if self.url is not None:
            await self.conn.close()


def fetch(cur: Any, stmt: Stmt) -> Any:
    """The result a statement asked for (``none``: the affected row count)."""
    if stmt.fetch == "one":
        return cur.fetchone()
    if stmt.fetch == "all":
        return cur.fetchall()
    return cur.rowcount if stmt.fetch == "none" else None


async def afetch(cur: Any, stmt: Stmt) -> Any:
    """Async twin of :func:`fetch`."""
    if stmt.fetch == "one":
        return await cur.fetchone()
    if stmt.fetch == "all":
        return await cur.fetchall()
    return cur.rowcount if stmt.fetch == "none" else None


@asynccontextmanager
async def anullcontext() -> AsyncIterator[None]:
    yield
