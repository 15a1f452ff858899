"""Getting a PostgreSQL connection, running a batch of statements, mapping failures.

The savers never hold session state: every transaction runs on whatever
connection the pool (or the single connection) hands out, statements are not
prepared unless asked (``prepare_threshold``), and nothing survives between
transactions. That is what makes them safe behind PgBouncer-style transaction
poolers.

The storage core runs each flow in one transaction (``transaction(write)``),
one batch of :class:`~.stmt.Stmt` per operation (:mod:`.stmt`; the arguments of
the connections and pools a saver opens itself are in :mod:`.pool`). Writing transactions are pipelined
when libpq supports it: statements whose result nobody needs travel together
with the next one that needs an answer, or with the commit. On an autocommit
connection the transaction is the pipeline's implicit one: no BEGIN or COMMIT
statement is sent, the closing Sync commits it (a ROLLBACK is queued before
that Sync when the flow fails), so a put costs its statements plus one Sync.

psycopg's per-statement work is kept small: one cursor per transaction for
the statements whose rows nobody reads, and list parameters cast to an array type
(``%s::bytea[]``) travel as one array literal instead of through psycopg's
element-by-element list dumper (:mod:`.params`).

When the connection turns out to be dead (``pg_terminate_backend``, a
restarted server, an idle timeout) and the saver can get another one (a pool,
or a connection it opened itself), the transaction is reopened on a fresh
connection and the batches already run in it are replayed; if a replayed read
returns something different, the operation fails instead of guessing. A
connection lost while committing is reported (the outcome is unknown), never
retried blindly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
from psycopg import Connection, Pipeline, pq
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool, PoolTimeout

from threadloom.checkpoint.postgres import lean
from threadloom.checkpoint.postgres.batchsend import pipelined_batch, send_gen, shared_cursor
from threadloom.checkpoint.postgres.checkout import live_from_pool
from threadloom.checkpoint.postgres.connector import (
    BEGIN_SNAPSHOT,
    CONFLICT_MARK,
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

# ConnectorBase and CONFLICT_MARK live in .connector; named here for older imports
_IDLE = pq.TransactionStatus.IDLE

__all__ = ["CONFLICT_MARK", "ConnectorBase", "PgConnector", "is_dead"]


def abort_implicit(conn: Any, commit: bool = False) -> Callable[..., bool]:
    """An exit callback for the "sql" mode: when the flow fails, queue a ROLLBACK
    before the pipeline's closing Sync, which would otherwise commit what the
    flow already sent (inside an implicit transaction ROLLBACK aborts it).
    ``commit`` ("snapshot" mode's explicit BEGIN): queue a COMMIT on success."""

    def exit_(exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None and commit:
            conn.execute("COMMIT")
        elif exc_type is not None and not conn.closed:
            try:
                conn.execute("ROLLBACK")
            except Exception:
                pass  # the pipeline is aborted already: the Sync rolls back
        return False

    return exit_


def rollback_if_open(conn: Any) -> None:
    """After a failed "sql" transaction: end it before the connection is reused."""
    if conn.closed or conn.pgconn.transaction_status == _IDLE:
        return
    try:
        conn.execute("ROLLBACK")
    except psycopg.Error:
        pass  # a broken connection is discarded by its owner anyway


def statement_result(cur: Any, stmt: Stmt) -> Any:
    """Fetch what ``stmt`` asked for (waits only for "one"/"all")."""
    if stmt.fetch == "one":
        return cur.fetchone()
    if stmt.fetch == "all":
        return cur.fetchall()
    return None


class PgConnector(ConnectorBase):
    """Runs transactions on a Connection, a ConnectionPool or a Pipeline (sync)."""

    def __init__(self, conn: Connection | ConnectionPool | Pipeline, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self.lock = threading.RLock()

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        if self.is_pool:
            self.check_open()
            with live_from_pool(self.conn) as conn:
                yield conn
            return
        with self.lock:
            self.check_open()  # after the lock: a close waits for it too (close)
            if self.owns_single and is_dead(self.conn):
                self.conn.close()
                self.conn = Connection.connect(self.url, **connect_kwargs(self.prepare_threshold))
            yield self.conn

    def _open(self, tx: Tx, lazy: bool = False) -> None:
        """Acquire a connection and begin; one retry if the connection is dead.

        ``lazy``: a transaction delimited by the pipeline's Sync ("sql") enters
        no pipeline yet; it may commit through :mod:`.lean` (see :meth:`_commit`)."""
        tx.lazy = False
        for attempt in (0, 1):
            stack = ExitStack()
            try:
                conn = stack.enter_context(self._connection())
                tx.conn, tx.stack = conn, stack
                pipelined, mode = self.plan(conn, tx.write, tx.snapshot)
                tx.optimistic = tx.optimistic and mode == "sql"
                tx.lazy = lazy and mode == "sql" and lean.usable(conn)
                if tx.lazy:  # the rest, if at all, in _enter
                    return
                stack.callback(self._settle, conn, tx, conn._pipeline)  # before it is given back
                if mode in ("sql", "snapshot"):  # on failure: ROLLBACK after the pipeline
                    stack.callback(rollback_if_open, conn)
                if pipelined:
                    stack.enter_context(conn.pipeline())
                    tx.pipeline = conn._pipeline
                if mode == "psycopg":
                    stack.enter_context(conn.transaction())
                    if tx.snapshot:
                        conn.execute(SNAPSHOT_SQL)
                elif mode == "sql":
                    stack.push(abort_implicit(conn))
                elif mode == "snapshot":
                    conn.execute(BEGIN_SNAPSHOT)
                    stack.push(abort_implicit(conn, commit=True))
                return
            except (psycopg.Error, PoolTimeout) as exc:
                self._discard(tx, exc)
                if attempt or not self.retryable(exc):
                    raise self.error(exc) from exc
            except BaseException as exc:  # e.g. KeyboardInterrupt while opening: give it back
                tx.stack = stack
                self._discard(tx, exc)
                raise

    def _settle(self, conn: Connection, tx: Tx, before: Any) -> None:
        if settle(conn, tx, before):
            conn.close()

    def _discard(self, tx: Tx, exc: BaseException) -> None:
        """Leave a failed transaction; a dead connection we own is closed."""
        conn, stack = tx.conn, tx.stack
        tx.conn = tx.stack = None
        try:
            if stack is not None:
                pipe = conn._pipeline if conn is not None else None
                if pipe is not None and conn.pgconn.pipeline_status == pq.PipelineStatus.ABORTED:
                    _drain(pipe)  # else its exit logs "error ignored terminating ... aborted"
                stack.__exit__(type(exc), exc, exc.__traceback__)
        except Exception:
            pass  # rolling back on a dead connection fails; the server rolled back anyway
        if conn is not None and self.owns_single and (conn.closed or conn.broken):
            conn.close()

    @contextmanager
    def transaction(
        self, write: bool, optimistic: bool = False, before_commit: Callable[[], Any] | None = None
    ) -> Iterator[None]:
        """One transaction for a whole flow (the storage driver's interface).

        ``optimistic``: the executor may answer reads without asking (only in
        the saver's own pipelined transactions; joined ones never are); a
        refused one raises :class:`~..storage.drive.OptimisticConflict`.
        ``before_commit``: run after the body, inside the transaction (the
        executor's last statements of an optimistic one).
        """
        if self.current.get() is not None:
            yield  # already inside one (a flow run from a flow): join it
            if before_commit is not None:
                before_commit()
            return
        snapshot = not write and (self.snapshot_reads or snapshot_wanted())
        tx = Tx(write, optimistic=optimistic, snapshot=snapshot)
        self._open(tx, lazy=True)
        token = self.current.set(tx)
        try:
            yield
            if before_commit is not None:
                before_commit()
            if tx.lazy:
                self._commit(tx)
            elif self.queued.get(id(tx)):
                self.execute(())  # what is still held back goes before the commit
        except BaseException as exc:
            self._discard(tx, exc)
            raise
        finally:
            self.current.reset(token)
            self.queued.pop(id(tx), None)
        try:
            tx.stack.close()  # pipeline Sync (commits) or COMMIT, connection back to the pool
        except (psycopg.Error, PoolTimeout) as exc:
            self._discard(tx, exc)
            if self.refused(tx, exc):
                raise OptimisticConflict(frozenset(tx.locked)) from exc
            raise self.error(exc, committing=True) from exc
        if self.pipe is not None and write:
            self.pipe.sync()

    def execute(self, batch: Sequence[Stmt]) -> list[Any]:
        """Run one batch in the current transaction; replay it all if the connection died.

        In a pipeline a batch whose results nobody reads is held back
        (:meth:`~ConnectorBase.hold`) and sent with the next one."""
        tx = self.current.get()
        if tx is None:
            with self.transaction(write=False):
                return self.execute(batch)
        held = self.hold(tx, batch)
        if held is not None:
            return held
        queued = self.take_held(tx)
        try:
            if tx.lazy:  # an answer is needed before the commit: psycopg's pipeline
                self._enter(tx)
            results = self._send(tx.conn, [*queued, *batch])[len(queued) :]
        except (psycopg.Error, PoolTimeout) as exc:
            results = self._run_steps(tx, self.recover(tx, batch, exc))
        tx.log.append((batch, results))
        return results

    def _enter(self, tx: Tx) -> None:
        """Enter the pipeline a lazy transaction put off (as :meth:`_open` would have)."""
        tx.lazy = False
        conn, stack = tx.conn, tx.stack
        stack.callback(self._settle, conn, tx, None)
        stack.callback(rollback_if_open, conn)
        stack.enter_context(conn.pipeline())
        tx.pipeline = conn._pipeline
        stack.push(abort_implicit(conn))

    def _commit(self, tx: Tx) -> None:
        """Send what a lazy transaction held back with its Sync, in one write
        (:mod:`.lean`); nothing held back: nothing was sent, nothing to commit.
        A failure that surely did not commit is handled as a failed send
        (refusal, replay, error); after that the outcome is unknown."""
        queued = self.take_held(tx)
        if not queued:
            return
        conn, out = tx.conn, lean.Outcome()
        try:
            self._send_lean(conn, queued, out)
        except psycopg.Error as exc:
            if lean.leave(conn):
                conn.close()
            if not out.not_committed:
                raise self.error(exc, committing=True) from exc
            self._run_steps(tx, self.recover(tx, (), exc))  # replayed: the Sync commits it
        except BaseException:
            if lean.leave(conn):
                conn.close()
            raise

    @staticmethod
    def _send_lean(conn: Connection, batch: Sequence[Stmt], out: lean.Outcome) -> None:
        """Run ``batch`` and commit, in one write (:mod:`.lean`)."""
        queries = lean.encode(conn, batch)
        with conn.lock:
            conn.wait(lean.exchange_gen(conn, queries, out))

    def _run_steps(self, tx: Tx, steps: Generator[tuple[str, Any], Any, list[Any]]) -> list[Any]:
        """Run :meth:`~ConnectorBase.recover`'s steps."""
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
                    reply = self._send(tx.conn, arg)
                elif step == DISCARD:
                    self._discard(tx, arg)
                else:
                    self._open(tx)
            except (psycopg.Error, PoolTimeout) as exc:
                error = exc

    @staticmethod
    def _send(conn: Connection, batch: Sequence[Stmt]) -> list[Any]:
        """Run ``batch``; outside a pipeline each result is read at once, so one
        cursor serves every statement. In a pipeline a statement whose rows are
        read needs a cursor of its own, even the last one: psycopg sets a
        result on its cursor whenever it arrives, and reads a cursor that has
        one without waiting for the rest. In a pipeline the batch is handed
        to libpq whole and leaves in one write (:mod:`.batchsend`)."""
        params = wire_params if use_binary_arrays(conn) else cheap_params
        planned = pipelined_batch(conn, batch, params)
        if planned is not None:
            cursors, queued = planned
            with conn.lock:
                conn.wait(send_gen(conn, queued))
            return [statement_result(cur, stmt) for cur, stmt in zip(cursors, batch)]
        pipelined = conn._pipeline is not None
        shared = shared_cursor(conn)
        cursors, results = [], []
        for stmt in batch:
            cur = shared
            if pipelined and stmt.fetch in ("one", "all"):
                cur = conn.cursor(row_factory=tuple_row)
            if stmt.fetch != "many":
                cur.execute(stmt.sql, params(stmt))
            elif stmt.params:
                cur.executemany(stmt.sql, stmt.params)
            if pipelined:
                cursors.append(cur)
            else:
                results.append(statement_result(cur, stmt))
        if pipelined:
            results = [statement_result(cur, stmt) for cur, stmt in zip(cursors, batch)]
        return results

    def close(self) -> None:
        """Close the connection or pool, only if the saver opened it (a single
        connection under the lock: after a transaction another thread is in)."""
        if self.url is None:
            return
        if self.is_pool:
            self.conn.close()
            return
        with self.lock:
            self.conn.close()


def _drain(pipe: Pipeline) -> None:
    """Sync an aborted pipeline (a failed statement, e.g. an optimistic refusal)
    before leaving it. Its Sync ends the failed transaction, which leaving it
    does too, but psycopg's exit raises "pipeline aborted" for the results
    it skipped and, with the refusal already propagating, logs that as a
    warning a user would see at every refusal."""
    try:
        pipe.sync()
    except psycopg.Error:
        pass  # the same "pipeline aborted" (or the connection is gone): nothing to keep
