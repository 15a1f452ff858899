"""Deleting the checkpoints one run stored (``multitask_strategy="rollback"``).

Reuses the retention core's removal step, so blobs, list chunks and writes
are released exactly as ``delete_for_runs`` does, but addresses checkpoints
by id: a run does not need a ``run_id`` in its metadata to be rolled back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Sequence
from typing import Any

from threadloom.checkpoint.storage import retention
from threadloom.checkpoint.storage.ops import ListCheckpoints

__all__ = ["delete_checkpoints_flow"]


def delete_checkpoints_flow(
    codec: Any, thread_id: str, created: Sequence[tuple[str, str]]
) -> Generator[Any, Any, None]:
    """Remove the listed ``(namespace, checkpoint_id)`` of ``thread_id`` with their writes."""
    groups: dict[str, set[str]] = defaultdict(set)
    for ns, cid in created:
        groups[ns].add(cid)
    codec.forget_thread(None)
    for ns, ids in groups.items():
        rows = yield ListCheckpoints(thread_id, ns)
        yield from retention._remove(codec, thread_id, ns, rows, ids)
