"""Async twin of :mod:`.connection`: the same transactions on psycopg's async API.

Every decision (retry or not, pipeline or not, error wording, replay check)
lives in :class:`~threadloom.checkpoint.postgres.connector.ConnectorBase`;
this module only awaits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncPipeline, pq
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from threadloom.checkpoint.postgres import lean
from threadloom.checkpoint.postgres.batchsend import pipelined_batch, send_gen, shared_cursor
from threadloom.checkpoint.postgres.checkout import alive_from_pool
from threadloom.checkpoint.postgres.connector import (
    BEGIN_SNAPSHOT,
    DISCARD,
    SEND,
    SNAPSHOT_SQL,
    ConnectorBase,
)
from threadloom.checkpoint.postgres.health import is_dead
from threadloom.checkpoint.postgres.params import cheap_params, use_binary_arrays, wire_params
from threadloom.checkpoint.postgres.pool import connect_kwargs
from threadloom.checkpoint.postgres.settle import settle
from threadloom.checkpoint.postgres.stmt import Stmt, Tx
from threadloom.checkpoint.storage.drive import OptimisticConflict, snapshot_wanted

_IDLE = pq.TransactionStatus.IDLE

__all__ = ["AsyncPgConnector"]


class AsyncPgConnector(ConnectorBase):
    """Runs transactions on an AsyncConnection, AsyncConnectionPool or AsyncPipeline."""

    _pool_type = AsyncConnectionPool
    _pipe_type = AsyncPipeline

    def __init__(self, conn: Any, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self.lock = asyncio.Lock()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        if self.is_pool:
            self.check_open()
            async with alive_from_pool(self.conn) as conn:
                yield conn
            return
        async with self.lock:
            self.check_open()  # after the lock: a close waits for it too (aclose)
            if self.owns_single and is_dead(self.conn):
                await self.conn.close()
                self.conn = await AsyncConnection.connect(
                    self.url, **connect_kwargs(self.prepare_threshold)
                )
            yield self.conn

    async def _open(self, tx: Tx, lazy: bool = False) -> None:
        """The sync twin's ``_open`` (``lazy``: see there)."""
        tx.lazy = False
        for attempt in (0, 1):
            stack = AsyncExitStack()
            try:
                conn = await stack.enter_async_context(self._connection())
                tx.conn, tx.stack = conn, stack
                pipelined, mode = self.plan(conn, tx.write, tx.snapshot)
                tx.optimistic = tx.optimistic and mode == "sql"
                tx.lazy = lazy and mode == "sql" and lean.usable(conn)
                if tx.lazy:  # the rest, if at all, in _enter
                    return
                stack.push_async_callback(
                    self._asettle, conn, tx, conn._pipeline
                )  # before it is given back
                if mode in ("sql", "snapshot"):  # on failure: ROLLBACK after the pipeline
                    stack.push_async_callback(arollback_if_open, conn)
                if pipelined:
                    await stack.enter_async_context(conn.pipeline())
                    tx.pipeline = conn._pipeline
                if mode == "psycopg":
                    await stack.enter_async_context(conn.transaction())
                    if tx.snapshot:
                        await conn.execute(SNAPSHOT_SQL)
                elif mode == "sql":
                    stack.push_async_exit(aabort_implicit(conn))
                elif mode == "snapshot":
                    await conn.execute(BEGIN_SNAPSHOT)
                    stack.push_async_exit(aabort_implicit(conn, commit=True))
                return
            except (psycopg.Error, PoolTimeout) as exc:
                await self._discard(tx, exc)
                if attempt or not self.retryable(exc):
                    raise self.error(exc) from exc
            except BaseException as exc:  # a cancel while opening: give the connection back
                tx.stack = stack
                await self._discard(tx, exc)
                raise

    async def _asettle(self, conn: AsyncConnection, tx: Tx, before: Any) -> None:
        if settle(conn, tx, before):
            await conn.close()

    async def _discard(self, tx: Tx, exc: BaseException) -> None:
        conn, stack = tx.conn, tx.stack
        tx.conn = tx.stack = None
        try:
            if stack is not None:
                pipe = conn._pipeline if conn is not None else None
                if pipe is not None and conn.pgconn.pipeline_status == pq.PipelineStatus.ABORTED:
                    await _drain(pipe)  # else its exit logs "error ignored terminating ..."
                await stack.__aexit__(type(exc), exc, exc.__traceback__)
        except Exception:
            pass  # rolling back on a dead connection fails; the server rolled back anyway
        if conn is not None and self.owns_single and (conn.closed or conn.broken):
            await conn.close()

    @asynccontextmanager
    async def atransaction(self, write: bool, optimistic: bool = False) -> AsyncIterator[None]:
        """One transaction for a whole flow (the sync twin's ``transaction``)."""
        if self.current.get() is not None:
            yield
            return
        snapshot = not write and (self.snapshot_reads or snapshot_wanted())
        tx = Tx(write, optimistic=optimistic, snapshot=snapshot)
        await self._open(tx, lazy=True)
        token = self.current.set(tx)
        try:
            yield
            if tx.lazy:
                await self._commit(tx)
            elif self.queued.get(id(tx)):
                await self.aexecute(())  # what is still queued goes before the commit
        except BaseException as exc:
            await self._discard(tx, exc)
            raise
        finally:
            self.current.reset(token)
            self.queued.pop(id(tx), None)
        try:
            await tx.stack.aclose()  # pipeline Sync (commits) or COMMIT
        except (psycopg.Error, PoolTimeout) as exc:
            await self._discard(tx, exc)
            if self.refused(tx, exc):
                raise OptimisticConflict(frozenset(tx.locked)) from exc
            raise self.error(exc, committing=True) from exc
        if self.pipe is not None and write:
            await self.pipe.sync()

    async def aexecute(self, batch: Sequence[Stmt]) -> list[Any]:
        """Run one batch in the current transaction; replay it all if the connection died.

        In a pipeline a batch whose results nobody reads is held back
        (:meth:`~ConnectorBase.hold`) and sent with the next one."""
        tx = self.current.get()
        if tx is None:
            async with self.atransaction(write=False):
                return await self.aexecute(batch)
        held = self.hold(tx, batch)
        if held is not None:
            return held
        queued = self.take_held(tx)
        try:
            if tx.lazy:  # an answer is needed before the commit: psycopg's pipeline
                await self._enter(tx)
            results = (await self._send(tx.conn, [*queued, *batch]))[len(queued) :]
        except (psycopg.Error, PoolTimeout) as exc:
            results = await self._run_steps(tx, self.recover(tx, batch, exc))
        tx.log.append((batch, results))
        return results

    async def _enter(self, tx: Tx) -> None:
        """The sync twin's ``_enter``."""
        tx.lazy = False
        conn, stack = tx.conn, tx.stack
        stack.push_async_callback(self._asettle, conn, tx, None)
        stack.push_async_callback(arollback_if_open, conn)
        await stack.enter_async_context(conn.pipeline())
        tx.pipeline = conn._pipeline
        stack.push_async_exit(aabort_implicit(conn))

    async def _commit(self, tx: Tx) -> None:
        """The sync twin's ``_commit``: held statements and the Sync in one write."""
        queued = self.take_held(tx)
        if not queued:
            return
        conn, out = tx.conn, lean.Outcome()
        try:
            await self._send_lean(conn, queued, out)
        except psycopg.Error as exc:
            if lean.leave(conn):
                await conn.close()
            if not out.not_committed:
                raise self.error(exc, committing=True) from exc
            await self._run_steps(tx, self.recover(tx, (), exc))  # replayed: the Sync commits
        except BaseException:
            if lean.leave(conn):
                await conn.close()
            raise

    @staticmethod
    async def _send_lean(conn: AsyncConnection, batch: Sequence[Stmt], out: lean.Outcome) -> None:
        """Run ``batch`` and commit, in one write (:mod:`.lean`)."""
        queries = lean.encode(conn, batch)
        async with conn.lock:
            await conn.wait(lean.exchange_gen(conn, queries, out))

    async def _run_steps(
        self, tx: Tx, steps: Generator[tuple[str, Any], Any, list[Any]]
    ) -> list[Any]:
        """Run :meth:`~ConnectorBase.recover`'s steps (the sync twin's ``_run_steps``)."""
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                step, arg = steps.send(reply) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value
            reply = error = None
            try:
                if step == SEND:
                    reply = await self._send(tx.conn, arg)
                elif step == DISCARD:
                    await self._discard(tx, arg)
                else:
                    await self._open(tx)
            except (psycopg.Error, PoolTimeout) as exc:
                error = exc

    @staticmethod
    async def _send(conn: AsyncConnection, batch: Sequence[Stmt]) -> list[Any]:
        """Run ``batch`` (cursor use as in the sync twin's ``_send``).

        In a pipeline every statement of the batch is queued in one wait on the
        connection (:func:`_queue_all`) instead of one ``await cur.execute()``
        each: each of those took psycopg's connection lock and set up its own
        wait, an await layer per statement that the sync twin does not pay."""
        params = wire_params if use_binary_arrays(conn) else cheap_params
        planned = pipelined_batch(conn, batch, params)
        if planned is not None:
            cursors, queued = planned
            await _queue_all(conn, queued)
            return [await _result(cur, stmt) for cur, stmt in zip(cursors, batch)]
        shared = shared_cursor(conn)
        pipelined = conn._pipeline is not None
        cursors, results = [], []
        for stmt in batch:
            cur = shared
            if pipelined and stmt.fetch in ("one", "all"):
                cur = conn.cursor(row_factory=tuple_row)
            if stmt.fetch != "many":
                await cur.execute(stmt.sql, params(stmt))
            elif stmt.params:
                await cur.executemany(stmt.sql, stmt.params)
            if pipelined:
                cursors.append(cur)
            else:
                results.append(await _result(cur, stmt))
        if pipelined:
            results = [await _result(cur, stmt) for cur, stmt in zip(cursors, batch)]
        return results

    async def aclose(self) -> None:
        """Close the connection or pool, only if the saver opened it (a single
        connection under the lock, as the sync twin: closed under a transaction
        another task is in, its commit failed with "lost the connection" and a
        lease it was taking could stay for the TTL)."""
        if self.url is None:
            return
        if self.is_pool:
            await self.conn.close()
            return
        async with self.lock:
            await self.conn.close()


