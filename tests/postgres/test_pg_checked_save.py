"""An optimistic ``put`` sends its check, refs insert and checkpoint upsert as
one statement (#9): the blob insert, then that statement (was three).

The statement locks the blobs its transaction did not insert in hash order
before the refs insert adds to their count rows, fails unless every held or
reused blob is there, the diff base exists and every ref was inserted; its
snapshot follows the blob insert and the thread lock. What it stores must be
what the pessimistic path stores, with generic plans too. Run directly after
its blob insert, it refuses a ref row that exists, a diff base that is gone
and a held blob that is gone (reused, or sent and skipped by the insert), and
leaves no refs row, checkpoint row or count change behind.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from tests.postgres.steps import spy_batches
from tests.postgres.test_pg_optimistic import BIG, config, consistent, cp, dump, put
from tests.postgres.test_pg_optimistic_races import start, wait_blocked
from tests.postgres.test_pg_write_counts import both, pair  # noqa: F401  (fixture)
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres import optimistic as opt
from threadloom.checkpoint.postgres.connection import CONFLICT_MARK
from threadloom.checkpoint.postgres.idpack import pack_ordered, packed_ckpt, packed_ref
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.storage import ops

pytestmark = pytest.mark.postgres


def sent_by(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    spy_batches(
        monkeypatch, lambda b: sent.extend(s.sql for s in b if "plan_cache_mode" not in s.sql)
    )
    return sent


def test_a_put_is_its_blob_insert_and_one_statement(pair, monkeypatch, refusals) -> None:  # noqa: F811
    fast = pair[0]
    parent = put(fast, config("t"), cp(1, BIG))
    sent = sent_by(monkeypatch)
    put(fast, parent, cp(2, BIG + "2"))  # a diff against 1 with a new blob
    assert len(sent) == 2
    assert "checkpoint_blobs" in sent[0] and "checkpoint_refs" in sent[1]
    assert "checkpoints" in sent[1] and "FOR UPDATE" in sent[1]
    assert refusals == []


def test_puts_store_what_the_pessimistic_path_stores(pair, refusals) -> None:  # noqa: F811
    """New and reused blobs, another thread's blobs, a pruned diff base and an
    existing ref (both refused and rerun)."""

    def run(saver: PostgresSaver) -> None:
        parent = config("t")
        for i, value in enumerate([BIG, BIG + "x", BIG, [BIG, "y"], BIG + "x"]):
            parent = put(saver, parent, cp(i + 1, value))
        other = put(saver, config("u"), cp(1, BIG + "x"))
        put(saver, other, cp(2, BIG))
        with psycopg.connect(pair[2], autocommit=True) as conn:  # "another process" prunes
            conn.execute(
                f"DELETE FROM {saver.sql.ckpt} WHERE checkpoint_id = %s",
                (pack_ordered(parent["configurable"]["checkpoint_id"]),),
            )
        put(saver, parent, cp(9, BIG + "9"))
        again = PostgresSaver(saver.connector.conn, schema=saver.sql.schema)
        put(again, config("v"), cp(2, BIG + "a", version="7"))
        put(saver, config("v"), cp(2, BIG + "b", version="7"))  # ref (doc, 7) exists

    both(pair, run)
    assert refusals == [frozenset({"t"}), frozenset({"v"})]


def test_a_stored_blob_deleted_while_the_put_waited_refuses_it(pg_url: str, refusals) -> None:
    """The put sends a blob that is stored already (its insert skips it, so it
    is not the transaction's own); another transaction holding that row's lock
    deletes it: the lock in the put's statement returns no row, the put is
    refused and rerun, and the blob is back, held once."""
    schema = f"tl_cs_{uuid.uuid4().hex[:10]}"
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}application_name={schema}"
    try:
        with PostgresSaver.from_conn_string(url, schema=schema) as saver:
            saver.setup()
            parent = put(saver, config("t"), cp(1, BIG))
            parent = put(saver, parent, cp(2, BIG + "x"))
            with psycopg.connect(pg_url) as gate:
                gate.execute(f"SELECT 1 FROM {saver.sql.blobs} ORDER BY hash FOR UPDATE")
                th, errors = start(put, saver, parent, cp(3, BIG))  # BIG: stored
                wait_blocked(pg_url, schema, 1)
                gate.execute(f"DELETE FROM {saver.sql.counts}")
                gate.execute(f"DELETE FROM {saver.sql.blobs}")
                gate.commit()
                th.join(10)
            assert errors == [] and refusals == [frozenset({"t"})]
            assert saver.get_tuple(config("t")).checkpoint["channel_values"] == {"doc": BIG}
            held = dict(dump(pg_url, saver)["checkpoint_blob_refs"])
            assert list(held.values()) == [1]  # the rerun stored BIG again, held once
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_long_chains_stay_consistent(pair, refusals) -> None:  # noqa: F811
    def run(saver: PostgresSaver) -> None:
        for thread in ("a", "b"):
            parent = config(thread)
            for i in range(1, 12):
                parent = put(saver, parent, cp(i, [BIG[: 10 * i], BIG + str(i % 3)]))
                saver.put_writes(parent, [("doc", BIG + str(i % 3))], f"task{i}")

    both(pair, run)
    assert refusals == []
    consistent(pair[2], pair[0])


# The combined statement itself, run directly after its blob insert (as a put's
# optimistic transaction sends them): each refusal leaves nothing behind.

OURS, KEPT = b"o" * 16, b"k" * 16  # a new blob the put sends; one stored before
BASE, NEW = "1ef00000-0000-6000-8000-000000000001", "1ef00000-0000-6000-8000-000000000002"


def ckpt_row(checkpoint_id: str, parent: str | None) -> ops.CheckpointRow:
    return ops.CheckpointRow("t", "", checkpoint_id, parent, "tl1", b"d", "{}", None)


def ref_row(thread: str, version: str, hashes: bytes) -> ops.RefRow:
    return ops.RefRow(thread, "", "doc", version, 1, "t", b"", hashes, 0, 0)


@pytest.fixture
def base_sql(pg_url: str, fresh_schema: str) -> SQL:
    """Thread "t" has the base checkpoint; KEPT is held once by thread "u"."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    sql = SQL(fresh_schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {sql.blobs} (hash, tag, data, children) VALUES (%s, 't', '', '')", (KEPT,)
        )
        conn.execute(f"INSERT INTO {sql.counts} (id, refs) SELECT id, 1 FROM {sql.blobs}")
        conn.execute(sql.upsert_ref, packed_ref(ref_row("u", "1", KEPT)))
        conn.execute(sql.upsert_ckpt, packed_ckpt(ckpt_row(BASE, None)))
    return sql


