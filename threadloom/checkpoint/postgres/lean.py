"""A transaction's closing exchange straight through libpq: statements + Sync in one write.

Most writing transactions of the savers (a put, a put_writes, a whole sync
step) send nothing until they commit: every batch is held back
(:meth:`~.connector.ConnectorBase.hold`) and the commit sends them with the
pipeline's Sync. Through psycopg's pipeline that cost a Pipeline enter and
exit, a cursor, a Transformer and a result object per statement, a queue of
callbacks, and three writes to the socket (the statements, the Sync, a flush
request). Here the held statements are encoded once (psycopg's own
:class:`~psycopg._queries.PostgresQuery` and dumpers, one Transformer per
connection), queued on the ``PGconn`` with the Sync behind them, flushed in
one write, and only the results' statuses are read (nobody reads their rows).

psycopg keeps owning everything else: the connection and its lock, the pool,
transaction status, the prepared-statement cache (``prepare_threshold`` is
honoured through the connection's own cache, so a connection that prepares
nothing prepares nothing here either) and the error classes
(:func:`psycopg.errors.error_from_result`). A connection whose cursors bind
on the client (``ClientCursor``) never comes here (:func:`usable`).

What the caller needs to decide about a failure is in :class:`Outcome`: the
transaction did NOT commit when the Sync never fully left or when a
statement's error came back (the server aborted it before the Sync); any
other loss after the write leaves the outcome unknown.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from psycopg import adapt, pq
from psycopg._preparing import Prepare
from psycopg._queries import _query2pg
from psycopg.errors import OperationalError, ProgrammingError, error_from_result
from psycopg.generators import fetch_many, send

from threadloom.checkpoint.postgres.binarray import binds_on_client
from threadloom.checkpoint.postgres.params import (
    cheap_params,
    typed_slots,
    use_binary_arrays,
    wire_params,
)
from threadloom.checkpoint.postgres.stmt import Stmt

__all__ = ["Outcome", "Query", "encode", "exchange_gen", "leave", "usable"]

_TEXT = pq.Format.TEXT
_FATAL = pq.ExecStatus.FATAL_ERROR
_NO, _SHOULD = Prepare.NO, Prepare.SHOULD
_PIPELINE_SYNC = pq.ExecStatus.PIPELINE_SYNC
_OFF = pq.PipelineStatus.OFF


def usable(conn: Any) -> bool:
    """Whether ``conn`` can commit through :func:`exchange_gen`: it binds
    parameters on the server (a ``ClientCursor`` connection keeps psycopg's
    path, which merges them into the text as its cursors do)."""
    return not binds_on_client(conn)


class Outcome:
    """What an exchange got to: ``sent`` once the whole write (Sync included)
    left; ``aborted`` once a statement's error came back."""

    __slots__ = ("aborted", "sent")

    def __init__(self) -> None:
        self.sent = False
        self.aborted = False

    @property
    def not_committed(self) -> bool:
        """The transaction surely did not commit (safe to replay elsewhere)."""
        return not self.sent or self.aborted


class Query:
    """A statement as psycopg's prepared-statement cache reads it (``query``,
    ``types``), for the calls that need one (see :func:`exchange_gen`)."""

    __slots__ = ("query", "types")

    def __init__(self, query: bytes, types: Any) -> None:
        self.query, self.types = query, types


Encoded = tuple[bytes, Any, Any, Any]  # query, params, types, formats

_parsed: dict[tuple[str, str], tuple[bytes, list[Any], int, bool]] = {}


def _parse(sql: str, encoding: str) -> tuple[bytes, list[Any], int, bool]:
    """``sql`` with ``$n`` placeholders, the formats wanted per parameter,
    their count, and whether a list parameter may need converting
    (:mod:`.params`), parsed once per text (the statement texts are a few
    fixed ones: psycopg's own cache re-encoded and re-hashed the text at
    every call)."""
    parsed = _parsed.get((sql, encoding))
    if parsed is None:
        query, formats, order, parts = _query2pg(sql.encode(encoding), encoding)
        if order is not None:
            raise TypeError("named placeholders are not used by the savers")
        if len(_parsed) >= 512:  # generated texts (list filters) stay bounded
            _parsed.clear()
        arrays = bool(typed_slots(sql))
        parsed = _parsed[sql, encoding] = (query, formats, len(parts) - 1, arrays)
    return parsed


