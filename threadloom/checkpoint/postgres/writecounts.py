"""An optimistic ``put_writes`` counts its row's holds in its own statements.

The non-strict put_writes flow (Postgres does not declare
``ValueCodec.writes_add_refs``) follows its ``SaveWrites`` with an
``AdjustRefcounts`` of exactly the row's holds. Planned as such, that was a
lock statement and an update statement after the writes insert, and every new
blob's count row got two versions (inserted at 0, then updated). In an
optimistic transaction the plan now does it all up front:

* the blob insert creates each new blob's count row at its final count and
  leaves their ids in :data:`NEW_WRITE_COUNTS`;
* the writes insert (:func:`text`), a later statement with a snapshot of its
  own (taken after the blob insert and its waits), locks the held blobs this
  transaction did not create in hash order, adds the holds to every count row
  the blob insert did not create, and fails the transaction unless every held
  blob is there (one deleted while the lock waited is not returned: the flow
  then reruns pessimistically) and the task had no row;
* the adjustment that follows plans only what these did not count
  (:func:`unabsorbed`: normally nothing).

Bench ``put_writes`` (two ~1 KB writes): 5 statements -> 3 with prepared
statements (plan mode, blob insert, writes insert), 4 -> 2 without.

The pessimistic plan (a caller's transaction, or the rerun of a refused
optimistic one) does the same after its ``LoadWrites`` found no row
(:func:`pessimistic`): read under the thread's lock, which the transaction
holds to its end, so the row is known to be new. Nothing reruns a pessimistic
transaction, so its blob insert also locks every sent blob there once its
insert is done waiting for other inserters, and inserts afresh those a
committed delete removed meanwhile (:func:`.blobinsert.relocking`): another
thread's delete that has counted such a blob down either commits first (the
blob is inserted afresh) or waits for this transaction, and no found blob is
locked while the insert waits for another transaction inserting the same
hash (1ba7638 did, and deadlocked). A held blob not there for the writes
insert fails the statement (:data:`MISSING`, a StorageError) instead of
storing a row that holds a missing blob. Per call of the bench's shape: 6
statements -> 4 (the adjustment's lock and update), and no count row
updated (2 row versions fewer).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from threadloom.checkpoint.postgres import generic
from threadloom.checkpoint.postgres.blobinsert import insert_blobs
from threadloom.checkpoint.postgres.idpack import packed_write
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.stmt import LOCK_SLOT, Stmt, Tx
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import HASH_SIZE

__all__ = ["NEW_WRITE_COUNTS", "held", "one_row", "pessimistic", "text", "unabsorbed"]

NEW_WRITE_COUNTS = "threadloom.new_write_counts"
"""The count rows a put_writes' blob insert created at their final count (ids),
set by every such insert (never left over from an earlier one)."""


def held(op: ops.SaveWrites, rows: list[ops.WriteRow]) -> Counter[bytes] | None:
    """How many times the task's row holds each hash, when the writes insert
    counts them itself: one row, every hash of which is among the blobs sent
    (so their insert runs and sets :data:`NEW_WRITE_COUNTS`). None: the
    flow's adjustment counts them, as before."""
    if len(rows) != 1 or not rows[0].hashes:
        return None
    h = rows[0].hashes
    counts = Counter(h[i : i + HASH_SIZE] for i in range(0, len(h), HASH_SIZE))
    if not counts.keys() <= {b.hash for b in op.blobs}:
        return None
    return counts


def unabsorbed(op: ops.AdjustRefcounts, absorbed: Counter[bytes] | None) -> Any:
    """The part of ``op`` the writes insert right before did not count (None:
    nothing left). The flow sends exactly the row's holds
    (``tests/postgres/test_pg_write_counts.py``); a difference is still planned."""
    if absorbed is None:
        return op
    rest = Counter(dict(op.deltas))
    rest.subtract(absorbed)
    deltas = tuple((h, d) for h, d in rest.items() if d)
    return ops.AdjustRefcounts(deltas) if deltas else None


