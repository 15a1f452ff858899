"""``AsyncSqliteSaver``: the storage core on ``aiosqlite``."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite

from threadloom.checkpoint.sqlite.aexecutor import AsyncSqliteExecutor
from threadloom.checkpoint.sqlite.executor import Tracer
from threadloom.checkpoint.sqlite.saver import pragmas
from threadloom.checkpoint.sqlite.walck import WalCheckpointer
from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.bridge import run_sync
from threadloom.checkpoint.storage.core import StorageSaver
from threadloom.checkpoint.storage.drive import Flow
from threadloom.checkpoint.storage.expiry import ThreadTTL

__all__ = ["AsyncSqliteSaver"]


class AsyncSqliteSaver(ThreadTTL, StorageSaver):
    """Async checkpoints in SQLite; same file format as :class:`SqliteSaver`.

    Bound to the event loop it was created on. Its sync methods work from
    other threads while that loop runs; called on the loop itself they raise
    :class:`StorageError` instead of deadlocking (use the ``a*`` methods there).
    Same arguments as ``SqliteSaver`` but with an ``aiosqlite.Connection``.
    """

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        synchronous: str = "NORMAL",
        busy_timeout: float = 30.0,
        tracer: Tracer | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        # SaveWrites: strict (INSERT OR IGNORE says whether a row was there) and
        # add_refs (blobs inserted holding their count): a task's first put_writes
        # is one flow op, no read
        self.codec.strict_writes = self.codec.writes_add_refs = True
        self.conn = conn
        self._pragmas = pragmas(synchronous, busy_timeout)
        self.executor = AsyncSqliteExecutor(conn, "the SQLite database", tracer)
        self.loop = asyncio.get_running_loop()
        self._owns = False
        self.is_setup = False
        self._setup_lock = asyncio.Lock()
        self.walck: WalCheckpointer | None = None  # own WAL files (sqlite/walck.py)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, **options: Any
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """``async with AsyncSqliteSaver.from_conn_string("state.db") as saver:``."""
        conn = await aiosqlite.connect(conn_string, check_same_thread=False, isolation_level=None)
        saver = cls(conn, **options)
        saver.executor.where = repr(conn_string)
        saver._owns = True
        try:
            await saver.setup()
            await saver._background_checkpoints()
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:
        """Create or migrate the schema and set PRAGMAs (WAL). Idempotent."""
        async with self._setup_lock:
            if not self.is_setup:
                async with self.conn.execute("PRAGMA database_list") as cur:
                    row = await cur.fetchone()
                await self.executor.setup(bool(row and row[2]), self._pragmas)
                self.is_setup = True

    async def _background_checkpoints(self) -> None:
        """WAL checkpoints on a thread of their own, as the sync saver's: only on
        a WAL file this saver opened (sqlite/walck.py)."""
        try:
            async with self.conn.execute("PRAGMA journal_mode") as cur:
                mode = (await cur.fetchone())[0]
            async with self.conn.execute("PRAGMA database_list") as cur:
                path = (await cur.fetchone())[2]
        except sqlite3.DatabaseError:
            return
        if str(mode).lower() == "wal" and path:
            self.walck = WalCheckpointer(path)
            self.executor.on_commit = self.walck.committed

    async def aclose(self) -> None:
        """Stop background checkpoints (off the loop: it waits for a running
        one); close the connection if the saver opened it, even when that failed."""
        try:
            if self.walck is not None:
                self.executor.on_commit = None
                walck, self.walck = self.walck, None
                await asyncio.to_thread(walck.close)
        finally:
            if self._owns:
                self._owns = False
                await self.conn.close()

    def close(self) -> None:
        if self._owns or self.walck is not None:
            self._bridge(self.aclose())

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        if not self.is_setup:
            await self.setup()
        return await drive.arun(flow, self.executor, write)

    async def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        if not self.is_setup:
            await self.setup()
        async for item in drive.aiterate(flow, self.executor):
            yield item

    def _run(self, flow: Flow, write: bool = False) -> Any:
        return self._bridge(self._arun(flow, write))

    def _iter(self, flow: Flow) -> Iterator[Any]:
        async def collect() -> list[Any]:
            return [item async for item in self._aiter(flow)]

        return iter(self._bridge(collect()))

    def _bridge(self, coro: Any) -> Any:
        """Run ``coro`` on the saver's loop from another thread, never on it."""
        return run_sync(coro, self.loop, "AsyncSqliteSaver")
