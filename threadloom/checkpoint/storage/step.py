"""The ``put_step`` flow: a superstep's pending writes and the checkpoint that
follows, stored by one flow so a backend runs them in one write transaction.

Why: with ``durability="sync"`` every step used to cost two transactions (the
finished tasks' ``put_writes``, then the step's ``put``); on SQLite with
``synchronous=FULL`` each is an fsync, on Postgres a commit and its round
trips. The flow is only the existing :func:`.puts.put_writes_flow` and
:func:`.puts.put_flow` chained in the order the runtime used to call them, so
what is stored is exactly what the separate calls stored.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadloom.checkpoint.storage import puts
from threadloom.checkpoint.storage.values import ValueCodec

__all__ = ["StepWrites", "StepCheckpoint", "put_step_flow", "put_steps_flow"]

Flow = Generator[Any, Any, Any]
StepWrites = tuple[Any, Sequence[tuple[str, Any]], str, str]
"""``(config, writes, task_id, task_path)``: the arguments of one ``put_writes``."""
StepCheckpoint = tuple[Any, Any, Any, Any]
"""``(config, checkpoint, metadata, new_versions)``: the arguments of one ``put``."""


def put_step_flow(
    codec: ValueCodec, writes: Sequence[StepWrites], checkpoint: StepCheckpoint | None
) -> Flow:
    """Each task's writes (in order), then the checkpoint when given.

    A channel that keeps the last value written (``LastValue``) holds the very
    object its task wrote, so the checkpoint would serialize again what the
    writes just did: values serialized for the writes are remembered by object
    (``seen``, this flow only) and the checkpoint reuses their bytes. Only when
    the serializer gives equal bytes for an unchanged object
    (``codec.same_bytes``).

    Returns the checkpoint's config (what ``put`` returns), or None without one.
    """
    seen: dict[int, Any] | None = None
    if checkpoint is not None and writes and codec.same_bytes:
        seen = {}
    for config, task_writes, task_id, task_path in writes:
        yield from puts.put_writes_flow(codec, config, task_writes, task_id, task_path, seen)
    if checkpoint is None:
        return None
    return (yield from puts.put_flow(codec, *checkpoint, seen=seen))


def put_steps_flow(
    codec: ValueCodec, steps: Sequence[tuple[Sequence[StepWrites], StepCheckpoint | None]]
) -> Flow:
    """Several ``put_step``s in order, in one flow: ``durability="async"`` hands the
    saves that queued up behind a slow commit to one transaction (one fsync on
    SQLite FULL for all of them). Returns the last checkpoint's config."""
    out = None
    for writes, checkpoint in steps:
        result = yield from put_step_flow(codec, writes, checkpoint)
        if checkpoint is not None:
            out = result
    return out
