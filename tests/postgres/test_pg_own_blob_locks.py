"""An optimistic write locks only the blob rows its transaction did not insert
(session 6, issue #9).

The put's combined statement (check, refs, row) and a ``put_writes``' writes
insert (or, when planned, the put's check and the count adjustment) lock the
blob rows they rely on (hash order), so a concurrent prune cannot delete one
under them. A
row this transaction inserted is invisible to every other transaction until
the commit, so nobody can lock or delete it: locking it only wrote a row-lock
WAL record and dirtied its page (5 of a bench put's ~55 WAL records, 2 of a
bench ``put_writes``' ~18). A row that already existed (reused, or sent and
skipped by the insert) is still locked, and one deleted while the lock waited
still fails the write. Own rows are the exact set the transaction's blob
inserts returned (a transaction-local setting), not those whose ``xmin`` is
the current xid (wraparound; review, session 6).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest

from threadloom.checkpoint.postgres import PostgresSaver, generic, writecounts
from threadloom.checkpoint.postgres import optimistic as opt
from threadloom.checkpoint.postgres.connection import CONFLICT_MARK
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage import ops

pytestmark = pytest.mark.postgres

OURS = b"o" * 16  # inserted by the transaction under test
KEPT = b"k" * 16  # committed before it (another thread's blob, reused)


@pytest.fixture
def sql(pg_url: str, fresh_schema: str) -> SQL:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    sql = SQL(fresh_schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        insert(conn, sql, KEPT)
    return sql


def insert(conn: Any, sql: SQL, h: bytes) -> None:
    conn.execute(
        f"INSERT INTO {sql.blobs} (hash, tag, data, children) VALUES (%s, 't', '', '')", (h,)
    )
    conn.execute(
        f"INSERT INTO {sql.counts} (id, refs) SELECT id, 0 FROM {sql.blobs} WHERE hash = %s", (h,)
    )


def insert_own(conn: Any, sql: SQL, *hashes: bytes, children: bytes = b"") -> None:
    """Insert blobs as an optimistic write does (its blob insert statement, which
    leaves the hashes it created in ``threadloom.new_blobs``)."""
    blobs = tuple(ops.BlobRow(h, "t", b"", children) for h in hashes)
    for stmt in opt.insert_blobs(blobs, sql):
        conn.execute(stmt.sql, stmt.params)


def own_setting(conn: Any) -> set[bytes]:
    text = conn.execute(f"SELECT current_setting('{generic.NEW_BLOBS}', true)").fetchone()[0]
    return {bytes.fromhex(h) for h in (text or "").split(",") if h}


def locked_by_me(conn: Any, sql: SQL) -> dict[bytes, bool]:
    """Which blob rows carry this transaction's row lock (``xmax`` is its id)."""
    rows = conn.execute(
        f"SELECT hash, xmax::text = pg_current_xact_id()::xid::text FROM {sql.blobs}"
    ).fetchall()
    return {bytes(h): mine for h, mine in rows}


def check_stmt(sql: SQL, hashes: list[bytes]) -> Any:
    op = ops.SaveCheckpoint(None, (), (), None, tuple(hashes))
    stmt = opt._check(op, sql, sorted(hashes))
    assert stmt is not None
    return stmt


def adjust_stmts(sql: SQL, hashes: list[bytes]) -> list[Any]:
    stmts, _ = generic.adjust(ops.AdjustRefcounts(tuple((h, 1) for h in hashes)), sql)
    return stmts


def put_batch(sql: SQL) -> list[Any]:
    """The usual optimistic put of a keyframe whose ref holds OURS and KEPT,
    both sent: its blob insert (KEPT exists: skipped) and its combined
    statement (:func:`.optimistic._checked_save`)."""
    row = ops.CheckpointRow("t", "", str(uuid.uuid1()), None, "tl1", b"d", "{}", None)
    ref = ops.RefRow("t", "", "doc", "1", 1, "t", b"", OURS + KEPT, 0, 0)
    blobs = (ops.BlobRow(OURS, "t", b"", b""), ops.BlobRow(KEPT, "t", b"", b""))
    batch, _ = opt._save_checkpoint(ops.SaveCheckpoint(row, (ref,), blobs), sql)
    assert "FOR UPDATE" in batch[-1].sql and "checkpoint_refs" in batch[-1].sql
    return batch


def put_writes_batch(sql: SQL) -> list[Any]:
    """The usual optimistic put_writes of one task row holding OURS and KEPT,
    both sent: its blob insert and its writes insert (:func:`.writecounts.text`)."""
    held = {OURS: 1, KEPT: 1}
    blobs = (ops.BlobRow(OURS, "t", b"", b""), ops.BlobRow(KEPT, "t", b"", b""))
    batch = opt.insert_blobs(blobs, sql, held, writecounts.NEW_WRITE_COUNTS)
    row = ("t", "", b"\x01c", b"\x01k", "", b"", OURS + KEPT)  # one row: scalars
    params = ([KEPT, OURS], [KEPT, OURS], [1, 1], *row, 1, 2)
    return [*batch, Stmt(writecounts.text(sql, opt.LOCK_SLOT, opt.REFUSE), params)]


