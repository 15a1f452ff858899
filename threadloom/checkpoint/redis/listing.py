"""Listing a thread's checkpoints newest first, a page of a sorted set at a time.

A thread keeps two sorted-set indexes of its checkpoints (:mod:`.keys`): ``ck``
by ``ns\\0id`` (one namespace) and ``ids`` by ``id\\0ns`` (every namespace). A
list walks one of them down from the ``before``/``after`` bound and filters
each page by metadata in Python, so a filtered list may take several pages.
Kept apart from the planner because the bounds and paging are their own logic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.checkpoint.redis.fields import SEP, checkpoint_row, row_gone
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import CheckpointRow
from threadloom.checkpoint.storage.rows import metadata_matches

if TYPE_CHECKING:
    from threadloom.checkpoint.redis.executor import Plan, RedisPlanner

__all__ = ["list_thread"]


def list_thread(
    planner: RedisPlanner, thread_id: str, op: ops.ListCheckpoints, touch: bool = True
) -> Plan:
    """Newest first within one thread, paging through the index until enough match.

    ``touch``: re-arm the thread's TTL (a read of that thread); False for a
    listing across threads, which must not keep every thread alive."""
    hi, inclusive = _upper_bound(op.before, op.after)
    ns = op.checkpoint_ns
    if ns is not None:
        zset, low = "ck", f"({ns}{SEP}"
        high = f"({ns}\1" if hi is None else f"{'[' if inclusive else '('}{ns}{SEP}{hi}"
    else:
        zset, low = "ids", "-"
        high = "+" if hi is None else (f"({hi}\1" if inclusive else f"({hi}")
    if op.limit is not None and op.limit <= 0:
        return []
    page = op.limit if op.limit is not None and not op.filter else 64
    rows: list[CheckpointRow] = []
    while True:
        (flat,) = yield [planner.lua("range", thread_id, zset, high, low, page, touch=touch)]
        for member, packed in zip(flat[::2], flat[1::2]):
            fld = member if zset == "ck" else _swap(member)
            if not packed:  # indexed, row gone: never list around it (fields.row_gone)
                raise row_gone(thread_id, fld)
            row = checkpoint_row(thread_id, fld, packed)
            if _wanted(row, op):
                rows.append(row)
        if len(flat) < 2 * page or (op.limit is not None and len(rows) >= op.limit):
            return rows if op.limit is None else rows[: op.limit]
        high = b"(" + flat[-2]


def _swap(member: bytes) -> bytes:
    """``cid\\0ns`` (ids index) -> ``ns\\0cid`` (row field)."""
    cid, _, ns = member.partition(b"\0")
    return ns + b"\0" + cid


def _upper_bound(before: str | None, after: tuple[str, str, str] | None) -> tuple[str | None, bool]:
    """Highest checkpoint id a page may hold, and whether it is included."""
    if after is None:
        return before, False
    if before is not None and before <= after[0]:
        return before, False
    return after[0], True


def _wanted(row: CheckpointRow, op: ops.ListCheckpoints) -> bool:
    if op.before is not None and not row.checkpoint_id < op.before:
        return False
    if (
        op.after is not None
        and not (row.checkpoint_id, row.thread_id, row.checkpoint_ns) < op.after
    ):
        return False
    return not op.filter or metadata_matches(row.metadata, op.filter)
