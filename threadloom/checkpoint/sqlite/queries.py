"""Every SQL statement of the SQLite backend, as plans shared by sync and async.

``plan(op)`` returns a generator that yields :class:`Stmt` and receives each
statement's result; :mod:`.executor` runs the same plan on ``sqlite3`` or on
``aiosqlite``. Identifiers are fixed; every value is a bound parameter.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Generator, Sequence
from typing import Any, NamedTuple

from threadloom.checkpoint.lease.sqlite import PLANS as LEASE_PLANS
from threadloom.checkpoint.sqlite.ttl import PLANS as TTL_PLANS
from threadloom.checkpoint.storage import ops as o

__all__ = ["Stmt", "plan", "CHUNK"]

CHUNK = 400  # values per IN (...) list, well under SQLite's variable limit

CP_COLS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, tag, data, metadata, run_id"
)
REF_COLS = "thread_id, checkpoint_ns, channel, version, kind, tag, data, hashes, length, logical"
WRITE_COLS = "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, data, hashes"
ORDER = " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC"
THREAD = "(SELECT id FROM tl_threads WHERE thread_id = ?)"
ADD_THREAD = "INSERT OR IGNORE INTO tl_threads (thread_id) VALUES (?)"
DROP_THREAD = (
    "DELETE FROM tl_threads WHERE thread_id = ?"
    " AND NOT EXISTS (SELECT 1 FROM tl_checkpoints WHERE thread = tl_threads.id)"
    " AND NOT EXISTS (SELECT 1 FROM tl_refs WHERE thread = tl_threads.id)"
    " AND NOT EXISTS (SELECT 1 FROM tl_writes WHERE thread = tl_threads.id)"
)

INSERT_BLOB = (
    "INSERT OR IGNORE INTO tl_blobs (hash, tag, data, children, refs) VALUES (?, ?, ?, ?, 0)"
)

INSERT_REF = f"INSERT OR IGNORE INTO tl_refs (thread, {REF_COLS[11:]}) VALUES ({THREAD}, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
UPSERT_REF = f"INSERT OR REPLACE INTO tl_refs (thread, {REF_COLS[11:]}) VALUES ({THREAD}, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
UPSERT_CP = f"INSERT OR REPLACE INTO tl_checkpoints (thread, {CP_COLS[11:]}) VALUES ({THREAD}, ?, ?, ?, ?, ?, ?, ?)"
UPSERT_WRITE = f"INSERT OR REPLACE INTO tl_writes (thread, {WRITE_COLS[11:]}) VALUES ({THREAD}, ?, ?, ?, ?, ?, ?)"
ANCESTORS = f"""WITH RECURSIVE chain(n, cid) AS (
    SELECT 0, ?
    UNION ALL
    SELECT chain.n + 1, c.parent_checkpoint_id FROM chain JOIN v_checkpoints c
      ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = chain.cid
    WHERE chain.n < ? AND c.parent_checkpoint_id IS NOT NULL
)
SELECT {CP_COLS} FROM v_checkpoints
WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN (SELECT cid FROM chain)"""
ADD_REFS = "UPDATE tl_blobs SET refs = refs + ? WHERE hash = ?"


_HEX = frozenset("0123456789abcdef")


def enc_id(value: str | None) -> Any:
    """A canonical lowercase UUID string as its 16 bytes (BLOB order = text order
    for these), anything else unchanged; ids are most of a row's key."""
    if (
        type(value) is str
        and len(value) == 36
        and value[8] == value[13] == value[18] == value[23] == "-"
    ):
        hexdigits = value.replace("-", "")
        if len(hexdigits) == 32 and _HEX.issuperset(hexdigits):
            return bytes.fromhex(hexdigits)
    return value


def dec_id(value: Any) -> Any:
    if type(value) is bytes:
        h = value.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return value


def _cp_row(r: Sequence[Any]) -> o.CheckpointRow:
    return o.CheckpointRow(r[0], r[1], dec_id(r[2]), dec_id(r[3]), r[4], r[5], r[6], r[7])


def _cp_params(row: o.CheckpointRow) -> tuple[Any, ...]:
    return (*row[:2], enc_id(row[2]), enc_id(row[3]), *row[4:])


def _w_row(r: Sequence[Any]) -> o.WriteRow:
    return o.WriteRow(r[0], r[1], dec_id(r[2]), dec_id(r[3]), r[4], r[5], r[6])


def _w_params(row: o.WriteRow) -> tuple[Any, ...]:
    return (*row[:2], enc_id(row[2]), enc_id(row[3]), *row[4:])


class Stmt(NamedTuple):
    """One statement. ``mode``: ``all`` (rows), ``one`` (row|None),
    ``count`` (rowcount), ``many`` (executemany, rowcount)."""

    sql: str
    params: Any = ()
    mode: str = "all"


