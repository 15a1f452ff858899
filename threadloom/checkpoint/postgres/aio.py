"""``AsyncPostgresSaver``: the shared storage core on psycopg's async API.

Same tables, options and behaviour as :class:`PostgresSaver`; only the I/O
is awaited. Its sync methods may be called from other threads (they run on
the saver's event loop); calling them from that loop itself would deadlock, so
it raises a clear error instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncPipeline
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from threadloom.checkpoint.postgres.aconnection import AsyncPgConnector
from threadloom.checkpoint.postgres.health import describe_target, storage_error
from threadloom.checkpoint.postgres.pool import connect_kwargs, pool_kwargs
from threadloom.checkpoint.postgres.saver import PgSaverBase
from threadloom.checkpoint.postgres.schema import setup_flow
from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.bridge import run_sync
from threadloom.checkpoint.storage.drive import Flow

__all__ = ["AsyncPostgresSaver"]


class AsyncPostgresSaver(PgSaverBase):
    """Checkpoints in PostgreSQL from asyncio code (AsyncConnection, pool or pipeline).

    Args: as :class:`~threadloom.checkpoint.postgres.PostgresSaver`, with the
    async psycopg types. Call ``await saver.setup()`` once before use.
    """

    _connector_type = AsyncPgConnector

    def __init__(
        self,
        conn: AsyncConnection | AsyncConnectionPool | AsyncPipeline,
        pipe: AsyncPipeline | None = None,
        serde: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(conn, pipe, serde, **kwargs)
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pool: bool | dict[str, Any] = False,
        pipeline: bool = False,
        prepare_threshold: int | None = None,
        schema: str = "public",
        **options: Any,
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """Async twin of :meth:`PostgresSaver.from_conn_string` (same arguments)."""
        conn = await open_async_connection(conn_string, pool, prepare_threshold)
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
            await saver.aclose()

    async def setup(self) -> None:
        """Create or migrate the tables; safe from many processes and inside a transaction."""
        await self.executor.arun_batches(setup_flow(self.sql.schema))

    async def aclose(self) -> None:
        """Close the connection or pool the saver opened, after settling or
        releasing the runs still writing through it (:meth:`_aclose_runs`); the
        saver then refuses every call. On a caller's connection only runs
        dropped mid-stream get to save and release (the saver keeps working)."""
        await self._aclose_own(self.connector.url is not None, self._shut)

    async def _shut(self) -> None:
        self.connector.closed = type(self).__name__
        await self.connector.aclose()

    def close(self) -> None:
        if self.connector.url is not None and not self._closed:
            self._sync(self.aclose())

    # -- how the core's flows run ------------------------------------------------

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:
            self._refuse_closed()
        return await drive.arun(flow, self.executor, write)

    def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        if self._closed:
            self._refuse_closed()
        return drive.aiterate(flow, self.executor)

    def _run(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:  # before the bridge: the saver's loop may be gone too
            self._refuse_closed()
        return self._sync(drive.arun(flow, self.executor, write))

    def _iter(self, flow: Flow) -> Iterator[Any]:
        if self._closed:
            self._refuse_closed()

        async def collect() -> list[Any]:
            return [item async for item in drive.aiterate(flow, self.executor)]

        return iter(self._sync(collect()))

    def _sync(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the saver's loop from another thread (in a fresh loop
        when the saver was made outside a running one)."""
        return run_sync(coro, self.loop, "AsyncPostgresSaver", standalone=True)


async def open_async_connection(
    url: str, pool: bool | dict[str, Any], prepare_threshold: int | None
) -> AsyncConnection | AsyncConnectionPool:
    """An async connection or opened pool, or a StorageError naming the server."""
    target = describe_target(url)
    if not pool:
        try:
            return await AsyncConnection.connect(url, **connect_kwargs(prepare_threshold))
        except psycopg.Error as exc:
            raise storage_error(exc, target) from exc
    kwargs = pool_kwargs(url, pool, prepare_threshold, async_=True)
    opened = AsyncConnectionPool(**kwargs)
    try:
        await opened.open(wait=True, timeout=kwargs["timeout"])
    except (PoolTimeout, psycopg.Error) as exc:
        await opened.close()
        raise storage_error(psycopg.OperationalError(str(exc)), target) from exc
    return opened
