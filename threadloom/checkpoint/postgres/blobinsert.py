"""The blob insert of an optimistic write (see :mod:`.optimistic`): new blobs
with their count rows, the hashes it created kept for the later locks, and a
new manifest's hold on its segments counted right after it."""

from __future__ import annotations

from threadloom.checkpoint.postgres import generic
from threadloom.checkpoint.postgres.blobpack import pack
from threadloom.checkpoint.postgres.queries import SQL, columns
from threadloom.checkpoint.postgres.stmt import LOCK_SLOT, Stmt
from threadloom.checkpoint.storage import ops

__all__ = ["NEW_COUNTS", "insert_blobs", "relocking"]


def insert_blobs(
    blobs: tuple[ops.BlobRow, ...],
    sql: SQL,
    holds: dict[bytes, int] | None = None,
    setting: str | None = None,
    lock_existing: bool = False,
    max_items: int | None = None,
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
    ``lock_existing``: then lock the blobs there, inserting afresh those a
    delete removed meanwhile (:func:`relocking`). ``max_items``: the writing
    serializer's bound (:func:`.blobpack.pack`)."""
    unique = sorted({b.hash: b for b in blobs}.values(), key=lambda b: b.hash)
    if not unique:
        return []
    rows = columns([(b.hash, *pack(b.tag, b.data, max_items), b.children) for b in unique], 4)
    src = "al" if lock_existing else "ins"
    count = f"INSERT INTO {sql.counts} (id) SELECT id FROM {src} ON CONFLICT (id) DO NOTHING"
    kept = [_OWN_KEPT.replace("FROM ins", f"FROM {src}")]
    if holds is not None:
        count = (
            f"INSERT INTO {sql.counts} (id, refs) SELECT {src}.id, coalesce(k.n, 0) FROM {src}"
            f" LEFT JOIN unnest(%s::bytea[], %s::bigint[]) AS k(h, n) ON k.h = {src}.hash"
            " ON CONFLICT (id) DO NOTHING RETURNING id"
        )
        sent = [b.hash for b in unique if b.hash in holds]
        rows += [sent, [holds[h] for h in sent]]
        kept.append(
            f"set_config('{setting or NEW_COUNTS}',"
            " coalesce((SELECT string_agg(id::text, ',') FROM cnt), ''), true)"
        )
    if lock_existing:
        counted = f"{relocking(sql, 'hash, id, children')}, cnt AS ({count})"
    else:
        head = sql.insert_blobs.split("ON CONFLICT")[0]
        counted = f"""{head} WHERE {LOCK_SLOT} ON CONFLICT (hash) DO NOTHING RETURNING hash, id, children
            ), cnt AS ({count})"""
    if not any(b.children for b in unique):
        return [Stmt(f"{counted} SELECT {', '.join(kept)}", rows)]
    kids = f"set_config('{_KIDS}', coalesce(string_agg(encode(children, 'hex'), ''), ''), true)"
    keep = f"SELECT {kids}, {', '.join(kept)} FROM {src} WHERE children <> ''"
    return [Stmt(f"{counted} {keep}", rows), Stmt(_count_kids(sql), ())]


_SOURCE = "unnest(%s::bytea[], %s::text[], %s::bytea[], %s::bytea[]) AS u(h, t, d, c)"


def relocking(sql: SQL, returning: str) -> str:
    """The CTEs of a blob insert that also locks the sent blobs found there
    (hash order, as the writes insert and every adjustment lock them) and
    inserts afresh those a committed delete removed meanwhile; ``al``: the rows
    either insert created (``returning``). Parameters: the 4 blob columns.

    For a transaction that cannot be refused (a pessimistic put_writes). Its
    ``ins`` (``DO NOTHING``) waits for another transaction inserting the same
    hash holding no lock on a blob found there; only then ``l`` locks the
    found blobs (it reads ``ins`` first) and ``re`` inserts those ``l`` no
    longer found. ``DO NOTHING`` alone let a delete remove a found blob before
    its lock, and the write row held a missing blob (every later read raised
    CorruptBlobError); locking found blobs inside the insert (1ba7638, ``ON
    CONFLICT DO UPDATE``) held them while it waited for the other inserter,
    which deadlocked when that one needed them next. ``l`` sees the blobs of
    the statement's snapshot: one another transaction committed while ``ins``
    waited is neither locked nor inserted here (the writes insert locks it)."""
    head = sql.insert_blobs.split("ON CONFLICT")[0]
    insert = head[head.index("INSERT INTO") :].replace(_SOURCE, "src AS u(h, t, d, c)")
    tail = f"ON CONFLICT (hash) DO NOTHING RETURNING {returning}"
    return (
        f"WITH src AS MATERIALIZED (SELECT * FROM {_SOURCE}),"
        f" ins AS ({insert} WHERE {LOCK_SLOT} {tail}),"
        f" l AS MATERIALIZED (SELECT hash FROM {sql.blobs}"
        " WHERE hash = ANY(ARRAY(SELECT h FROM src)) AND (SELECT count(*) FROM ins) >= 0"
        " ORDER BY hash FOR UPDATE),"
        f" re AS ({insert} WHERE h NOT IN (SELECT hash FROM l)"
        f" AND h NOT IN (SELECT hash FROM ins) {tail}),"
        " al AS (SELECT * FROM ins UNION ALL SELECT * FROM re)"
    )


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
