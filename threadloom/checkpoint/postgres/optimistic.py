"""Optimistic plans: a put, a put_writes or a whole put_step in ONE round trip.

A write flow waits for the server only to learn about rare cases: a task that
already has a row of pending writes (``LoadWrites`` before its first write), a
diff base or reused blob pruned by another process, a ref row that exists
already, which blobs were new. In the saver's own pipelined transactions the
executor answers those reads itself with the common case and queues statements
that make the transaction FAIL in the database when the answer was wrong (they
cast a marked text to an integer: SQLSTATE 22P02 naming
:data:`~.connection.CONFLICT_MARK`). Nothing waits until the commit's Sync.
A refused transaction leaves nothing behind (the Sync rolls it back) and the
driver runs the flow again, pessimistically, in a new one
(:class:`~threadloom.checkpoint.storage.drive.OptimisticConflict`).

What the flow would have computed from an answer moves into SQL instead: a new
list manifest's hold on its segments is counted by the statement after the blob
insert, only for the manifests that insert really inserted.

The thread's advisory lock rides in the first statement only when that
statement reads nothing the lock protects: a statement's snapshot is taken
before it waits for the lock, so a read in it could see rows that the lock's
previous holder deleted (ON CONFLICT sees the latest rows and is safe). A
check that must see the thread as the lock leaves it runs in a later statement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from hashlib import blake2b
from typing import Any

from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.postgres import fence as lease_fence
from threadloom.checkpoint.lease.postgres import fence_params
from threadloom.checkpoint.postgres import generic, seenrows, writecounts
from threadloom.checkpoint.postgres.blobinsert import NEW_COUNTS, insert_blobs
from threadloom.checkpoint.postgres.idpack import (
    pack_id,
    packed_ckpt,
    packed_ref,
    packed_write,
)
from threadloom.checkpoint.postgres.queries import SQL, columns
from threadloom.checkpoint.postgres.rowsave import (
    NO_REFS,
    REFUSE,
    _check,
    _checked_upsert,
    _lock_others,
    _text,
    refuse_unless,
    save_row,
)
from threadloom.checkpoint.postgres.saveplan import _base_exists, _cached_base
from threadloom.checkpoint.postgres.stmt import LOCK_SLOT, Stmt, Tx
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import HASH_SIZE, WriteRow

__all__ = ["LOCK_SLOT", "REFUSE", "flush", "lock_first", "plan", "refuse_unless", "thread_lock_key"]

Guess = tuple[list[Stmt], Any]
Planner = Callable[[Any, SQL], tuple[list[Stmt], Any]]

_LOCKED = "(SELECT 1 FROM pg_advisory_xact_lock(%s)) = 1"


def thread_lock_key(sql: SQL, thread_id: str) -> int:
    """A signed 64-bit advisory lock id for (schema, thread)."""
    return _lock_key(sql.schema, thread_id)


@lru_cache(maxsize=1024)  # a run asks for its thread's key at every step
def _lock_key(schema: str, thread_id: str) -> int:
    digest = blake2b(f"{schema}\0{thread_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_first(batch: list[Stmt], key: int) -> bool:
    """Make ``batch``'s first statement take the advisory lock ``key`` in its
    :data:`LOCK_SLOT` (True), instead of a statement of its own (one statement
    less per transaction). The slot is a one-time filter evaluated before the
    statement writes a row, so the lock is held as early as before. Only
    statements whose reads ignore their snapshot (inserts with ON CONFLICT,
    a lease fence's UPDATE) have a slot: see the module docstring."""
    if not batch or LOCK_SLOT not in batch[0].sql:
        return False
    first = batch[0]
    text, n = _text(("lock", first.sql), lambda: _slot_locked(first.sql))
    params = tuple(first.params)
    batch[0] = Stmt(text, (*params[:n], key, *params[n:]), first.fetch)
    return True


def _slot_locked(sql: str) -> tuple[str, int]:
    """``sql`` with its lock slot taking the lock, and the slot's parameter index."""
    n = sql.count("%s", 0, sql.index(LOCK_SLOT))
    return sql.replace(LOCK_SLOT, _LOCKED, 1), n


def plan(op: ops.Op, sql: SQL, tx: Tx, pessimistic: Planner) -> Guess | None:
    """(statements, the op's result) without waiting for the server, or None
    when ``op`` needs a real answer (the caller then plans it normally, after
    :func:`flush`)."""
    absorbed, tx.absorbed = tx.absorbed, None  # only for the op right after
    if type(op) is ops.LoadWrites:
        return _load_writes(op, sql, tx, pessimistic)
    if type(op) is ops.SaveWrites:
        return _save_writes(op, sql, tx, pessimistic)
    if type(op) is ops.SaveCheckpoint:
        batch, answer = _save_checkpoint(op, sql)
        return (flush(tx, pessimistic, sql) if tx.pending is not None else []) + batch, answer
    if type(op) is ops.AdjustRefcounts:  # bounded for a generic plan (generic.py)
        rest = writecounts.unabsorbed(op, absorbed)
        batch = generic.adjust(rest, sql)[0] if rest is not None else []
        return (flush(tx, pessimistic, sql) if tx.pending is not None else []) + batch, None
    if type(op) is lo.CheckLease:
        return (flush(tx, pessimistic, sql) if tx.pending is not None else []) + _check_lease(
            op, sql, pessimistic
        ), ""
    return None


def _check_lease(op: lo.CheckLease, sql: SQL, pessimistic: Planner) -> list[Stmt]:
    """A leased run's fence: usually the lease is ours and nobody asked it to
    stop (answer ``""``). The fence's renewal runs as planned; the transaction
    fails when it found no live lease of ours or a stop request, and the run
    again learns which (lease lost, or the stop) from the pessimistic fence."""
    stmt = _text(("fence", sql.s), lambda: _fence_text(op, sql))
    return [Stmt(stmt, fence_params(op))]


def _fence_text(op: lo.CheckLease, sql: SQL) -> str:
    ctes = lease_fence(op, sql)[0]
    return (
        f"WITH {ctes} SELECT CASE WHEN NOT ({LOCK_SLOT}) THEN 0"
        f" WHEN (SELECT stop FROM l) = '' THEN 1 ELSE {REFUSE} END"
    )


def flush(tx: Tx, pessimistic: Planner, sql: SQL) -> list[Stmt]:
    """The statement validating an earlier optimistic ``LoadWrites`` (it fails
    when the checkpoint's rows of pending writes are not the guessed ones:
    none, or those :mod:`.seenrows` knew)."""
    pending, tx.pending = tx.pending, None
    if pending is None:
        return []
    op, guess = pending if type(pending) is tuple else (pending, None)
    [read], _ = pessimistic(op, sql)
    lock = []
    if op.thread_id not in tx.locked:  # the read took no lock (it sent nothing)
        tx.locked.add(op.thread_id)
        lock = [Stmt(_LOCK, (thread_lock_key(sql, op.thread_id),))]
    if guess:
        return [*lock, _same_rows(read, guess)]
    return [*lock, Stmt(f"SELECT {REFUSE} FROM ({read.sql}) w LIMIT 1", read.params)]


_LOCK = "SELECT pg_advisory_xact_lock(%s)"


def _same_rows(read: Stmt, guess: list[Any]) -> Stmt:
    """Fails unless the read finds exactly the guessed rows (task, data, held hashes)."""
    text = (
        f"SELECT {REFUSE} FROM (SELECT count(*) AS n, count(g.t) AS m FROM ({read.sql}) w"
        " LEFT JOIN unnest(%s::bytea[], %s::bytea[], %s::bytea[]) AS g(t, d, h)"
        " ON w.task_id = g.t AND w.data = g.d AND w.hashes = g.h) c WHERE n <> %s OR m <> %s"
    )
    tasks = [pack_id(w.task_id) for w in guess]
    n = len(guess)
    return Stmt(
        text, (*read.params, tasks, [w.data for w in guess], [w.hashes for w in guess], n, n)
    )


def _load_writes(op: ops.LoadWrites, sql: SQL, tx: Tx, pessimistic: Planner) -> Guess | None:
    """A put_writes reads its task's row of one checkpoint: usually there is
    none; a resumed task has one (its interrupt), which this saver wrote or
    read before (:func:`.seenrows.known`)."""
    ids = op.checkpoint_ids
    if ids is None or len(ids) != 1 or op.checkpoint_ns is None:
        return None
    batch = flush(tx, pessimistic, sql)
    guess = seenrows.known(sql, op.thread_id, op.checkpoint_ns, ids[0], op.task_id)
    tx.pending = (op, guess) if guess else op  # validated by the next SaveWrites, or flush()
    return batch, guess


def _save_writes(op: ops.SaveWrites, sql: SQL, tx: Tx, pessimistic: Planner) -> Guess | None:
    """Rows the flow expects to be new: a plain insert that fails on an existing one."""
    expected, rows = op.expected, op.rows
    if not rows or expected is None or len(expected) != len(rows):
        return None
    for e in expected:
        if e is not None:
            seenrows.remember(sql, rows)  # what the (pessimistic) upsert leaves
            if len(rows) == 1 and not op.blobs and type(e) is WriteRow:
                return _update_writes(rows[0], e, sql, tx, pessimistic)
            return None
    pending = tx.pending
    if pending is not None and _pending_covers(pending, rows):
        tx.pending = None  # the insert below checks exactly what the flow assumed
    seenrows.remember(sql, rows)
    if len(rows) == 1:  # the usual case: scalars, no arrays to build and parse
        unique = list(rows)
    else:
        unique = list(
            {(w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id): w for w in rows}.values()
        )
    held = writecounts.held(op, unique)
    batch = flush(tx, pessimistic, sql) if tx.pending is not None else []
    if op.blobs:
        batch += insert_blobs(
            op.blobs, sql, held, writecounts.NEW_WRITE_COUNTS, max_items=op.max_items
        )
    one = len(unique) == 1
    if one:
        params = (*packed_write(unique[0]), 1)
    else:
        params = (*columns(map(packed_write, unique), 7), len(unique))
    if held is None:
        stmt = _text(("writes", sql.upsert_writes, one), lambda: _insert_writes(sql, one))
        batch.append(Stmt(stmt, params))
    else:
        hashes = sorted(held)
        stmt = _text(
            ("writes-held", sql.upsert_writes),
            lambda: writecounts.text(sql, LOCK_SLOT, REFUSE),
        )
        counts = [held[h] for h in hashes]
        batch.append(Stmt(stmt, (hashes, hashes, counts, *params, len(hashes))))
        tx.absorbed = held
    return batch, frozenset(b.hash for b in op.blobs)


def _update_writes(row: WriteRow, old: WriteRow, sql: SQL, tx: Tx, pessimistic: Planner) -> Guess:
    """A task row merged into the one the flow read or guessed (a resumed
    task's): replaced only where it is still ``old``, else the transaction
    fails. The advisory lock may ride in it: a row the lock's previous holder
    changed or deleted is re-checked at its newest version (and fails the
    match); one it inserted is not seen (and fails too)."""
    if tx.pending is not None and _pending_covers(tx.pending, (row,)):
        tx.pending = None  # the update checks exactly what the flow assumed
    batch = flush(tx, pessimistic, sql) if tx.pending is not None else []
    stmt = _text(("writes-update", sql.writes), lambda: _update_text(sql))
    new = packed_write(row)
    batch.append(Stmt(stmt, (*new[4:], *new[:4], old.data, old.hashes)))
    return batch, frozenset()


def _update_text(sql: SQL) -> str:
    return (
        f"WITH up AS (UPDATE {sql.writes} SET task_path = %s, data = %s, hashes = %s"
        f" WHERE {LOCK_SLOT} AND thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
        " AND task_id = %s AND data = %s AND hashes = %s RETURNING 1)"
        f" SELECT {refuse_unless('count(*) = 1')} FROM up"
    )


def _pending_covers(pending: Any, rows: Any) -> bool:
    """Whether every row is of the checkpoint(s) the pending ``LoadWrites`` read."""
    if type(pending) is tuple:
        pending = pending[0]
    task = pending.task_id  # a one-task read covers that task's row only
    for w in rows:
        if w.thread_id != pending.thread_id or w.checkpoint_ns != pending.checkpoint_ns:
            return False
        if task is not None and w.task_id != task:
            return False
        if w.checkpoint_id not in pending.checkpoint_ids:
            return False
    return True


def _insert_writes(sql: SQL, one: bool) -> str:
    head = sql.upsert_writes.split("ON CONFLICT")[0]
    if one:
        head = writecounts.one_row(head)
    return (
        f"WITH ins AS ({head} WHERE {LOCK_SLOT} ON CONFLICT DO NOTHING RETURNING 1)"
        f" SELECT {refuse_unless('count(*) = %s')} FROM ins"
    )


def _save_checkpoint(op: ops.SaveCheckpoint, sql: SQL) -> tuple[list[Stmt], ops.SaveResult]:
    """Blobs, the check (fails when stale), refs (fail when one exists), the row.

    The answer: nothing stale, every ref inserted (a key repeated in the call
    only once, as the pessimistic plan reports it), no new blob to settle
    (their children are counted by the insert)."""
    if not (op.refs or op.blobs or op.needs):  # a state kept whole in the record
        return save_row(op, sql), NO_REFS
    flags, seen, holds = [], set(), Counter[bytes]()
    for ref in op.refs:
        key = (ref.channel, ref.version)
        flags.append(key not in seen)
        if key not in seen:  # a repeated key is inserted (and counted) once
            h = ref.hashes
            holds.update(h[i : i + HASH_SIZE] for i in range(0, len(h), HASH_SIZE))
        seen.add(key)
    batch = insert_blobs(op.blobs, sql, holds if op.refs else None, max_items=op.max_items)
    held = sorted(holds)
    locking = sorted(set(held) | set(op.needs))
    if locking and op.refs and op.row is not None:  # the usual put: one statement after
        batch.append(_checked_save(op, sql, locking, held, len(seen)))
        return batch, ops.SaveResult(frozenset(), tuple(flags))
    upsert = None
    if op.row is not None and not locking:  # the base check rides on the row's upsert
        upsert = _checked_upsert(op, sql)
    check = None if upsert is not None else _check(op, sql, locking)
    if check is not None:
        batch.append(check)
    if op.refs:
        stmt = _text(("refs", sql.insert_refs, bool(op.blobs)), lambda: _refs_text(sql, op))
        params = (*columns(map(packed_ref, op.refs), 10), held, len(seen))
        batch.append(Stmt(stmt, params))
    if upsert is not None:
        batch.append(upsert)
    elif op.row is not None:
        batch.append(Stmt(sql.upsert_ckpt, packed_ckpt(op.row)))
    return batch, ops.SaveResult(frozenset(), tuple(flags))


def _checked_save(
    op: ops.SaveCheckpoint, sql: SQL, locking: list[bytes], held: list[bytes], refs: int
) -> Stmt:
    """The check, the refs insert and the checkpoint upsert as ONE statement
    (they were three): it locks the blobs this transaction did not insert
    (hash order) before the refs insert adds to their count rows (a one-time
    filter on the update), and fails unless every locked or own blob is
    there, the diff base exists and every ref was inserted. Its snapshot
    follows the blob insert (and the thread lock), as the check's did; a
    failed check aborts the transaction, so what the other parts wrote is
    rolled back with it."""
    key = ("checked-save", sql.insert_refs, bool(op.blobs), _cached_base(op))
    stmt = _text(key, lambda: _checked_save_text(sql, op))
    params: list[Any] = [locking, *columns(map(packed_ref, op.refs), 10), held]
    params += [*packed_ckpt(op.row), len(locking)]
    if _cached_base(op):
        params += _base_exists(op, sql)[1]
    params.append(refs)
    return Stmt(stmt, tuple(params))


def _checked_save_text(sql: SQL, op: ops.SaveCheckpoint) -> str:
    refs = sql.insert_refs.rsplit("SELECT channel, version FROM ins", 1)[0].strip()
    assert refs.startswith("WITH ins AS (") and "WHERE c.id = b.id" in refs
    refs = refs.replace("WITH ins AS (", "ins AS (", 1)
    refs = refs.replace("WHERE c.id = b.id", "WHERE (SELECT count(*) FROM l) >= 0 AND c.id = b.id")
    if op.blobs:
        refs = refs.replace(
            "b.hash = ANY(%s::bytea[])",
            f"b.hash = ANY(%s::bytea[]) AND c.id NOT IN {generic.setting_ids(NEW_COUNTS)}",
        )
    cond = "(SELECT count(*) FROM l) + (SELECT count(*) FROM a WHERE mine) = %s"
    if _cached_base(op):
        cond += " AND " + _base_exists(op, sql)[0]
    cond += " AND (SELECT count(*) FROM ins) = %s"
    return (
        f"{_lock_others(sql)}, {refs}, ck AS ({sql.upsert_ckpt.strip()})"
        f" SELECT {refuse_unless(cond)}"
    )


def _refs_text(sql: SQL, op: ops.SaveCheckpoint) -> str:
    """The refs insert, failing unless it inserted every ref; after a blob
    insert it adds no count to the rows that insert created (:data:`NEW_COUNTS`)."""
    stmt = sql.insert_refs.replace(
        "SELECT channel, version FROM ins", f"SELECT {refuse_unless('count(*) = %s')} FROM ins"
    )
    if op.blobs:
        bound = "b.hash = ANY(%s::bytea[])"
        stmt = stmt.replace(
            bound,
            f"{bound} AND c.id NOT IN {generic.setting_ids(NEW_COUNTS)}",
        )
    return stmt
