"""Every SQL statement of the SQLite backend, as plans shared by sync and async.

``plan(op)`` returns a generator that yields :class:`Stmt` and receives each
statement's result; :mod:`.executor` runs the same plan on ``sqlite3`` or on
``aiosqlite``. Identifiers are fixed; every value is a bound parameter.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from threadloom.checkpoint.lease.sqlite import PLANS as LEASE_PLANS
from threadloom.checkpoint.sqlite.common import (
    CHUNK,
    CP_COLS,
    REF_COLS,
    WRITE_COLS,
    Plan,
    Stmt,
    _chunks,
    _cp_row,
    _in_list,
    _marks,
    _scope,
    _w_row,
    enc_id,
)
from threadloom.checkpoint.sqlite.ttl import PLANS as TTL_PLANS
from threadloom.checkpoint.sqlite.writes import WRITE_PLANS
from threadloom.checkpoint.storage import ops as o
from threadloom.errors import StorageError

__all__ = ["Stmt", "Plan", "plan", "CHUNK", "_marks", "_scope"]

ORDER = " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC"
ANCESTORS = f"""WITH RECURSIVE chain(n, cid) AS (
    SELECT 0, ?
    UNION ALL
    SELECT chain.n + 1, c.parent_checkpoint_id FROM chain JOIN v_checkpoints c
      ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = chain.cid
    WHERE chain.n < ? AND c.parent_checkpoint_id IS NOT NULL
)
SELECT {CP_COLS} FROM v_checkpoints
WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN (SELECT cid FROM chain)"""


def _filter_sql(key: str, json_value: str) -> tuple[str, list[Any]]:
    """Equality on one metadata key; ``key`` is pre-validated, values are bound."""
    path = f'$."{key}"'
    value = json.loads(json_value)
    if value is None:  # JSON null or no such key, as LangGraph's SQLite saver matches
        return "coalesce(json_type(metadata, ?), 'null') = 'null'", [path]
    if isinstance(value, bool):
        return "json_type(metadata, ?) = ?", [path, "true" if value else "false"]
    if isinstance(value, (int, float)):
        sql = "json_type(metadata, ?) IN ('integer', 'real') AND json_extract(metadata, ?) = ?"
        return sql, [path, path, value]
    if isinstance(value, str):
        return "json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?", [
            path,
            path,
            value,
        ]
    return "json_extract(metadata, ?) = json(?)", [path, json_value]


# -- reads --------------------------------------------------------------------


def _get(op: o.GetCheckpoint) -> Plan:
    sql = f"SELECT {CP_COLS} FROM v_checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
    if op.checkpoint_id is not None:
        row = yield Stmt(
            sql + " AND checkpoint_id = ?",
            (op.thread_id, op.checkpoint_ns, enc_id(op.checkpoint_id)),
            "one",
        )
    else:
        row = yield Stmt(
            sql + " ORDER BY checkpoint_id DESC LIMIT 1", (op.thread_id, op.checkpoint_ns), "one"
        )
    return _cp_row(row) if row else None


def _ancestors(op: o.LoadAncestors) -> Plan:
    t, ns = op.thread_id, op.checkpoint_ns
    rows = yield Stmt(ANCESTORS, (enc_id(op.checkpoint_id), t, ns, op.depth, t, ns))
    return [_cp_row(r) for r in rows]


def _list(op: o.ListCheckpoints) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    for key, value in op.filter:
        sql, p = _filter_sql(key, value)
        where.append(sql)
        params.extend(p)
    if op.before is not None:
        where.append("checkpoint_id < ?")
        params.append(enc_id(op.before))
    if op.after is not None:
        where.append("(checkpoint_id, thread_id, checkpoint_ns) < (?, ?, ?)")
        params.extend((enc_id(op.after[0]), *op.after[1:]))
    sql = f"SELECT {CP_COLS} FROM v_checkpoints"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += ORDER
    if op.limit is not None:
        sql += " LIMIT ?"
        params.append(op.limit)
    rows = yield Stmt(sql, params)
    return [_cp_row(r) for r in rows]


def _find_runs(op: o.FindRunCheckpoints) -> Plan:
    found = []
    for part in _chunks(op.run_ids):
        marks, values = _in_list(part)
        sql = f"SELECT {CP_COLS} FROM v_checkpoints WHERE run_id IN ({marks})"
        found.extend(_cp_row(r) for r in (yield Stmt(sql, values)))
    return found


@cache
def _refs_sql(size: int) -> str:
    # a join on a VALUES list, not `(channel, version) IN (VALUES ...)`: SQLite
    # answers the IN form with a scan of every ref of the thread, the join with
    # one primary-key lookup per key, so reads stay flat as a thread grows
    cols = ", ".join(f"r.{c.strip()}" for c in REF_COLS.split(","))
    return (
        f"WITH k(channel, version) AS (VALUES {', '.join(['(?, ?)'] * size)})"
        f" SELECT {cols} FROM k JOIN v_refs r"
        " ON r.channel = k.channel AND r.version = k.version"
        " WHERE r.thread_id = ? AND r.checkpoint_ns = ?"
    )


def _load_refs(op: o.LoadRefs) -> Plan:
    found = []
    for part in _chunks(op.keys, CHUNK // 2):
        params = [*(x for key in part for x in key), op.thread_id, op.checkpoint_ns]
        found.extend(o.RefRow(*r) for r in (yield Stmt(_refs_sql(len(part)), params)))
    return found


def _thread_refs(op: o.LoadThreadRefs) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    rows = yield Stmt(f"SELECT {REF_COLS} FROM v_refs WHERE " + " AND ".join(where), params)
    return [o.RefRow(*r) for r in rows]


def _load_blobs(op: o.LoadBlobs) -> Plan:
    found: dict[bytes, Any] = {}
    cols = "hash, tag, data, children, refs" if op.refcounts else "hash, tag, data, children"
    for part in _chunks(op.hashes):
        marks, values = _in_list(part)
        sql = f"SELECT {cols} FROM tl_blobs WHERE hash IN ({marks})"
        for r in (yield Stmt(sql, values)):
            found[r[0]] = (o.BlobRow(*r[:4]), r[4]) if op.refcounts else o.BlobRow(*r)
    return found


def _load_writes(op: o.LoadWrites) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    base = f"SELECT {WRITE_COLS} FROM v_writes WHERE " + " AND ".join(where)
    if op.task_id is not None:  # one task's row (a put_writes merge): by primary key
        base += " AND task_id = ?"
        params.append(enc_id(op.task_id))
    if op.checkpoint_ids is None:
        return [_w_row(r) for r in (yield Stmt(base, params))]
    found = []
    for part in _chunks([enc_id(i) for i in op.checkpoint_ids]):
        marks, values = _in_list(part)
        sql = base + f" AND checkpoint_id IN ({marks})"
        found.extend(_w_row(r) for r in (yield Stmt(sql, [*params, *values])))
    return found


_PLANS = {
    o.GetCheckpoint: _get,
    o.LoadAncestors: _ancestors,
    o.ListCheckpoints: _list,
    o.FindRunCheckpoints: _find_runs,
    o.LoadRefs: _load_refs,
    o.LoadThreadRefs: _thread_refs,
    o.LoadBlobs: _load_blobs,
    o.LoadWrites: _load_writes,
    **WRITE_PLANS,  # sqlite/writes.py
    **LEASE_PLANS,  # thread leases: checkpoint/lease/sqlite.py
    **TTL_PLANS,  # per-thread TTL clocks: sqlite/ttl.py
}


def plan(op: o.Op) -> Plan:
    """The statements that run ``op`` (a generator; see module docstring)."""
    build = _PLANS.get(type(op))
    if build is not None:
        return build(op)
    if type(op) is o.CollectStats:
        from threadloom.checkpoint.sqlite.stats import stats_plan

        return stats_plan(op)
    raise StorageError(f"the SQLite saver has no plan for {type(op).__name__}")
