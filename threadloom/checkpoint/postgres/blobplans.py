"""Plans for the shared, content-addressed blob rows (``checkpoint_blobs`` and
their counts in ``checkpoint_blob_refs``), split from :mod:`.executor`.

Values go through :mod:`.blobpack` on the way in and out, so the storage core
sees exactly the bytes it wrote; except the rows read to count references (a
dry-run prune's ``LoadBlobs(refcounts=True)``) and those ``DropUnreferenced``
deletes, returned as stored: their caller reads only ``children`` and the size,
and deleting data must never depend on decoding it (an older row compressed
past the reader's ``max_decoded_items`` could not be pruned or deleted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.postgres.blobinsert import relocking
from threadloom.checkpoint.postgres.blobpack import pack, unpack
from threadloom.checkpoint.postgres.queries import SQL, columns
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import BlobRow

__all__ = ["adjust", "drop", "guarded", "insert_blobs", "load_blobs", "lock_blobs"]

Plan = tuple[list[Stmt], Callable[[list[Any]], Any]]


def load_blobs(op: ops.LoadBlobs, sql: SQL) -> Plan:
    if not op.hashes:
        return [], lambda r: {}
    if op.refcounts:  # as stored: only children and size are read (see the module doc)
        stmt = Stmt(sql.load_blob_counts, (list(set(op.hashes)),), "all")
        return [stmt], lambda r: {
            bytes(row[0]): (BlobRow(*map(_b, row[:4])), int(row[4])) for row in r[0]
        }
    where = (op.max_items, op.thread_id, op.checkpoint_id)  # the reader's bound, for errors
    stmt = Stmt(sql.load_blobs, (list(set(op.hashes)),), "all")
    return [stmt], lambda r: {bytes(row[0]): unpack(BlobRow(*map(_b, row)), *where) for row in r[0]}


def _b(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def guarded(stmt: str, before: str, guard: str) -> str:
    """``stmt`` with ``WHERE guard`` inserted before its first ``before`` clause
    (an ``INSERT ... SELECT * FROM unnest(...)``)."""
    if not guard:
        return stmt
    head, sep, tail = stmt.partition(before)
    return f"{head} WHERE {guard}\n            {sep}{tail}"


# Deadlocks: concurrent transactions touching the same shared blobs must take
# their row locks in one global order, so blobs are inserted, locked and
# updated sorted by hash (what is left is retried by the connector).


def insert_blobs(
    blobs: tuple[BlobRow, ...],
    sql: SQL,
    guard: str = "",
    gparams: tuple[Any, ...] = (),
    lock_existing: bool = False,
    max_items: int | None = None,
) -> list[Stmt]:
    """Insert the new blobs (count rows at 0); ``lock_existing`` (unguarded):
    and lock the blobs there, inserting afresh those a delete removed
    meanwhile (:func:`.blobinsert.relocking`). ``max_items``: the writing
    serializer's bound (:func:`.blobpack.pack`). Returns the hashes inserted."""
    unique = sorted({b.hash: b for b in blobs}.values(), key=lambda b: b.hash)
    if not unique:
        return []
    stmt = guarded(sql.insert_blobs, "ON CONFLICT", guard)
    if lock_existing:
        count = f"INSERT INTO {sql.counts} (id) SELECT id FROM al ON CONFLICT (id) DO NOTHING"
        stmt = f"{relocking(sql, 'hash, id')}, cnt AS ({count}) SELECT hash FROM al"
    rows = [(b.hash, *pack(b.tag, b.data, max_items), b.children) for b in unique]
    return [Stmt(stmt, (*columns(rows, 4), *gparams), "all")]


def lock_blobs(hashes: Any, sql: SQL) -> list[Stmt]:
    """Lock existing blob rows in hash order before updating their counts."""
    return [Stmt(sql.lock_blobs, (sorted(hashes),))] if hashes else []


def adjust(op: ops.AdjustRefcounts, sql: SQL) -> Plan:
    if not op.deltas:
        return [], lambda r: None
    total: Counter[bytes] = Counter()
    for h, delta in op.deltas:
        total[h] += delta
    batch = [*lock_blobs(total, sql), Stmt(sql.adjust, columns(sorted(total.items()), 2))]
    return batch, lambda r: None


def drop(op: ops.DropUnreferenced, sql: SQL) -> Plan:
    if not op.hashes:
        return [], lambda r: []
    stmt = Stmt(sql.drop_unreferenced, (sorted(set(op.hashes)),), "all")
    # as stored, never inflated: the flow reads their children and size only
    return [*lock_blobs(op.hashes, sql), stmt], lambda r: [BlobRow(*map(_b, x)) for x in r[-1]]