Plan = Generator[Stmt, Any, Any]


def _chunks(items: Sequence[Any], size: int = CHUNK) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _scope(
    thread_id: str | None, ns: str | None, table: bool = False
) -> tuple[list[str], list[Any]]:
    """WHERE parts for a thread/namespace: on a ``v_*`` view by default, on a
    ``tl_*`` table (integer ``thread``) when ``table``."""
    where, params = [], []
    if thread_id is not None:
        where.append(f"thread = {THREAD}" if table else "thread_id = ?")
        params.append(thread_id)
    if ns is not None:
        where.append("checkpoint_ns = ?")
        params.append(ns)
    return where, params


def _add_threads(rows: Sequence[Any]) -> Plan:
    for thread_id in dict.fromkeys(r[0] for r in rows):
        yield Stmt(ADD_THREAD, (thread_id,), "count")


def _filter_sql(key: str, json_value: str) -> tuple[str, list[Any]]:
    """Equality on one metadata key; ``key`` is pre-validated, values are bound."""
    path = f'$."{key}"'
    value = json.loads(json_value)
    if value is None:
        return "json_type(metadata, ?) = 'null'", [path]
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
        sql = f"SELECT {CP_COLS} FROM v_checkpoints WHERE run_id IN ({_marks(len(part))})"
        found.extend(_cp_row(r) for r in (yield Stmt(sql, part)))
    return found


def _load_refs(op: o.LoadRefs) -> Plan:
    found = []
    for part in _chunks(op.keys, CHUNK // 2):
        values = ", ".join(["(?, ?)"] * len(part))
        # a join on a VALUES list, not `(channel, version) IN (VALUES ...)`: SQLite
        # answers the IN form with a scan of every ref of the thread, the join with
        # one primary-key lookup per key, so reads stay flat as a thread grows
        cols = ", ".join(f"r.{c.strip()}" for c in REF_COLS.split(","))
        sql = (
            f"WITH k(channel, version) AS (VALUES {values})"
            f" SELECT {cols} FROM k JOIN v_refs r"
            " ON r.channel = k.channel AND r.version = k.version"
            " WHERE r.thread_id = ? AND r.checkpoint_ns = ?"
        )
        params = [*(x for key in part for x in key), op.thread_id, op.checkpoint_ns]
        found.extend(o.RefRow(*r) for r in (yield Stmt(sql, params)))
    return found


def _thread_refs(op: o.LoadThreadRefs) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    rows = yield Stmt(f"SELECT {REF_COLS} FROM v_refs WHERE " + " AND ".join(where), params)
    return [o.RefRow(*r) for r in rows]


def _load_blobs(op: o.LoadBlobs) -> Plan:
    found: dict[bytes, Any] = {}
    cols = "hash, tag, data, children, refs" if op.refcounts else "hash, tag, data, children"
    for part in _chunks(op.hashes):
        sql = f"SELECT {cols} FROM tl_blobs WHERE hash IN ({_marks(len(part))})"
        for r in (yield Stmt(sql, part)):
            found[r[0]] = (o.BlobRow(*r[:4]), r[4]) if op.refcounts else o.BlobRow(*r)
    return found


def _load_writes(op: o.LoadWrites) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    base = f"SELECT {WRITE_COLS} FROM v_writes WHERE " + " AND ".join(where)
    if op.checkpoint_ids is None:
        return [_w_row(r) for r in (yield Stmt(base, params))]
    found = []
    for part in _chunks([enc_id(i) for i in op.checkpoint_ids]):
        sql = base + f" AND checkpoint_id IN ({_marks(len(part))})"
        found.extend(_w_row(r) for r in (yield Stmt(sql, [*params, *part])))
    return found


# -- writes -------------------------------------------------------------------


def _stale(op: o.SaveCheckpoint) -> Plan:
    """Whether the diff base or a reused blob is gone (see SaveCheckpoint)."""
    if op.base is not None and op.row is not None:
        sql = "SELECT 1 FROM v_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        params = (op.row.thread_id, op.row.checkpoint_ns, enc_id(op.base))
        if (yield Stmt(sql, params, "one")) is None:
            return True
    for part in _chunks(op.needs):
        sql = f"SELECT count(*) FROM tl_blobs WHERE hash IN ({_marks(len(part))})"
        if (yield Stmt(sql, part, "one"))[0] != len(part):
            return True
    return False


def _save(op: o.SaveCheckpoint) -> Plan:
    if (yield from _stale(op)):
        return o.SaveResult(frozenset(), (), stale=True)
    yield from _add_threads([op.row] if op.row is not None else op.refs)
    new = []
    for blob in op.blobs:
        if (yield Stmt(INSERT_BLOB, blob, "count")):
            new.append(blob.hash)
    inserted = []
    held: Counter[bytes] = Counter()
    for ref in op.refs:
        ok = bool((yield Stmt(INSERT_REF, ref, "count")))
        inserted.append(ok)
        if ok:
            h = ref.hashes
            held.update(h[i : i + o.HASH_SIZE] for i in range(0, len(h), o.HASH_SIZE))
    if held:
        yield Stmt(ADD_REFS, [(n, h) for h, n in held.items()], "many")
    if op.row is not None:
        yield Stmt(UPSERT_CP, _cp_params(op.row), "count")
    return o.SaveResult(frozenset(new), tuple(inserted))


def _save_writes(op: o.SaveWrites) -> Plan:
    yield from _add_threads(op.rows)
    new = []
    for blob in op.blobs:
        if (yield Stmt(INSERT_BLOB, blob, "count")):
            new.append(blob.hash)
    yield Stmt(UPSERT_WRITE, [_w_params(w) for w in op.rows], "many")
    return frozenset(new)


def _insert(op: o.InsertRows) -> Plan:
    yield from _add_threads([*op.checkpoints, *op.refs, *op.writes])
    if op.checkpoints:
        yield Stmt(UPSERT_CP, [_cp_params(r) for r in op.checkpoints], "many")
    if op.refs:
        yield Stmt(UPSERT_REF, op.refs, "many")
    if op.writes:
        yield Stmt(UPSERT_WRITE, [_w_params(w) for w in op.writes], "many")


def _adjust(op: o.AdjustRefcounts) -> Plan:
    if op.deltas:
        yield Stmt(ADD_REFS, [(d, h) for h, d in op.deltas], "many")


def _drop(op: o.DropUnreferenced) -> Plan:
    dropped = []
    for part in _chunks(op.hashes):
        cond = f"refs <= 0 AND hash IN ({_marks(len(part))})"
        rows = yield Stmt(f"SELECT hash, tag, data, children FROM tl_blobs WHERE {cond}", part)
        if rows:
            yield Stmt(f"DELETE FROM tl_blobs WHERE {cond}", part, "count")
            dropped.extend(o.BlobRow(*r) for r in rows)
    return dropped


def _delete_checkpoints(op: o.DeleteCheckpoints) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns, table=True)
    cond = " AND ".join(where)
    count = 0
    if op.checkpoint_ids is None:
        yield Stmt(f"DELETE FROM tl_writes WHERE {cond}", params, "count")
        count = yield Stmt(f"DELETE FROM tl_checkpoints WHERE {cond}", params, "count")
    for part in _chunks([enc_id(i) for i in op.checkpoint_ids or ()]):
        ids = f" AND checkpoint_id IN ({_marks(len(part))})"
        yield Stmt(f"DELETE FROM tl_writes WHERE {cond}{ids}", [*params, *part], "count")
        count += yield Stmt(
            f"DELETE FROM tl_checkpoints WHERE {cond}{ids}", [*params, *part], "count"
        )
    yield Stmt(DROP_THREAD, (op.thread_id,), "count")
    return count


