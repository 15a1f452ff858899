"""Write plans of the SQLite backend: as little work per operation as the
contract allows.

A checkpoint save: the thread's integer id (a primary-key read the executor
answers from its memo while no one else wrote, ``sqlite/memo.py``; an insert
the first time), one staleness probe when the flow needs one (the memo knows
a base this connection saved), one ``INSERT OR IGNORE``
per ref row and per blob (their rowcount says what was inserted: a multi-row
``VALUES`` saves ~2-3 us of 5 rows but has one rowcount for all, and a probe
``SELECT`` or ``RETURNING`` to recover them costs more than it saves; an upsert
cannot tell an insert from an update: docs/sqlite.md), blobs inserted holding
their final reference count so new blobs need no ``UPDATE``, and the
checkpoint row. Rows carry the integer thread id, not a subquery on the
thread's text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from threadloom.checkpoint.sqlite.common import (
    CP_COLS,
    REF_COLS,
    THREAD,
    WRITE_COLS,
    Plan,
    Stmt,
    _chunks,
    _cp_params,
    _in_list,
    _marks,
    _scope,
    _w_params,
    _w_row,
    enc_id,
)
from threadloom.checkpoint.storage import ops as o

__all__ = ["WRITE_PLANS"]

FIND_THREAD = "SELECT id FROM tl_threads WHERE thread_id = ?"
NEW_THREAD = "INSERT INTO tl_threads (thread_id) VALUES (?) RETURNING id"
ADD_THREAD = "INSERT OR IGNORE INTO tl_threads (thread_id) VALUES (?)"
DROP_THREAD = (
    "DELETE FROM tl_threads WHERE thread_id = ?"
    " AND NOT EXISTS (SELECT 1 FROM tl_checkpoints WHERE thread = tl_threads.id)"
    " AND NOT EXISTS (SELECT 1 FROM tl_refs WHERE thread = tl_threads.id)"
    " AND NOT EXISTS (SELECT 1 FROM tl_writes WHERE thread = tl_threads.id)"
)
BASE_EXISTS = "EXISTS (SELECT 1 FROM tl_checkpoints WHERE thread = ? AND checkpoint_ns = ? AND checkpoint_id = ?)"
SELECT_BASE = f"SELECT {BASE_EXISTS}"
ADD_REFS = "UPDATE tl_blobs SET refs = refs + ? WHERE hash = ?"
INSERT_BLOB = (
    "INSERT OR IGNORE INTO tl_blobs (hash, tag, data, children, refs) VALUES (?, ?, ?, ?, ?)"
)
INSERT_REF = f"INSERT OR IGNORE INTO tl_refs (thread, {REF_COLS[11:]}) VALUES ({_marks(10)})"
SAVE_CP = f"INSERT OR REPLACE INTO tl_checkpoints (thread, {CP_COLS[11:]}) VALUES ({_marks(8)})"
SAVE_WRITE = f"INSERT OR REPLACE INTO tl_writes (thread, {WRITE_COLS[11:]}) VALUES ({_marks(7)})"
INSERT_WRITE = f"INSERT OR IGNORE INTO tl_writes (thread, {WRITE_COLS[11:]}) VALUES ({_marks(7)})"
UPSERT_REF = (
    f"INSERT OR REPLACE INTO tl_refs (thread, {REF_COLS[11:]}) VALUES ({THREAD}, {_marks(9)})"
)
UPSERT_CP = (
    f"INSERT OR REPLACE INTO tl_checkpoints (thread, {CP_COLS[11:]}) VALUES ({THREAD}, {_marks(7)})"
)
UPSERT_WRITE = (
    f"INSERT OR REPLACE INTO tl_writes (thread, {WRITE_COLS[11:]}) VALUES ({THREAD}, {_marks(6)})"
)


def _thread_ids(names: Iterable[str], create: bool = True) -> Plan:
    """thread id text -> integer key, inserting a ``tl_threads`` row if missing
    (unless not ``create``: then missing names are absent). Mode ``thread``: the
    executor answers repeats from its memo (``sqlite/memo.py``)."""
    ids: dict[str, int] = {}
    if type(names) is tuple and len(names) == 1:  # the usual single thread: no dedup
        rows = yield Stmt(FIND_THREAD, names, "thread")
        if not rows and create:
            rows = yield Stmt(NEW_THREAD, names, "thread")
        if rows:
            ids[names[0]] = rows[0][0]
        return ids
    for name in dict.fromkeys(names):
        rows = yield Stmt(FIND_THREAD, (name,), "thread")
        if not rows and create:
            rows = yield Stmt(NEW_THREAD, (name,), "thread")
        if rows:
            ids[name] = rows[0][0]
    return ids


def _stale(op: o.SaveCheckpoint, ids: dict[str, int]) -> Plan:
    """Whether the diff base or a reused blob is gone (see SaveCheckpoint): one
    statement for the base and the first ``CHUNK`` needed hashes. The thread id
    it looks up is left in ``ids`` (``_save`` needs it again)."""
    cols, params = [], []
    if op.base is not None and op.row is not None:
        ids.update((yield from _thread_ids((op.row.thread_id,), create=False)))
        tid = ids.get(op.row.thread_id)
        if tid is None:
            return True
        base = (tid, op.row.checkpoint_ns, enc_id(op.base))
        if not op.needs:  # mode base: a base this connection knows is not asked again
            return not (yield Stmt(SELECT_BASE, base, "base"))[0]
        cols.append(BASE_EXISTS)
        params.extend(base)
    for i, part in enumerate(_chunks(op.needs)):
        marks, values = _in_list(part)
        sql = f"(SELECT count(*) = ? FROM tl_blobs WHERE hash IN ({marks}))"
        if i == 0:
            cols.append(sql)
            params.extend((len(part), *values))
            continue
        if not all((yield Stmt(f"SELECT {sql}", (len(part), *values), "one"))):
            return True
    if cols:
        row = yield Stmt("SELECT " + ", ".join(cols), params, "one")
        return not all(row)
    return False


# a runtime step's save results (immutable, shared)
_SAVED = o.SaveResult(frozenset(), ())
_STALE = o.SaveResult(frozenset(), (), stale=True)


def _save_row(op: o.SaveCheckpoint, row: o.CheckpointRow) -> Plan:
    """A runtime step: the checkpoint row only, after its diff base is known to
    exist. The statements ``_stale`` and ``_thread_ids`` would yield, as plain
    tuples (a ``Stmt`` is built by a Python-level ``__new__``) and without their
    generator layers: every step runs this."""
    name = (row.thread_id,)
    rows = yield (FIND_THREAD, name, "thread")
    if op.base is not None:
        if not rows:  # no thread row: the base is gone
            return _STALE
        tid = rows[0][0]
        if not (yield (SELECT_BASE, (tid, row.checkpoint_ns, enc_id(op.base)), "base"))[0]:
            return _STALE
    else:
        if not rows:
            rows = yield (NEW_THREAD, name, "thread")
        tid = rows[0][0]
    yield (SAVE_CP, _cp_params(row, tid), "saved")
    return _SAVED


def _save(op: o.SaveCheckpoint) -> Plan:
    row = op.row
    if row is not None and not op.refs and not op.blobs and not op.needs:
        return (yield from _save_row(op, row))
    ids: dict[str, int] = {}
    if (op.needs or (op.base is not None and op.row is not None)) and (yield from _stale(op, ids)):
        return o.SaveResult(frozenset(), (), stale=True)
    row = op.row
    if not op.refs and not op.blobs:  # a runtime step: the checkpoint row only
        if row is None:
            return o.SaveResult(frozenset(), ())
        tid = ids.get(row.thread_id)
        if tid is None:
            tid = (yield from _thread_ids((row.thread_id,)))[row.thread_id]
        yield Stmt(SAVE_CP, _cp_params(row, tid), "saved")
        return o.SaveResult(frozenset(), ())
    names = {row.thread_id: None} if row is not None else {}
    for ref in op.refs:
        names[ref.thread_id] = None
    if len(names) != 1 or next(iter(names)) not in ids:  # (else _stale looked it up)
        ids = yield from _thread_ids(tuple(names))  # one name: _thread_ids' fast path
    held: dict[bytes, int] = {}  # (a dict: Counter's missing-key path is Python code)
    inserted: list[bool] = []
    if op.refs:
        rows = [  # (_bound inlined on data and hashes)
            (
                ids[t],
                ns,
                ch,
                v,
                kind,
                tag,
                bytearray(d) if type(d) is bytes else d,
                bytearray(h) if type(h) is bytes else h,
                n,
                size,
            )
            for t, ns, ch, v, kind, tag, d, h, n, size in op.refs
        ]
        counts = yield Stmt(INSERT_REF, rows, "each")
        for ref, count in zip(op.refs, counts):
            if count:
                h = ref.hashes
                if len(h) == o.HASH_SIZE:  # the usual single-blob ref
                    held[h] = held.get(h, 0) + 1
                else:
                    for i in range(0, len(h), o.HASH_SIZE):
                        part = h[i : i + o.HASH_SIZE]
                        held[part] = held.get(part, 0) + 1
            inserted.append(bool(count))
    new: set[bytes] = set()
    if op.blobs:  # inserted holding their final count: no UPDATE for new blobs
        counts = yield Stmt(INSERT_BLOB, _blob_rows(op.blobs, held), "each")
        new = {blob.hash for blob, count in zip(op.blobs, counts) if count}
    rest = [(n, h) for h, n in held.items() if h not in new]
    if rest:
        yield Stmt(ADD_REFS, rest, "many")
    if row is not None:
        yield Stmt(SAVE_CP, _cp_params(row, ids[row.thread_id]), "saved")
    return o.SaveResult(frozenset(new), tuple(inserted))


def _blob_rows(blobs: Sequence[o.BlobRow], held: Mapping[bytes, int]) -> list[tuple[Any, ...]]:
    """INSERT_BLOB parameters: each blob holding its final count, its bytes as
    bytearrays (``_bound``, inlined: three a blob; sqlite3 binds a bytearray
    without its adapter lookup)."""
    get = held.get
    return [
        (
            bytearray(h) if type(h) is bytes else h,
            tag,
            bytearray(d) if type(d) is bytes else d,
            bytearray(c) if type(c) is bytes else c,
            get(h, 0),
        )
        for h, tag, d, c in blobs
    ]


def _save_writes(op: o.SaveWrites) -> Plan:
    rows = op.rows
    if len(rows) == 1:  # a task's writes (every step): as _thread_ids, plain tuples
        name = (rows[0].thread_id,)
        found = yield (FIND_THREAD, name, "thread")
        if not found:
            found = yield (NEW_THREAD, name, "thread")
        params = [_w_params(rows[0], found[0][0])]
        if op.strict and op.expected and op.expected[0] is None:
            if not (yield (INSERT_WRITE, params[0], "count")):
                return None  # a row is there (another writer): nothing written
            if not op.blobs and not op.add_refs:
                return frozenset()
            return (yield from _write_blobs(op))
    else:
        ids = yield from _thread_ids([r.thread_id for r in rows])
        params = [_w_params(w, ids[w.thread_id]) for w in rows]
    if op.strict:
        if not (yield from _expected_rows(op, params)):
            return None  # a row differs (another writer): nothing written
    else:
        yield Stmt(SAVE_WRITE, params, "many")
    if not op.blobs and not op.add_refs:  # the usual task write: nothing to count
        return frozenset()
    return (yield from _write_blobs(op))


def _write_blobs(op: o.SaveWrites) -> Plan:
    """The written rows' blobs (inserted holding their count) and the
    references ``add_refs`` adds to blobs that were there; the new hashes."""
    held: Counter[bytes] = Counter()
    if op.add_refs:
        for w in op.rows:
            h = w.hashes
            held.update([h[i : i + o.HASH_SIZE] for i in range(0, len(h), o.HASH_SIZE)])
    new: frozenset[bytes] = frozenset()
    if op.blobs:  # inserted holding their final count: no UPDATE for new blobs
        counts = yield Stmt(INSERT_BLOB, _blob_rows(op.blobs, held), "each")
        new = frozenset(blob.hash for blob, count in zip(op.blobs, counts) if count)
    rest = [(n, h) for h, n in held.items() if h not in new]
    if rest:
        yield Stmt(ADD_REFS, rest, "many")
    return new


def _expected_rows(op: o.SaveWrites, params: list[tuple[Any, ...]]) -> Plan:
    """``strict``: write the rows only if each task row is as the flow expects.
    The usual case (one row, none expected) is one ``INSERT OR IGNORE`` whose
    rowcount says whether a row was there; otherwise the rows are compared
    first. True when written."""
    expected = op.expected or (o.ANY_ROW,) * len(op.rows)
    if len(params) == 1 and expected[0] is None:
        return bool((yield Stmt(INSERT_WRITE, params[0], "count")))
    for w, old in zip(op.rows, expected):
        if old is o.ANY_ROW:
            continue
        where, values = _scope(w.thread_id, w.checkpoint_ns)
        sql = f"SELECT {WRITE_COLS} FROM v_writes WHERE {' AND '.join(where)}"
        sql += " AND checkpoint_id = ? AND task_id = ?"
        row = yield Stmt(sql, (*values, enc_id(w.checkpoint_id), enc_id(w.task_id)), "one")
        if (_w_row(row) if row else None) != old:
            return False
    yield Stmt(SAVE_WRITE, params, "many")
    return True


def _add_threads(rows: Sequence[Any]) -> Plan:
    for thread_id in dict.fromkeys(r[0] for r in rows):
        yield Stmt(ADD_THREAD, (thread_id,), "count")


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
        rows = yield Stmt(
            f"DELETE FROM tl_blobs WHERE {cond} RETURNING hash, tag, data, children", part
        )
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
    yield Stmt(DROP_THREAD, (op.thread_id,), "drop")
    return count


def _delete_refs(op: o.DeleteRefs) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns, table=True)
    cond = " AND ".join(where)
    if op.keys is None:
        yield Stmt(f"DELETE FROM tl_refs WHERE {cond}", params, "count")
    if op.keys:  # one primary-key delete per key (an IN list of pairs scans the thread)
        sql = f"DELETE FROM tl_refs WHERE {cond} AND channel = ? AND version = ?"
        yield Stmt(sql, [(*params, *key) for key in op.keys], "many")
    yield Stmt(DROP_THREAD, (op.thread_id,), "drop")


WRITE_PLANS = {
    o.SaveCheckpoint: _save,
    o.SaveWrites: _save_writes,
    o.InsertRows: _insert,
    o.AdjustRefcounts: _adjust,
    o.DropUnreferenced: _drop,
    o.DeleteCheckpoints: _delete_checkpoints,
    o.DeleteRefs: _delete_refs,
}
