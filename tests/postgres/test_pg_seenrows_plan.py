"""The torn-read check (postgres/seenrows.py) probes the checkpoint rows a read
found by primary key, one by one: a ``checkpoint_id = ANY(...)`` form was
planned as a filter over every checkpoint row of the thread, so the refs
lookup of a cold read grew with the thread (154 us of execution at 1,000
checkpoints, 17 us probed). Review, session 6."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver, seenrows
from threadloom.checkpoint.postgres.opplans import _load_refs, _load_writes
from threadloom.checkpoint.storage import ops
from threadloom.errors import CorruptBlobError

pytestmark = pytest.mark.postgres

IDS = [f"1ef00000-0000-6000-8000-{i:012d}" for i in range(40)]


def plan_of(conn: Any, stmt: Any) -> str:
    rows = conn.execute("EXPLAIN (ANALYZE, TIMING OFF, BUFFERS) " + stmt.sql, stmt.params)
    return "\n".join(r[0] for r in rows.fetchall())


@pytest.mark.parametrize("kind", [ops.LoadWrites, ops.LoadRefs])
@pytest.mark.parametrize("found", [1, 3])
def test_the_check_probes_each_row_by_key(
    pg_url: str, fresh_schema: str, kind: type, found: int
) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as s:
        s.setup()
        cfg: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for cid in IDS:
            c = empty_checkpoint()
            c["id"] = cid
            cfg = s.put(cfg, c, {}, {})
        ids = set(IDS[:found])
        if kind is ops.LoadWrites:
            [stmt], decode = _load_writes(ops.LoadWrites("t", "", tuple(ids)), s.sql)
            cols = s.sql.WRITE_COLS
        else:
            [stmt], decode = _load_refs(ops.LoadRefs("t", "", (("c", "1"),)), s.sql)
            cols = s.sql.REF_COLS
        [marked], check = seenrows.checked(stmt, decode, s.sql, ("t", ""), ids, cols)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            plan = plan_of(conn, marked)
            assert "checkpoints_pkey" in plan and "Filter: (checkpoint_id" not in plan, plan
            assert check([conn.execute(marked.sql, marked.params).fetchall()]) == []
            conn.execute(f"DELETE FROM {s.sql.ckpt} WHERE checkpoint_id <> ''")
            with pytest.raises(CorruptBlobError, match="deleted while it was read"):
                check([conn.execute(marked.sql, marked.params).fetchall()])
