"""Storage operations on Redis, as sans-I/O plans over :mod:`.keys`.

Each operation of :mod:`threadloom.checkpoint.storage.ops` becomes a generator
that yields batches of :class:`Call` (sent in one pipelined round trip) and
returns the operation's result; :mod:`.saver` drives it with a sync or an async
client. Every write is one Lua script over one thread's keys (one slot).

Blobs are content-addressed per thread (see :mod:`.keys`), so operations that
name only hashes (``LoadBlobs``, ``AdjustRefcounts``, ``DropUnreferenced``) run
in the *scope* of the thread the flow last touched: every flow of the core
names a thread before it touches its blobs.

Crash safety without multi-operation transactions: each operation is atomic,
and where a flow needs two (store a manifest, then count its segments; copy a
thread, then count its refs) the first script already takes the references and
the executor subtracts them from the flow's following ``AdjustRefcounts``. A
crash in between can only leave a reference too many (a blob kept too long,
removed with its thread), never one too few (a blob dropped while needed).

How rows sit in hash fields and values is :mod:`.fields`; paging a thread's
checkpoint index for a list is :mod:`.listing`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from threadloom.checkpoint.lease.redis import fenced, register_lease_plans
from threadloom.checkpoint.redis.fields import (
    SEP,
    blob_row,
    checkpoint_row,
    expected_arg,
    pack_values,
    ref_field,
    ref_row,
    row_fields,
    row_gone,
    row_value,
    text,
    unpack_values,
    write_args,
    write_row,
)
from threadloom.checkpoint.redis.index import live_threads
from threadloom.checkpoint.redis.keys import KeyLayout
from threadloom.checkpoint.redis.listing import list_thread
from threadloom.checkpoint.redis.once import once
from threadloom.checkpoint.redis.seenrows import remember, torn
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import BlobRow
from threadloom.checkpoint.storage.rows import unpack
from threadloom.errors import StorageError

__all__ = ["Call", "RedisPlanner", "Scope"]

LOST = 1 << 50
"""The count the Lua scripts give a blob whose count went missing (keys.py)."""

_unpack = unpack_values  # tests read stored rows with it


@dataclass(frozen=True)
class Call:
    """One command (``script`` None) or one Lua script of :data:`.keys.SCRIPTS`."""

    args: tuple[Any, ...]
    script: str | None = None
    keys: tuple[str, ...] = ()


@dataclass
class Scope:
    """Per-flow state: the thread whose blobs hash-only operations mean, and
    references a script already took that the flow will adjust again."""

    thread: str | None = None
    held: Counter[tuple[str, bytes]] = field(default_factory=Counter)
    lease: tuple[str, str] | None = None  # (lease key, token) once the flow ran CheckLease
    write: bool = False  # a writing flow: its ReadLease takes a guard lease (retention)
    guards: dict[str, str] = field(default_factory=dict)  # lease key -> guard token
    # a read's checkpoint rows by (thread, ns): its refs lookup checks they still exist
    seen: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    # False in retention flows (prune, also its dry run): listing a thread to
    # prune, delete runs from or copy it must not keep it alive
    touch: bool = True


Plan = Generator[list[Call], list[Any], Any]


class RedisPlanner:
    """Turns operations into Redis calls for one key layout and TTL."""

    def __init__(self, layout: KeyLayout, ttl: int | None = None) -> None:
        self.layout = layout
        self.ttl = int(ttl or 0)

    def plan(self, op: ops.Op, scope: Scope) -> Plan:
        handler = getattr(self, "_" + type(op).__name__, None)
        if handler is None:
            raise NotImplementedError(f"Redis executor has no plan for {type(op).__name__}")
        return handler(op, scope)

    def lua(self, name: str, thread_id: str, *args: Any, touch: bool = True) -> Call:
        """A call of the Lua script ``name`` over ``thread_id``'s keys (TTL first).

        ``touch=False`` sends TTL -1: a script that would re-arm the thread's
        expiry leaves it alone (a listing across threads keeps none alive).
        The thread's lease key follows its eight keys: a run holding the lease
        keeps the thread alive at least as long (``touch`` in :mod:`.keys`)."""
        keys = (*self.layout.thread_keys(thread_id), self.key(thread_id, "lease"))
        call = Call((self.ttl if touch else -1, *args), name, keys)
        return once(call, self.key(thread_id, "op:"))  # a write: re-sent, it runs once

    def key(self, thread_id: str, part: str) -> str:
        return f"{self.layout.tag(thread_id)}:{part}"

    def threads(self) -> Plan:
        """Live thread ids, newest first; drops expired ones from the index (index.py)."""
        return (yield from live_threads(self))

    # -- checkpoints -------------------------------------------------------------

    def _LoadAncestors(self, op: ops.LoadAncestors, scope: Scope) -> Plan:
        scope.thread = op.thread_id
        args = (op.checkpoint_ns, op.checkpoint_id, int(op.depth))
        (flat,) = yield [self.lua("ancestors", op.thread_id, *args)]
        return [checkpoint_row(op.thread_id, f, v) for f, v in zip(flat[::2], flat[1::2])]

    def _GetCheckpoint(self, op: ops.GetCheckpoint, scope: Scope) -> Plan:
        scope.thread = op.thread_id
        (found,) = yield [self.lua("get", op.thread_id, op.checkpoint_ns, op.checkpoint_id or "")]
        if found and len(found) == 1:
            raise row_gone(op.thread_id, found[0])
        row = checkpoint_row(op.thread_id, *found) if found else None
        if row is not None and not scope.write:
            remember(scope.seen, [row])
        return row

    def _ListCheckpoints(self, op: ops.ListCheckpoints, scope: Scope) -> Plan:
        if op.thread_id is not None:
            scope.thread = op.thread_id
            touch = scope.touch and not scope.write  # write flows that list: retention
            rows = yield from list_thread(self, op.thread_id, op, touch=touch)
        else:
            rows = []
            for thread_id in (yield from self.threads()):  # re-arms no thread's TTL
                rows.extend((yield from list_thread(self, thread_id, op, touch=False)))
            rows.sort(key=lambda r: (r.checkpoint_id, r.thread_id, r.checkpoint_ns), reverse=True)
            rows = rows if op.limit is None else rows[: op.limit]
        if not scope.write:
            remember(scope.seen, rows)
        return rows

    def _FindRunCheckpoints(self, op: ops.FindRunCheckpoints, scope: Scope) -> Plan:
        wanted = set(op.run_ids)
        threads = yield from self.threads()
        if not wanted or not threads:
            return []
        results = yield [Call(("HGETALL", self.key(t, "row"))) for t in threads]
        found = []
        for thread_id, rows in zip(threads, results):
            for fld, packed in rows.items():
                row = checkpoint_row(thread_id, fld, packed)
                if row.run_id in wanted:
                    found.append(row)
        return found

    # -- refs, blobs, writes -----------------------------------------------------------

    def _LoadRefs(self, op: ops.LoadRefs, scope: Scope) -> Plan:
        scope.thread = op.thread_id
        if not op.keys:
            return []
        fields = [f"{op.checkpoint_ns}{SEP}{c}{SEP}{v}" for c, v in op.keys]
        refs = Call(("HMGET", self.key(op.thread_id, "ref"), *fields))
        ids = scope.seen.get((op.thread_id, op.checkpoint_ns))
        if not ids:
            (values,) = yield [refs]
        else:  # after the refs (same pipeline): see seenrows.py
            rows = [f"{op.checkpoint_ns}{SEP}{cid}" for cid in ids]
            values, found = yield [refs, Call(("HMGET", self.key(op.thread_id, "row"), *rows))]
            torn(op.thread_id, found)
        return [ref_row(op.thread_id, f.encode(), p) for f, p in zip(fields, values) if p]

    def _LoadThreadRefs(self, op: ops.LoadThreadRefs, scope: Scope) -> Plan:
        scope.thread = op.thread_id
        (found,) = yield [Call(("HGETALL", self.key(op.thread_id, "ref")))]
        refs = [ref_row(op.thread_id, f, p) for f, p in found.items()]
        return [r for r in refs if op.checkpoint_ns is None or r.checkpoint_ns == op.checkpoint_ns]

    def _blobs_of(self, thread_id: str, hashes: list[bytes]) -> Plan:
        (values,) = yield [Call(("HMGET", self.key(thread_id, "blob"), *hashes))]
        return {h: blob_row(h, p) for h, p in zip(hashes, values) if p}

    def _LoadBlobs(self, op: ops.LoadBlobs, scope: Scope) -> Plan:
        if not op.hashes:
            return {}
        thread_id, hashes = _scoped(scope, op), list(dict.fromkeys(op.hashes))
        found = yield from self._blobs_of(thread_id, hashes)
        if not op.refcounts or not found:
            return found
        (counts,) = yield [Call(("HMGET", self.key(thread_id, "rc"), *found))]
        # a missing count was lost (an evicted RC key): never 0, as DROP reads it
        return {
            h: (row, LOST if c is None else int(c)) for (h, row), c in zip(found.items(), counts)
        }

    def _LoadWrites(self, op: ops.LoadWrites, scope: Scope) -> Plan:
        scope.thread = thread_id = op.thread_id
        if op.checkpoint_ids is not None and not op.checkpoint_ids:
            return []
        if op.checkpoint_ids is not None and op.checkpoint_ns is not None:
            fields = [f"{op.checkpoint_ns}{SEP}{cid}" for cid in op.checkpoint_ids]
            if op.task_id is not None:  # one task's row (a put_writes merge): its field
                return (yield from self._task_writes(op, fields, scope))
            call = self.lua("load_writes", thread_id, *fields)
            seen = scope.seen.get((thread_id, op.checkpoint_ns))
            if not seen or seen.isdisjoint(op.checkpoint_ids):
                (flat,) = yield [call]
            else:  # the rows again after the writes (same pipeline): see seenrows.py
                rows = [f for f, cid in zip(fields, op.checkpoint_ids) if cid in seen]
                flat, found = yield [call, Call(("HMGET", self.key(thread_id, "row"), *rows))]
                torn(thread_id, found)
            items = [(c + b"\0" + t, p) for c, t, p in zip(flat[::3], flat[1::3], flat[2::3])]
        else:
            (found,) = yield [Call(("HGETALL", self.key(thread_id, "w")))]
            items = list(found.items())
        ids = set(op.checkpoint_ids) if op.checkpoint_ids is not None else None
        rows = []
        for fld, packed in items:
            ns, cid, task_id = text(fld).split(SEP, 2)
            if (op.checkpoint_ns is None or ns == op.checkpoint_ns) and (ids is None or cid in ids):
                rows.append(write_row(thread_id, ns, cid, task_id, packed))
        return rows

    def _task_writes(self, op: ops.LoadWrites, fields: list[str], scope: Scope) -> Plan:
        """One task's rows of the checkpoints ``fields`` name: an HMGET of its
        own fields, not the script reading the checkpoint's every row (a
        resumed fan-out merges W/10 tasks into a checkpoint of W rows)."""
        thread_id, ns, task, ids = op.thread_id, op.checkpoint_ns, op.task_id, op.checkpoint_ids
        assert ns is not None and task is not None and ids is not None
        call = Call(("HMGET", self.key(thread_id, "w"), *(f"{f}{SEP}{task}" for f in fields)))
        seen = scope.seen.get((thread_id, ns))
        if not seen or seen.isdisjoint(ids):
            (packed,) = yield [call]
        else:  # the rows again after the writes (same pipeline): see seenrows.py
            rows = [f for f, cid in zip(fields, ids) if cid in seen]
            packed, found = yield [call, Call(("HMGET", self.key(thread_id, "row"), *rows))]
            torn(thread_id, found)
        return [write_row(thread_id, ns, c, task, p) for c, p in zip(ids, packed) if p is not None]

    # -- writing -----------------------------------------------------------------

    def _SaveCheckpoint(self, op: ops.SaveCheckpoint, scope: Scope) -> Plan:
        first = op.row if op.row is not None else (op.refs[0] if op.refs else None)
        if first is None:
            return ops.SaveResult(frozenset(), ())
        scope.thread = thread_id = first.thread_id
        base = ""
        if op.base is not None and op.row is not None:
            base = f"{op.row.checkpoint_ns}{SEP}{op.base}"
        args: list[Any] = [base, len(op.needs), *op.needs, len(op.blobs)]
        for b in op.blobs:
            args += [b.hash, pack_values([b.tag, b.data, b.children]), b.children]
        args.append(len(op.refs))
        for r in op.refs:
            args += [ref_field(r), pack_values(list(r[4:])), r.hashes]
        if op.row is not None:
            fld, member = row_fields(op.row)
            args += ["1", fld, row_value(op.row), member]
        else:
            args.append("0")
        result, _ = yield [
            fenced(self.lua("save", thread_id, *args), scope.lease, Call),
            Call(("SADD", self.layout.threads(), thread_id)),
        ]
        new, pre, inserted, stale = result
        if int(stale):
            return ops.SaveResult(frozenset(), (), stale=True)
        scope.held.update((thread_id, h) for h in pre)
        return ops.SaveResult(frozenset(new), tuple(bool(x) for x in inserted))

    def _SaveWrites(self, op: ops.SaveWrites, scope: Scope) -> Plan:
        if not op.rows:
            return frozenset()
        scope.thread = thread_id = op.rows[0].thread_id
        args: list[Any] = [len(op.blobs)]
        for b in op.blobs:
            args += [b.hash, pack_values([b.tag, b.data, b.children])]
        expected = op.expected if op.expected is not None else (ops.ANY_ROW,) * len(op.rows)
        for w, old in zip(op.rows, expected):
            args += [*write_args(w), expected_arg(old), w.hashes if op.add_refs else ""]
        (new,) = yield [fenced(self.lua("writes", thread_id, *args), scope.lease, Call)]
        return None if new is None else frozenset(new)

    def _InsertRows(self, op: ops.InsertRows, scope: Scope) -> Plan:
        first = next(iter(op.checkpoints or op.refs or op.writes), None)
        if first is None:
            return None
        source, target = scope.thread, first.thread_id
        blobs: dict[bytes, BlobRow] = {}
        if source is not None and source != target:  # copy: bring the blobs along
            wanted = {h for r in (*op.refs, *op.writes) for h in unpack(r.hashes)}
            while wanted:
                found = yield from self._blobs_of(source, sorted(wanted))
                blobs.update(found)
                wanted = {c for b in found.values() for c in unpack(b.children)} - set(blobs)
        scope.thread = target
        args: list[Any] = [len(blobs)]
        for b in blobs.values():
            args += [b.hash, pack_values([b.tag, b.data, b.children]), b.children]
        args.append(len(op.checkpoints))
        for row in op.checkpoints:
            fld, member = row_fields(row)
            args += [fld, row_value(row), member]
        args.append(len(op.refs))
        for r in op.refs:
            args += [ref_field(r), pack_values(list(r[4:])), r.hashes]
        for w in op.writes:
            args += [*write_args(w), w.hashes]
        copy = source is not None and source != target  # else: retention rebasing rows
        pre, _ = yield [
            self.lua("insert", target, *args, touch=copy),
            Call(("SADD", self.layout.threads(), target)),
        ]
        scope.held.update((target, h) for h in pre)
        return None

    def _AdjustRefcounts(self, op: ops.AdjustRefcounts, scope: Scope) -> Plan:
        thread_id = _scoped(scope, op)
        args: list[Any] = []
        for h, delta in op.deltas:
            delta -= scope.held.pop((thread_id, h), 0)  # already taken by a script
            if delta:
                args += [h, delta]
        if args:
            yield [self.lua("adjust", thread_id, *args)]
        return None

    def _DropUnreferenced(self, op: ops.DropUnreferenced, scope: Scope) -> Plan:
        if not op.hashes:
            return []
        thread_id = _scoped(scope, op)
        (flat,) = yield [self.lua("drop", thread_id, *dict.fromkeys(op.hashes))]
        # the script answers (hash, children, size), not the bytes (deletes.py):
        # release() reads only children and len(data); bytes(n) is calloc'd, so
        # a dropped blob's size costs no memory here
        return [BlobRow(h, "", bytes(n), c) for h, c, n in zip(flat[::3], flat[1::3], flat[2::3])]

    def _DeleteCheckpoints(self, op: ops.DeleteCheckpoints, scope: Scope) -> Plan:
        scope.thread = thread_id = op.thread_id
        if op.checkpoint_ids is not None and not op.checkpoint_ids:
            return 0
        every = "1" if op.checkpoint_ns is None else "0"
        ids = op.checkpoint_ids or ()
        ((deleted, left),) = yield [
            self.lua("delete", thread_id, op.checkpoint_ns or "", every, *ids)
        ]
        if not left:  # as index.py: check again after the SREM, re-add if a put came back
            key = self.layout.threads()
            _, alive = yield [Call(("SREM", key, thread_id)), self.lua("reap", thread_id)]
            if int(alive):
                yield [Call(("SADD", key, thread_id))]
        return int(deleted)

    def _DeleteRefs(self, op: ops.DeleteRefs, scope: Scope) -> Plan:
        scope.thread = thread_id = op.thread_id
        if op.keys is None:
            mode = "thread" if op.checkpoint_ns is None else "ns"
            yield [self.lua("delete_refs", thread_id, mode, op.checkpoint_ns or "")]
            return None
        wanted = set(op.keys)
        if op.checkpoint_ns is not None:
            fields = [f"{op.checkpoint_ns}{SEP}{c}{SEP}{v}" for c, v in op.keys]
        else:  # the same keys in every namespace
            (names,) = yield [Call(("HKEYS", self.key(thread_id, "ref")))]
            fields = [n for n in map(text, names) if tuple(n.split(SEP)[1:]) in wanted]
        if fields:
            yield [self.lua("delete_refs", thread_id, "keys", "", *fields)]
        return None

    def _CollectStats(self, op: ops.CollectStats, scope: Scope) -> Plan:
        from threadloom.checkpoint.redis.stats import collect_stats

        return (yield from collect_stats(self, op))


def _scoped(scope: Scope, op: ops.Op) -> str:
    if scope.thread is None:
        raise StorageError(
            f"Redis executor: {type(op).__name__} before any thread was named in this flow "
            "(blobs are stored per thread)"
        )
    return scope.thread


register_lease_plans(RedisPlanner, Call)  # thread leases: checkpoint/lease/redis.py
