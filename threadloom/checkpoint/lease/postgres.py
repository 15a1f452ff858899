"""Leases on Postgres: a ``tl_leases`` row per thread in the saver's schema
(created by ``setup()``, like the other tables).

Times come from the server clock (``clock_timestamp()``), so processes on
several hosts agree. The fence (:class:`~.ops.CheckLease`) locks our row
(``FOR NO KEY UPDATE``) inside the write transaction: a takeover (an ``UPDATE``
of that row) waits until the checkpoint is committed, and a checkpoint whose
fence failed is rolled back with its transaction. It extends the lease only
when a third of the TTL has passed since the last extension (:func:`fence`).

Acquiring runs in a writing transaction, whose first statement on the thread
takes the thread's advisory lock (``postgres/executor.py`` ``_thread_lock``):
retention holds that lock from its lease check to its commit, so a run
acquiring meanwhile waits and then reads the finished result
(``tests/concurrency/test_retention_race.py``).
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.lease import ops as lo

__all__ = ["PLANNERS", "TABLE", "fence", "fence_params"]

NOW = "(extract(epoch from clock_timestamp()) * 1000)"
COLS = f"holder, token, (expires_at - {NOW})::bigint, stop"


def Stmt(*args: Any) -> Any:  # stands in for the class
    """``postgres.connection.Stmt``, imported on use: importing it at module level
    would cycle (postgres package -> executor -> this module) when this module is
    imported first."""
    from threadloom.checkpoint.postgres.stmt import Stmt as _Stmt

    return _Stmt(*args)


def _t(sql: Any) -> str:
    return f"{sql.s}.tl_leases"


TABLE = (  # a migration of the saver's schema (postgres/schema.py MIGRATIONS)
    "CREATE TABLE IF NOT EXISTS {s}.tl_leases (thread_id TEXT PRIMARY KEY,"
    " holder TEXT NOT NULL, token TEXT NOT NULL,"
    " expires_at DOUBLE PRECISION NOT NULL, stop TEXT NOT NULL DEFAULT '')"
)


def _info(row: Any) -> lo.LeaseInfo | None:
    return None if row is None else lo.LeaseInfo(row[0], row[1], int(row[2]), row[3])


def _acquire(op: lo.AcquireLease, sql: Any) -> Any:
    t = _t(sql)
    upsert = Stmt(
        f"INSERT INTO {t} AS l VALUES (%s, %s, %s, {NOW} + %s, '') ON CONFLICT (thread_id)"
        " DO UPDATE SET holder = EXCLUDED.holder, token = EXCLUDED.token,"
        f" expires_at = EXCLUDED.expires_at, stop = '' WHERE l.expires_at <= {NOW}"
        " OR l.token = EXCLUDED.token OR l.token = %s RETURNING token",
        (op.thread_id, op.holder, op.token, op.ttl_ms, op.steal),
        "one",
    )
    read = Stmt(f"SELECT {COLS} FROM {t} WHERE thread_id = %s", (op.thread_id,), "one")
    return [upsert, read], lambda r: None if r[0] is not None else _info(r[1])


def _renew(op: lo.RenewLease, sql: Any) -> Any:
    stmt = Stmt(
        f"UPDATE {_t(sql)} SET expires_at = {NOW} + %s WHERE thread_id = %s AND token = %s"
        f" AND expires_at > {NOW} RETURNING {COLS}",
        (op.ttl_ms, op.thread_id, op.token),
        "one",
    )
    return [stmt], lambda r: _info(r[0])


def _release(op: lo.ReleaseLease, sql: Any) -> Any:
    """Delete the row: a released lease kept as an expired row (tried in migration
    17's session to avoid a dead row per run) would stay forever, one per thread
    ever leased and holding its last run id after the thread is erased."""
    stmt = Stmt(
        f"DELETE FROM {_t(sql)} WHERE thread_id = %s AND token = %s", (op.thread_id, op.token)
    )
    return [stmt], lambda r: None


def _request_stop(op: lo.RequestStop, sql: Any) -> Any:
    new = (
        "CASE WHEN stop = %s THEN '' ELSE stop END"
        if op.withdraw
        else ("CASE WHEN stop = '' THEN %s ELSE stop END")
    )
    stmt = Stmt(
        f"UPDATE {_t(sql)} SET stop = {new}"
        f" WHERE thread_id = %s AND expires_at > {NOW} RETURNING {COLS}",
        (op.mode, op.thread_id),
        "one",
    )
    return [stmt], lambda r: _info(r[0])


def fence(op: lo.CheckLease, sql: Any) -> tuple[str, tuple[Any, ...]]:
    """The fence's CTEs: ``l`` locks our live lease row (``FOR NO KEY UPDATE``: a
    takeover waits until this transaction ends) and yields its stop request;
    ``u`` extends it only when less than two thirds of the TTL are left, as the
    SQLite fence does. A row lock writes no new row version; an UPDATE at every
    step did (a dead row each, which other sessions' snapshots can keep from
    being pruned: up to ~0.8 MB over the bench's 1,000-turn conversation)."""
    t = _t(sql)
    ctes = (
        f"l AS MATERIALIZED (SELECT stop, expires_at FROM {t} WHERE thread_id = %s"
        f" AND token = %s AND expires_at > {NOW} FOR NO KEY UPDATE),"
        f" u AS (UPDATE {t} SET expires_at = {NOW} + %s FROM l WHERE thread_id = %s"
        f" AND token = %s AND l.expires_at <= {NOW} + %s * 2 / 3)"
    )
    return ctes, fence_params(op)


def fence_params(op: lo.CheckLease) -> tuple[Any, ...]:
    """The parameters of :func:`fence`'s CTEs (its text depends on the schema
    only, so the optimistic fence builds it once: ``postgres/optimistic.py``)."""
    t, k, ttl = op.thread_id, op.token, op.ttl_ms
    return (t, k, ttl, t, k, ttl)


def _check(op: lo.CheckLease, sql: Any) -> Any:
    ctes, params = fence(op, sql)
    stmt = Stmt(f"WITH {ctes} SELECT stop FROM l", params, "one")
    return [stmt], lambda r: None if r[0] is None else r[0][0]


def _read(op: lo.ReadLease, sql: Any) -> Any:
    stmt = Stmt(
        f"SELECT {COLS} FROM {_t(sql)} WHERE thread_id = %s AND expires_at > {NOW}",
        (op.thread_id,),
        "one",
    )
    return [stmt], lambda r: _info(r[0])


PLANNERS: dict[type, Any] = {
    lo.AcquireLease: _acquire,
    lo.RenewLease: _renew,
    lo.ReleaseLease: _release,
    lo.RequestStop: _request_stop,
    lo.CheckLease: _check,
    lo.ReadLease: _read,
}