async def _queue_all(conn: AsyncConnection, queued: list[tuple[Any, str, Any]]) -> None:
    """Queue ``(cursor, sql, params)`` statements in the connection's pipeline
    under one hold of its lock and one wait, and send them in one write
    (:mod:`.batchsend`)."""
    async with conn.lock:
        await conn.wait(send_gen(conn, queued))


async def _result(cur: Any, stmt: Stmt) -> Any:
    if stmt.fetch == "one":
        return await cur.fetchone()
    if stmt.fetch == "all":
        return await cur.fetchall()
    return None


def aabort_implicit(conn: Any, commit: bool = False) -> Any:
    """Async twin of :func:`~threadloom.checkpoint.postgres.connection.abort_implicit`."""

    async def exit_(exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None and commit:
            await conn.execute("COMMIT")
        elif exc_type is not None and not conn.closed:
            try:
                await conn.execute("ROLLBACK")
            except Exception:
                pass  # the pipeline is aborted already: the Sync rolls back
        return False

    return exit_


async def arollback_if_open(conn: Any) -> None:
    """Async twin of :func:`~threadloom.checkpoint.postgres.connection.rollback_if_open`."""
    if conn.closed or conn.pgconn.transaction_status == _IDLE:
        return
    try:
        await conn.execute("ROLLBACK")
    except psycopg.Error:
        pass


async def _drain(pipe: AsyncPipeline) -> None:
    """Async twin of :func:`.connection._drain`: sync an aborted pipeline before
    leaving it, so psycopg does not log its "pipeline aborted" as a warning."""
    try:
        await pipe.sync()
    except psycopg.Error:
        pass
