"""The blob insert of an optimistic write (see :mod:`.optimistic`): new blobs
with their count rows, the hashes it created kept for the later locks, and a
new manifest's hold on its segments counted right after it."""

from __future__ import annotations

from threadloom.checkpoint.postgres import generic
from threadloom.checkpoint.postgres.blobpack import pack
from threadloom.checkpoint.postgres.queries import SQL, columns
from threadloom.checkpoint.postgres.stmt import LOCK_SLOT, Stmt
from threadloom.checkpoint.storage import ops

__all__ = ["LOCK_EXISTING", "NEW_COUNTS", "insert_blobs"]


def insert_blobs(
    blobs: tuple[ops.BlobRow, ...],
    sql: SQL,
    holds: dict[bytes, int] | None = None,
    setting: str | None = None,
    lock_existing: bool = False,
) -> list[Stmt]:
    """Insert the blobs that are new with their count rows, then count each new
    manifest's hold on its children (its segments): the flow cannot, not
    knowing which were new.

    The children are counted by a second statement, as the pessimistic
    :class:`~threadloom.checkpoint.storage.ops.AdjustRefcounts` does: the
    insert's snapshot predates its waits (for the thread lock, for another
    transaction inserting the same hash), so a child committed elsewhere
    meanwhile is invisible to it and a count row deleted meanwhile looks alive.
    The insert leaves the new manifests' children in a transaction-local
    setting; the count statement, with a snapshot of its own, locks the
    children's blob rows (hash order) and adds to the count rows there are
    (children with none are ignored, as an adjustment ignores them).

    ``holds`` (a put's): how many times its refs hold each hash. A count row
    this insert creates starts at that number instead of 0 and its id is left
    in :data:`NEW_COUNTS`, so the refs insert (which must insert every ref, or
    the transaction is refused) does not add it again: one row version per new
    blob instead of an insert and an update. ``setting``: the one that
    receives those ids instead (a put_writes': :data:`.writecounts.NEW_WRITE_COUNTS`).
    ``lock_existing``: lock the blobs found already there (:data:`LOCK_EXISTING`)."""
    unique = sorted({b.hash: b for b in blobs}.values(), key=lambda b: b.hash)
    if not unique:
        return []
    rows = columns([(b.hash, *pack(b.tag, b.data), b.children) for b in unique], 4)
    head = sql.insert_blobs.split("ON CONFLICT")[0]
    count = f"INSERT INTO {sql.counts} (id) SELECT id FROM ins ON CONFLICT (id) DO NOTHING"
    kept = [_OWN_KEPT]
    if holds is not None:
        count = (
            f"INSERT INTO {sql.counts} (id, refs) SELECT ins.id, coalesce(k.n, 0) FROM ins"
            " LEFT JOIN unnest(%s::bytea[], %s::bigint[]) AS k(h, n) ON k.h = ins.hash"
            " ON CONFLICT (id) DO NOTHING RETURNING id"
        )
        sent = [b.hash for b in unique if b.hash in holds]
        rows += [sent, [holds[h] for h in sent]]
        kept.append(
            f"set_config('{setting or NEW_COUNTS}',"
            " coalesce((SELECT string_agg(id::text, ',') FROM cnt), ''), true)"
        )
    conflict = LOCK_EXISTING if lock_existing else "ON CONFLICT (hash) DO NOTHING"
    counted = f"""{head} WHERE {LOCK_SLOT} {conflict} RETURNING hash, id, children
            ), cnt AS ({count})"""
    if not any(b.children for b in unique):
        return [Stmt(f"{counted} SELECT {', '.join(kept)}", rows)]
    kids = f"set_config('{_KIDS}', coalesce(string_agg(encode(children, 'hex'), ''), ''), true)"
    keep = f"SELECT {kids}, {', '.join(kept)} FROM ins WHERE children <> ''"
    return [Stmt(f"{counted} {keep}", rows), Stmt(_count_kids(sql), ())]


LOCK_EXISTING = "ON CONFLICT (hash) DO UPDATE SET hash = EXCLUDED.hash WHERE false"
"""The conflict clause of a blob insert whose transaction cannot be refused (a
pessimistic put_writes): a blob already there is locked, not skipped (``WHERE
false`` updates nothing but locks every conflicting row), waiting for a
transaction that holds it, e.g. a delete that has counted it down; if that one
deleted the row, the insert inserts it afresh instead (Postgres retries the
insert). With ``DO NOTHING`` the insert saw the doomed row, did nothing, and the
write row went in holding a blob the delete then removed: every later read of
the thread raised CorruptBlobError. ``RETURNING`` still lists only the rows
inserted. Locks are taken in the insert's hash order, as every other lock."""

NEW_COUNTS = "threadloom.new_counts"
"""The count rows a put's blob insert created at their final count (ids)."""


_KIDS = "threadloom.new_kids"

_OWN_KEPT = (
    f"set_config('{generic.NEW_BLOBS}', concat_ws(',', nullif(current_setting("
    f"'{generic.NEW_BLOBS}', true), ''), (SELECT string_agg(encode(hash, 'hex'), ',') FROM ins)),"
    " true)"
)
"""Appends the hashes the insert created (``ins``: its ``RETURNING``) to
:data:`.generic.NEW_BLOBS`, which the later locks skip."""


def _count_kids(sql: SQL) -> str:
    """Add the holds left in :data:`_KIDS` by the insert before (see
    :func:`insert_blobs`); the one-time filter takes the row locks first."""
    return f"""WITH k AS (SELECT decode(coalesce(current_setting('{_KIDS}', true), ''), 'hex') AS c
            ), kid AS (
                SELECT substring(k.c FROM i * 16 + 1 FOR 16) AS hash, count(*) AS n
                FROM k CROSS JOIN LATERAL generate_series(0, length(k.c) / 16 - 1) i
                GROUP BY 1
            ), l AS MATERIALIZED (
                SELECT hash, id FROM {sql.blobs} WHERE hash IN (SELECT hash FROM kid)
                ORDER BY hash FOR UPDATE
            )
            UPDATE {sql.counts} c SET refs = c.refs + kid.n FROM kid JOIN l USING (hash)
            WHERE (SELECT count(*) FROM l) >= 0 AND c.id = l.id"""
