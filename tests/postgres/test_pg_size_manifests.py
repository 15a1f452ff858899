"""Session 5 size steps: a list manifest's hashes stored once (in ``children``,
its ``data`` left empty) and read back exactly; the refs' primary key ordered
(thread, ns, version, channel) so new keys append (migration 24), with rows
written before it read the same after it; ascending keys split at fillfactor
100 (migration 25)."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from tests.postgres.conftest import add_blob_ids, drop_blob_ids, schema_at
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.schema import MIGRATIONS, quote_ident
from threadloom.graph import END, START, StateGraph

psycopg = pytest.importorskip("psycopg")

TURNS = 40  # compact_every=2: 20 segments, so flat and two-level manifests both exist
REFS_KEY = MIGRATIONS.index(
    next(m for m in MIGRATIONS if "(thread_id, checkpoint_ns, version" in m)
)


class State(TypedDict):
    log: Annotated[list, operator.add]


def _graph(saver: PostgresSaver):
    g = StateGraph(State)
    g.add_node("a", lambda s: {"log": [f"item {len(s['log'])} " + "x" * 40]})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g.compile(checkpointer=saver)


def _run(url: str, schema: str, turns: int, setup: bool = True) -> None:
    with PostgresSaver.from_conn_string(url, schema=schema, compact_every=2) as saver:
        if setup:
            saver.setup()
        graph = _graph(saver)
        for _ in range(turns):
            graph.invoke({"log": []}, {"configurable": {"thread_id": "t"}})


def _history(url: str, schema: str) -> list[list[str]]:
    """Every checkpoint's ``log`` as a fresh saver (cold caches) reads it."""
    with PostgresSaver.from_conn_string(url, schema=schema, compact_every=2) as saver:
        states = _graph(saver).get_state_history({"configurable": {"thread_id": "t"}})
        return [state.values["log"] for state in states]


def _expected(turns: int) -> list[str]:
    return [f"item {i} " + "x" * 40 for i in range(turns)]


def test_manifests_store_their_hashes_once_and_read_back_exactly(pg_url, fresh_schema):
    s = quote_ident(fresh_schema)
    _run(pg_url, fresh_schema, TURNS)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT tag, length(data), length(children) FROM {s}.checkpoint_blobs"
            " WHERE tag IN ('~M', '~N')"
        ).fetchall()
        stored = conn.execute(
            f"SELECT sum(CASE WHEN tag IN ('~M', '~N') THEN length(children)"
            f" ELSE length(data) END) FROM {s}.checkpoint_blobs"
        ).fetchone()[0]
    assert {tag for tag, _, _ in rows} == {"~M", "~N"}
    assert all(data == 0 and kids > 0 and kids % 16 == 0 for _, data, kids in rows)
    logs = _history(pg_url, fresh_schema)
    assert logs[0] == _expected(TURNS)
    assert all(log == _expected(len(log)) for log in logs)
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        # blob bytes count a manifest's hashes, as when they were stored twice
        assert saver.stats("t")["bytes_stored"] >= stored
        saver.delete_thread("t")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        left = conn.execute(
            f"SELECT (SELECT count(*) FROM {s}.checkpoint_blobs),"
            f" (SELECT count(*) FROM {s}.checkpoint_blob_refs)"
        ).fetchone()
    assert left == (0, 0)


def test_refs_key_appends_by_version(pg_url, fresh_schema):
    s = quote_ident(fresh_schema)
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cols = conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(att, pos)"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.att"
            " WHERE n.nspname = %s AND c.relname = 'checkpoint_refs' AND i.indisprimary"
            " ORDER BY k.pos",
            (fresh_schema,),
        ).fetchall()
        assert [c[0] for c in cols] == ["thread_id", "checkpoint_ns", "version", "channel"]
        assert conn.execute(f"SELECT count(*) FROM {s}.checkpoint_refs").fetchone() == (0,)


def test_rows_written_before_migration_24_read_the_same(pg_url, fresh_schema):
    """A thread written under the old key (and old manifests, data stored twice)
    reads back unchanged after the upgrade and keeps growing."""
    schema_at(pg_url, fresh_schema, REFS_KEY)
    s = quote_ident(fresh_schema)
    _run_old(pg_url, fresh_schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        doubled = conn.execute(
            f"SELECT count(*) FROM {s}.checkpoint_blobs WHERE tag IN ('~M', '~N')"
            " AND data = children AND data <> ''"
        ).fetchone()[0]
    assert doubled > 0  # the old layout: a manifest's hashes in data and children
    before = _history(pg_url, fresh_schema)
    _run(pg_url, fresh_schema, 6)  # setup() applies migration 24, then more turns
    after = _history(pg_url, fresh_schema)
    assert after[-len(before) :] == before
    assert all(log == _expected(len(log)) for log in after)
    assert after[0] == _expected(TURNS + 6)


def _run_old(url: str, schema: str) -> None:
    """TURNS turns written as an older threadloom did: manifests' data stored
    twice (the insert copied here, as before), under the old refs key."""
    s = quote_ident(schema)
    add_blob_ids(url, schema)  # today's code counts by blob id
    _run(url, schema, TURNS, setup=False)
    drop_blob_ids(url, schema)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {s}.checkpoint_blobs SET data = children"
            " WHERE tag IN ('~M', '~N') AND data = ''"
        )


def test_ascending_keys_fill_their_index_pages(pg_url, fresh_schema):
    """Migration 25: the three append-mostly primary keys split at fillfactor 100."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'i' ORDER BY 1",
            (fresh_schema,),
        ).fetchall()
    options = dict(rows)
    for index in ("checkpoints_pkey", "checkpoint_refs_pkey", "checkpoint_writes_pkey"):
        assert options[index] == ["fillfactor=100"]
    assert options["checkpoint_blobs_pkey"] is None  # random keys: the default
