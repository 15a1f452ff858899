"""Storage operations -> SQL batches, and results -> the rows the flows expect.

Pure: :func:`plan` turns one operation of :mod:`threadloom.checkpoint.storage.ops`
into a batch of :class:`Stmt` plus a decoder for the batch's results, so the
sync and async savers share every decision and only differ in who sends the
batch (:mod:`.executor`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.lease.postgres import PLANNERS as LEASE_PLANNERS
from threadloom.checkpoint.postgres.blobplans import adjust, drop, insert_blobs, load_blobs
from threadloom.checkpoint.postgres.idpack import (
    pack_id,
    pack_ordered,
    packed_ckpt,
    packed_keys,
    packed_ref,
    packed_write,
    unpacked_ckpt,
    unpacked_ref,
    unpacked_write,
)
from threadloom.checkpoint.postgres.leaseread import AcquireRead
from threadloom.checkpoint.postgres.metapack import sql_unpack as sql_unpack_meta
from threadloom.checkpoint.postgres.queries import SQL, columns
from threadloom.checkpoint.postgres.saveplan import save_checkpoint
from threadloom.checkpoint.postgres.stats import plan_stats
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.postgres.ttl import PLANNERS as TTL_PLANNERS
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import CheckpointRow, RefRow, WriteRow

__all__ = ["Decoder", "Plan", "op_thread", "plan"]

Decoder = Callable[[list[Any]], Any]
Plan = tuple[list[Stmt], Decoder]


def op_thread(op: ops.Op) -> str | None:
    """The thread an operation touches (None for hash-only or cross-thread ones)."""
    thread_id = getattr(op, "thread_id", None)
    if thread_id is not None:
        return thread_id
    first = None
    if isinstance(op, ops.SaveCheckpoint):
        first = op.row or (op.refs[0] if op.refs else None)
    elif isinstance(op, (ops.SaveWrites,)):
        first = op.rows[0] if op.rows else None
    elif isinstance(op, ops.InsertRows):
        first = next(iter(op.checkpoints or op.refs or op.writes), None)
    return first.thread_id if first is not None else None


def plan(op: ops.Op, sql: SQL) -> Plan:
    """The statements that run ``op`` and how to turn their results into its result."""
    try:
        planner = _PLANNERS[type(op)]
    except KeyError:
        raise NotImplementedError(
            f"Postgres executor has no plan for {type(op).__name__}"
        ) from None
    return planner(op, sql)


def _scope(thread_id: str | None, ns: str | None, prefix: str = "") -> tuple[str, list[Any]]:
    where, params = [], []
    if thread_id is not None:
        where.append(f"{prefix}thread_id = %s")
        params.append(thread_id)
    if ns is not None:
        where.append(f"{prefix}checkpoint_ns = %s")
        params.append(ns)
    return " AND ".join(where) or "TRUE", params


def _ckpt_rows(results: list[Any]) -> list[CheckpointRow]:
    return [unpacked_ckpt(row) for row in results[0]]


def _get_checkpoint(op: ops.GetCheckpoint, sql: SQL) -> Plan:
    if op.checkpoint_id is None:
        stmt = Stmt(
            f"{sql.select_ckpt} WHERE thread_id = %s AND checkpoint_ns = %s"
            " ORDER BY checkpoint_id DESC LIMIT 1",
            (op.thread_id, op.checkpoint_ns),
            "one",
        )
    else:
        stmt = Stmt(
            f"{sql.select_ckpt} WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            (op.thread_id, op.checkpoint_ns, pack_ordered(op.checkpoint_id)),
            "one",
        )
    return [stmt], lambda r: unpacked_ckpt(r[0]) if r[0] else None


def _acquire_read(op: AcquireRead, sql: SQL) -> Plan:
    """The acquire's statements, then the latest-row read (see :mod:`.leaseread`)."""
    batch, decode = LEASE_PLANNERS[type(op.acquire)](op.acquire, sql)
    read, decode_read = _get_checkpoint(op.latest, sql)
    n = len(batch)
    return batch + read, lambda r: (decode(r[:n]), decode_read(r[n:]))