def state(conn: Any, sql: SQL) -> dict[str, Any]:
    """Every row the statement could write: refs, checkpoints, blob counts."""
    refs = conn.execute(f"SELECT thread_id, version, hashes FROM {sql.refs} ORDER BY 1, 2")
    ckpts = conn.execute(f"SELECT checkpoint_id FROM {sql.ckpt} ORDER BY 1")
    counts = conn.execute(
        f"SELECT b.hash, c.refs FROM {sql.counts} c JOIN {sql.blobs} b USING (id) ORDER BY 1"
    )
    return {
        "refs": [(t, bytes(v), bytes(h)) for t, v, h in refs.fetchall()],
        "checkpoints": [bytes(c) for (c,) in ckpts.fetchall()],
        "counts": {bytes(h): n for h, n in counts.fetchall()},
    }


def checked_put(conn: Any, sql: SQL, reuse: bool = False, between: Any = None) -> Any:
    """Send the put's blob insert, then run its combined statement (a diff
    against BASE, one ref holding OURS and KEPT; KEPT sent again, or only
    reused when ``reuse``) in a savepoint, ``between`` run before it; returns
    the state right before the statement and its error (None: it stored the put)."""
    sent = (ops.BlobRow(OURS, "t", b"", b""),)
    if not reuse:
        sent += (ops.BlobRow(KEPT, "t", b"", b""),)
    op = ops.SaveCheckpoint(
        ckpt_row(NEW, BASE),
        (ref_row("t", "2", OURS + KEPT),),
        sent,
        base=BASE,
        needs=(KEPT,) if reuse else (),
    )
    batch, _ = opt._save_checkpoint(op, sql)
    *inserts, last = batch
    assert "checkpoint_refs" in last.sql and "FOR UPDATE" in last.sql  # the combined one
    for stmt in inserts:
        conn.execute(stmt.sql, stmt.params)
    if between is not None:
        between(conn, sql)
    before = state(conn, sql)
    try:
        with conn.transaction():
            conn.execute(last.sql, last.params)
    except psycopg.errors.InvalidTextRepresentation as exc:
        assert CONFLICT_MARK in str(exc)
        return before, exc
    return before, None


def drop_kept(conn: Any, sql: SQL) -> None:
    """KEPT's last holder deleted, and KEPT with it (a prune)."""
    conn.execute(f"DELETE FROM {sql.refs} WHERE thread_id = 'u'")
    conn.execute(
        f"DELETE FROM {sql.counts} WHERE id IN (SELECT id FROM {sql.blobs} WHERE hash = %s)",
        (KEPT,),
    )
    conn.execute(f"DELETE FROM {sql.blobs} WHERE hash = %s", (KEPT,))


def test_the_combined_statement_stores_the_put(pg_url: str, base_sql: SQL) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with conn.transaction(force_rollback=True):
            before, error = checked_put(conn, base_sql)
            assert error is None
            after = state(conn, base_sql)
            assert len(after["refs"]) == len(before["refs"]) + 1
            assert after["checkpoints"] == [pack_ordered(BASE), pack_ordered(NEW)]
            assert after["counts"] == {OURS: 1, KEPT: 2}  # OURS inserted at 1, KEPT added


CASES = ["ref exists", "base gone", "reused blob gone", "sent blob gone after its insert"]


@pytest.mark.parametrize("case", CASES)
def test_the_combined_statement_refuses_and_leaves_nothing(
    pg_url: str, base_sql: SQL, case: str
) -> None:
    """A ref row that exists, a pruned diff base, a held blob that is gone
    (reused without being sent; or sent, skipped by the insert as stored, then
    deleted before the statement): refused, nothing written by it."""
    sql = base_sql
    with psycopg.connect(pg_url, autocommit=True) as conn:
        if case == "ref exists":  # (t, doc, 2) stored already, holding KEPT
            conn.execute(sql.upsert_ref, packed_ref(ref_row("t", "2", KEPT)))
            conn.execute(f"UPDATE {sql.counts} SET refs = 2")
        elif case == "base gone":  # pruned by another process
            conn.execute(f"DELETE FROM {sql.ckpt}")
        elif case == "reused blob gone":
            drop_kept(conn, sql)
        with conn.transaction(force_rollback=True):
            before, error = checked_put(
                conn,
                sql,
                reuse=case == "reused blob gone",
                between=drop_kept if case == "sent blob gone after its insert" else None,
            )
            assert error is not None
            after = state(conn, sql)
            assert after == before
            assert pack_ordered(NEW) not in after["checkpoints"]
            assert not any(t == "t" and h == OURS + KEPT for t, _, h in after["refs"])