def encode(conn: Any, batch: Sequence[Stmt]) -> list[Encoded]:
    """``batch``'s statements converted and dumped as psycopg's cursors would
    (same dumpers, same OIDs and formats, lists cast to arrays sent as in
    :mod:`.params`). A value psycopg cannot dump raises here, before anything
    is queued on the connection."""
    tx = conn.__dict__.get("_threadloom_tx")
    if tx is None:
        tx = conn.__dict__["_threadloom_tx"] = adapt.Transformer(conn)
    params = wire_params if use_binary_arrays(conn) else cheap_params
    encoding = tx.encoding
    out = []
    for stmt in batch:
        query, formats, n, arrays = _parse(stmt.sql, encoding)
        args = params(stmt) if arrays else stmt.params
        if len(args) != n:
            raise ProgrammingError(
                f"the query has {n} placeholders but {len(args)} parameters were passed"
            )
        if n:
            out.append((query, tx.dump_sequence(args, formats), tx.types, tx.formats))
        else:
            out.append((query, None, (), None))
    return out


def exchange_gen(conn: Any, queries: list[Encoded], out: Outcome) -> Generator[Any, Any, None]:
    """Run ``queries`` and a Sync as one pipeline in one write; raise the
    first statement's error (after the Sync's reply, the connection idle
    again). For ``conn.wait`` (sync) and ``await conn.wait`` (async) alike.

    Prepared statements follow the connection's cache exactly as a cursor's
    execute would (``PrepareManager.get``, ``maybe_add_to_cache``,
    ``validate``); a statement already prepared takes the short way those
    calls take for it (a lookup, moved to the cache's end)."""
    pgconn = conn.pgconn
    prepared = conn._prepared
    names = prepared._names
    unprepared = prepared.prepare_threshold is None
    pending: list[Any] = []  # per result set: (key, prep, name) to validate, or None
    pgconn.enter_pipeline_mode()
    for query, params, types, formats in queries:
        if unprepared:
            name = None
        else:
            name = names.get((query, types))
        if name:
            names.move_to_end((query, types))
            pgconn.send_query_prepared(name, params, param_formats=formats, result_format=_TEXT)
            pending.append(None)
            continue
        pgq = Query(query, types)
        prep, name = prepared.get(pgq)
        if prep is _NO:
            pgconn.send_query_params(
                query, params, param_formats=formats, param_types=types, result_format=_TEXT
            )
        else:
            if prep is _SHOULD:
                pgconn.send_prepare(name, query, param_types=types)
                pending.append(None)
            pgconn.send_query_prepared(name, params, param_formats=formats, result_format=_TEXT)
        key = prepared.maybe_add_to_cache(pgq, prep, name)
        if key is None and prep is _SHOULD:
            # validated like any prepared statement: a PREPARE the server skipped
            # (an earlier statement failed) must drop its name from the cache
            key = (query, types)
        pending.append((key, prep, name) if key is not None else None)
    pgconn.pipeline_sync()
    yield from send(pgconn)
    out.sent = True
    first = None
    for validate in pending:
        results = yield from fetch_many(pgconn)
        for res in results:
            if res.status == _FATAL:
                out.aborted = True
                if first is None:
                    first = res
        if validate is not None:
            prepared.validate(*validate, results)
    first = yield from _sync_reply(pgconn, first)
    out.aborted = out.aborted or first is not None
    pgconn.exit_pipeline_mode()
    if first is not None:
        raise error_from_result(first, encoding=pgconn._encoding)


def _sync_reply(pgconn: Any, first: Any) -> Generator[Any, Any, Any]:
    """Read the Sync's slot up to its PIPELINE_SYNC result: the transaction
    ended there. An error in that slot is the COMMIT failing (a deferred
    constraint, a serialization failure): the server rolled back and is ready
    again, so it is returned as ``first`` (surely not committed) when no
    statement failed before it. Without a PIPELINE_SYNC the outcome is unknown."""
    for _ in range(4):  # an error, its end, then the PIPELINE_SYNC
        results = yield from fetch_many(pgconn)
        for res in results:
            if res.status == _FATAL and first is None:
                first = res
        if results and results[-1].status == _PIPELINE_SYNC:
            return first
    raise OperationalError("the server did not end the pipeline after its Sync")


def leave(conn: Any) -> bool:
    """After an exchange cut short (lost connection, Ctrl-C, a cancel): True
    when the connection is left in pipeline mode with a half-run exchange
    (it must be closed: nobody can read the rest of it)."""
    try:
        return not conn.closed and conn.pgconn.pipeline_status != _OFF
    except Exception:
        return True
