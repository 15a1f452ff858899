"""The put's stale check on Postgres: evaluated once, after the blob locks.

The check records its answer in a transaction-local setting under a token of
its own; the put's later writes only compare that setting with the token. When
the check fails, the same statement takes back the blobs this put inserted
(nobody references them), so a stale put keeps nothing.
"""

from __future__ import annotations

import psycopg
import pytest

from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.executor import _PASSED, _check, _stale_guard
from threadloom.checkpoint.postgres.queries import SQL
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
                conn.execute(f"INSERT INTO {sql.counts} (hash, refs) VALUES (%s, %s)", (h, refs))
            yield conn, sql


def _run(conn, sql: SQL, needs: tuple[bytes, ...], token: str) -> bool:
    guard, params = _stale_guard(ops.SaveCheckpoint(None, (), (), None, needs), sql)
    stmt = _check(sql, guard, (*params, token), sorted([OURS, KEPT]))
    return conn.execute(stmt.sql, stmt.params).fetchone()[0]


def _blobs(conn, sql: SQL) -> set[bytes]:
    rows = conn.execute(
        f"SELECT b.hash FROM {sql.blobs} b JOIN {sql.counts} USING (hash) WHERE hash = ANY(%s)",
        ([OURS, KEPT],),
    )
    return {bytes(r[0]) for r in rows}


def _passed(conn, token: str) -> bool:
    return conn.execute(f"SELECT {_PASSED}", (token,)).fetchone()[0]


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


def test_check_without_blobs_sent_is_a_plain_select(tx) -> None:
    conn, sql = tx
    guard, params = _stale_guard(ops.SaveCheckpoint(None, (), (), None, (KEPT,)), sql)
    stmt = _check(sql, guard, (*params, "t1"), None)
    assert "DELETE" not in stmt.sql
    assert conn.execute(stmt.sql, stmt.params).fetchone()[0] is True
    assert _passed(conn, "t1")
