"""A ``put_writes`` counts the blobs its row holds in its own statements (#9).

An optimistic ``put_writes`` used to insert its new blobs' count rows at 0,
then lock the blobs and add the row's holds in two more statements (the flow's
``AdjustRefcounts``). Its blob insert now creates the count rows at their
final count, and the writes insert itself locks the blobs this transaction did
not create (hash order), adds the holds to their count rows and fails unless
every held blob is there: two statements and two row versions fewer. The
counts must stay exact for new blobs, blobs stored before (by this thread or
another), a value written twice, a task's writes merged twice, a put_step of
several tasks sharing a value, and nothing may be left after ``delete_thread``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.postgres.steps import spy_batches
from tests.postgres.test_pg_optimistic import BIG, config, consistent, cp, dump, put
from threadloom.checkpoint.postgres import PostgresSaver, writecounts
from threadloom.checkpoint.postgres import optimistic as opt
from threadloom.checkpoint.postgres.connection import CONFLICT_MARK
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.storage import ops

pytestmark = pytest.mark.postgres


@pytest.fixture(params=[None, 0], ids=["unprepared", "prepared"])
def pair(pg_url: str, request: Any) -> Iterator[tuple[PostgresSaver, PostgresSaver, str]]:
    """(optimistic saver, pessimistic saver, url) on separate schemas; the
    optimistic one also with prepared statements (generic plans)."""
    names = [f"tl_wc_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    try:
        with (
            PostgresSaver.from_conn_string(
                pg_url, schema=names[0], prepare_threshold=request.param
            ) as fast,
            PostgresSaver.from_conn_string(pg_url, schema=names[1]) as slow,
        ):
            fast.setup()
            slow.setup()
            slow.executor.optimistic_transaction = None  # never guesses
            yield fast, slow, pg_url
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def both(pair: Any, fn: Any) -> None:
    fast, slow, url = pair
    fn(fast)
    fn(slow)
    assert dump(url, fast) == dump(url, slow)
    consistent(url, fast)


def counts(url: str, saver: PostgresSaver) -> dict[bytes, int]:
    return dict(dump(url, saver)["checkpoint_blob_refs"])


def test_new_blobs_are_counted_exactly(pair, refusals) -> None:
    def run(saver: PostgresSaver) -> None:
        parent = put(saver, config("t"), cp(1, "small"))
        saver.put_writes(parent, [("doc", BIG + "a"), ("x", BIG + "b"), ("y", 3)], "task")

    both(pair, run)
    assert refusals == []
    assert sorted(counts(pair[2], pair[0]).values()) == [1, 1]


def test_blobs_stored_before_are_counted_exactly(pair, refusals) -> None:
    """The write's value is the checkpoint's (same blob), another thread's, and
    one value is written twice by the task."""

    def run(saver: PostgresSaver) -> None:
        parent = put(saver, config("t"), cp(1, BIG))
        other = put(saver, config("u"), cp(1, BIG + "u"))
        saver.put_writes(other, [("doc", BIG + "shared")], "task")
        writes = [("doc", BIG), ("a", BIG + "shared"), ("b", BIG + "2"), ("c", BIG + "2")]
        saver.put_writes(parent, writes, "task")

    both(pair, run)
    assert refusals == []
    assert sorted(counts(pair[2], pair[0]).values()) == [1, 2, 2, 2]


def test_a_task_merged_twice_and_a_step_of_tasks_sharing_values(pair, refusals) -> None:
    def run(saver: PostgresSaver) -> None:
        parent = put(saver, config("t"), cp(1, BIG))
        saver.put_writes(parent, [("doc", BIG + "1")], "task")
        saver.put_writes(parent, [("doc", BIG + "1"), ("x", BIG + "2")], "task")  # merges
        step = [(parent, [("doc", BIG + "s")], f"t{i}", "") for i in range(3)]
        step.append((parent, [("doc", BIG), ("x", BIG + "s")], "t3", ""))
        saver.put_step(step, (parent, cp(2, BIG + "s"), {"step": 2}, {"doc": 2}))

    both(pair, run)
    assert refusals == []  # the second put_writes of "task" merges into the row it knows
    tables = dump(pair[2], pair[0])
    assert max(n for _, n in tables["checkpoint_blob_refs"]) == 5  # BIG + "s": 4 writes, 1 ref


def test_delete_thread_leaves_no_blob(pair, refusals) -> None:
    def run(saver: PostgresSaver) -> None:
        parent = put(saver, config("t"), cp(1, BIG))
        saver.put_writes(parent, [("doc", BIG), ("x", BIG + "w"), ("y", BIG + "w")], "task")
        saver.delete_thread("t")

    both(pair, run)
    tables = dump(pair[2], pair[0])
    assert tables["checkpoint_blobs"] == [] and tables["checkpoint_blob_refs"] == []


def test_put_writes_sends_no_separate_count_adjustment(pair, monkeypatch) -> None:
    """Blob insert + writes insert (+ the plan-mode statement when prepared),
    where the adjustment's lock and update statements followed."""
    fast, _, url = pair
    parent = put(fast, config("t"), cp(1, BIG))
    sent: list[list[str]] = []
    spy_batches(monkeypatch, lambda b: sent.append([s.sql for s in b]))
    fast.put_writes(parent, [("doc", BIG + "a"), ("x", BIG + "b")], "task")
    stmts = [s for batch in sent for s in batch if "plan_cache_mode" not in s]
    assert len(stmts) == 2
    assert not any(s.lstrip().startswith("UPDATE") for s in stmts)
    assert "unnest" not in stmts[1].split("checkpoint_writes")[1]  # one row: scalars
    assert sorted(counts(url, fast).values()) == [1, 1, 1]  # BIG (the ref) and the two


