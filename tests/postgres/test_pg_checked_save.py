"""An optimistic ``put`` sends its check, refs insert and checkpoint upsert as
one statement (#9): the blob insert, then that statement (was three).

The statement locks the blobs its transaction did not insert in hash order
before the refs insert adds to their count rows, fails unless every held or
reused blob is there, the diff base exists and every ref was inserted; its
snapshot follows the blob insert and the thread lock. What it stores must be
what the pessimistic path stores, with generic plans too.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from tests.postgres.test_pg_optimistic import BIG, config, consistent, cp, dump, put
from tests.postgres.test_pg_optimistic_races import start, wait_blocked
from tests.postgres.test_pg_write_counts import both, pair  # noqa: F401  (fixture)
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.executor import PgExecutor
from threadloom.checkpoint.postgres.idpack import pack_ordered
from threadloom.checkpoint.storage import ops

pytestmark = pytest.mark.postgres


def sent_by(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    prepare = PgExecutor._prepare

    def spy(self: PgExecutor, op: ops.Op) -> Any:
        batch, decode = prepare(self, op)
        sent.extend(s.sql for s in batch if "plan_cache_mode" not in s.sql)
        return batch, decode

    monkeypatch.setattr(PgExecutor, "_prepare", spy)
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
