"""A pipelined batch handed to libpq whole and sent in one write.

psycopg's ``cursor.execute()`` in a pipeline queues the statement and then
exchanges with the server at once: a ``poll`` and a ``sendto`` per statement,
and the server woken for each. :func:`send_gen` runs the same steps of
``execute()`` for every statement of a batch (start, convert, prepare or not,
queue), hands them all to libpq, which keeps them in its output buffer, and
then does the exchange once: one write for the batch, and whatever the server
has sent meanwhile is read, so a connection found dead fails here as before
(where a transaction can still be replayed), not at the commit.

It is a psycopg generator, the same for the sync and the async connection:
run it with ``conn.wait(send_gen(...))`` under ``conn.lock``. With a psycopg
that lacks those steps each statement runs its own ``_execute_gen`` whole.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from threadloom.checkpoint.postgres.stmt import Stmt

__all__ = ["pipelined_batch", "send_gen", "shared_cursor"]

_STEPS = ("_start_query", "_convert_query", "_maybe_prepare_gen", "_last_query")
QUIET_STEPS = all(
    hasattr(cls, name) for cls in (psycopg.Cursor, psycopg.AsyncCursor) for name in _STEPS
)
"""Whether this psycopg has the steps :func:`send_gen` runs one by one."""


def send_gen(conn: Any, queued: list[tuple[Any, str, Any]]) -> Generator[Any, Any, None]:
    """Queue ``(cursor, sql, params)`` statements in ``conn``'s pipeline and send them."""
    pipeline = conn._pipeline
    quiet = (
        QUIET_STEPS and hasattr(pipeline, "command_queue") and hasattr(pipeline, "_communicate_gen")
    )
    for cur, sql, args in queued:
        if not quiet:
            yield from cur._execute_gen(sql, args)
            continue
        yield from cur._start_query(sql)
        yield from cur._maybe_prepare_gen(cur._convert_query(sql, args))
        cur._last_query = sql
        yield from conn._prepared.maintain_gen(conn)
    if quiet:
        commands = pipeline.command_queue
        while commands:  # into libpq's output buffer, in order
            commands.popleft()()
        yield from pipeline._communicate_gen()  # one flush, and read what came


def shared_cursor(conn: Any) -> Any:
    """The cursor for a batch's statements whose rows are read at once or never.

    In a pipeline it is kept on the pipeline (one transaction, one user) and
    serves every batch of the transaction: a new cursor per batch cost a few
    microseconds plus, in its fresh transformer, one dumper lookup per
    parameter type, and an optimistic step sends ~3 batches. Outside a
    pipeline each batch gets its own, as before."""
    pipe = conn._pipeline
    if pipe is None:
        return conn.cursor(row_factory=tuple_row)
    cur = getattr(pipe, "_threadloom_cursor", None)
    if cur is None or cur.closed:
        cur = pipe._threadloom_cursor = conn.cursor(row_factory=tuple_row)
    return cur


def pipelined_batch(
    conn: Any, batch: Sequence[Stmt], params: Callable[[Stmt], Any]
) -> tuple[list[Any], list[Any]] | None:
    """``(cursors, [(cursor, sql, params), ...])`` for sending ``batch`` in one
    go (:func:`send_gen`), or None when it cannot be (outside a
    pipeline, or an ``executemany``). A statement whose rows are read gets a
    cursor of its own (see ``PgConnector._send``), the rest share one."""
    if conn._pipeline is None or any(s.fetch == "many" for s in batch):
        return None
    shared = shared_cursor(conn)
    cursors = [
        conn.cursor(row_factory=tuple_row) if s.fetch in ("one", "all") else shared for s in batch
    ]
    return cursors, [(c, s.sql, params(s)) for c, s in zip(cursors, batch)]
