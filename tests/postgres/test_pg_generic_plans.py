"""Generic plans in optimistic write transactions (postgres/generic.py).

On a connection that prepares statements, a put / put_writes / put_step
starts with the plan-mode statement and marks every statement after it, so
each is planned once per connection instead of at every execution. The
plans are built on an empty schema here, the worst case: none may scan a
table (a scan planned on a near-empty table would be kept while the table
grows).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.postgres.steps import count_parent, count_steps
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver, generic
from threadloom.checkpoint.postgres import connection as pgconn
from threadloom.checkpoint.postgres.generic import MARK, PLAN_MODE
from threadloom.checkpoint.storage import ops

pytestmark = pytest.mark.postgres


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[list[pgconn.Stmt]]:
    """Every batch the sync connector sends (in this test)."""
    batches: list[list[pgconn.Stmt]] = []
    send, lean_send = pgconn.PgConnector._send, pgconn.PgConnector._send_lean

    def recording(conn: Any, batch: Any) -> list[Any]:
        batches.append(list(batch))
        return send(conn, batch)

    def recording_lean(conn: Any, batch: Any, out: Any) -> None:
        batches.append(list(batch))
        lean_send(conn, batch, out)

    monkeypatch.setattr(pgconn.PgConnector, "_send", staticmethod(recording))
    monkeypatch.setattr(pgconn.PgConnector, "_send_lean", staticmethod(recording_lean))
    return batches


def _doc(*key: Any) -> str:
    """A value stored as a blob: small once compressed, so a page holds many."""
    return (f"{key} " + "0123456789abcdef" * 64)[:1000]


def _saves(saver: PostgresSaver, thread: str) -> None:
    """Puts with blobs, put_writes with a blob, and put_steps."""
    parent = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(4):
        cp = empty_checkpoint()
        versions = {"doc": str(i + 1), "n": str(i + 1)}
        cp["channel_values"] = {"doc": _doc(thread, i), "n": i}
        cp["channel_versions"] = versions
        if i < 2:
            parent = saver.put(parent, cp, {"step": i}, versions)
            saver.put_writes(parent, [("doc", _doc(thread, i, "w"))], f"t{i}")
        else:
            writes = [(parent, [("doc", _doc(thread, i, "s")), ("n", i)], f"t{i}", "")]
            parent = saver.put_step(writes, (parent, cp, {"step": i}, versions))
    tup = saver.get_tuple(parent)
    assert tup is not None and tup.checkpoint["channel_values"]["n"] == 3


@pytest.fixture
def prepared(pg_url: str, fresh_schema: str) -> Iterator[tuple[PostgresSaver, Any]]:
    conn = psycopg.connect(pg_url, autocommit=True, prepare_threshold=0)
    with conn:
        saver = PostgresSaver(conn, schema=fresh_schema)
        saver.setup()
        yield saver, conn


def _write_batches(batches: list[list[pgconn.Stmt]]) -> list[list[pgconn.Stmt]]:
    return [b for b in batches if any(MARK in s.sql or s == PLAN_MODE for s in b)]


def test_prepared_saves_plan_generically_without_scans(
    prepared, sent, pg_url: str, fresh_schema: str
) -> None:
    saver, conn = prepared
    sent.clear()
    _saves(saver, "generic")
    writes = _write_batches(sent)
    assert len(writes) >= 6  # 2 puts, 2 put_writes, 2 put_steps
    firsts = [b[0] for b in writes if b[0] == PLAN_MODE]
    assert len(firsts) == 6  # one mode statement per write transaction
    marked = {s.sql for b in writes for s in b if s != PLAN_MODE}
    assert marked and all(sql.endswith(MARK) for sql in marked)
    rows = conn.execute(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
    ).fetchall()
    mine = [r for r in rows if "threadloom:generic" in r[0]]
    assert len(mine) >= len(marked)  # (one text per parameter types)
    assert all(generic >= 1 and custom == 0 for _, generic, custom in mine)
    _assert_no_scans(pg_url, fresh_schema, marked)  # plans of a near-empty schema
    for i in range(40):  # a few pages per table: where a scan looked cheapest
        _saves(saver, f"more-{i}")
    _assert_no_scans(pg_url, fresh_schema, marked)


def _assert_no_scans(url: str, schema: str, statements: set[str]) -> None:
    """Each statement's generic plan, built on the (small) tables as they are."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        for k, sql in enumerate(sorted(statements)):
            n = sql.count("%s")
            text = re.sub(r"%s", lambda m, c=iter(range(1, n + 1)): f"${next(c)}", sql)
            with conn.transaction(force_rollback=True):
                conn.execute(PLAN_MODE.sql)
                conn.execute(f"PREPARE g{k} AS {text}")
                args = f"({', '.join(['NULL'] * n)})" if n else ""
                plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE g{k}{args}"))
                assert "Seq Scan" not in plan, f"{sql}\n{plan}"


