"""``PostgresSaver``: the shared storage core on PostgreSQL through psycopg 3.

All logic (row mapping, content-addressed blobs, list deltas, retention) is in
:mod:`threadloom.checkpoint.storage`; this module only picks a connection
strategy and hands the core an executor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import Connection, Pipeline
from psycopg_pool import ConnectionPool, PoolTimeout

from threadloom.checkpoint.postgres.connection import PgConnector
from threadloom.checkpoint.postgres.executor import PgExecutor
from threadloom.checkpoint.postgres.health import describe_target, storage_error
from threadloom.checkpoint.postgres.pool import connect_kwargs, pool_kwargs
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.schema import setup_flow
from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.bridge import in_thread
from threadloom.checkpoint.storage.core import StorageSaver
from threadloom.checkpoint.storage.drive import Flow
from threadloom.checkpoint.storage.expiry import ThreadTTL

__all__ = ["COMPACT_EVERY", "PgSaverBase", "PostgresSaver"]

COMPACT_EVERY = 12
"""The Postgres savers' default ``compact_every`` (the core's is 16). A list
version's ref row names its manifest plus up to this many tail chunks, and
each of them is one reference-count update (a new row version) per version
stored: with 12 the bench's 1,000-turn conversation stores ~0.16 MB less
(refs 0.89 -> 0.83 MB, blobs 1.19 -> 1.10: 12-message segments of ~1.5 KB
fill the heap pages that 2 KB ones left a fifth empty) and makes 15% fewer
count updates; 8 and 14 measured alike, 4 and 6 worse (more manifests)."""


class PgSaverBase(ThreadTTL, StorageSaver):
    """What the sync and async Postgres savers share: the constructor.

    They differ only in the connector that runs their transactions
    (``_connector_type``) and in how the core's flows are driven.
    """

    _connector_type: type = PgConnector

    def __init__(
        self,
        conn: Connection | ConnectionPool | Pipeline | Any,
        pipe: Pipeline | Any = None,
        serde: Any = None,
        *,
        schema: str = "public",
        pipeline: bool = False,
        _owned_url: str | None = None,
        _prepare_threshold: int | None = None,
        **options: Any,
    ) -> None:
        options.setdefault("compact_every", COMPACT_EVERY)
        super().__init__(serde=serde, **options)
        self.sql = SQL(schema)
        self.connector = self._connector_type(
            conn,
            pipe=pipe,
            url=_owned_url,
            prepare_threshold=_prepare_threshold,
            pipeline=pipeline,
            schema=schema,
        )
        self.executor = PgExecutor(self.connector, self.sql)

    @property
    def conn(self) -> Any:
        """The connection or pool the saver runs on (LangGraph's attribute: code
        that runs its own SQL next to the saver's reads it). Statements run on it
        are outside the saver's transactions."""
        return self.connector.conn

    @property
    def pipe(self) -> Any:
        """The pipeline given to the constructor, if any (LangGraph's attribute)."""
        return self.connector.pipe


class PostgresSaver(PgSaverBase):
    """Checkpoints in PostgreSQL; works with a Connection, a ConnectionPool or a Pipeline.

    Args:
        conn: a ``psycopg.Connection``, ``psycopg_pool.ConnectionPool`` or an
            open ``Pipeline``. Not closed by the saver. Any settings work: the
            saver asks for tuple rows itself and runs in a transaction when the
            connection is not in autocommit mode (or joins the caller's).
        pipe: LangGraph-compatible way to pass a pipeline with its connection.
        serde: the serializer (third positional argument, as in LangGraph).
        schema: the schema holding the tables (default ``public``); separate
            schemas isolate tenants or test runs.
        pipeline: also pipeline reads (writes are always pipelined).
        delta, compact_every, cache_bytes: see
            :class:`~threadloom.checkpoint.storage.core.StorageSaver`
            (``compact_every`` defaults to :data:`COMPACT_EVERY` here).
        ttl, ttl_touch_every, clock: per-thread TTL, see
            :class:`~threadloom.checkpoint.storage.expiry.ThreadTTL`.

    Call :meth:`setup` before first use; it is cheap and safe to run on every
    start, from several processes at once, or inside your own transaction.
    """

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pool: bool | dict[str, Any] = False,
        pipeline: bool = False,
        prepare_threshold: int | None = None,
        schema: str = "public",
        **options: Any,
    ) -> Iterator[PostgresSaver]:
        """Open a connection (or a pool) for the saver and close it on exit.

        Args:
            conn_string: libpq URL or ``key=value`` string.
            pool: ``True`` for a checked ``ConnectionPool`` (min 1, max 10
                connections), or a dict of ``ConnectionPool`` arguments
                (``min_size``, ``max_size``, ``max_idle``, ``timeout``, ``kwargs``...).
            pipeline: also pipeline reads.
            prepare_threshold: ``None`` (default) never prepares statements,
                which transaction poolers (PgBouncer, Cloud SQL, Supabase) need;
                a number prepares a statement after that many runs.
            schema: where the tables live.

        Raises:
            StorageError: the server cannot be reached (names host and port).
        """
        conn = open_connection(conn_string, pool, prepare_threshold)
        saver = cls(
            conn,
            schema=schema,
            pipeline=pipeline,
            _owned_url=conn_string,
            _prepare_threshold=prepare_threshold,
            **options,
        )
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Create or migrate the tables; safe from many processes and inside a transaction."""
        self.executor.run_batches(setup_flow(self.sql.schema))

    def close(self) -> None:
        """Close the connection or pool the saver opened (``from_conn_string``),
        after settling or releasing the runs still writing through it
        (:meth:`_close_runs`); the saver then refuses every call. A caller's
        connection is left alone and the saver keeps working on it."""
        if self.connector.url is not None:
            self._close_once(self._shut)

    def _shut(self) -> None:
        if self._closed:
            return
        try:
            self._close_runs()
        finally:
            self._closed = True
            self.connector.closed = type(self).__name__
            self.connector.close()

    # -- how the core's flows run ------------------------------------------------

    def _run(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:
            self._refuse_closed()
        return drive.run(flow, self.executor, write)

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        # the sync saver's a* methods run in a worker thread: never block the loop
        if self._closed:
            self._refuse_closed()
        return await in_thread(drive.run, flow, self.executor, write)

    def _iter(self, flow: Flow) -> Iterator[Any]:
        if self._closed:
            self._refuse_closed()
        return drive.iterate(flow, self.executor)

    async def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        if self._closed:
            self._refuse_closed()
        items = await in_thread(lambda: list(drive.iterate(flow, self.executor)))
        for item in items:
            yield item


def open_connection(
    url: str, pool: bool | dict[str, Any], prepare_threshold: int | None
) -> Connection | ConnectionPool:
    """A connection or an opened pool for ``url``, or a StorageError naming the server."""
    target = describe_target(url)
    if not pool:
        try:
            return Connection.connect(url, **connect_kwargs(prepare_threshold))
        except psycopg.Error as exc:
            raise storage_error(exc, target) from exc
    kwargs = pool_kwargs(url, pool, prepare_threshold, async_=False)
    opened = ConnectionPool(**kwargs)
    try:
        opened.open(wait=True, timeout=kwargs["timeout"])
    except (PoolTimeout, psycopg.Error) as exc:
        opened.close()
        raise storage_error(psycopg.OperationalError(str(exc)), target) from exc
    return opened