def _list_checkpoints(op: ops.ListCheckpoints, sql: SQL) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    if op.filter:
        # `@>` is containment; `->` equality keeps the match exact for
        # arrays/objects (containment alone would accept supersets). A None
        # value also matches a missing key (storage.rows.metadata_matches).
        present = [(key, value) for key, value in op.filter if value != "null"]
        if present:
            wanted = {key: json.loads(value) for key, value in present}
            where += f" AND {_METADATA} @> %s::jsonb"
            params.append(json.dumps(wanted))
        for key, value in present:
            where += f" AND {_METADATA} -> %s = %s::jsonb"
            params.extend((key, value))
        for key, value in op.filter:
            if value == "null":
                where += f" AND coalesce({_METADATA} -> %s, 'null'::jsonb) = 'null'::jsonb"
                params.append(key)
    if op.before is not None:
        where += " AND checkpoint_id < %s"
        params.append(pack_ordered(op.before))
    if op.after is not None:
        where += " AND (checkpoint_id, thread_id, checkpoint_ns) < (%s, %s, %s)"
        params.extend((pack_ordered(op.after[0]), *op.after[1:]))
    query = (
        f"{sql.select_ckpt} WHERE {where}"
        " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC"
    )
    if op.limit is not None:
        query += " LIMIT %s"
        params.append(int(op.limit))
    return [Stmt(query, params, "all")], _ckpt_rows


_METADATA = f"({sql_unpack_meta('metadata')})::jsonb"  # stored packed (metapack)


def _find_runs(op: ops.FindRunCheckpoints, sql: SQL) -> Plan:
    if not op.run_ids:
        return [], lambda r: []
    stmt = Stmt(f"{sql.select_ckpt} WHERE run_id = ANY(%s::text[])", (list(op.run_ids),), "all")
    return [stmt], _ckpt_rows


def _refs(results: list[Any]) -> list[RefRow]:
    return [unpacked_ref(row) for row in results[0]]


def _load_refs(op: ops.LoadRefs, sql: SQL) -> Plan:
    """One primary-key probe per wanted (channel, version), whatever the table's
    statistics say: with stale or missing statistics (autovacuum off, a table
    never analyzed) the planner read every ref row of the thread for an ``IN``
    list, so loading the latest state grew with the thread (3.4 ms at 1,000
    turns); the ``LATERAL ... OFFSET 0`` form keeps it an index lookup per key."""
    if not op.keys:
        return [], lambda r: []
    channels, versions = packed_keys(op.keys)
    stmt = Stmt(
        "SELECT r.* FROM unnest(%s::text[], %s::bytea[]) AS k(channel, version)"
        f" CROSS JOIN LATERAL ({sql.select_refs} WHERE thread_id = %s AND checkpoint_ns = %s"
        " AND channel = k.channel AND version = k.version OFFSET 0) r",
        (channels, versions, op.thread_id, op.checkpoint_ns),
        "all",
    )
    return [stmt], _refs


def _load_thread_refs(op: ops.LoadThreadRefs, sql: SQL) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    return [Stmt(f"{sql.select_refs} WHERE {where}", params, "all")], _refs


def _load_writes(op: ops.LoadWrites, sql: SQL) -> Plan:
    """Writes of named checkpoints are probed per checkpoint id (as refs are,
    see :func:`_load_refs`): an ``= ANY(...)`` over the thread's rows was
    planned as a scan of all of them without statistics."""
    if op.checkpoint_ids is not None and not op.checkpoint_ids:
        return [], lambda r: []
    # one task's row (a put_writes merge): the primary key's last column
    task = " AND task_id = %s" if op.task_id is not None else ""
    if op.checkpoint_ids is not None and op.thread_id is not None and op.checkpoint_ns is not None:
        ids = [pack_id(c) for c in dict.fromkeys(op.checkpoint_ids)]
        stmt = Stmt(
            f"SELECT w.* FROM unnest(%s::bytea[]) AS k(id) CROSS JOIN LATERAL ({sql.select_writes}"
            f" WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = k.id{task}"
            " OFFSET 0) w",
            (ids, op.thread_id, op.checkpoint_ns, *_task(op)),
            "all",
        )
        return [stmt], _writes
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    if op.checkpoint_ids is not None:
        where += " AND checkpoint_id = ANY(%s::bytea[])"
        params.append([pack_id(c) for c in op.checkpoint_ids])
    where += task
    params.extend(_task(op))
    return [Stmt(f"{sql.select_writes} WHERE {where}", params, "all")], _writes


def _task(op: ops.LoadWrites) -> tuple[bytes, ...]:
    """The task id parameter of a one-task read, else none."""
    return (pack_id(op.task_id),) if op.task_id is not None else ()


