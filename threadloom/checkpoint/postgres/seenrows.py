"""Refs vanished mid-read: the refs lookup also checks that the checkpoint rows
it serves still exist, in the same statement (same snapshot, no round trip).

A read on an autocommit connection (or at READ COMMITTED) sees one snapshot
per statement. When a ``delete_thread``/``prune`` commits between the
checkpoint row lookup and the refs lookup, the refs come back without the rows
that were deleted; a reader cannot tell a missing ref from a channel that has a
version but no value (normal: a trigger channel after it was read), so the
checkpoint used to come back without its values (storage/rereads.py).

Ref rows are deleted only in the transaction that deletes every checkpoint
row holding them. So if, in the snapshot of the refs lookup, the rows the read
found are all still there, every ref they hold is there too; if one is gone,
the read tore. The executor remembers the checkpoint rows a read transaction
found (:func:`watched`); the refs statement of that transaction then returns
one extra marker row (``thread_id`` NULL) when any of them is gone, and
:func:`refs_or_torn` raises :class:`~threadloom.errors.CorruptBlobError`, which
the driver answers by re-running the read in one snapshot (storage/drive.py).
The common read pays a primary-key probe per checkpoint row inside a
statement it sends anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.postgres.idpack import pack_ordered, packed_keys, unpacked_ref
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.stmt import Stmt, Tx
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import RefRow
from threadloom.errors import CorruptBlobError

__all__ = ["checked_refs", "seen_ids", "watched"]

ROW_OPS = (ops.GetCheckpoint, ops.ListCheckpoints)
Plan = tuple[list[Stmt], Callable[[list[Any]], Any]]
_NULLS = ", ".join(["NULL"] * len(SQL.REF_COLS.split(",")))


def watched(tx: Tx, op: ops.Op, sql: SQL, prepare: Callable[[ops.Op], Plan]) -> Plan:
    """``op``'s statements and decoder in a read transaction whose statements
    do not share one snapshot: a row lookup's decoder remembers the rows it
    found (a list append: a warm re-read never looks refs up), a refs lookup
    checks that those of its thread are still there."""
    if type(op) is ops.LoadRefs and op.keys and tx.seen:
        ids = seen_ids(tx.seen, op.thread_id, op.checkpoint_ns)
        if ids:
            return checked_refs(op, sql, ids)
    batch, decode = prepare(op)
    if type(op) not in ROW_OPS:
        return batch, decode

    def remembering(results: list[Any]) -> Any:
        found = decode(results)
        if found:
            if tx.seen is None:
                tx.seen = []
            tx.seen.append(found)
        return found

    return batch, remembering


def seen_ids(seen: list[Any], thread_id: str, ns: str) -> set[str]:
    """The ids of the checkpoint rows of (thread, namespace) found so far
    (``seen``: what each row lookup returned, a row or a list of rows)."""
    ids = set()
    for found in seen:
        for row in found if type(found) is list else (found,):
            if row.thread_id == thread_id and row.checkpoint_ns == ns:
                ids.add(row.checkpoint_id)
    return ids


def checked_refs(op: ops.LoadRefs, sql: SQL, ids: set[str]) -> Plan:
    """``op``'s refs lookup plus the marker row when one of the checkpoint
    rows ``ids`` (of the op's thread/namespace) is gone in its snapshot."""
    channels, versions = packed_keys(op.keys)
    thread, ns = op.thread_id, op.checkpoint_ns
    packed = [pack_ordered(c) for c in ids]
    stmt = Stmt(
        "SELECT r.* FROM unnest(%s::text[], %s::bytea[]) AS k(channel, version)"
        f" CROSS JOIN LATERAL ({sql.select_refs} WHERE thread_id = %s AND checkpoint_ns = %s"
        " AND channel = k.channel AND version = k.version OFFSET 0) r"
        f" UNION ALL SELECT {_NULLS} WHERE (SELECT count(*) FROM {sql.ckpt}"
        " WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s::bytea[]))"
        " < %s",
        (channels, versions, thread, ns, thread, ns, packed, len(packed)),
        "all",
    )

    def decode(results: list[Any]) -> list[RefRow]:
        return refs_or_torn(results[0], thread)

    return [stmt], decode


def refs_or_torn(rows: list[Any], thread_id: str) -> list[RefRow]:
    """The ref rows, or :class:`CorruptBlobError` when the marker row says a
    checkpoint row the read found was deleted before its refs were read."""
    out = []
    for row in rows:
        if row[0] is None:
            raise CorruptBlobError(
                "checkpoint deleted while it was read (its refs are gone)", thread_id=thread_id
            )
        out.append(unpacked_ref(row))
    return out