STATEMENTS = ["put", "put_writes", "put check (refs only)", "adjustment"]


def statements(sql: SQL, which: str, conn: Any) -> list[Any]:
    if which == "put":
        return put_batch(sql)
    if which == "put_writes":
        return put_writes_batch(sql)
    insert_own(conn, sql, OURS)
    if which == "put check (refs only)":
        return [check_stmt(sql, [OURS, KEPT])]
    return adjust_stmts(sql, [OURS, KEPT])


@pytest.mark.parametrize("which", STATEMENTS)
def test_only_rows_of_other_transactions_are_locked(pg_url: str, sql: SQL, which: str) -> None:
    """The usual put's combined statement and put_writes' writes insert (since
    282fcad/e4af6fc), and the check and adjustment still planned otherwise."""
    with psycopg.connect(pg_url, autocommit=True) as conn, psycopg.connect(pg_url) as other:
        with conn.transaction(force_rollback=True):
            for stmt in statements(sql, which, conn):
                conn.execute(stmt.sql, stmt.params)
            assert locked_by_me(conn, sql) == {OURS: False, KEPT: True}
            with pytest.raises(psycopg.errors.LockNotAvailable):  # KEPT's lock is real
                other.execute(
                    f"SELECT 1 FROM {sql.blobs} WHERE hash = %s FOR UPDATE NOWAIT", (KEPT,)
                )
            counts = conn.execute(
                f"SELECT b.hash, c.refs FROM {sql.counts} c JOIN {sql.blobs} b USING (id)"
            ).fetchall()
            held = 0 if which == "put check (refs only)" else 1  # the check counts nothing
            assert {bytes(h): n for h, n in counts} == {OURS: held, KEPT: held}


@pytest.mark.parametrize("which", ["put check", "put_writes adjust"])
def test_the_unlocked_rows_are_exactly_those_the_inserts_created(
    pg_url: str, sql: SQL, which: str
) -> None:
    """Own rows are told by the exact set of hashes this transaction's blob
    inserts returned (``threadloom.new_blobs``), not by ``xmin`` (the raw 32-bit
    xid, kept by freezing: after a wraparound an old row's could equal ours):
    a row an insert skipped because it existed (KEPT, sent again) is locked,
    a second insert's rows are added to the first's, a row inserted any other
    way is locked, and the next transaction starts with none."""
    later, raw = b"l" * 16, b"r" * 16
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with conn.transaction(force_rollback=True):
            insert_own(conn, sql, OURS, KEPT)  # KEPT exists: skipped, not ours
            assert own_setting(conn) == {OURS}
            insert_own(conn, sql, later, children=KEPT)  # a manifest: two statements
            assert own_setting(conn) == {OURS, later}
            insert(conn, sql, raw)
            hashes = [OURS, KEPT, later, raw]
            stmts = [check_stmt(sql, hashes)] if which == "put check" else adjust_stmts(sql, hashes)
            for stmt in stmts:
                conn.execute(stmt.sql, stmt.params)
            assert locked_by_me(conn, sql) == {OURS: False, KEPT: True, later: False, raw: True}
        with conn.transaction(force_rollback=True):
            assert own_setting(conn) == set()
            for stmt in adjust_stmts(sql, [KEPT]):
                conn.execute(stmt.sql, stmt.params)
            assert locked_by_me(conn, sql) == {KEPT: True}


def test_the_check_passes_with_own_and_other_rows(pg_url: str, sql: SQL) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with conn.transaction(force_rollback=True):
            insert_own(conn, sql, OURS)
            stmt = check_stmt(sql, [OURS, KEPT])
            assert conn.execute(stmt.sql, stmt.params).fetchone()[0] == 1


def test_the_check_fails_when_a_held_row_is_missing(pg_url: str, sql: SQL) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with conn.transaction(force_rollback=True):
            insert_own(conn, sql, OURS)
            stmt = check_stmt(sql, [OURS, KEPT, b"g" * 16])
            with pytest.raises(psycopg.errors.InvalidTextRepresentation, match=CONFLICT_MARK):
                conn.execute(stmt.sql, stmt.params)


