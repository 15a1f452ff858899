"""Sets a write transaction keeps in settings are built once per statement.

An optimistic write leaves the blobs and count rows its blob insert created
in transaction settings (``threadloom.new_blobs``, ``threadloom.new_counts``,
``threadloom.new_write_counts``); later statements skip those rows. They used
``hash = ANY(ARRAY(SELECT ... current_setting(...)))`` (the array built once,
then scanned whole for every row) and ``id <> ALL(string_to_array(
current_setting(...))::bigint[])`` (the setting parsed again for every row,
then scanned): a ``put_writes`` of W blob values cost W x W inside Postgres
(W=40,000: 32 s; LangGraph 1 s). Each set is now an uncorrelated ``IN``
subquery, which Postgres hashes once per statement (a "hashed SubPlan").

The test records every statement a put and two put_writes send and checks
each plan with EXPLAIN (no ANALYZE, nothing runs): no per-row filter reads a
setting, and every set read from one is a hashed SubPlan. Structural, no
timing."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.postgres import PostgresSaver, generic
from threadloom.checkpoint.postgres.connection import PgConnector
from threadloom.checkpoint.postgres.connector import ConnectorBase
from threadloom.checkpoint.storage import ops

pytestmark = pytest.mark.postgres

BIG = "v" * 300  # a blob on every configuration


def _record(monkeypatch: pytest.MonkeyPatch) -> dict[int, Any]:
    """Every statement the saver sends or holds for its commit, by id."""
    sent: dict[int, Any] = {}
    execute, hold = PgConnector.execute, ConnectorBase.hold

    def executing(self: Any, batch: Any) -> Any:
        sent.update((id(st), st) for st in batch)
        return execute(self, batch)

    def holding(self: Any, tx: Any, batch: Any) -> Any:
        sent.update((id(st), st) for st in batch)
        return hold(self, tx, batch)

    monkeypatch.setattr(PgConnector, "execute", executing)
    monkeypatch.setattr(ConnectorBase, "hold", holding)
    return sent


_HEADER = re.compile(r"^\s*(?:->\s*)?(SubPlan|InitPlan) (\d+)")
_PER_ROW = ("Filter:", "Join Filter:", "Hash Cond:", "Index Cond:", "Recheck Cond:", "Merge Cond:")


def per_row_setting_reads(plan: list[str]) -> list[str]:
    """The plan lines that read a setting once per row: a filter or join
    condition calling ``current_setting``, or a set read from a setting that
    is not a hashed SubPlan (an InitPlan array then scanned for every row)."""
    text = "\n".join(plan)
    bad = []
    for i, line in enumerate(plan):
        if "current_setting(" not in line:
            continue
        stripped = line.strip()
        if stripped.startswith(_PER_ROW):
            bad.append(stripped)
            continue
        if not stripped.startswith("Function Call:"):
            continue  # a one-row expression (set_config, a one-time filter)
        for j in range(i - 1, -1, -1):
            header = _HEADER.match(plan[j])
            if header:
                kind, n = header.groups()
                if kind != "SubPlan" or f"hashed SubPlan {n}" not in text:
                    bad.append(f"{kind} {n}: {stripped}")
                break
    return bad


@pytest.mark.parametrize("pipeline", [False, True])
def test_setting_sets_are_hashed_not_scanned_per_row(
    pg_url: str, fresh_schema: str, monkeypatch: pytest.MonkeyPatch, pipeline: bool
) -> None:
    with PostgresSaver.from_conn_string(
        pg_url, schema=fresh_schema, pool=pipeline, pipeline=pipeline
    ) as s:
        s.setup()
        sent = _record(monkeypatch)
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=1))
        values = {f"c{i}": f"{BIG}{i}" for i in range(30)}
        versions = {c: "00000000000000000000000000000001.0.1" for c in values}
        cp["channel_values"], cp["channel_versions"] = values, versions
        cfg = s.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, versions)
        s.put_writes(cfg, [(f"w{i}", f"{BIG}w{i}") for i in range(30)], "task-a")
        s.put_writes(cfg, [(f"x{i}", f"{BIG}x{i}") for i in range(30)], "task-b")
        monkeypatch.undo()
        assert s.get_tuple(cfg).pending_writes[0][2] == f"{BIG}w0"
    reading = [st for st in sent.values() if "current_setting(" in st.sql]
    assert len(reading) >= 3, [
        st.sql[:80] for st in sent.values()
    ]  # the put's and each put_writes'
    with psycopg.connect(pg_url) as conn:
        for st in reading:
            plan = [r[0] for r in conn.execute("EXPLAIN (VERBOSE) " + st.sql, st.params)]
            bad = per_row_setting_reads(plan)
            assert not bad, f"{st.sql[:200]}...\n" + "\n".join(bad)
        conn.rollback()


def test_the_adjustment_lock_hashes_the_own_set(pg_url: str, fresh_schema: str) -> None:
    """The refcount adjustment's lock (generic.py) skips this transaction's own
    blobs with the same hashed set."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as s:
        s.setup()
        [lock, _], _ = generic.adjust(ops.AdjustRefcounts(((b"h" * 16, 1),)), s.sql)
        with psycopg.connect(pg_url) as conn:
            plan = [r[0] for r in conn.execute("EXPLAIN (VERBOSE) " + lock.sql, lock.params)]
            conn.rollback()
    assert "current_setting(" in "\n".join(plan)
    assert not per_row_setting_reads(plan), plan
