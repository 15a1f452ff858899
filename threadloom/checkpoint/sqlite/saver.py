"""``SqliteSaver``: the storage core on stdlib ``sqlite3``."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from threadloom.checkpoint.sqlite.executor import SqliteExecutor, Tracer, storage_error
from threadloom.checkpoint.sqlite.walck import WalCheckpointer
from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.bridge import in_thread
from threadloom.checkpoint.storage.core import StorageSaver
from threadloom.checkpoint.storage.drive import Flow
from threadloom.checkpoint.storage.expiry import ThreadTTL
from threadloom.errors import ConfigError

__all__ = ["SqliteSaver", "pragmas"]

_SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


def pragmas(synchronous: str, busy_timeout: float) -> list[str]:
    """Connection PRAGMAs; ``synchronous`` validated (it is not a bindable value)."""
    mode = synchronous.upper()
    if mode not in _SYNC_MODES:
        raise ConfigError(f"synchronous must be one of {_SYNC_MODES}, got {synchronous!r}")
    return [
        f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}",
        f"PRAGMA synchronous = {mode}",
        # hot pages (b-tree paths, blob index) stay cached past a few MB of data
        "PRAGMA cache_size = -16384",
    ]


class SqliteSaver(ThreadTTL, StorageSaver):
    """Checkpoints in one SQLite file (or ``:memory:``), safe across threads and processes.

    Args:
        conn: an open ``sqlite3.Connection`` (opened with ``check_same_thread=False``
            if several threads use the saver). The saver never closes a connection
            it was given.
        synchronous: ``"NORMAL"`` (default with WAL: durable across process crashes,
            an OS crash may lose the last transactions) or ``"FULL"``.
        busy_timeout: seconds a writer waits for another process's write lock.
        tracer: ``tracer(sql, params)`` is called for every statement.
        **options: ``serde``, ``delta``, ``compact_every``, ``cache_bytes``; per-thread
            TTL ``ttl``, ``clock`` (:class:`~threadloom.checkpoint.storage.expiry.ThreadTTL`).

    Raises:
        StorageError: the file is not a SQLite database, or its schema is newer.
    """

    retention_pause = 1.0
    """Lock waiters of other processes poll: a big prune rests this many times
    each step's duration between steps so they get in (storage/batching.py).
    0 on an in-memory database (set up); set 0 for a file no other process
    writes."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        synchronous: str = "NORMAL",
        busy_timeout: float = 30.0,
        tracer: Tracer | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.conn = conn
        # SaveWrites: strict (INSERT OR IGNORE says whether a row was there) and
        # add_refs (blobs inserted holding their count): a task's first put_writes
        # is one flow op, no read
        self.codec.strict_writes = self.codec.writes_add_refs = True
        self._pragmas = pragmas(synchronous, busy_timeout)
        self.executor = SqliteExecutor(conn, _where(conn), tracer)
        self._owns = False
        self.is_setup = False
        self.walck: WalCheckpointer | None = None  # own WAL files (sqlite/walck.py)

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **options: Any) -> Iterator[SqliteSaver]:
        """``with SqliteSaver.from_conn_string("state.db") as saver:`` (closes on exit)."""
        try:
            conn = sqlite3.connect(conn_string, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise storage_error(exc, repr(conn_string)) from exc
        saver = cls(conn, **options)
        saver._owns = True
        try:
            saver.setup()
            saver._background_checkpoints()
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Create or migrate the schema and set PRAGMAs (WAL). Idempotent."""
        with self.executor.lock:
            if not self.is_setup:
                is_file = _is_file(self.conn)
                self.executor.setup(is_file, self._pragmas)
                _no_rest_in_memory(self, is_file)
                self.is_setup = True

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """A cursor on the saver's connection, for SQL of your own (LangGraph's
        ``SqliteSaver.cursor``): the saver's other calls wait meanwhile, and the
        block is committed at its end (``transaction=False``: left as it is).
        What the saver remembers of the tables is dropped afterwards: rows the
        block changed are read again, not answered from memory."""
        if self._closed:
            self._refuse_closed()
        self.setup()
        with self.executor.lock:
            cur = self.conn.cursor()
            try:
                yield cur
            finally:
                try:
                    if transaction and self.conn.in_transaction:
                        self.conn.commit()
                finally:
                    cur.close()
                    self.forget_cached()

    def _background_checkpoints(self) -> None:
        """WAL checkpoints on a thread of their own (sqlite/walck.py): only on a
        WAL file this saver opened, so the second connection opens it alike."""
        try:
            mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
            path = self.conn.execute("PRAGMA database_list").fetchone()[2]
        except sqlite3.DatabaseError:
            return
        if str(mode).lower() == "wal" and path:
            self.walck = WalCheckpointer(path)
            self.executor.on_commit = self.walck.committed

    def close(self) -> None:
        """Stop background checkpoints; close the connection if the saver opened
        it (even when stopping them failed: never leak it). Runs still writing
        through a connection the saver opened are settled or released first
        (:meth:`_close_runs`); the saver then refuses every call."""
        if self._owns or "_close_done" in self.__dict__:
            self._close_once(self._shut)
        else:
            self._stop_walck()

    def _stop_walck(self) -> None:
        if self.walck is not None:
            self.executor.on_commit = None
            walck, self.walck = self.walck, None
            walck.close()

    def _shut(self) -> None:
        try:
            if self._owns and not self._closed:
                self._close_runs()
            self._stop_walck()
        finally:
            if self._owns:
                self._owns = False
                with self.executor.lock:  # after a transaction another thread is in
                    self._closed = True
                    self.executor.closed = type(self).__name__
                    self.conn.close()

    def _run(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:
            self._refuse_closed()
        if not self.is_setup:
            self.setup()
        return drive.run(flow, self.executor, write)

    def _iter(self, flow: Flow) -> Iterator[Any]:
        if self._closed:
            self._refuse_closed()
        if not self.is_setup:
            self.setup()
        return drive.iterate(flow, self.executor)

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        return await in_thread(self._run, flow, write)

    async def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        items = self._iter(flow)
        done = object()
        while (item := await in_thread(next, items, done)) is not done:
            yield item


def _where(conn: Any) -> str:
    try:
        row = conn.execute("PRAGMA database_list").fetchone()
        return repr(row[2] or ":memory:")
    except Exception:
        return "the SQLite database"


def _no_rest_in_memory(saver: Any, is_file: bool) -> None:
    """An in-memory (or temporary) database has no other process to let in, and
    this process's threads wait on the saver's lock, which a rest between prune
    steps does not hand over: it only made the prune slower (4,000 threads on
    ``:memory:``: 4.2 s, 2.1 s without). A pause set on the saver is kept."""
    if not is_file and "retention_pause" not in vars(saver):
        saver.retention_pause = 0.0


def _is_file(conn: Any) -> bool:
    try:
        row = conn.execute("PRAGMA database_list").fetchone()
        return bool(row[2])
    except sqlite3.DatabaseError:
        return True