def test_a_row_the_insert_skipped_deleted_while_the_check_waits_fails_it(
    pg_url: str, sql: SQL
) -> None:
    """A blob that existed (not this transaction's) is deleted by a prune that
    commits while the check waits for its row lock: the check's snapshot still
    sees the row, its lock does not, so the put is refused."""
    h = uuid.uuid4().bytes
    with psycopg.connect(pg_url, autocommit=True) as conn, psycopg.connect(pg_url) as pruner:
        insert(conn, sql, h)
        pruner.execute(f"DELETE FROM {sql.blobs} WHERE hash = %s", (h,))  # holds the row lock
        errors: list[BaseException] = []
        with conn.transaction(force_rollback=True):
            insert_own(conn, sql, OURS)
            stmt = check_stmt(sql, [OURS, h])

            def run() -> None:
                try:
                    conn.execute(stmt.sql, stmt.params)
                except psycopg.Error as exc:
                    errors.append(exc)

            waiter = threading.Thread(target=run)
            waiter.start()
            wait_blocked(pg_url, conn.info.backend_pid)
            pruner.commit()
            waiter.join(30)
        assert len(errors) == 1 and CONFLICT_MARK in str(errors[0])


def wait_blocked(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        for _ in range(3000):
            row = admin.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row and row[0] == "Lock":
                return
            admin.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("the check never waited for the row lock")


def test_a_put_and_put_writes_store_and_read_back(pg_url: str, fresh_schema: str) -> None:
    """End to end on a connection that prepares (generic plans): a put whose
    blobs are new and one reusing another thread's blob, then put_writes."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, prepare_threshold=0) as s:
        s.setup()
        shared = "s" * 900
        for tid in ("u", "t"):
            cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
            c = {
                "v": 1,
                "id": str(uuid.uuid1()),
                "ts": "2026-01-01T00:00:00+00:00",
                "channel_values": {"a": shared, "b": tid * 900},
                "channel_versions": {"a": "1", "b": "1"},
                "versions_seen": {},
            }
            cfg = s.put(cfg, c, {}, {"a": "1", "b": "1"})
            s.put_writes(cfg, [("a", tid + "w" * 900)], "task")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            counts = conn.execute(
                f"SELECT min(c.refs), max(c.refs), count(*) FROM {s.sql.counts} c"
            ).fetchone()
        assert counts == (1, 2, 5)  # "shared" held by both threads, the rest once
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as fresh:
        got = fresh.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        assert got is not None
        assert got.checkpoint["channel_values"] == {"a": "s" * 900, "b": "t" * 900}
        assert got.pending_writes == [("task", "a", "t" + "w" * 900)]


def _count_versions(saver: PostgresSaver, admin: Any) -> tuple[int, int]:
    """(inserts, updates) of the count table so far (the saver's backend
    flushes its statistics first)."""
    saver.connector.conn.execute("SELECT pg_stat_force_next_flush()")
    saver.connector.conn.execute("SELECT 1")
    admin.execute("SELECT pg_stat_clear_snapshot()")
    row = admin.execute(
        "SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables"
        " WHERE schemaname = %s AND relname = 'checkpoint_blob_refs'",
        (saver.sql.schema,),
    ).fetchone()
    return int(row[0]), int(row[1])


def _counts(saver: PostgresSaver, admin: Any) -> list[int]:
    rows = admin.execute(f"SELECT refs FROM {saver.sql.counts} ORDER BY refs").fetchall()
    return [n for (n,) in rows]


def test_a_put_creates_its_new_blobs_count_rows_at_their_final_count(
    pg_url: str, fresh_schema: str
) -> None:
    """A new blob's count row is inserted holding the put's refs (one row
    version, no update); a sent blob that existed already (another thread's)
    gets its count added by the refs insert as before."""
    with (
        PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as s,
        psycopg.connect(pg_url, autocommit=True) as admin,
    ):
        s.setup()
        values = {"a": "x" * 900 + "one", "b": "x" * 900 + "one", "c": "y" * 900 + "two"}
        c = {
            "v": 1,
            "id": str(uuid.uuid1()),
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": values,
            "channel_versions": dict.fromkeys(values, "1"),
            "versions_seen": {},
        }
        base = _count_versions(s, admin)
        s.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, c, {}, c["channel_versions"]
        )
        ins, upd = (a - b for a, b in zip(_count_versions(s, admin), base))
        assert (ins, upd) == (2, 0)  # "one" held twice, inserted at 2
        with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as other:  # sends "two"
            c2 = {
                **c,
                "id": str(uuid.uuid1()),
                "channel_values": {"c": values["c"]},
                "channel_versions": {"c": "1"},
            }
            other.put({"configurable": {"thread_id": "u", "checkpoint_ns": ""}}, c2, {}, {"c": "1"})
        assert _counts(s, admin) == [2, 2]  # "one" twice in t, "two" in t and u
        got = other_read(pg_url, fresh_schema, "u")
        assert got == {"c": values["c"]}


def other_read(url: str, schema: str, thread: str) -> dict[str, Any]:
    with PostgresSaver.from_conn_string(url, schema=schema) as fresh:
        got = fresh.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        assert got is not None
        return got.checkpoint["channel_values"]