def _writes(results: list[Any]) -> list[WriteRow]:
    return [unpacked_write(row) for row in results[0]]


def _save_writes(op: ops.SaveWrites, sql: SQL) -> Plan:
    """Blobs (those there locked, those deleted meanwhile inserted afresh: the
    flow's AdjustRefcounts after ignores a missing blob, and the row would
    hold it)."""
    batch = insert_blobs(op.blobs, sql, lock_existing=True, max_items=op.max_items)
    if op.rows:
        unique = list({_write_key(w): w for w in op.rows}.values())  # last one wins
        batch.append(Stmt(sql.upsert_writes, columns(map(packed_write, unique), 7)))
    has_blobs = bool(op.blobs)
    return batch, lambda r: frozenset(bytes(x[0]) for x in r[0]) if has_blobs else frozenset()


def _write_key(w: WriteRow) -> tuple[str, str, str, str]:
    return (w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id)


def _load_ancestors(op: ops.LoadAncestors, sql: SQL) -> Plan:
    params = (op.thread_id, op.checkpoint_ns, pack_ordered(op.checkpoint_id), int(op.depth))
    return [Stmt(sql.ancestors, params, "all")], _ckpt_rows


def _insert_rows(op: ops.InsertRows, sql: SQL) -> Plan:
    batch = []
    if op.checkpoints:
        batch.append(Stmt(sql.upsert_ckpt, [packed_ckpt(r) for r in op.checkpoints], "many"))
    if op.refs:
        batch.append(Stmt(sql.upsert_ref, [packed_ref(r) for r in op.refs], "many"))
    if op.writes:
        unique = list({_write_key(w): w for w in op.writes}.values())
        batch.append(Stmt(sql.upsert_writes, columns(map(packed_write, unique), 7)))
    return batch, lambda r: None


def _delete_checkpoints(op: ops.DeleteCheckpoints, sql: SQL) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    if op.checkpoint_ids is not None:
        if not op.checkpoint_ids:
            return [], lambda r: 0
        ids = list(op.checkpoint_ids)
        writes = Stmt(
            f"DELETE FROM {sql.writes} WHERE {where} AND checkpoint_id = ANY(%s::bytea[])",
            [*params, [pack_id(c) for c in ids]],
        )
        where += " AND checkpoint_id = ANY(%s::bytea[])"
        params.append([pack_ordered(c) for c in ids])
    else:
        writes = Stmt(f"DELETE FROM {sql.writes} WHERE {where}", params)
    batch = [
        writes,
        Stmt(
            f"WITH gone AS (DELETE FROM {sql.ckpt} WHERE {where} RETURNING 1)"
            " SELECT count(*) FROM gone",
            params,
            "one",
        ),
    ]
    return batch, lambda r: int(r[1][0])


def _delete_refs(op: ops.DeleteRefs, sql: SQL) -> Plan:
    where, params = _scope(op.thread_id, op.checkpoint_ns)
    if op.keys is not None:
        if not op.keys:
            return [], lambda r: None
        where += " AND (channel, version) IN (SELECT * FROM unnest(%s::text[], %s::bytea[]))"
        params.extend(packed_keys(op.keys))
    return [Stmt(f"DELETE FROM {sql.refs} WHERE {where}", params)], lambda r: None


_PLANNERS: dict[type, Callable[[Any, SQL], Plan]] = {
    ops.GetCheckpoint: _get_checkpoint,
    ops.ListCheckpoints: _list_checkpoints,
    ops.FindRunCheckpoints: _find_runs,
    ops.LoadRefs: _load_refs,
    ops.LoadThreadRefs: _load_thread_refs,
    ops.LoadBlobs: load_blobs,
    ops.LoadWrites: _load_writes,
    ops.LoadAncestors: _load_ancestors,
    ops.SaveCheckpoint: save_checkpoint,
    ops.SaveWrites: _save_writes,
    ops.InsertRows: _insert_rows,
    ops.AdjustRefcounts: adjust,
    ops.DropUnreferenced: drop,
    ops.DeleteCheckpoints: _delete_checkpoints,
    ops.DeleteRefs: _delete_refs,
    ops.CollectStats: plan_stats,
    AcquireRead: _acquire_read,  # a lease acquire with the run's first read
    **LEASE_PLANNERS,  # thread leases: checkpoint/lease/postgres.py
    **TTL_PLANNERS,  # per-thread TTL clocks: postgres/ttl.py
}