def _delete_refs(op: o.DeleteRefs) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns, table=True)
    cond = " AND ".join(where)
    if op.keys is None:
        yield Stmt(f"DELETE FROM tl_refs WHERE {cond}", params, "count")
    for part in _chunks(op.keys or (), CHUNK // 2):
        values = ", ".join(["(?, ?)"] * len(part))
        sql = f"DELETE FROM tl_refs WHERE {cond} AND (channel, version) IN (VALUES {values})"
        yield Stmt(sql, [*params, *(x for key in part for x in key)], "count")
    yield Stmt(DROP_THREAD, (op.thread_id,), "count")


_PLANS = {
    o.GetCheckpoint: _get,
    o.LoadAncestors: _ancestors,
    o.ListCheckpoints: _list,
    o.FindRunCheckpoints: _find_runs,
    o.LoadRefs: _load_refs,
    o.LoadThreadRefs: _thread_refs,
    o.LoadBlobs: _load_blobs,
    o.LoadWrites: _load_writes,
    o.SaveCheckpoint: _save,
    o.SaveWrites: _save_writes,
    o.InsertRows: _insert,
    o.AdjustRefcounts: _adjust,
    o.DropUnreferenced: _drop,
    o.DeleteCheckpoints: _delete_checkpoints,
    o.DeleteRefs: _delete_refs,
    **LEASE_PLANS,  # thread leases: checkpoint/lease/sqlite.py
    **TTL_PLANS,  # per-thread TTL clocks: sqlite/ttl.py
}


def plan(op: o.Op) -> Plan:
    """The statements that run ``op`` (a generator; see module docstring)."""
    if type(op) is o.CollectStats:
        from threadloom.checkpoint.sqlite.stats import stats_plan

        return stats_plan(op)
    return _PLANS[type(op)](op)