def test_unprepared_connections_plan_as_before(pg_url: str, pg_schema: str, sent) -> None:
    """Statements planned afresh each time gain nothing from the mode: not sent."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        sent.clear()
        _saves(saver, "unprepared")
    stmts = [s for b in sent for s in b]
    assert stmts and PLAN_MODE not in stmts
    assert not any(MARK in s.sql for s in stmts)


async def test_async_prepared_saves_plan_generically(pg_url: str, fresh_schema: str) -> None:
    from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver

    conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True, prepare_threshold=0)
    async with conn:
        saver = AsyncPostgresSaver(conn, schema=fresh_schema)
        await saver.setup()
        parent = {"configurable": {"thread_id": "async", "checkpoint_ns": ""}}
        for i in range(3):
            cp = empty_checkpoint()
            cp["channel_values"] = {"doc": _doc("async", i)}
            cp["channel_versions"] = {"doc": str(i + 1)}
            parent = await saver.aput(parent, cp, {"step": i}, {"doc": str(i + 1)})
            await saver.aput_writes(parent, [("doc", _doc("async", i, "w"))], f"t{i}")
        cur = await conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%threadloom:generic%'"
        )
        plans = await cur.fetchall()
        tup = await saver.aget_tuple(parent)
    assert tup is not None and tup.checkpoint["channel_values"]["doc"] == _doc("async", 2)
    assert plans and all(generic >= 1 and custom == 0 for generic, custom in plans)


def test_small_saves_plan_as_before(prepared, sent) -> None:
    """A step that moves no blob or ref plans too little to pay for the mode."""
    saver, _ = prepared
    parent = count_parent(saver, "small")
    sent.clear()
    parent = count_steps(saver, parent)
    stmts = [s for b in sent for s in b]
    assert len(stmts) >= 6 and PLAN_MODE not in stmts
    assert saver.get_tuple(parent).checkpoint["channel_values"] == {"count": 2}


def test_the_mode_goes_once_before_the_first_costly_op() -> None:
    """A costly op (blobs, refs, a refcount adjustment) on a connection that
    prepares: PLAN_MODE first, every statement marked from then on."""

    class Prepared:
        prepare_threshold = 0

    tx = pgconn.Tx(True, conn=Prepared(), optimistic=True)
    batch = [pgconn.Stmt("SELECT 1"), pgconn.Stmt("SELECT 2")]
    assert generic.batch(tx, batch, ops.GetCheckpoint("t", "", None)) == batch  # not costly
    op = ops.AdjustRefcounts(((b"h" * 16, 1),))
    first = generic.batch(tx, batch, op)
    assert first == [PLAN_MODE, *(pgconn.Stmt(s.sql + MARK) for s in batch)]
    assert generic.batch(tx, batch, op) == first[1:]  # once per transaction
    unprepared = pgconn.Tx(True, conn=object(), optimistic=True)
    assert generic.batch(unprepared, batch, op) == batch
