"""The put's stale check on Postgres: evaluated once, with the blob locks.

The check locks the blobs the refs hold, counts the reused ones it locked and records its answer in a transaction-local setting under a token of
its own; the put's later writes only compare that setting with the token. When
the check fails, the same statement takes back the blobs this put inserted
(nobody references them), so a stale put keeps nothing.
"""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.saveplan import PASSED, check
from threadloom.checkpoint.storage import ops

pytestmark = pytest.mark.postgres

OURS = b"o" * 16  # a blob "this put" inserted: no references yet
KEPT = b"k" * 16  # someone else's blob, referenced
GONE = b"g" * 16  # a reused blob that vanished


@pytest.fixture
def tx(pg_url: str, pg_schema: str):
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
    sql = SQL(pg_schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with conn.transaction(force_rollback=True):
            for h, refs in ((OURS, 0), (KEPT, 1)):
                conn.execute(
                    f"INSERT INTO {sql.blobs} (hash, tag, data, children) VALUES (%s, 't', '', '')",
                    (h,),
                )
                conn.execute(
                    f"INSERT INTO {sql.counts} (id, refs)"
                    f" SELECT id, %s FROM {sql.blobs} WHERE hash = %s",
                    (refs, h),
                )
            yield conn, sql


def _stmt(sql: SQL, needs: tuple[bytes, ...], token: str, sent: list[bytes] | None):
    op = ops.SaveCheckpoint(None, (), (), None, needs)
    return check(op, sql, sorted({OURS, *needs}), token, sent)


def _run(conn, sql: SQL, needs: tuple[bytes, ...], token: str) -> bool:
    stmt = _stmt(sql, needs, token, sorted([OURS, KEPT]))
    return conn.execute(stmt.sql, stmt.params).fetchone()[0]


def _blobs(conn, sql: SQL) -> set[bytes]:
    rows = conn.execute(
        f"SELECT b.hash FROM {sql.blobs} b JOIN {sql.counts} USING (id) WHERE b.hash = ANY(%s)",
        ([OURS, KEPT],),
    )
    return {bytes(r[0]) for r in rows}


def _wait_until_blocked(pg_url: str, pid: int) -> None:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for _ in range(3000):
            row = admin.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row and row[0] == "Lock":
                return
            admin.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("the check never waited for the row lock")


def _passed(conn, token: str) -> bool:
    return conn.execute(f"SELECT {PASSED}", (token,)).fetchone()[0]


def test_failed_check_takes_back_unreferenced_blobs_only(tx) -> None:
    conn, sql = tx
    assert _run(conn, sql, (KEPT, GONE), "t1") is False
    assert _blobs(conn, sql) == {KEPT}  # ours went back, the referenced one stays
    assert not _passed(conn, "t1")  # the writes after it keep nothing


def test_passed_check_keeps_blobs_and_admits_only_its_own_token(tx) -> None:
    conn, sql = tx
    assert _run(conn, sql, (KEPT,), "t1") is True
    assert _blobs(conn, sql) == {OURS, KEPT}
    assert _passed(conn, "t1")
    assert not _passed(conn, "t0")  # another put's token does not pass
    assert _run(conn, sql, (GONE,), "t2") is False  # a later failed check ...
    assert not _passed(conn, "t1") and not _passed(conn, "t2")  # ... admits nobody


def test_check_without_blobs_sent_deletes_nothing(tx) -> None:
    conn, sql = tx
    stmt = _stmt(sql, (KEPT,), "t1", None)
    assert "DELETE" not in stmt.sql
    assert conn.execute(stmt.sql, stmt.params).fetchone()[0] is True
    assert _passed(conn, "t1")


def test_reused_blob_deleted_while_waiting_for_its_lock_fails_the_check(
    pg_url: str, pg_schema: str
) -> None:
    """The deleting transaction commits while the check waits for the row lock:
    the check's snapshot (taken before the wait) still sees the row, the lock does not."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
    sql, h = SQL(pg_schema), uuid.uuid4().bytes
    with psycopg.connect(pg_url, autocommit=True) as a, psycopg.connect(pg_url) as b:
        a.execute(f"INSERT INTO {sql.blobs} VALUES (%s, 't', '', '')", (h,))
        b.execute(f"DELETE FROM {sql.blobs} WHERE hash = %s", (h,))  # holds the row lock
        stmt = check(ops.SaveCheckpoint(None, (), (), None, (h,)), sql, [h], "t1", None)
        got: list[bool] = []
        with a.transaction(force_rollback=True):
            waiter = threading.Thread(
                target=lambda: got.append(a.execute(stmt.sql, stmt.params).fetchone()[0])
            )
            waiter.start()
            _wait_until_blocked(pg_url, a.info.backend_pid)
            b.commit()
            waiter.join(30)
        assert got == [False]


def test_held_blob_the_insert_skipped_and_someone_dropped_fails_the_check(tx) -> None:
    """A sent blob that already existed (the insert skipped it) is not this
    put's: if it is gone by the check, the refs would hold nothing."""
    conn, sql = tx
    op = ops.SaveCheckpoint(None, (), (), None, (KEPT,))
    stmt = check(op, sql, sorted([OURS, KEPT, GONE]), "t1", sorted([OURS, GONE]))
    assert conn.execute(stmt.sql, stmt.params).fetchone()[0] is False
    assert _blobs(conn, sql) == {KEPT}
