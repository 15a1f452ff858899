"""What the storage driver (:mod:`..storage.drive`) talks to on Postgres.

:class:`PgExecutor` runs each operation's batch (planned by :mod:`.opplans`,
or answered optimistically by :mod:`.optimistic`) on the connector's
transaction, sync or async.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

from threadloom.checkpoint.postgres import generic, optimistic, seenrows, writecounts
from threadloom.checkpoint.postgres.blobplans import adjust
from threadloom.checkpoint.postgres.opplans import Decoder, op_thread, plan
from threadloom.checkpoint.postgres.optimistic import thread_lock_key
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.saveplan import lock_in_first
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage import ops

__all__ = ["PgExecutor", "plan", "thread_lock_key"]


class PgExecutor:
    """The storage driver's executor on Postgres: plan an op, send it, decode it."""

    def __init__(self, connector: Any, sql: SQL) -> None:
        self.connector = connector
        self.sql = sql

    def transaction(self, write: bool) -> Any:
        return self.connector.transaction(write)

    def atransaction(self, write: bool) -> Any:
        return self.connector.atransaction(write)

    def in_transaction(self) -> bool:
        """Whether a flow runs now (a flow run from it joins its transaction)."""
        return self.connector.current.get() is not None

    def optimistic_transaction(self, write: bool) -> AbstractContextManager[None]:
        """A write flow's transaction in which reads a flow needs only for rare
        cases are answered without a round trip (:mod:`.optimistic`); a refused
        one raises :class:`~threadloom.checkpoint.storage.drive.OptimisticConflict`
        and the driver runs the flow again in :meth:`transaction`. The
        connector runs :meth:`_flush_sync` after the flow, inside the
        transaction (one context manager per write instead of two)."""
        return self.connector.transaction(write, optimistic=True, before_commit=self._flush_sync)

    def _flush_sync(self) -> None:
        self._flush(self.connector.execute)

    @asynccontextmanager
    async def aoptimistic_transaction(self, write: bool) -> AsyncIterator[None]:
        """Async twin of :meth:`optimistic_transaction`."""
        async with self.connector.atransaction(write, optimistic=True):
            yield
            tx = self.connector.current.get()
            if tx is not None and tx.optimistic and tx.pending is not None:
                guard = optimistic.flush(tx, plan, self.sql)
                if guard:
                    await self.connector.aexecute(generic.batch(tx, guard))

    def _flush(self, send: Callable[[list[Stmt]], Any]) -> None:
        tx = self.connector.current.get()
        if tx is not None and tx.optimistic and tx.pending is not None:
            guard = optimistic.flush(tx, plan, self.sql)
            if guard:
                send(generic.batch(tx, guard))

    def _prepare(self, op: ops.Op) -> tuple[list[Stmt], Decoder]:
        """The op's statements (the thread lock first when due) and their decoder."""
        tx = self.connector.current.get()
        head: list[Stmt] = []
        if tx is not None and tx.optimistic:
            guess = self._guess(op, tx)
            if guess is not None:
                batch, answer = guess
                return batch, lambda r: answer
            head = optimistic.flush(tx, plan, self.sql)
        counted = None
        if tx is not None and tx.write and not tx.optimistic:
            counted = writecounts.pessimistic(op, self.sql, tx, adjust)
        batch, decode = counted if counted is not None else plan(op, self.sql)
        if not batch and not head:
            return [], decode
        lock = self._thread_lock(op, batch, tx) + head
        if tx is not None and tx.optimistic:
            lock, batch = generic.split(tx, lock, batch, op)
        skip = len(lock)
        return lock + batch, lambda r: decode(r[skip:])

    def _guess(self, op: ops.Op, tx: Any) -> tuple[list[Stmt], Any] | None:
        """An optimistic transaction's (statements, answer) for ``op``, or None
        when it needs a real answer (:func:`.optimistic.plan`)."""
        guess = optimistic.plan(op, self.sql, tx, plan)
        if guess is not None and guess[0]:  # (a read answered from nothing locks nothing yet)
            batch = guess[0]
            return generic.batch(tx, self._thread_lock(op, batch, tx) + batch, op), guess[1]
        return guess

    def execute(self, op: ops.Op) -> Any:
        tx = self.connector.current.get()
        if tx is not None and tx.optimistic:  # the usual write: answered without asking
            guess = self._guess(op, tx)
            if guess is not None:
                batch, answer = guess
                if batch and self.connector.hold(tx, batch) is None:
                    self.connector.execute(batch)
                return answer
        batch, decode = self._planned(op)
        return decode(self.connector.execute(batch) if batch else [])

    async def aexecute(self, op: ops.Op) -> Any:
        tx = self.connector.current.get()
        if tx is not None and tx.optimistic:  # the sync twin's fast path
            guess = self._guess(op, tx)
            if guess is not None:
                batch, answer = guess
                if batch and self.connector.hold(tx, batch) is None:
                    await self.connector.aexecute(batch)
                return answer
        batch, decode = self._planned(op)
        return decode(await self.connector.aexecute(batch) if batch else [])

    def _planned(self, op: ops.Op) -> tuple[list[Stmt], Decoder]:
        tx = self.connector.current.get()
        if tx is not None and not tx.write and not tx.snapshot:  # reads may tear
            return seenrows.watched(tx, op, self.sql, self._prepare)
        batch, decode = self._prepare(op)
        if type(op) is ops.LoadWrites or type(op) is ops.SaveWrites:  # task rows (seenrows.py)
            decode = seenrows.remembering(self.sql, op, decode)
        return batch, decode

    def _thread_lock(self, op: ops.Op, batch: list[Stmt], tx: Any) -> list[Stmt]:
        """In a writing transaction, the first operation on a thread takes a
        transaction-scoped advisory lock on it (pipelined: no extra round trip).

        Writers of one thread then run one after the other, so retention (which
        decides what is unused from what it read) never deletes a ref that a
        concurrent put or fork of the same thread has just started to use.
        A put that sends blobs takes it in its blob insert instead (one
        statement less, see :func:`.saveplan.lock_in_first`).
        """
        thread_id = op_thread(op)
        if tx is None or not tx.write or thread_id is None or thread_id in tx.locked:
            return []
        tx.locked.add(thread_id)
        key = thread_lock_key(self.sql, thread_id)
        if optimistic.lock_first(batch, key):
            return []
        if isinstance(op, ops.SaveCheckpoint) and lock_in_first(batch, self.sql, key):
            return []
        return [Stmt("SELECT pg_advisory_xact_lock(%s)", (key,))]

    def run_batches(self, flow: Generator[list[Stmt], list[Any], Any]) -> Any:
        """Drive a flow of raw SQL batches (setup) in one writing transaction."""
        with self.connector.transaction(True):
            result: Any = None
            while True:
                try:
                    batch = flow.send(result)
                except StopIteration as stop:
                    return stop.value
                result = self.connector.execute(batch)

    async def arun_batches(self, flow: Generator[list[Stmt], list[Any], Any]) -> Any:
        """Async twin of :meth:`run_batches`."""
        async with self.connector.atransaction(True):
            result: Any = None
            while True:
                try:
                    batch = flow.send(result)
                except StopIteration as stop:
                    return stop.value
                result = await self.connector.aexecute(batch)
