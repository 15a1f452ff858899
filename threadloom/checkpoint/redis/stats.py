"""``CollectStats`` on Redis: one pipelined read of each thread's hashes.

Blobs are stored per thread, so the store-wide blob count and bytes are the
sum over threads: that is what Redis really holds.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from threadloom.checkpoint.storage import ops
from threadloom.errors import CorruptBlobError

if TYPE_CHECKING:
    from threadloom.checkpoint.redis.executor import Plan, RedisPlanner

__all__ = ["collect_stats"]


def collect_stats(planner: RedisPlanner, op: ops.CollectStats) -> Plan:
    """Counts and bytes for one thread, or every thread under the prefix."""
    from threadloom.checkpoint.redis.executor import Call
    from threadloom.checkpoint.redis.fields import blob_row, checkpoint_row, ref_row, write_row

    if op.thread_id is not None:
        threads = [op.thread_id]
    else:
        threads = yield from planner.threads()
    parts = ("row", "w", "ref", "blob")
    calls = [Call(("HGETALL", planner.key(t, part))) for t in threads for part in parts]
    results = (yield calls) if calls else []
    totals: Counter[str] = Counter()
    per_channel: dict[str, list[int]] = {}
    per_thread: Counter[str] = Counter()
    for i, thread_id in enumerate(threads):
        rows, writes, refs, blobs = results[4 * i : 4 * i + 4]
        # a damaged value (fields.py) counts as its stored bytes: stats never
        # decode values, so they do not stop at one
        for fld, value in rows.items():
            try:
                row = checkpoint_row(thread_id, fld, value)
                size = len(row.data) + len(row.metadata)
            except CorruptBlobError:
                size = len(value)
            totals["checkpoints"] += 1
            totals["checkpoint_bytes"] += size
            per_thread[thread_id] += size
        for packed in writes.values():
            data = write_row(thread_id, "", "", "", packed).data
            size = len(packed if data is None else data)
            totals["writes"] += 1
            totals["write_bytes"] += size
            per_thread[thread_id] += size
        for fld, packed in refs.items():
            ref = ref_row(thread_id, fld, packed)
            entry = per_channel.setdefault(ref.channel, [0, 0, 0])
            entry[0] += 1
            entry[1] += ref.logical
            entry[2] += len(ref.data) if ref.kind == ops.KIND_INLINE else 0
        totals["blobs"] += len(blobs)
        for h, packed in blobs.items():
            data = blob_row(h, packed).data
            totals["blob_bytes"] += len(packed if data is None else data)
        totals["threads"] += 1 if rows else 0
    return ops.StatsResult(
        checkpoints=totals["checkpoints"],
        writes=totals["writes"],
        threads=totals["threads"],
        refs=sum(v[0] for v in per_channel.values()),
        blobs=totals["blobs"],
        checkpoint_bytes=totals["checkpoint_bytes"],
        write_bytes=totals["write_bytes"],
        inline_bytes=sum(v[2] for v in per_channel.values()),
        blob_bytes=totals["blob_bytes"],
        logical_bytes=sum(v[1] for v in per_channel.values()),
        per_channel={k: (v[0], v[1], v[2]) for k, v in per_channel.items()},
        threads_bytes=dict(per_thread.most_common(op.top)),
    )
