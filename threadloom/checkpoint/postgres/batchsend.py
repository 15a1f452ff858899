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

from collections.abc import Generator
from typing import Any

import psycopg

__all__ = ["send_gen"]

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
