"""Postgres: reference counts keyed by a bigint blob id (migration 26).

A schema written before the migration (counts keyed by the 16-byte hash) is
upgraded by ``setup()`` with every count carried over exactly, every blob
given a distinct id, nothing else read differently, and later writes keep the
counts exact (each equals the occurrences of its hash in refs, pending writes
and manifests)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.postgres.conftest import add_blob_ids, blob_ids_version, drop_blob_ids, schema_at
from tests.postgres.test_pg_optimistic import consistent
from tests.storage.upgrade_scenario import THREADS, resume_all, snapshot, write_history
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.schema import quote_ident

psycopg = pytest.importorskip("psycopg")


def _saver(url: str, schema: str) -> Any:
    return PostgresSaver.from_conn_string(url, schema=schema, compact_every=2)


def _counts_by_hash(url: str, schema: str, keyed_by_id: bool) -> dict[bytes, int]:
    s = quote_ident(schema)
    select = (
        f"SELECT b.hash, c.refs FROM {s}.checkpoint_blob_refs c"
        f" LEFT JOIN {s}.checkpoint_blobs b USING (id)"
        if keyed_by_id
        else f"SELECT hash, refs FROM {s}.checkpoint_blob_refs"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(select).fetchall()
    return {bytes(h) if h is not None else None: n for h, n in rows}


def test_setup_keys_counts_by_blob_id_with_every_count_kept(pg_url, fresh_schema):
    version = blob_ids_version()
    assert version == 26
    schema_at(pg_url, fresh_schema, version)
    add_blob_ids(pg_url, fresh_schema)  # today's code writes only the new layout
    with _saver(pg_url, fresh_schema) as old:  # no setup(): the schema stays at 25
        write_history(old)
        before = snapshot(old)
    drop_blob_ids(pg_url, fresh_schema)
    counts = _counts_by_hash(pg_url, fresh_schema, keyed_by_id=False)
    assert len(counts) > 10 and max(counts.values()) > 1  # shared blobs, held more than once

    s = quote_ident(fresh_schema)
    with _saver(pg_url, fresh_schema) as saver:
        saver.setup()
        assert _counts_by_hash(pg_url, fresh_schema, keyed_by_id=True) == counts
        with psycopg.connect(pg_url, autocommit=True) as conn:
            ids = conn.execute(
                f"SELECT count(*), count(id), count(DISTINCT id) FROM {s}.checkpoint_blobs"
            ).fetchone()
            cols = conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = 'checkpoint_blob_refs'"
                " ORDER BY ordinal_position",
                (fresh_schema,),
            ).fetchall()
            key = conn.execute(
                "SELECT pg_get_indexdef(indexrelid) FROM pg_index i JOIN pg_class c"
                " ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relname = 'checkpoint_blob_refs'",
                (fresh_schema,),
            ).fetchall()
            applied = conn.execute(f"SELECT max(v) FROM {s}.checkpoint_migrations").fetchone()
        assert ids[0] == ids[1] == ids[2] == len(counts)  # every blob, a distinct id
        assert cols == [("id", "bigint"), ("refs", "bigint")]  # 16 data bytes a row, was 25
        assert len(key) == 1 and key[0][0].endswith("USING btree (id)")  # the one index
        assert applied == (version,)
        assert snapshot(saver) == before
        resume_all(saver)  # more puts, writes and releases on the upgraded schema
        consistent(pg_url, saver)
        saver.setup()  # a second setup() changes nothing


def test_counts_of_a_new_schema_stay_exact(pg_url, fresh_schema):
    """Puts, pending writes, prunes and deletes on a new schema: each count
    row belongs to a live blob and equals its holds."""
    with _saver(pg_url, fresh_schema) as saver:
        saver.setup()
        write_history(saver)
        resume_all(saver)
        consistent(pg_url, saver)
        for thread in THREADS[:2]:
            saver.delete_thread(thread)
        consistent(pg_url, saver)
    counts = _counts_by_hash(pg_url, fresh_schema, keyed_by_id=True)
    assert None not in counts and all(n > 0 for n in counts.values())
