"""Generic plans for the statements of an optimistic write transaction.

A put, put_writes or put_step sends the same few statements every time, with
array parameters (``unnest(%s::bytea[])``). With prepared statements
(``prepare_threshold`` set) Postgres plans them at every execution anyway:
``plan_cache_mode=auto`` compares a generic plan, which must assume an array of
unknown length, with custom plans that know it, finds the generic one dearer
and never switches. Re-planning the CTEs of a put cost about 360 us of server
time per put (the refs insert alone ~250 us) against ~60 us for binding the
cached generic plan.

So in an optimistic transaction on a connection that prepares statements,
the first operation that moves blobs or refs (:func:`costly`) is preceded by
:data:`PLAN_MODE`, which makes the rest of the transaction use generic plans
(``set_config(..., true)``: transaction-local, nothing left on the
connection; it rides in the pipeline, no round trip). A step that moves
neither (a small state inline in the checkpoint record: a lease fence, a
writes insert, a checkpoint upsert, ~70 us of planning per step in all)
plans as before: the extra statement would cost the client more than the
server saves.

A generic plan is built once per connection and kept (autovacuum may never
analyze the tables), so it must not depend on how small the tables were when
it was built: on a near-empty table the planner picks a sequential scan, and
that plan would then scan the whole table at every put for the connection's
life. :data:`PLAN_MODE` therefore also turns ``enable_seqscan`` off for the
transaction (every statement of these transactions reaches its rows through a
primary key), and every statement of such a transaction carries :data:`MARK`:
its text differs from the same statement run elsewhere, so it never reuses a
generic plan that ``auto`` mode built (and cached) in an ordinary transaction.
The refcount adjustment also gets an explicit ``= ANY(%s)`` bound
(:func:`adjust`), as the refs insert has.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from threadloom.checkpoint.postgres.binarray import binds_on_client
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.stmt import Stmt, Tx
from threadloom.checkpoint.storage import ops

__all__ = [
    "MARK",
    "OWN",
    "PLAN_MODE",
    "adjust",
    "batch",
    "costly",
    "marked",
    "setting_ids",
    "split",
    "wants_generic",
]

PLAN_MODE = Stmt(
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true),"
    " set_config('enable_seqscan', 'off', true)"
)
"""Sent before the first :func:`costly` op of an optimistic transaction."""

MARK = "\n/* threadloom:generic */"
"""Appended to every statement planned under :data:`PLAN_MODE`."""

NEW_BLOBS = "threadloom.new_blobs"
"""The blob rows this transaction's optimistic blob inserts created: their
hashes in hex, comma-separated, appended by each insert (``RETURNING``:
exactly the rows it inserted), transaction-local (optimistic.insert_blobs)."""

OWN = (
    "(SELECT decode(h, 'hex') FROM unnest(string_to_array("
    f"current_setting('{NEW_BLOBS}', true), ',')) h)"
)
"""SQL: the hashes of :data:`NEW_BLOBS` as a subquery (no rows when none), for
``hash IN {OWN}`` / ``hash NOT IN {OWN}``: Postgres builds a hash table of an
uncorrelated ``IN`` subquery once per statement (a hashed SubPlan). The
``= ANY(ARRAY(...))`` / ``<> ALL(ARRAY(...))`` this replaced scanned the whole
array for every row, so a ``put_writes`` of W new blobs cost W x W
comparisons (W=40,000: 32 s; tests/postgres/test_pg_setting_sets.py)."""


def setting_ids(name: str) -> str:
    """SQL: the ids of the comma-separated transaction setting ``name`` (count
    rows a blob insert created) as a subquery, for ``id NOT IN ...``: parsed
    and hashed once per statement. ``id <> ALL(string_to_array(current_setting
    (...))::bigint[])`` re-parsed the whole setting for every row (a stable
    function is not folded) and then scanned it: W x W again."""
    return (
        f"(SELECT i::bigint FROM unnest(string_to_array(current_setting('{name}', true), ',')) i)"
    )


def costly(op: ops.Op | None) -> bool:
    """Whether ``op``'s statements cost enough planning to switch to generic
    plans for them: the CTEs that insert blobs and refs and count references."""
    if type(op) is ops.SaveCheckpoint:
        return bool(op.blobs or op.refs or op.needs)
    if type(op) is ops.SaveWrites:
        return bool(op.blobs)
    return type(op) is ops.AdjustRefcounts


def wants_generic(tx: Tx, op: ops.Op | None) -> bool:
    """Whether :data:`PLAN_MODE` goes before ``op``'s statements (once per
    transaction): only in an optimistic one whose statements are prepared
    (unprepared statements are planned afresh at every execution whatever
    the mode says), and for a :func:`costly` op."""
    if tx.generic or not tx.optimistic or tx.conn is None or not costly(op):
        return False
    conn = tx.conn
    return getattr(conn, "prepare_threshold", None) is not None and not binds_on_client(conn)


def batch(tx: Tx, stmts: list[Stmt], op: ops.Op | None = None) -> list[Stmt]:
    """``stmts`` (of ``op``) as sent in ``tx``: marked once generic plans are
    on, after :data:`PLAN_MODE` when ``op`` turns them on."""
    if not tx.generic and not (tx.optimistic and costly(op)):  # as split would leave them
        return stmts
    head, body = split(tx, [], stmts, op)
    return head + body


def split(
    tx: Tx, head: list[Stmt], body: list[Stmt], op: ops.Op | None = None
) -> tuple[list[Stmt], list[Stmt]]:
    """(``head``, ``body``) as sent in ``tx`` (see :func:`batch`): the mode
    statement joins ``head``, whose results the caller skips."""
    if wants_generic(tx, op):
        tx.generic = True
        return [PLAN_MODE, *marked(head)], marked(body)
    if tx.generic:
        return marked(head), marked(body)
    return head, body


def marked(stmts: list[Stmt]) -> list[Stmt]:
    return [Stmt(_marked_text(s.sql), s.params, s.fetch) for s in stmts]


_marked: dict[str, str] = {}


def _marked_text(sql: str) -> str:
    """``sql + MARK``, the same string object every time: psycopg keys its
    query and prepared-statement caches by the text, and a fresh string
    would be hashed (and encoded) again at every execution."""
    text = _marked.get(sql)
    if text is None:
        if len(_marked) >= 1024:  # generated texts (list filters) stay bounded
            _marked.clear()
        text = _marked[sql] = sql + MARK
    return text


def adjust(op: ops.AdjustRefcounts, sql: SQL) -> tuple[list[Stmt], Any]:
    """The refcount adjustment with its rows bounded by primary key (see the
    module docstring); the same locks and updates as the pessimistic plan."""
    if not op.deltas:
        return [], None
    total: Counter[bytes] = Counter()
    for h, delta in op.deltas:
        total[h] += delta
    hashes = sorted(total)
    stmt = (
        f"UPDATE {sql.counts} c SET refs = c.refs + d.delta"
        f" FROM unnest(%s::bytea[], %s::bigint[]) AS d(hash, delta) JOIN {sql.blobs} b"
        " ON b.hash = d.hash WHERE c.id = b.id AND b.hash = ANY(%s::bytea[])"
    )
    deltas = [total[h] for h in hashes]
    return [Stmt(_lock_others(sql), (hashes,)), Stmt(stmt, (hashes, deltas, hashes))], None


def _lock_others(sql: SQL) -> str:
    """Lock the blob rows in hash order, except those this transaction's blob
    inserts created (:data:`NEW_BLOBS`, an exact list: ``xmin``, the raw 32-bit
    xid that freezing keeps, could match an old row after wraparound): no other
    transaction can see, lock or delete those before the commit, so their lock
    only cost a WAL record and a dirty page (a ``put_writes`` of two new blobs
    wrote two)."""
    return (
        f"SELECT 1 FROM {sql.blobs} WHERE hash = ANY(%s::bytea[])"
        f" AND hash NOT IN {OWN} ORDER BY hash FOR UPDATE"
    )
