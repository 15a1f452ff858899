"""The plan of one put (:class:`~threadloom.checkpoint.storage.ops.SaveCheckpoint`)
on Postgres, split from :mod:`.executor`.

A put is one pipelined batch: insert its blobs, lock every blob its refs hold
(hash order: no deadlocks between writers sharing blobs) and check that it is
not stale, insert its refs (adding their references), upsert its checkpoint.
The statements cannot branch on each other's results, so the check's answer
is kept in a transaction-local setting under a token of the put's own and the
later writes compare that setting with the token (a one-time filter): the
guard's subqueries run before the locks (so a stale put inserts no blobs) and
once after them, not once per write.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.postgres.blobplans import guarded, insert_blobs, lock_blobs
from threadloom.checkpoint.postgres.idpack import (
    pack_ordered,
    packed_ckpt,
    packed_ref,
    unpack_version,
)
from threadloom.checkpoint.postgres.queries import SQL, columns
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import HASH_SIZE

__all__ = ["PASSED", "check", "lock_in_first", "save_checkpoint"]

Plan = tuple[list[Stmt], Callable[[list[Any]], Any]]

_SETTING = "threadloom.put_ok"
PASSED = f"current_setting('{_SETTING}', true) = %s"
"""True after this transaction's last check passed with the token given."""

_CKPT_VALUES = "VALUES (%s, %s, %s, %s::bytea, %s, %s, %s, %s)"


def save_checkpoint(op: ops.SaveCheckpoint, sql: SQL) -> Plan:
    guard, gparams = "", ()
    batch = insert_blobs(
        op.blobs, sql, max_items=op.max_items
    )  # unguarded: a stale put's check takes them back
    blobs = bool(batch)
    held: list[bytes] = []
    if op.refs:  # includes the reused blobs (op.needs)
        held = sorted(
            {r.hashes[i : i + HASH_SIZE] for r in op.refs for i in range(0, len(r.hashes), 16)}
        )
    if _cached_base(op) or op.needs:  # locks + check: the answer holds until COMMIT
        token = secrets.token_hex(8)
        sent = sorted({b.hash for b in op.blobs}) if blobs else None
        batch.append(check(op, sql, held, token, sent))
        guard, gparams = PASSED, (token,)
    else:
        batch += lock_blobs(held, sql)
    at = len(batch) - 1  # the check (or the lock when there is none)
    if op.refs:
        stmt = guarded(sql.insert_refs, "ON CONFLICT", guard)
        params = (*columns(map(packed_ref, op.refs), 10), *gparams, held)
        batch.append(Stmt(stmt, params, "all"))
    if op.row is not None:
        if guard:
            values = "SELECT %s, %s, %s, %s::bytea, %s, %s::bytea, %s, %s WHERE " + guard
            stmt = sql.upsert_ckpt.replace(_CKPT_VALUES, values)
            batch.append(Stmt(stmt, (*packed_ckpt(op.row), *gparams)))
        else:
            batch.append(Stmt(sql.upsert_ckpt, packed_ckpt(op.row)))
    refs, checked = op.refs, bool(guard)

    def decode(results: list[Any]) -> ops.SaveResult:
        if checked and not results[at][0]:
            return ops.SaveResult(frozenset(), (), stale=True)  # nothing was kept
        new = frozenset(bytes(r[0]) for r in results[0]) if blobs else frozenset()
        inserted = set()
        if refs:
            inserted = {(r[0], unpack_version(r[1])) for r in results[at + 1]}
        flags = []
        for ref in refs:
            key = (ref.channel, ref.version)
            flags.append(key in inserted)
            inserted.discard(key)  # a repeated key in one call: only the first counts
        return ops.SaveResult(new_blobs=new, inserted_refs=tuple(flags))

    return batch, decode


def check(
    op: ops.SaveCheckpoint, sql: SQL, held: list[bytes], token: str, sent: list[bytes] | None
) -> Stmt:
    """Lock the blobs the refs hold (hash order), then answer whether the put
    is still valid and record the answer for the writes after it (:data:`PASSED`).

    Every blob the refs hold must be there, reused (``op.needs``) or sent (an
    existing one the insert skipped may have been dropped since), and counts
    only if its row was locked: one another process deleted while this put
    waited for the lock is not returned, so the check needs no second look at
    the table (whose snapshot would predate the wait). The diff base is
    protected by the thread's advisory lock, taken before. When the check
    fails and this put sent blobs, the same statement takes back those nobody
    references (the ones it inserted). The token is random: no earlier put of
    the transaction passes for this one.
    """
    ctes, parts, params = [], [], []
    locking = sorted(set(held) | set(op.needs))
    if locking:
        ctes.append(
            f"l AS (SELECT hash FROM {sql.blobs} WHERE hash = ANY(%s::bytea[])"
            " ORDER BY hash FOR UPDATE)"
        )
        # first in the AND: evaluated (every row locked) whatever the rest says
        parts.append("(SELECT count(*) FROM l) = %s")
        params += [locking, len(locking)]
    base, bparams = _base_exists(op, sql)
    if base:
        parts.append(base)
        params += bparams
    cond = " AND ".join(parts)
    ctes.append(
        f"g AS MATERIALIZED (SELECT set_config('{_SETTING}',"
        f" CASE WHEN {cond} THEN %s ELSE '' END, true) AS ok)"
    )
    params.append(token)
    if sent is not None:
        ctes.append(
            f"gone AS (DELETE FROM {sql.counts} c USING {sql.blobs} k WHERE c.id = k.id"
            " AND k.hash = ANY(%s::bytea[]) AND c.refs = 0"
            " AND (SELECT ok FROM g) = '' RETURNING k.hash)"
        )
        ctes.append(f"del AS (DELETE FROM {sql.blobs} b USING gone WHERE b.hash = gone.hash)")
        params.append(sent)
    return Stmt(f"WITH {', '.join(ctes)} SELECT ok <> '' FROM g", tuple(params), "one")


def _cached_base(op: ops.SaveCheckpoint) -> bool:
    """Whether the put is a diff against a base it did not re-read."""
    return op.base is not None and op.row is not None


def _base_exists(op: ops.SaveCheckpoint, sql: SQL) -> tuple[str, list[Any]]:
    if not _cached_base(op):
        return "", []
    return (
        f"EXISTS (SELECT 1 FROM {sql.ckpt} WHERE thread_id = %s"
        " AND checkpoint_ns = %s AND checkpoint_id = %s)"
    ), [op.row.thread_id, op.row.checkpoint_ns, pack_ordered(op.base)]


_LOCKED = "(SELECT 1 FROM pg_advisory_xact_lock(%s)) = 1"


def lock_in_first(batch: list[Stmt], sql: SQL, key: int) -> bool:
    """Make the put's blob insert take the thread's advisory lock ``key``
    first (True), or leave ``batch`` alone when it does not start with one.

    The lock is a one-time filter above the rows to insert: it is held before
    the first blob row is written. The insert reads nothing that the lock
    protects (ON CONFLICT looks at the latest rows, not the statement's
    snapshot, which predates the wait), and every read that needs the lock
    (the check) is a later statement, whose snapshot follows it.
    """
    if not batch or not batch[0].sql.startswith(sql.insert_blobs.split("ON CONFLICT")[0]):
        return False  # (the optimistic insert of .optimistic starts alike)
    first = batch[0]
    stmt = guarded(first.sql, "ON CONFLICT", _LOCKED)
    batch[0] = Stmt(stmt, (*first.params, key), first.fetch)
    return True
