"""Executes storage operations against plain dicts (the in-memory backend).

Layout (all keyed by strings/bytes, values are immutable rows):
``checkpoints[(thread, ns)][checkpoint_id] -> CheckpointRow`` with
``order[(thread, ns)]`` its ids sorted (latest last: ``list`` bisects instead
of sorting the thread per call),
``refs[(thread, ns)][(channel, version)] -> RefRow``,
``blobs[hash] -> BlobRow`` with ``counts[hash] -> refs`` (two flat dicts, not a
``[row, refs]`` pair per blob: nothing per stored blob for the garbage
collector to walk),
``writes[(thread, ns, checkpoint_id)][task_id] -> WriteRow``.
One re-entrant lock makes every flow atomic.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from threadloom.checkpoint.lease.memory import handlers as lease_handlers
from threadloom.checkpoint.memory.ttl import handlers as ttl_handlers
from threadloom.checkpoint.storage import ops as o
from threadloom.checkpoint.storage.rows import metadata_matches

__all__ = ["MemoryExecutor"]


class MemoryExecutor:
    """Runs :mod:`threadloom.checkpoint.storage.ops` over dicts."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.checkpoints: dict[tuple[str, str], dict[str, o.CheckpointRow]] = {}
        self.order: dict[tuple[str, str], list[str]] = {}
        self.refs: dict[tuple[str, str], dict[tuple[str, str], o.RefRow]] = {}
        self.blobs: dict[bytes, o.BlobRow] = {}
        self.counts: dict[bytes, int] = {}  # blob hash -> references held
        self.writes: dict[tuple[str, str, str], dict[str, o.WriteRow]] = {}
        self._dispatch = {
            o.GetCheckpoint: self._get,
            o.LoadAncestors: self._ancestors,
            o.ListCheckpoints: self._list,
            o.FindRunCheckpoints: self._find_runs,
            o.LoadRefs: self._load_refs,
            o.LoadThreadRefs: self._thread_refs,
            o.LoadBlobs: self._load_blobs,
            o.LoadWrites: self._load_writes,
            o.SaveCheckpoint: self._save,
            o.SaveWrites: self._save_writes,
            o.InsertRows: self._insert,
            o.AdjustRefcounts: self._adjust,
            o.DropUnreferenced: self._drop,
            o.DeleteCheckpoints: self._delete_checkpoints,
            o.DeleteRefs: self._delete_refs,
            o.CollectStats: self._stats,
        }
        self._dispatch.update(lease_handlers(self))  # thread leases: checkpoint/lease
        self._dispatch.update(ttl_handlers(self))  # per-thread TTL clocks: memory/ttl.py

    # -- driver interface -------------------------------------------------------

    def transaction(self, write: bool) -> Any:
        return self.lock  # an RLock is its own (cheap) context manager

    @asynccontextmanager
    async def atransaction(self, write: bool) -> AsyncIterator[None]:
        with self.lock:
            yield

    def execute(self, op: o.Op) -> Any:
        return self._dispatch[type(op)](op)

    async def aexecute(self, op: o.Op) -> Any:
        return self._dispatch[type(op)](op)

    # -- reads ------------------------------------------------------------------

    def _get(self, op: o.GetCheckpoint) -> o.CheckpointRow | None:
        key = (op.thread_id, op.checkpoint_ns)
        rows = self.checkpoints.get(key)
        if not rows:
            return None
        cid = op.checkpoint_id if op.checkpoint_id is not None else self.order[key][-1]
        return rows.get(cid)

    def _ancestors(self, op: o.LoadAncestors) -> list[o.CheckpointRow]:
        rows = self.checkpoints.get((op.thread_id, op.checkpoint_ns)) or {}
        found: list[o.CheckpointRow] = []
        cid: str | None = op.checkpoint_id
        while cid is not None and len(found) <= op.depth and cid in rows:
            found.append(rows[cid])
            cid = rows[cid].parent_checkpoint_id
        return found

    def _list(self, op: o.ListCheckpoints) -> list[o.CheckpointRow]:
        if op.thread_id is not None and op.checkpoint_ns is not None:
            return self._list_one(op)
        found = []
        for (thread_id, ns), rows in self.checkpoints.items():
            if op.thread_id is not None and thread_id != op.thread_id:
                continue
            if op.checkpoint_ns is not None and ns != op.checkpoint_ns:
                continue
            for row in rows.values():
                if op.before is not None and not row.checkpoint_id < op.before:
                    continue
                key = (row.checkpoint_id, row.thread_id, row.checkpoint_ns)
                if op.after is not None and not key < op.after:
                    continue
                if op.filter and not metadata_matches(row.metadata, op.filter):
                    continue
                found.append((key, row))
        found.sort(key=lambda kr: kr[0], reverse=True)
        if op.limit is not None:
            found = found[: op.limit]
        return [row for _, row in found]

    def _list_one(self, op: o.ListCheckpoints) -> list[o.CheckpointRow]:
        """One thread/namespace: walk its sorted ids down from the cursor."""
        key = (op.thread_id, op.checkpoint_ns)
        ids, rows = self.order.get(key), self.checkpoints.get(key)  # type: ignore[arg-type]
        if not ids or not rows:
            return []
        hi = len(ids) if op.before is None else bisect_left(ids, op.before)
        if op.after is not None:
            # strictly after (id, thread, ns) in DESC order; ties on id compare (thread, ns)
            after_id, tail = op.after[0], op.after[1:]
            cut = bisect_right if key < tail else bisect_left  # type: ignore[operator]
            hi = min(hi, cut(ids, after_id))
        found: list[o.CheckpointRow] = []
        limit = op.limit
        for i in range(hi - 1, -1, -1):
            if limit is not None and len(found) >= limit:
                break
            row = rows[ids[i]]
            if not op.filter or metadata_matches(row.metadata, op.filter):
                found.append(row)
        return found

    def _find_runs(self, op: o.FindRunCheckpoints) -> list[o.CheckpointRow]:
        wanted = set(op.run_ids)
        return [
            row
            for rows in self.checkpoints.values()
            for row in rows.values()
            if row.run_id in wanted
        ]

    def _load_refs(self, op: o.LoadRefs) -> list[o.RefRow]:
        refs = self.refs.get((op.thread_id, op.checkpoint_ns))
        if not refs:
            return []
        return [refs[k] for k in op.keys if k in refs]

    def _thread_refs(self, op: o.LoadThreadRefs) -> list[o.RefRow]:
        return [
            ref
            for (thread_id, ns), refs in self.refs.items()
            if thread_id == op.thread_id and (op.checkpoint_ns is None or ns == op.checkpoint_ns)
            for ref in refs.values()
        ]

    def _load_blobs(self, op: o.LoadBlobs) -> dict[bytes, o.BlobRow]:
        blobs = self.blobs
        if op.refcounts:
            counts = self.counts
            return {h: (blobs[h], counts[h]) for h in op.hashes if h in blobs}
        return {h: blobs[h] for h in op.hashes if h in blobs}

    def _load_writes(self, op: o.LoadWrites) -> list[o.WriteRow]:
        if op.checkpoint_ids is not None and op.checkpoint_ns is not None:
            result = []
            task = op.task_id
            for cid in op.checkpoint_ids:
                rows = self.writes.get((op.thread_id, op.checkpoint_ns, cid))
                if not rows:
                    continue
                if task is None:
                    result.extend(rows.values())
                elif task in rows:  # one task's row (a put_writes merge)
                    result.append(rows[task])
            return result
        ids = set(op.checkpoint_ids) if op.checkpoint_ids is not None else None
        return [
            w
            for (thread_id, ns, cid), rows in self.writes.items()
            if thread_id == op.thread_id
            and (op.checkpoint_ns is None or ns == op.checkpoint_ns)
            and (ids is None or cid in ids)
            for w in rows.values()
        ]

    # -- writes -----------------------------------------------------------------

    def _save(self, op: o.SaveCheckpoint) -> o.SaveResult:
        blobs, counts = self.blobs, self.counts
        if op.base is not None and op.row is not None:
            rows = self.checkpoints.get((op.row.thread_id, op.row.checkpoint_ns)) or {}
            if op.base not in rows:
                return o.SaveResult(frozenset(), (), stale=True)
        for h in op.needs:
            if h not in blobs:
                return o.SaveResult(frozenset(), (), stale=True)
        new = []
        for blob in op.blobs:
            h = blob[0]  # .hash (rows are tuples: an index spares the descriptor)
            if blobs.setdefault(h, blob) is blob:  # one lookup: absent, now stored
                counts[h] = 0
                new.append(h)
        inserted = []
        thread_id = ns = None
        table: dict[tuple[str, str], o.RefRow] = {}
        size = o.HASH_SIZE
        for ref in op.refs:
            if ref[0] != thread_id or ref[1] != ns:  # (thread_id, checkpoint_ns): once per put
                thread_id, ns = ref[0], ref[1]
                table = self.refs.setdefault((thread_id, ns), {})
            if table.setdefault((ref[2], ref[3]), ref) is not ref:  # (channel, version) is kept
                inserted.append(False)
                continue
            inserted.append(True)
            hashes = ref[7]  # .hashes
            held = counts.get(hashes)
            if held is not None:  # a whole value: one hash
                counts[hashes] = held + 1
            elif len(hashes) > size:
                for i in range(0, len(hashes), size):
                    h = hashes[i : i + size]
                    if h in counts:
                        counts[h] += 1
        if op.row is not None:
            self._put_row(op.row)
        return o.SaveResult(frozenset(new), tuple(inserted))

    def _put_row(self, row: o.CheckpointRow) -> None:
        key = (row.thread_id, row.checkpoint_ns)
        rows, cid = self.checkpoints.setdefault(key, {}), row.checkpoint_id
        if cid not in rows:
            ids = self.order.setdefault(key, [])
            if not ids or cid > ids[-1]:
                ids.append(cid)  # ids are time-ordered: the usual case
            else:
                insort(ids, cid)
        rows[cid] = row

    def _save_writes(self, op: o.SaveWrites) -> frozenset[bytes] | None:
        writes, blobs, counts = self.writes, self.blobs, self.counts
        if op.strict and op.expected is not None:  # the flow did not read: check
            for w, old in zip(op.rows, op.expected):
                rows = writes.get((w.thread_id, w.checkpoint_ns, w.checkpoint_id))
                current = rows.get(w.task_id) if rows else None
                if old is not o.ANY_ROW and current != old:
                    return None
        new = []
        for blob in op.blobs:
            h = blob[0]  # .hash
            if blobs.setdefault(h, blob) is blob:  # one lookup: absent, now stored
                counts[h] = 0
                new.append(h)
        size, add = o.HASH_SIZE, op.add_refs
        for w in op.rows:  # (thread_id, checkpoint_ns, checkpoint_id)[task_id]
            writes.setdefault(w[:3], {})[w[3]] = w
            if add:
                hashes = w[6]  # .hashes
                for i in range(0, len(hashes), size):
                    h = hashes[i : i + size]
                    held = counts.get(h)
                    if held is not None:
                        counts[h] = held + 1
        return frozenset(new)

    def _insert(self, op: o.InsertRows) -> None:
        for row in op.checkpoints:
            self._put_row(row)
        for ref in op.refs:
            self.refs.setdefault((ref.thread_id, ref.checkpoint_ns), {})[
                (ref.channel, ref.version)
            ] = ref
        for w in op.writes:
            self.writes.setdefault((w.thread_id, w.checkpoint_ns, w.checkpoint_id), {})[
                w.task_id
            ] = w

    def _adjust(self, op: o.AdjustRefcounts) -> None:
        counts = self.counts
        for h, delta in op.deltas:
            if h in counts:
                counts[h] += delta

    def _drop(self, op: o.DropUnreferenced) -> list[o.BlobRow]:
        dropped, counts = [], self.counts
        for h in op.hashes:
            if h in counts and counts[h] <= 0:
                del counts[h]
                dropped.append(self.blobs.pop(h))
        return dropped

    def _delete_checkpoints(self, op: o.DeleteCheckpoints) -> int:
        keys = [
            k
            for k in self.checkpoints
            if k[0] == op.thread_id and (op.checkpoint_ns is None or k[1] == op.checkpoint_ns)
        ]
        count = 0
        for key in keys:
            rows = self.checkpoints[key]
            ids = list(rows) if op.checkpoint_ids is None else op.checkpoint_ids
            for cid in ids:
                count += rows.pop(cid, None) is not None
                self.writes.pop((key[0], key[1], cid), None)
            if not rows:
                del self.checkpoints[key]
                self.order.pop(key, None)
            else:
                self.order[key] = sorted(rows)
        if op.checkpoint_ids is None:
            for wkey in [k for k in self.writes if k[0] == op.thread_id]:
                if op.checkpoint_ns is None or wkey[1] == op.checkpoint_ns:
                    del self.writes[wkey]
        return count

    def _delete_refs(self, op: o.DeleteRefs) -> None:
        for key in [k for k in self.refs if k[0] == op.thread_id]:
            if op.checkpoint_ns is not None and key[1] != op.checkpoint_ns:
                continue
            if op.keys is None:
                del self.refs[key]
                continue
            table = self.refs[key]
            for k in op.keys:
                table.pop(k, None)
            if not table:
                del self.refs[key]

    def _stats(self, op: o.CollectStats) -> o.StatsResult:
        def wanted(thread_id: str) -> bool:
            return op.thread_id is None or thread_id == op.thread_id

        cps = [r for k, rows in self.checkpoints.items() if wanted(k[0]) for r in rows.values()]
        ws = [w for k, rows in self.writes.items() if wanted(k[0]) for w in rows.values()]
        refs = [r for k, rows in self.refs.items() if wanted(k[0]) for r in rows.values()]
        if op.thread_id is None:  # what is stored, as the SQL backends count it
            held = set(self.blobs)
        else:
            held = set()
            for row in (*refs, *ws):
                held.update(row.hashes[i : i + o.HASH_SIZE] for i in range(0, len(row.hashes), 16))
            _close(held, self.blobs)
        per_channel: dict[str, list[int]] = {}
        per_thread: Counter[str] = Counter()
        for ref in refs:
            entry = per_channel.setdefault(ref.channel, [0, 0, 0])
            entry[0] += 1
            entry[1] += ref.logical
            entry[2] += len(ref.data) if ref.kind == o.KIND_INLINE else 0
        for r in cps:
            per_thread[r.thread_id] += len(r.data) + len(r.metadata)
        for w in ws:
            per_thread[w.thread_id] += len(w.data)
        return o.StatsResult(
            checkpoints=len(cps),
            writes=len(ws),
            threads=len({r.thread_id for r in cps}),
            refs=len(refs),
            blobs=len(held),
            checkpoint_bytes=sum(len(r.data) + len(r.metadata) for r in cps),
            write_bytes=sum(len(w.data) for w in ws),
            inline_bytes=sum(len(r.data) for r in refs if r.kind == o.KIND_INLINE),
            blob_bytes=sum(len(self.blobs[h].data) for h in held if h in self.blobs),
            logical_bytes=sum(r.logical for r in refs),
            per_channel={k: (v[0], v[1], v[2]) for k, v in per_channel.items()},
            threads_bytes=dict(per_thread.most_common(op.top)),
        )


def _close(held: set[bytes], blobs: dict[bytes, o.BlobRow]) -> None:
    """Add the children (manifest segments, nested manifests) of held blobs."""
    todo = list(held)
    while todo:
        blob = blobs.get(todo.pop())
        if blob is not None and blob.children:
            ch = blob.children
            for child in (ch[i : i + o.HASH_SIZE] for i in range(0, len(ch), o.HASH_SIZE)):
                if child not in held:
                    held.add(child)
                    todo.append(child)
