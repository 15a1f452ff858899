"""The checkpoint row of an optimistic put (see :mod:`.optimistic`): its upsert,
failing the transaction when its diff base is gone, or the check before it;
and the statement texts those plans share, built once per schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.postgres import generic
from threadloom.checkpoint.postgres.connector import CONFLICT_MARK
from threadloom.checkpoint.postgres.idpack import pack_ordered, packed_ckpt
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.saveplan import _base_exists, _cached_base
from threadloom.checkpoint.postgres.stmt import LOCK_SLOT, Stmt
from threadloom.checkpoint.storage import ops

__all__ = ["NO_REFS", "REFUSE", "refuse_unless", "save_row"]

REFUSE = f"('{CONFLICT_MARK}:' || pg_backend_pid())::int"
"""Fails the statement, and so the transaction. ``pg_backend_pid()`` is not
immutable, so the planner cannot fold the cast (and fail) before the condition
guarding it is evaluated."""


def refuse_unless(cond: str) -> str:
    """A SELECT list item: 1 when ``cond`` holds, else the transaction fails."""
    return f"CASE WHEN {cond} THEN 1 ELSE {REFUSE} END"


_texts: dict[tuple[str, ...], Any] = {}


def _text(key: tuple[str, ...], build: Callable[[], Any]) -> Any:
    """A statement text derived from the fixed texts of :class:`.queries.SQL`,
    built once (a put used to rebuild its texts at every call)."""
    text = _texts.get(key)
    if text is None:
        if len(_texts) >= 256:
            _texts.clear()
        text = _texts[key] = build()
    return text


NO_REFS = ops.SaveResult(frozenset(), ())


def save_row(op: ops.SaveCheckpoint, sql: SQL) -> list[Stmt]:
    """:func:`.optimistic._save_checkpoint` without blobs, refs or reused blobs: the row's
    upsert, failing when its diff base is gone (or the base check alone
    before a plain upsert, or nothing without a row)."""
    if op.row is None:
        check = _check(op, sql, [])
        return [check] if check is not None else []
    upsert = _checked_upsert(op, sql)
    if upsert is not None:
        return [upsert]
    check = _check(op, sql, [])
    plain = Stmt(sql.upsert_ckpt, packed_ckpt(op.row))
    return [check, plain] if check is not None else [plain]


def _lock_others(sql: SQL) -> str:
    """``a``: the blobs asked for, ``mine`` when this transaction's blob insert
    created the row (:data:`.generic.NEW_BLOBS`; not ``xmin``, which after an
    xid wraparound can equal an old frozen row's); ``l``: the others, locked in
    hash order."""
    return (
        f"WITH a AS MATERIALIZED (SELECT hash, hash IN {generic.OWN} AS mine"
        f" FROM {sql.blobs} WHERE hash = ANY(%s::bytea[])),"
        f" l AS (SELECT hash FROM {sql.blobs}"
        " WHERE hash = ANY(ARRAY(SELECT hash FROM a WHERE NOT mine)) ORDER BY hash FOR UPDATE) "
    )


def _checked_upsert(op: ops.SaveCheckpoint, sql: SQL) -> Stmt | None:
    """The checkpoint upsert, failing the transaction when its diff base is gone
    (evaluated once, before the row is written). None when the upsert's text
    has no ``VALUES (...)`` to turn into a SELECT.

    Only a keyframe's upsert has a lock slot: the base check reads the thread
    in the statement's snapshot, which must follow the lock (a put first in
    its transaction then sends the lock as a statement of its own), else a
    ``delete_thread`` committed while the put waited leaves a diff against a
    deleted base."""
    if not _cached_base(op):
        stmt = _text(("upsert", sql.upsert_ckpt), lambda: _upsert_where(sql, LOCK_SLOT))
        return Stmt(stmt, packed_ckpt(op.row)) if stmt else None
    # no lock slot: the base check needs a snapshot taken after it
    stmt = _text(("upsert-base", sql.upsert_ckpt), lambda: _upsert_where(sql, _base_where(op, sql)))
    if stmt == "":
        return None
    row = op.row
    return Stmt(stmt, (*packed_ckpt(row), row.thread_id, row.checkpoint_ns, pack_ordered(op.base)))


def _base_where(op: ops.SaveCheckpoint, sql: SQL) -> str:
    """The base check as the upsert's filter; its parameters are the row's
    thread and namespace and the packed base id (:func:`.saveplan._base_exists`)."""
    return f"({refuse_unless(_base_exists(op, sql)[0])}) = 1"


def _upsert_where(sql: SQL, where: str) -> str:
    """The checkpoint upsert as ``INSERT ... SELECT <values> WHERE <where>``
    ("" when its text has no ``VALUES (...)``)."""
    text = sql.upsert_ckpt
    start = text.find("VALUES (")
    end = text.find(")", start)
    if start < 0 or end < 0:
        return ""
    return f"{text[:start]}SELECT {text[start + 8 : end]} WHERE {where}{text[end + 1 :]}"


def _check(op: ops.SaveCheckpoint, sql: SQL, locking: list[bytes]) -> Stmt | None:
    """Lock every blob the refs hold or reuse (hash order) that this
    transaction did not insert, and fail unless all are there and the diff base
    exists (see :func:`.saveplan.check`: a blob deleted while the lock waited is
    not returned, so it counts as missing). A blob row this transaction
    inserted is invisible to every other until the commit, so nobody can delete
    it: locking it only wrote a row-lock WAL record and dirtied its page (5 of
    a bench put's ~55 WAL records)."""
    parts: list[str] = []
    params: list[Any] = []
    with_ = ""
    if locking:
        with_ = _text(("lock", sql.blobs), lambda: _lock_others(sql))
        parts.append("(SELECT count(*) FROM l) + (SELECT count(*) FROM a WHERE mine) = %s")
        params += [locking, len(locking)]
    if _cached_base(op):
        base, bparams = _base_exists(op, sql)
        parts.append(base)
        params += bparams
    if not parts:
        return None
    return Stmt(f"{with_}SELECT {refuse_unless(' AND '.join(parts))}", tuple(params))