def text(sql: SQL, lock_slot: str, refuse: str) -> str:
    """The writes insert that also locks and counts the row's holds.

    Parameters: the held hashes (sorted), the same hashes and their holds,
    the row's 7 values (:func:`one_row`), 1, the number of held hashes.
    ``lock_slot``: where the thread's advisory lock may ride (see
    :func:`.optimistic.lock_first`); ``refuse``: the expression failing the
    transaction."""
    head = one_row(sql.upsert_writes.split("ON CONFLICT")[0])
    new = generic.setting_ids(NEW_WRITE_COUNTS)
    return (
        f"WITH a AS MATERIALIZED (SELECT hash, id, hash IN {generic.OWN} AS mine"
        f" FROM {sql.blobs} WHERE hash = ANY(%s::bytea[])),"
        f" l AS (SELECT hash FROM {sql.blobs}"
        " WHERE hash = ANY(ARRAY(SELECT hash FROM a WHERE NOT mine)) ORDER BY hash FOR UPDATE),"
        f" u AS (UPDATE {sql.counts} c SET refs = c.refs + d.n"
        " FROM unnest(%s::bytea[], %s::bigint[]) AS d(hash, n) JOIN a ON a.hash = d.hash"
        f" WHERE (SELECT count(*) FROM l) >= 0 AND c.id = a.id AND c.id NOT IN {new}),"
        f" ins AS ({head} WHERE {lock_slot} ON CONFLICT DO NOTHING RETURNING 1)"
        " SELECT CASE WHEN (SELECT count(*) FROM ins) = %s"
        " AND (SELECT count(*) FROM l) + (SELECT count(*) FROM a WHERE mine) = %s"
        f" THEN 1 ELSE {refuse} END"
    )


def one_row(head: str) -> str:
    """The writes insert ``head`` (``... SELECT * FROM unnest(%s::text[], ...)``)
    for one row of scalars (``SELECT %s::text, ...``): a put_writes writes one
    row, and 7 one-element arrays cost the client a literal each and the server
    their parsing."""
    start = head.index("SELECT * FROM unnest(")
    inner = head[start + len("SELECT * FROM unnest(") : head.rindex(")")]
    casts = [c.strip().replace("[]", "") for c in inner.split(",")]
    return f"{head[:start]}SELECT {', '.join(casts)}"


def pessimistic(op: ops.Op, sql: SQL, tx: Tx, adjust: Any) -> tuple[list[Stmt], Any] | None:
    """The pessimistic plan of a put_writes' ``SaveWrites`` whose row the flow
    read and found absent (``expected`` None; the read held the thread's lock):
    new count rows created at their final count and the other held blobs
    counted by the writes insert, as in the optimistic plan; the blobs found
    there are locked by their insert (once it waited for other inserters)
    instead of re-checked by a rerun. The ``AdjustRefcounts`` right after plans
    only what these did not count (``adjust``: its plain plan). None: plan
    ``op`` as usual."""
    absorbed, tx.absorbed = tx.absorbed, None  # only for the op right after
    if type(op) is ops.AdjustRefcounts:
        if absorbed is None:
            return None
        rest = unabsorbed(op, absorbed)
        return adjust(rest, sql) if rest is not None else ([], lambda r: None)
    if type(op) is not ops.SaveWrites or op.strict or op.expected != (None,) or len(op.rows) != 1:
        return None
    counts = held(op, list(op.rows))
    if counts is None:
        return None
    hashes = sorted(counts)
    batch = insert_blobs(
        op.blobs, sql, counts, NEW_WRITE_COUNTS, lock_existing=True, max_items=op.max_items
    )
    params = (
        hashes,
        hashes,
        [counts[h] for h in hashes],
        *packed_write(op.rows[0]),
        1,
        len(hashes),
    )
    batch.append(Stmt(_counted_text(sql), params))
    tx.absorbed = counts
    new = frozenset(b.hash for b in op.blobs)  # the flow only needs it not None here
    return batch, lambda r: new


MISSING = (
    "('threadloom: pending-write row not stored (a held blob missing, or the row there):'"
    " || pg_backend_pid())::int"
)
"""Fails a pessimistic writes insert whose held blobs are not all there or
whose row exists (a StorageError; never expected: its blob insert locked or
re-created each blob, and the flow read the row under the thread's lock)."""

_texts: dict[str, str] = {}


def _counted_text(sql: SQL) -> str:
    """:func:`text` failing with :data:`MISSING` (not a refusal: nothing reruns
    a pessimistic transaction), built once per schema."""
    stmt = _texts.get(sql.upsert_writes)
    if stmt is None:
        if len(_texts) >= 64:
            _texts.clear()
        stmt = _texts[sql.upsert_writes] = text(sql, LOCK_SLOT, MISSING)
    return stmt
