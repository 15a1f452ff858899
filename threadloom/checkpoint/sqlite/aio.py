"""``AsyncSqliteSaver``: the storage core on ``aiosqlite``.

Each storage flow runs whole on aiosqlite's worker thread through the sync
:class:`~.executor.SqliteExecutor` (``sqlite/worker.py``): one hop to that
thread per flow (per page for ``list``), the same statements as ``SqliteSaver``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite

from threadloom.checkpoint.lease import local
from threadloom.checkpoint.sqlite import worker
from threadloom.checkpoint.sqlite.executor import SqliteExecutor, Tracer
from threadloom.checkpoint.sqlite.saver import _is_file, _no_rest_in_memory, pragmas
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

    retention_pause = 1.0  # as SqliteSaver's: 0 on an in-memory database

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
        worker.check(conn)
        # runs on the worker thread only, over the sqlite3 connection there
        # (bound again by setup: a connection not yet awaited has none)
        self.executor = SqliteExecutor(_raw(conn), "the SQLite database", tracer)
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
                await worker.hop(self.conn, self._setup)
                self.is_setup = True

    def _setup(self) -> None:
        """On the worker thread."""
        self.executor.conn = self.conn._conn
        is_file = _is_file(self.executor.conn)
        self.executor.setup(is_file, self._pragmas)
        _no_rest_in_memory(self, is_file)

    async def _background_checkpoints(self) -> None:
        """WAL checkpoints on a thread of their own, as the sync saver's: only on
        a WAL file this saver opened (sqlite/walck.py)."""
        path = await worker.hop(self.conn, _wal_file, self.executor.conn)
        if path:
            self.walck = WalCheckpointer(path)
            self.executor.on_commit = self._wal_committed

    def _wal_committed(self, total_changes: int) -> None:
        """After each own write COMMIT (on the worker thread); the executor logs a
        failure of this hook and the commit stands (``SqliteExecutor._committed``)."""
        walck = self.walck
        if walck is not None:
            walck.committed(total_changes)

    async def aclose(self) -> None:
        """Stop background checkpoints (off the loop: it waits for a running
        one); close the connection if the saver opened it, even when that failed.
        Runs dropped mid-stream save and release their leases first; on a
        connection the saver opened, live runs' leases are released too and the
        saver then refuses every call (:meth:`_aclose_runs`)."""
        if self._owns or "_close_done" in self.__dict__:
            await self._aclose_once(self._shut)
            return
        await local.asettle_saver(self)
        await self._stop_walck()

    async def _stop_walck(self) -> None:
        if self.walck is not None:
            self.executor.on_commit = None
            walck, self.walck = self.walck, None
            await asyncio.to_thread(walck.close)

    async def _shut(self) -> None:
        try:
            if self._owns and not self._closed:
                await self._aclose_runs()
            await self._stop_walck()
        finally:
            if self._owns:
                self._owns = False
                self._closed = True
                self.executor.closed = type(self).__name__
                await self.conn.close()

    def close(self) -> None:
        if self._owns or self.walck is not None:
            self._bridge(self.aclose())

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:
            self._refuse_closed()
        if not self.is_setup:
            await self.setup()
        return await worker.run_flow(self.conn, flow, self.executor, write)

    async def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        """One hop per page: a consumer that stops early reads no further page
        (between pages the flow holds no transaction: dropping it is safe anywhere)."""
        if self._closed:
            self._refuse_closed()
        if not self.is_setup:
            await self.setup()
        tap = worker.Tap()
        items = drive.iterate(worker.tapped(flow, tap), self.executor)
        while (page := await worker.hop(self.conn, worker.page, items, tap)) is not None:
            for item in page:
                yield item

    def _run(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:  # before the bridge: the saver's loop may be gone too
            self._refuse_closed()
        return self._bridge(self._arun(flow, write))

    def _iter(self, flow: Flow) -> Iterator[Any]:
        if self._closed:
            self._refuse_closed()

        async def collect() -> list[Any]:
            return [item async for item in self._aiter(flow)]

        return iter(self._bridge(collect()))

    def _bridge(self, coro: Any) -> Any:
        """Run ``coro`` on the saver's loop from another thread, never on it."""
        return run_sync(coro, self.loop, "AsyncSqliteSaver")


def _raw(conn: aiosqlite.Connection) -> Any:
    """``conn``'s sqlite3 connection, None while it is not connected yet."""
    try:
        return conn._conn
    except ValueError:
        return None


def _wal_file(conn: sqlite3.Connection) -> str | None:
    """The database file when ``conn`` has it in WAL mode (on the worker thread)."""
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        path = conn.execute("PRAGMA database_list").fetchone()[2]
    except sqlite3.DatabaseError:
        return None
    return path if str(mode).lower() == "wal" and path else None
