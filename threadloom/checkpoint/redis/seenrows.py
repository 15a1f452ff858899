"""Rows vanished mid-read on Redis (the Postgres twin: postgres/seenrows.py).

A read is several commands, so a ``delete_thread``/``prune`` script can run
between its checkpoint row lookup and its writes or refs lookup; missing
writes read like a checkpoint without pending writes and a missing ref like a
channel that has a version but no value (both normal), so the checkpoint used
to come back without its writes or values. Write rows are deleted only with
their checkpoint row, ref rows only by the script that deletes every
checkpoint row holding them, and the writes lookup (every read sends one, a
warm re-read included) and the refs lookup read the rows the read found again
right after, in the same pipeline (no round trip; one more command; call by
call on a cluster): if they are all still there, so were the writes and refs.
Else :func:`torn` raises :class:`~threadloom.errors.CorruptBlobError` and the
driver runs the read again (storage/drive.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from threadloom.checkpoint.storage.ops import CheckpointRow
from threadloom.errors import CorruptBlobError

__all__ = ["remember", "torn"]


def remember(seen: dict[tuple[str, str], set[str]], rows: Iterable[CheckpointRow]) -> None:
    """Keep the ids of the checkpoint rows a read found, by (thread, namespace)."""
    for row in rows:
        seen.setdefault((row.thread_id, row.checkpoint_ns), set()).add(row.checkpoint_id)


def torn(thread_id: str, found: list[Any]) -> None:
    """Raise when a row the read found was gone after its writes or refs were read."""
    if None in found:
        raise CorruptBlobError(
            "checkpoint deleted while it was read (its refs or writes are gone)",
            thread_id=thread_id,
        )
