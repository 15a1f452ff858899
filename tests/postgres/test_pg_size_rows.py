"""Row layouts that keep the stored size down: metadata kept as the compact JSON
text the saver writes, packed (migrations 18 and 21) and still filterable; a
released lease leaves no row behind; task paths of pending writes packed
(migration 20)."""

from __future__ import annotations

import json
import operator
from typing import Annotated, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.postgres.conftest import schema_at
from threadloom.checkpoint.postgres import PostgresSaver, blobpack
from threadloom.checkpoint.postgres.idpack import pack_path, unpack_path
from threadloom.checkpoint.postgres.metapack import pack_meta, sql_unpack, unpack_meta
from threadloom.checkpoint.postgres.saver import COMPACT_EVERY
from threadloom.checkpoint.postgres.schema import MIGRATIONS, quote_ident
from threadloom.checkpoint.storage.ops import BlobRow
from threadloom.errors import LeaseLostError
from threadloom.graph import END, START, StateGraph

psycopg = pytest.importorskip("psycopg")


class State(TypedDict):
    log: Annotated[list, operator.add]


def _graph(saver: PostgresSaver):
    g = StateGraph(State)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g.compile(checkpointer=saver)


def test_metadata_is_compact_json_text_and_filters_still_match(pg_url, fresh_schema):
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        cfg = {"configurable": {"thread_id": "m"}}
        _graph(saver).invoke({"log": []}, cfg)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            kind = conn.execute(
                "SELECT data_type FROM information_schema.columns WHERE table_schema = %s"
                " AND table_name = 'checkpoints' AND column_name = 'metadata'",
                (fresh_schema,),
            ).fetchone()
            texts = conn.execute(
                f'SELECT metadata::text FROM "{fresh_schema}".checkpoints'
            ).fetchall()
        assert kind == ("text",)
        texts = [unpack_meta(t) for (t,) in texts]
        assert texts and all(", " not in t and ": " not in t for t in texts)  # compact
        assert all(len(pack_meta(t)) < len(t) - 30 for t in texts)  # stored packed
        every = [t.metadata for t in saver.list(cfg)]
        loop = [t.metadata for t in saver.list(cfg, filter={"source": "loop"})]
        assert loop and loop == [m for m in every if m["source"] == "loop"] != every
        assert list(saver.list(cfg, filter={"parents": {}}))  # object equality, not containment
        assert not list(saver.list(cfg, filter={"source": "nope"}))


def test_a_released_lease_leaves_no_row(pg_url, fresh_schema):
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        graph = _graph(saver)
        cfg = {"configurable": {"thread_id": "l"}}
        for _ in range(3):
            graph.invoke({"log": []}, cfg)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            rows = conn.execute(
                f'SELECT thread_id, expires_at FROM "{fresh_schema}".tl_leases'
            ).fetchall()
        assert rows == []  # released: nothing stays for a thread nobody runs
        assert graph.get_state(cfg).values["log"] == ["a", "a", "a"]
        saver.delete_thread("l")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            left = conn.execute(f'SELECT count(*) FROM "{fresh_schema}".tl_leases').fetchone()
        assert left == (0,)


PATHS = ["", "~__pregel_pull, agent", "~__pregel_push, 0, ~__pregel_pull, a, 2", "\x01x", "\x03"]
PACKED_PATHS = MIGRATIONS.index(next(m for m in MIGRATIONS if "SET task_path = chr(3)" in m))


@given(st.one_of(st.sampled_from(PATHS), st.text(max_size=30)), st.text(max_size=10))
def test_task_paths_round_trip(path, tail):
    for p in (path, path + tail, "~__pregel_pull, " + tail):
        assert unpack_path(pack_path(p)) == p
    assert len(pack_path("~__pregel_pull, " + tail)) == 1 + len(tail)


def test_migration_keeps_old_task_paths(pg_url, fresh_schema):
    """Paths written before migration 20 read back unchanged after it, even one
    that starts with a code character."""
    s = quote_ident(fresh_schema)
    schema_at(pg_url, fresh_schema, PACKED_PATHS)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for i, path in enumerate(PATHS):
            conn.execute(
                f"INSERT INTO {s}.checkpoint_writes (thread_id, checkpoint_id, task_id,"
                " task_path, data, hashes) VALUES ('t', 'c', %s, %s, '', '')",
                (str(i).encode(), path),
            )
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT task_path FROM {s}.checkpoint_writes ORDER BY task_id"
        ).fetchall()
    assert [unpack_path(r[0]) for r in rows] == PATHS


METAS = [
    '{"source":"loop","step":3,"parents":{}}',
    '{"source":"input","step":-1,"parents":{"":"1ef"},"run_id":"r","thread_id":"t"}',
    '{"step": 3, "source": "loop", "parents": {}}',  # jsonb's text form (older rows)
    '{"note":"\\"source\\":\\u0001","steps":[1,2]}',
    "{}",
]
PACKED_META = MIGRATIONS.index(next(m for m in MIGRATIONS if "metadata TYPE TEXT" in m))


