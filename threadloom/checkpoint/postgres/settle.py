"""Giving a connection back in the state it was taken: psycopg's pipeline
enter and exit are not cancel-safe (see :func:`settle`)."""

from __future__ import annotations

from typing import Any

import psycopg

from threadloom.checkpoint.postgres.stmt import Tx

__all__ = ["settle"]


def settle(conn: Any, tx: Tx, before: Any) -> bool:
    """Before a connection is given back: leave no pipeline a cancel cut off;
    True when the connection must be closed instead.

    psycopg's pipeline enter and exit are not cancel-safe. The enter
    switches libpq to pipeline mode (no I/O) and may then yield to the
    loop once; a cancel landing there leaves the connection in pipeline
    mode with nobody to exit it, and every later transaction on it ran
    inside that pipeline (writes neither pipelined nor optimistic, one
    nesting level more per such cancel, autocommit reads left in an
    implicit transaction holding their locks until some later Sync).
    Nothing was sent in it: leaving pipeline mode repairs it. A cancel on
    the exit's first yield leaves its Sync unsent and the generator
    suspended: psycopg leaves pipeline mode anyway, the server's implicit
    transaction stays open with its locks until whatever the connection
    runs next commits it along, and the generator, closed by the garbage
    collector later, sends a flush on that connection (and warns
    "generator ignored GeneratorExit"). Such a connection (any leftover we
    cannot name) is closed: the server rolls the transaction back, a pool
    replaces the connection, a single one we own reconnects; its pipeline's
    queues are emptied so the suspended generator ends without I/O.
    ``before``: the pipeline the connection was already in (a caller's);
    then nothing here is ours to settle."""
    entered, tx.pipeline = tx.pipeline, None
    pipeline = conn._pipeline
    if before is not None or conn.closed:
        return False
    if pipeline is None and not (entered and (entered.result_queue or entered.command_queue)):
        return False  # the usual way: our pipeline exited, every reply read
    if pipeline is not None and entered is None and _just_entered(pipeline):
        try:
            conn.pgconn.exit_pipeline_mode()
        except psycopg.Error:
            pass
        else:
            pipeline.level, conn._pipeline = 0, None
            return False
    for pipe in (pipeline, entered):
        if pipe is not None:
            pipe.command_queue.clear()
            pipe.result_queue.clear()
    return True


def _just_entered(pipeline: Any) -> bool:
    """A pipeline entered once and never used: nothing sent, nothing queued."""
    return pipeline.level == 1 and not (pipeline.command_queue or pipeline.result_queue)