def test_a_pessimistic_put_writes_counts_in_its_writes_insert_too(pair, monkeypatch) -> None:
    """The pessimistic plan (a caller's transaction, a refused optimistic one's
    rerun): after its read found no row, new count rows are created at their
    final count and the writes insert counts the rest; the adjustment's lock
    and update statements are gone (6 statements -> 4)."""
    _, slow, url = pair
    parent = put(slow, config("t"), cp(1, BIG))
    sent: list[list[str]] = []
    spy_batches(monkeypatch, lambda b: sent.append([s.sql for s in b]))
    slow.put_writes(parent, [("doc", BIG + "a"), ("x", BIG + "b"), ("doc2", BIG)], "task")
    stmts = [s for batch in sent for s in batch]
    assert len(stmts) == 4  # thread lock, the task's row read, blob insert, writes insert
    assert not any(s.lstrip().startswith("UPDATE") for s in stmts)
    assert sorted(counts(url, slow).values()) == [1, 1, 2]  # BIG held by the ref and the row


def _held_writes(sql: SQL, held: dict[bytes, int]) -> tuple[str, tuple[Any, ...]]:
    hashes = sorted(held)
    row = ("t", "", b"\x01c", b"\x01k", "", b"", b"".join(h * held[h] for h in hashes))
    cols = list(row)  # one row: scalars (writecounts.one_row)
    return writecounts.text(sql, opt.LOCK_SLOT, opt.REFUSE), (
        hashes,
        hashes,
        [held[h] for h in hashes],
        *cols,
        1,
        len(hashes),
    )


OURS, KEPT = b"o" * 16, b"k" * 16


@pytest.fixture
def sql(pg_url: str, fresh_schema: str) -> SQL:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    sql = SQL(fresh_schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {sql.blobs} (hash, tag, data, children) VALUES (%s, 't', '', '')", (KEPT,)
        )
        conn.execute(f"INSERT INTO {sql.counts} (id, refs) SELECT id, 4 FROM {sql.blobs}")
    return sql


def _insert_own(conn: Any, sql: SQL, held: dict[bytes, int], *hashes: bytes) -> None:
    blobs = tuple(ops.BlobRow(h, "t", b"", b"") for h in hashes)
    for stmt in opt.insert_blobs(blobs, sql, held, writecounts.NEW_WRITE_COUNTS):
        conn.execute(stmt.sql, stmt.params)


def test_the_writes_insert_locks_and_counts_only_what_the_blob_insert_did_not(
    pg_url: str, sql: SQL
) -> None:
    held = {OURS: 2, KEPT: 1}
    with psycopg.connect(pg_url, autocommit=True) as conn, psycopg.connect(pg_url) as other:
        with conn.transaction(force_rollback=True):
            _insert_own(conn, sql, held, OURS, KEPT)  # KEPT exists: skipped
            conn.execute(*_held_writes(sql, held))
            rows = conn.execute(
                f"SELECT b.hash, c.refs, b.xmax::text = pg_current_xact_id()::xid::text"
                f" FROM {sql.counts} c JOIN {sql.blobs} b USING (id)"
            ).fetchall()
            assert {bytes(h): (n, lk) for h, n, lk in rows} == {OURS: (2, False), KEPT: (5, True)}
            with pytest.raises(psycopg.errors.LockNotAvailable):  # KEPT's lock is real
                other.execute(
                    f"SELECT 1 FROM {sql.blobs} WHERE hash = %s FOR UPDATE NOWAIT", (KEPT,)
                )


def test_a_held_blob_gone_refuses_the_transaction(pg_url: str, sql: SQL) -> None:
    """A blob the row holds that is not there (deleted by a prune after the
    blob insert found it) fails the transaction: the flow reruns pessimistically."""
    held = {OURS: 1, KEPT: 1}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with conn.transaction(force_rollback=True):
            _insert_own(conn, sql, held, OURS)
            conn.execute(f"DELETE FROM {sql.blobs} WHERE hash = %s", (KEPT,))
            with pytest.raises(psycopg.errors.InvalidTextRepresentation, match=CONFLICT_MARK):
                conn.execute(*_held_writes(sql, held))


def test_an_adjustment_after_absorbed_holds_plans_only_the_difference() -> None:
    held = {OURS: 2, KEPT: 1}
    same = ops.AdjustRefcounts(((KEPT, 1), (OURS, 2)))
    assert writecounts.unabsorbed(same, held) is None
    more = writecounts.unabsorbed(ops.AdjustRefcounts(((KEPT, 2), (OURS, 2))), held)
    assert more == ops.AdjustRefcounts(((KEPT, 1),))
    assert writecounts.unabsorbed(same, None) is same