@given(st.one_of(st.sampled_from(METAS), st.dictionaries(st.text(max_size=8), st.integers())))
def test_metadata_round_trips_packed(meta):
    text = meta if isinstance(meta, str) else json.dumps(meta, separators=(",", ":"))
    assert unpack_meta(pack_meta(text)) == text
    assert len(pack_meta(METAS[0])) == 3


def test_migration_packs_old_metadata_and_filters_match(pg_url, fresh_schema):
    """Metadata written before migration 21 (``json`` text) is packed by it (the
    SQL twin packs exactly like :func:`pack_meta`) and reads back unchanged."""
    s = quote_ident(fresh_schema)
    schema_at(pg_url, fresh_schema, PACKED_META)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for i, meta in enumerate(METAS):
            conn.execute(
                f"INSERT INTO {s}.checkpoints (thread_id, checkpoint_id, tag, data, metadata)"
                " VALUES ('t', %s, 'x', '', %s::json)",
                (bytes([1, i]), meta),
            )
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(f"SELECT metadata FROM {s}.checkpoints ORDER BY checkpoint_id")
        stored = [r[0] for r in rows.fetchall()]
        found = conn.execute(
            f"SELECT metadata FROM {s}.checkpoints WHERE"
            f" ({sql_unpack('metadata')})::jsonb @> %s::jsonb ORDER BY checkpoint_id",
            ('{"source":"loop"}',),
        ).fetchall()
    assert stored == [pack_meta(m) for m in METAS]
    assert [unpack_meta(m) for m in stored] == METAS
    assert [unpack_meta(r[0]) for r in found] == [METAS[0], METAS[2]]


def test_the_fence_extends_a_lease_only_after_a_third_of_its_ttl(pg_url, fresh_schema):
    """A fence within the first third of the TTL locks the lease row but writes
    no new version of it (no dead row per step); later it extends the lease."""
    from threadloom.checkpoint.lease import ops as lo
    from threadloom.checkpoint.lease.lease import Lease

    s = quote_ident(fresh_schema)
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        lease = Lease(saver, "f", "run-1", ttl=60.0)
        assert lease.try_acquire() is None

        def row() -> tuple:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                return conn.execute(
                    f"SELECT xmin::text, expires_at FROM {s}.tl_leases WHERE thread_id = 'f'"
                ).fetchone()

        first = row()
        for _ in range(3):
            assert saver._run(lo.check_flow("f", lease.token, 60_000), True) == ""
        assert row() == first  # same row version: nothing written
        assert saver._run(lo.check_flow("f", lease.token, 3_000_000), True) == ""
        renewed = row()
        assert renewed[0] != first[0] and renewed[1] > first[1] + 1_000_000
        with pytest.raises(LeaseLostError):
            saver._run(lo.check_flow("f", "not-mine", 60_000), True)


def test_the_usual_record_tag_is_stored_as_null(pg_url, fresh_schema):
    """Migration 22: a checkpoint whose tag is the record format's usual one stores
    NULL (4 bytes less a row); a row written with the tag (before it) reads the same."""
    s = quote_ident(fresh_schema)
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        cfg = {"configurable": {"thread_id": "g"}}
        _graph(saver).invoke({"log": []}, cfg)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            tags = {r[0] for r in conn.execute(f"SELECT tag FROM {s}.checkpoints")}
            assert tags == {None}
            conn.execute(f"UPDATE {s}.checkpoints SET tag = 'tl1'")  # as older rows hold it
        with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as other:
            assert other.get_tuple(cfg).checkpoint["channel_values"]["log"] == ["a"]
            assert [t.checkpoint["id"] for t in other.list(cfg)] == [
                t.checkpoint["id"] for t in saver.list(cfg)
            ]


TAGS = [*blobpack.TAGS, "json", "pickle", "threadloom.other"]


@given(st.sampled_from(TAGS), st.binary(max_size=300) | st.just(b"hello " * 40))
def test_blob_tags_and_data_round_trip_packed(tag, data):
    """The usual blob tags are stored as one character (``~z`` + it when
    compressed); rows in the older forms (raw tag, ``~z:`` + tag) read the same."""
    stored_tag, stored = blobpack.pack(tag, data)
    row = blobpack.unpack(BlobRow(b"h", stored_tag, stored, b""))
    assert (row.tag, row.data) == (tag, data)
    if tag in blobpack.TAGS:
        assert len(stored_tag) <= 3
    older = [BlobRow(b"h", tag, data, b"")]
    if stored != data:  # compressed: the form rows written before the codes have
        older.append(BlobRow(b"h", blobpack.PACKED + tag, stored, b""))
    for old in older:
        assert blobpack.unpack(old)[1:3] == (tag, data)


def test_postgres_seals_list_tails_every_12_chunks_unless_told(pg_url, fresh_schema):
    """The Postgres savers' own ``compact_every`` default (fewer tail hashes per
    ref row and count updates per version); an explicit one still wins."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        assert saver.codec.compact_every == COMPACT_EVERY == 12
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, compact_every=16) as saver:
        assert saver.codec.compact_every == 16


def test_lease_pages_are_filled(pg_url, fresh_schema):
    """Migration 23 drops migration 17's ``fillfactor`` of 50 on ``tl_leases``."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        options = conn.execute(
            "SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = 'tl_leases'",
            (fresh_schema,),
        ).fetchone()
    assert options == (None,)
