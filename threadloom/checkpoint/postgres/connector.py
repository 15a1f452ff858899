"""What the sync and async Postgres connectors share: no I/O, only decisions.

:class:`ConnectorBase` decides how a transaction is delimited on a connection,
which failures are a refusal (rerun pessimistically), which are retryable (a
lost connection, a deadlock: reopen and replay once) and what the caller sees
otherwise. :mod:`.connection` (sync) and :mod:`.aconnection` (async) do the I/O.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextvars import ContextVar
from typing import Any

import psycopg
from psycopg import Pipeline, pq
from psycopg_pool import ConnectionPool, PoolTimeout

from threadloom.checkpoint.postgres.checkout import pass_dead_to_checkout
from threadloom.checkpoint.postgres.health import (
    describe_target,
    is_connection_lost,
    storage_error,
)
from threadloom.checkpoint.postgres.stmt import Stmt, Tx
from threadloom.checkpoint.storage.drive import OptimisticConflict
from threadloom.errors import SaverClosedError, StorageError

__all__ = ["ConnectorBase", "CONFLICT_MARK", "is_conflict"]

RETRY_STATES = {"40P01", "40001"}  # deadlock_detected, serialization_failure
SEND, DISCARD, OPEN = "send", "discard", "open"  # the steps of ConnectorBase.recover


def in_caller_transaction(conn: Any) -> bool:
    """Whether the caller has a transaction open (or a ``transaction()`` block
    whose BEGIN is not sent yet) that our work must join."""
    if getattr(conn, "_num_transactions", 0):
        return True
    return conn.pgconn.transaction_status != _IDLE


_IDLE = pq.TransactionStatus.IDLE
_can_pipeline: list[bool] = []


def use_pipeline(conn: Any, want: bool) -> bool:
    """Pipeline a batch when libpq can and the connection is not already in one."""
    if not want or conn._pipeline is not None:
        return False
    if not _can_pipeline:  # the libpq loaded does not change
        _can_pipeline.append(psycopg.Capabilities().has_pipeline())
    return _can_pipeline[0]


class ConnectorBase:
    """What the sync and async connectors share: no I/O, only decisions.

    Args:
        conn: what to run on. A single connection is used under a lock (one
            transaction at a time); a pool hands out one connection per transaction.
        pipe: a caller's open pipeline on ``conn``; it is synced after writes.
        url: set when the saver opened ``conn`` itself, so it may reconnect.
        prepare_threshold: used when reconnecting.
        pipeline: also pipeline reads (writes are pipelined anyway).
        schema: named in the "call setup()" error.
    """

    _pool_type: type = ConnectionPool
    _pipe_type: type = Pipeline
    snapshot_reads = False  # True: every read flow in one REPEATABLE READ snapshot

    @property
    def torn_reads(self) -> bool:
        """Autocommit reads see one snapshot per statement: the driver re-runs a
        torn one in a snapshot (storage/rereads.py)."""
        return not self.snapshot_reads

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
        if self.is_pool:  # its own check must not sleep on dead connections (checkout)
            pass_dead_to_checkout(conn)
        self.target = describe_target(url or (conn.conninfo if self.is_pool else conn))
        self.current: ContextVar[Tx | None] = ContextVar(
            f"threadloom_pg_tx_{id(self)}", default=None
        )
        self.queued: dict[int, list[Stmt]] = {}  # per open Tx (by id): see hold
        # the saver's class name once it closed the connection or pool it opened:
        # no transaction reconnects (a connection nobody would close) after that
        self.closed: str | None = None

    def check_open(self) -> None:
        """Refuse a transaction once the saver closed what it opened (a run in
        another thread that passed the saver's own check just before the close)."""
        if self.closed is not None:
            raise SaverClosedError(self.closed)

    def hold(self, tx: Tx, batch: Sequence[Stmt]) -> list[Any] | None:
        """Hold back a pipelined batch whose results nobody reads: it is sent with
        the next batch that needs an answer (:meth:`take_held`), or before the
        commit, so a step's statements leave in one exchange instead of one per
        batch. Nothing is lost by waiting: a server-side error of a pipelined
        statement surfaces at a later fetch or at the Sync anyway; a client-side
        one (a value psycopg cannot dump, e.g. a NUL byte in text) now surfaces
        at that later send instead of this call, and fails the transaction all
        the same. The log replays held batches in order like any other batch.
        Returns its results, or None when the batch must be sent now."""
        if not batch or (not tx.lazy and tx.conn._pipeline is None):
            return None
        for stmt in batch:
            if stmt.fetch != "none":
                return None
        queued = self.queued.get(id(tx))
        if queued is None:
            self.queued[id(tx)] = list(batch)
        else:
            queued.extend(batch)
        results: list[Any] = [None] * len(batch)
        tx.log.append((batch, results))
        return results

    def take_held(self, tx: Tx) -> Sequence[Stmt]:
        """The statements :meth:`hold` kept back for ``tx``, to send first."""
        return self.queued.pop(id(tx), ())

    @property
    def can_reconnect(self) -> bool:
        """A pool replaces dead connections; a connection we opened can be reopened."""
        return self.is_pool or self.owns_single

    @property
    def owns_single(self) -> bool:
        return not self.is_pool and self.url is not None and self.pipe is None

    def plan(self, conn: Any, write: bool, snapshot: bool = False) -> tuple[bool, str]:
        """(pipelined, how to delimit the transaction) on ``conn``.

        ``"sql"``: the pipeline's implicit transaction, committed by its
        closing Sync (psycopg's ``transaction()`` would add a BEGIN, a COMMIT
        and a sync of its own at each end).
        ``"psycopg"``: ``conn.transaction()``, which also nests as a SAVEPOINT
        inside a caller's transaction. ``""``: autocommit reads.
        ``"snapshot"``: a read re-run after it tore, on an autocommit
        connection: BEGIN REPEATABLE READ READ ONLY rides with its first
        statement, COMMIT with the Sync (elsewhere ``"psycopg"`` runs
        :data:`SNAPSHOT_SQL` first; a caller's open transaction is joined).
        """
        caller_tx = in_caller_transaction(conn)
        if snapshot and not write and not caller_tx:
            return use_pipeline(conn, True), "snapshot" if conn.autocommit else "psycopg"
        pipelined = not caller_tx and use_pipeline(conn, write or self.pipeline)
        if not write and (conn.autocommit or caller_tx):
            return pipelined, ""
        if pipelined and conn.autocommit and self.pipe is None:
            return True, "sql"
        return pipelined, "psycopg"

    def error(self, exc: BaseException, committing: bool = False) -> StorageError:
        if committing and is_connection_lost(exc):
            err = StorageError(
                f"lost the connection to {self.target} while committing: the last write "
                "may or may not be stored; read the thread back before retrying"
            )
            err.__cause__ = exc
            return err
        return storage_error(exc, self.target, self.schema)

    def retryable(self, exc: BaseException, tx: Tx | None = None) -> bool:
        """A lost connection (when we can get another) or a transaction the server
        aborted to break a deadlock / serialization conflict: replay it."""
        if getattr(exc, "sqlstate", None) in RETRY_STATES:
            return True
        conn = tx.conn if tx is not None else None
        return self.can_reconnect and is_connection_lost(exc, conn)

    def refused(self, tx: Tx, exc: BaseException) -> bool:
        """Whether ``exc`` ends an optimistic transaction that may simply run again
        pessimistically: its validation failed, or the server aborted it (at
        commit every statement of an optimistic run executes at once)."""
        if not tx.optimistic:
            return False
        return getattr(exc, "sqlstate", None) in RETRY_STATES or is_conflict(exc)

    def recover(
        self, tx: Tx, batch: Sequence[Stmt], exc: BaseException
    ) -> Generator[tuple[str, Any], Any, list[Any]]:
        """What follows a failed send of ``batch`` (``exc``), for both twins: the
        steps to run, yielded as ``(SEND, statements)`` (send back the results),
        ``(DISCARD, exc)`` and ``(OPEN, None)``; a psycopg error of a step is
        thrown back in. Returns ``batch``'s results after a replay.

        An optimistic transaction the server refused, at the first send or
        while replaying, is left and raises
        :class:`~threadloom.checkpoint.storage.drive.OptimisticConflict` (the
        driver reruns the flow pessimistically). A lost connection or a
        transaction the server aborted is reopened and what it ran replayed,
        once; anything else is a StorageError."""
        replaying = False
        while True:
            if self.refused(tx, exc):
                yield DISCARD, exc
                raise OptimisticConflict(frozenset(tx.locked)) from exc
            if replaying or not self.retryable(exc, tx):
                raise self.error(exc) from exc
            yield DISCARD, exc
            replaying = True
            try:
                yield OPEN, None
                for done, expected in tx.log:
                    self.check_replay(expected, (yield SEND, done))
                return (yield SEND, batch)
            except (psycopg.Error, PoolTimeout) as again:
                exc = again

    def check_replay(self, expected: list[Any], got: list[Any]) -> None:
        if expected != got:
            raise StorageError(
                f"lost the connection to {self.target} mid-operation and the data changed "
                "before it could be replayed; nothing was written, retry the call"
            )


BEGIN_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
SNAPSHOT_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
"""How a read re-run after it tore starts (storage/rereads.py): every statement
of the transaction then sees one snapshot (what is missing there is corrupt)."""

CONFLICT_MARK = "threadloom:optimistic-retry"
"""The text an optimistic statement casts to an integer to fail the transaction
(SQLSTATE 22P02, the text quoted in the message) when its guess was wrong."""


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is an optimistic statement refusing its transaction."""
    return getattr(exc, "sqlstate", None) == "22P02" and CONFLICT_MARK in str(exc)
