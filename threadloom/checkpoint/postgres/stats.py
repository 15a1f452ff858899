"""``CollectStats`` on Postgres: counts and bytes, for one thread or the store.

Blob bytes count each distinct blob once: for the whole store that is the
blob table; for one thread, the blobs its refs hold (and, recursively, the
segments their list manifests hold).
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.postgres.queries import BLOB_DATA, SQL
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage import ops

__all__ = ["plan_stats"]


def plan_stats(op: ops.CollectStats, sql: SQL) -> tuple[list[Stmt], Any]:
    """Five aggregate queries in one batch, decoded into a StatsResult."""
    where, params = ("thread_id = %s", [op.thread_id]) if op.thread_id is not None else ("TRUE", [])
    batch = [
        Stmt(
            "SELECT count(*), coalesce(sum(octet_length(data) + octet_length(metadata)), 0),"
            f" count(DISTINCT thread_id) FROM {sql.ckpt} WHERE {where}",
            params,
            "one",
        ),
        Stmt(
            f"SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM {sql.writes}"
            f" WHERE {where}",
            params,
            "one",
        ),
        Stmt(
            "SELECT channel, count(*), coalesce(sum(logical), 0),"
            " coalesce(sum(CASE WHEN kind = 0 THEN octet_length(data) ELSE 0 END), 0)"
            f" FROM {sql.refs} WHERE {where}"
            " GROUP BY channel",
            params,
            "all",
        ),
        Stmt(sql.thread_blobs, [*params, *params], "one")
        if op.thread_id is not None
        else Stmt(
            f"SELECT count(*), coalesce(sum(octet_length({BLOB_DATA.format(b='')})), 0)"
            f" FROM {sql.blobs}",
            (),
            "one",
        ),
        Stmt(
            f"""SELECT thread_id, sum(n) FROM (
                SELECT thread_id, octet_length(data) + octet_length(metadata) AS n
                FROM {sql.ckpt} WHERE {where}
                UNION ALL SELECT thread_id, octet_length(data) FROM {sql.writes} WHERE {where}
            ) AS sizes GROUP BY thread_id ORDER BY 2 DESC, 1 LIMIT %s""",
            [*params, *params, op.top],
            "all",
        ),
    ]
    return batch, _decode


def _decode(results: list[Any]) -> ops.StatsResult:
    (ckpts, ckpt_bytes, threads), (writes, write_bytes), channels, blobs, top = results
    per_channel = {name: (int(n), int(lg), int(il)) for name, n, lg, il in channels}
    return ops.StatsResult(
        checkpoints=int(ckpts),
        writes=int(writes),
        threads=int(threads),
        refs=sum(v[0] for v in per_channel.values()),
        blobs=int(blobs[0]),
        checkpoint_bytes=int(ckpt_bytes),
        write_bytes=int(write_bytes),
        inline_bytes=sum(v[2] for v in per_channel.values()),
        blob_bytes=int(blobs[1]),
        logical_bytes=sum(v[1] for v in per_channel.values()),
        per_channel=per_channel,
        threads_bytes={t: int(n) for t, n in top},
    )
