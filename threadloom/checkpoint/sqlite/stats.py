"""SQL of ``stats()`` (aggregates only; kept apart from the hot-path queries)."""

from __future__ import annotations

from threadloom.checkpoint.sqlite.queries import CHUNK, Plan, Stmt, _marks, _scope
from threadloom.checkpoint.storage import ops as o

__all__ = ["stats_plan"]


def stats_plan(op: o.CollectStats) -> Plan:
    where, params = _scope(op.thread_id, None)
    cond = (" WHERE " + " AND ".join(where)) if where else ""
    cps = yield Stmt(
        "SELECT count(*), coalesce(sum(length(data) + length(metadata)), 0),"
        f" count(DISTINCT thread_id) FROM v_checkpoints{cond}",
        params,
        "one",
    )
    ws = yield Stmt(
        f"SELECT count(*), coalesce(sum(length(data)), 0) FROM v_writes{cond}", params, "one"
    )
    channels = yield Stmt(
        "SELECT channel, count(*), sum(logical), sum(CASE WHEN kind = 0 THEN length(data) ELSE 0 END)"
        f" FROM v_refs{cond} GROUP BY channel",
        params,
    )
    if op.thread_id is None:
        blobs = yield Stmt(
            "SELECT count(*), coalesce(sum(length(data)), 0) FROM tl_blobs", (), "one"
        )
    else:
        blobs = yield from _thread_blobs(op.thread_id)
    top = yield Stmt(
        "SELECT thread_id, sum(length(data) + length(metadata)) AS b FROM v_checkpoints"
        f"{cond} GROUP BY thread_id ORDER BY b DESC LIMIT ?",
        [*params, op.top],
    )
    return o.StatsResult(
        checkpoints=cps[0],
        writes=ws[0],
        threads=cps[2],
        refs=sum(r[1] for r in channels),
        blobs=blobs[0],
        checkpoint_bytes=cps[1],
        write_bytes=ws[1],
        inline_bytes=sum(r[3] or 0 for r in channels),
        blob_bytes=blobs[1],
        logical_bytes=sum(r[2] or 0 for r in channels),
        per_channel={r[0]: (r[1], r[2] or 0, r[3] or 0) for r in channels},
        threads_bytes={r[0]: r[1] for r in top},
    )


def _thread_blobs(thread_id: str) -> Plan:
    """(count, bytes) of the distinct blobs a thread's refs hold, manifests' segments included."""
    rows = yield Stmt(
        "SELECT hashes FROM v_refs WHERE thread_id = ?"
        " UNION ALL SELECT hashes FROM v_writes WHERE thread_id = ?",
        (thread_id, thread_id),
    )
    todo = {r[0][i : i + o.HASH_SIZE] for r in rows for i in range(0, len(r[0]), o.HASH_SIZE)}
    seen: dict[bytes, int] = {}
    while todo:
        part = list(todo)[:CHUNK]
        todo.difference_update(part)
        sql = (
            f"SELECT hash, length(data), children FROM tl_blobs WHERE hash IN ({_marks(len(part))})"
        )
        for h, size, children in (yield Stmt(sql, part)):
            seen[h] = size
            for i in range(0, len(children), o.HASH_SIZE):
                child = children[i : i + o.HASH_SIZE]
                if child not in seen:
                    todo.add(child)
    return len(seen), sum(seen.values())
