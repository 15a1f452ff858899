"""Postgres: a schema written by an earlier threadloom (before ``tl_leases``; before
the metadata GIN index was dropped) is upgraded in place by ``setup()`` with nothing lost, and resumes."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest

from tests.postgres.conftest import add_blob_ids, drop_blob_ids, schema_at
from tests.storage.upgrade_scenario import has_fork, resume_all, snapshot, write_history
from threadloom.checkpoint.postgres import PostgresSaver, blobpack
from threadloom.checkpoint.postgres.idpack import (
    unpack_id,
    unpack_ordered,
    unpack_path,
    unpack_version,
)
from threadloom.checkpoint.postgres.metapack import sql_unpack, unpack_meta
from threadloom.checkpoint.postgres.schema import LEASE_TABLE, MIGRATIONS, quote_ident
from threadloom.checkpoint.storage.record import RECORD_TAG

psycopg = pytest.importorskip("psycopg")

# migrations 0 .. OLD_VERSION - 1 existed before the lease table
OLD_VERSION = MIGRATIONS.index(LEASE_TABLE)
# the first migration of the separate blob reference-count table
BLOB_REFS = next(
    i for i, m in enumerate(MIGRATIONS) if "TABLE IF NOT EXISTS {s}.checkpoint_blob_refs" in m
)


# the migrations that pack the ids of pending writes and the versions of refs (idpack)
PACKED_IDS = next(i for i, m in enumerate(MIGRATIONS) if "checkpoint_id TYPE BYTEA" in m)
PACKED_VERSIONS = next(i for i, m in enumerate(MIGRATIONS) if "version TYPE BYTEA" in m)
PACKED_PARENTS = next(i for i, m in enumerate(MIGRATIONS) if "parent_checkpoint_id TYPE BYTEA" in m)
# checkpoint ids (and parents again) packed in order
ORDERED_IDS = next(i for i, m in enumerate(MIGRATIONS) if "tl_pack_ordered(checkpoint_id)" in m)
# metadata packed (metapack) as text; before it `json` (from migration 18 on) or `jsonb`
PACKED_META = next(i for i, m in enumerate(MIGRATIONS) if "metadata TYPE TEXT" in m)
JSON_META = next(i for i, m in enumerate(MIGRATIONS) if "metadata TYPE JSON" in m)
GIN = next(i for i, m in enumerate(MIGRATIONS) if "USING GIN (metadata" in m)
NULL_TAG = next(i for i, m in enumerate(MIGRATIONS) if "tag DROP NOT NULL" in m)
# the first migration after the separate blob reference-count table
NO_GIN = MIGRATIONS.index("DROP INDEX IF EXISTS {s}.checkpoints_metadata_idx")

_UNPACK_VERSION_SQL = (  # idpack.unpack_version in SQL
    "CASE WHEN get_byte({c}, 0) = 0 THEN convert_from(substring({c} FROM 2), 'UTF8')"
    " ELSE (get_byte({c}, 1)::bigint << 24 | get_byte({c}, 2) << 16 | get_byte({c}, 3) << 8"
    " | get_byte({c}, 4))::text || '.0.' || rtrim(encode(substring({c} FROM 6), 'hex'), 'f') END"
)

_UNPACK_SQL = (  # idpack.unpack_id in SQL, to write the old (text) id columns
    "CASE WHEN octet_length({c}) = 16 THEN regexp_replace(encode({c}, 'hex'),"
    " '(.{{8}})(.{{4}})(.{{4}})(.{{4}})(.{{12}})', '\\1-\\2-\\3-\\4-\\5')"
    " WHEN get_byte({c}, 0) = 1 THEN convert_from(substring({c} FROM 3), 'UTF8')"
    " ELSE convert_from(substring({c} FROM 2), 'UTF8') END"
)


_UNPACK_ORDERED_SQL = (  # idpack.unpack_ordered in SQL
    "CASE WHEN get_byte({c}, 0) = 0 THEN convert_from(substring({c} FROM 2), 'UTF8')"
    " WHEN octet_length({c}) = 17 THEN regexp_replace(encode(substring({c} FROM 2), 'hex'),"
    " '(.{{8}})(.{{4}})(.{{4}})(.{{4}})(.{{12}})', '\\1-\\2-\\3-\\4-\\5')"
    " ELSE convert_from(substring({c} FROM 18), 'UTF8') END"
)


_UNPACK_PATHS_SQL = (  # idpack.unpack_path in SQL: task paths as they were written before
    "UPDATE {s}.checkpoint_writes SET task_path = CASE left(task_path, 1)"
    " WHEN chr(1) THEN '~__pregel_pull, ' || substr(task_path, 2)"
    " WHEN chr(2) THEN '~__pregel_push, ' || substr(task_path, 2)"
    " WHEN chr(3) THEN substr(task_path, 2) ELSE task_path END"
)


def _old_schema(url: str, schema: str, version: int = OLD_VERSION) -> None:
    """Create the earlier schema exactly as that threadloom's setup() left it."""
    schema_at(url, schema, version)


def _write_old(url: str, schema: str, version: int = OLD_VERSION) -> dict:
    """History written as the threadloom at migration ``version`` would have left it.

    Today's code needs the later layout to write at all, so the schema gets it
    for the writing (``checkpoint_blob_refs``, packed write ids), then goes back:
    counts folded into the old ``checkpoint_blobs.refs`` column (left at 0) and
    that table dropped, ids turned back into text. Blobs are written raw.
    """
    _old_schema(url, schema, version)
    s = quote_ident(schema)
    with psycopg.connect(url, autocommit=True) as conn:
        if version <= BLOB_REFS:
            conn.execute(MIGRATIONS[BLOB_REFS].format(s=s))
        if version <= PACKED_IDS:  # (the schemas written here are before all four)
            conn.execute(MIGRATIONS[PACKED_IDS].format(s=s))
            conn.execute(MIGRATIONS[PACKED_VERSIONS].format(s=s))
            conn.execute(MIGRATIONS[PACKED_PARENTS].format(s=s))
            conn.execute(MIGRATIONS[ORDERED_IDS].format(s=s))
        if GIN < version <= NO_GIN:
            conn.execute(MIGRATIONS[NO_GIN].format(s=s))  # (cannot index packed text)
        conn.execute(MIGRATIONS[PACKED_META].format(s=s))
        conn.execute(MIGRATIONS[NULL_TAG].format(s=s))
    add_blob_ids(url, schema)
    with unpacked(), PostgresSaver.from_conn_string(url, schema=schema) as old:  # no setup()
        write_history(old)
        before = snapshot(old)
    drop_blob_ids(url, schema)
    with psycopg.connect(url, autocommit=True) as conn:
        if version <= BLOB_REFS:
            conn.execute(
                f"UPDATE {s}.checkpoint_blobs b SET refs = r.refs"
                f" FROM {s}.checkpoint_blob_refs r WHERE r.hash = b.hash"
            )
            conn.execute(f"DROP TABLE {s}.checkpoint_blob_refs")
        if version <= PACKED_IDS:
            _unpack_ids(conn, s)
        if version <= PACKED_META:
            kind = "JSON" if version > JSON_META else "JSONB"
            conn.execute(
                f"ALTER TABLE {s}.checkpoints ALTER COLUMN metadata DROP DEFAULT,"
                f" ALTER COLUMN metadata TYPE {kind} USING ({sql_unpack('metadata')})::{kind},"
                " ALTER COLUMN metadata SET DEFAULT '{}'"
            )
        if GIN < version <= NO_GIN:
            conn.execute(MIGRATIONS[GIN].format(s=s))
        if version <= NULL_TAG:  # the usual tag was written out
            conn.execute(f"UPDATE {s}.checkpoints SET tag = %s WHERE tag IS NULL", (RECORD_TAG,))
            conn.execute(f"ALTER TABLE {s}.checkpoints ALTER COLUMN tag SET NOT NULL")
    return before


def _unpack_ids(conn: Any, s: str) -> None:
    """Turn the packed ids, versions and task paths back into text."""
    conn.execute(
        f"ALTER TABLE {s}.checkpoint_writes"
        f" ALTER COLUMN checkpoint_id TYPE TEXT USING {_UNPACK_SQL.format(c='checkpoint_id')},"
        f" ALTER COLUMN task_id TYPE TEXT USING {_UNPACK_SQL.format(c='task_id')}"
    )
    conn.execute(_UNPACK_PATHS_SQL.format(s=s))
    conn.execute(
        f"ALTER TABLE {s}.checkpoint_refs ALTER COLUMN version TYPE TEXT"
        f" USING {_UNPACK_VERSION_SQL.format(c='version')}"
    )
    conn.execute(
        f"ALTER TABLE {s}.checkpoints"
        f" ALTER COLUMN checkpoint_id TYPE TEXT"
        f" USING {_UNPACK_ORDERED_SQL.format(c='checkpoint_id')},"
        f" ALTER COLUMN parent_checkpoint_id TYPE TEXT"
        f" USING {_UNPACK_ORDERED_SQL.format(c='parent_checkpoint_id')}"
    )


def _unpacked_ckpts(rows: list) -> list:
    """Raw ``checkpoints`` rows with their ids and parent ids as text again."""
    return _parsed_meta(
        [
            (*r[:2], unpack_ordered(r[2]), None if r[3] is None else unpack_ordered(r[3]), *r[4:])
            for r in rows
        ]
    )


def _parsed_meta(rows: list) -> list:
    """Raw ``checkpoints`` rows with their metadata parsed (unpacked first when
    packed as text; a ``jsonb`` or ``json`` column's comes parsed already)."""
    return sorted(
        [
            (*r[:6], json.loads(unpack_meta(r[6])) if isinstance(r[6], str) else r[6], *r[7:])
            for r in rows
        ],
        key=repr,
    )


def _unpacked_refs(rows: list) -> list:
    """Raw ``checkpoint_refs`` rows with their versions as text again."""
    return sorted([(*r[:3], unpack_version(r[3]), *r[4:]) for r in rows], key=repr)


def _unpacked_writes(rows: list) -> list:
    """Raw ``checkpoint_writes`` rows with their ids and task paths as text again."""
    return sorted(
        [(r[0], r[1], unpack_id(r[2]), unpack_id(r[3]), unpack_path(r[4]), *r[5:]) for r in rows],
        key=repr,
    )


def unpacked() -> Any:
    """Blobs written raw, as threadloom did before ``blobpack`` compressed them."""
    return mock.patch.object(blobpack, "MIN_SIZE", 1 << 62)


def _state(url: str, schema: str) -> tuple[list, list, dict[str, list]]:
    """(columns of every table, applied versions, sorted rows of every table)."""
    s = quote_ident(schema)
    with psycopg.connect(url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = %s ORDER BY 1, 2",
            (schema,),
        ).fetchall()
        tables = sorted({c[0] for c in columns})
        versions = [r[0] for r in conn.execute(f"SELECT v FROM {s}.checkpoint_migrations")]
        rows = {
            t: sorted(conn.execute(_select_all(conn, schema, t)).fetchall(), key=repr)
            for t in tables
            if t != "checkpoint_migrations"
        }
    return columns, sorted(versions), rows


def _select_all(conn: Any, schema: str, table: str) -> str:
    """Every row of ``table`` as the layout before blob ids reads it: blob rows
    without their id, counts by hash (found through the blob's id: a count row
    whose id has no blob reads as a None hash, and fails the comparisons)."""
    s = quote_ident(schema)
    names = [
        r[0]
        for r in conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (schema, table),
        )
    ]
    if "id" not in names or table not in ("checkpoint_blobs", "checkpoint_blob_refs"):
        return f"SELECT * FROM {s}.{table}"
    if table == "checkpoint_blobs":
        return f"SELECT {', '.join(n for n in names if n != 'id')} FROM {s}.{table}"
    return (
        f"SELECT b.hash, c.refs FROM {s}.checkpoint_blob_refs c"
        f" LEFT JOIN {s}.checkpoint_blobs b USING (id)"
    )


def test_setup_upgrades_an_old_schema_with_nothing_lost(pg_url, fresh_schema):
    before = _write_old(pg_url, fresh_schema)
    _, versions, raw_before = _state(pg_url, fresh_schema)
    assert versions == list(range(OLD_VERSION)) and "tl_leases" not in raw_before
    assert raw_before["checkpoint_blobs"] and raw_before["checkpoint_writes"]
    assert any(r[4].startswith("~__pregel_pull, ") for r in raw_before["checkpoint_writes"])

    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        columns, upgraded, raw_after = _state(pg_url, fresh_schema)
        assert upgraded == list(range(len(MIGRATIONS))) and "tl_leases" in raw_after
        writes = raw_before.pop("checkpoint_writes")  # ids packed (idpack)
        assert _unpacked_writes(raw_after["checkpoint_writes"]) == writes
        refs = raw_before.pop("checkpoint_refs")  # versions packed (idpack)
        assert _unpacked_refs(raw_after["checkpoint_refs"]) == refs
        ckpts = raw_before.pop("checkpoints")  # ids packed (idpack), metadata (metapack)
        assert _unpacked_ckpts(raw_after["checkpoints"]) == _parsed_meta(ckpts)
        counts = raw_before.pop("checkpoint_blobs")  # refs moved to their own table
        assert raw_after["checkpoint_blobs"] == [r[:-1] for r in counts]
        assert raw_after["checkpoint_blob_refs"] == sorted(
            [(r[0], r[-1]) for r in counts], key=repr
        )
        for table, rows in raw_before.items():  # raw rows untouched by the migration
            assert raw_after[table] == rows, table
        assert snapshot(saver) == before
        for thread, snap in before.items():
            assert snap["next"] and snap["interrupts"], thread  # each waits on an interrupt
            assert any(t[4] for t in snap["tuples"]), thread  # pending writes survived
            assert len(snap["history"]) > 10 and has_fork(snap), thread

        saver.setup()  # a second setup() is a no-op
        assert _state(pg_url, fresh_schema) == (columns, upgraded, raw_after)

        finals = resume_all(saver)  # leases on: the upgraded schema has the lease table
        for thread, values in finals.items():
            assert f"{thread}-after-upgrade" in values["answers"]
            assert f"{thread}-second" in values["answers"]
            assert (
                values["log"][: len(before[thread]["values"]["log"])]
                == (before[thread]["values"]["log"])
            )
            assert "post-upgrade run" in values["log"]
        leases = _state(pg_url, fresh_schema)[2]["tl_leases"]
        assert leases == []  # every lease released (a released lease leaves no row)


def test_setup_upgrades_a_schema_with_raw_blobs_and_the_gin_index(pg_url, fresh_schema):
    """A database at the version before the GIN index was dropped, written with
    raw (uncompressed) blobs: upgraded, it reads back identically and keeps
    working; new blobs are stored compressed next to the old raw ones."""
    before = _write_old(pg_url, fresh_schema, NO_GIN)
    _, versions, raw_before = _state(pg_url, fresh_schema)
    assert versions == list(range(NO_GIN))
    assert not any(r[1].startswith(blobpack.PACKED) for r in raw_before["checkpoint_blobs"])

    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        _, upgraded, raw_after = _state(pg_url, fresh_schema)
        assert upgraded == list(range(len(MIGRATIONS)))
        writes = raw_before.pop("checkpoint_writes")  # ids packed (idpack)
        assert _unpacked_writes(raw_after["checkpoint_writes"]) == writes
        refs = raw_before.pop("checkpoint_refs")  # versions packed (idpack)
        assert _unpacked_refs(raw_after["checkpoint_refs"]) == refs
        ckpts = raw_before.pop("checkpoints")  # ids packed (idpack), metadata (metapack)
        assert _unpacked_ckpts(raw_after["checkpoints"]) == _parsed_meta(ckpts)
        for table, rows in raw_before.items():  # other raw rows untouched
            assert raw_after[table] == rows, table
        assert snapshot(saver) == before
        finals = resume_all(saver)
        for thread, values in finals.items():
            assert f"{thread}-after-upgrade" in values["answers"]
            assert (
                values["log"][: len(before[thread]["values"]["log"])]
                == (before[thread]["values"]["log"])
            )
        blobs = _state(pg_url, fresh_schema)[2]["checkpoint_blobs"]
        assert set(raw_before["checkpoint_blobs"]) <= set(blobs)
        assert any(r[1].startswith("~z") for r in blobs)  # new ones compressed
    with psycopg.connect(pg_url, autocommit=True) as conn:
        indexes = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (fresh_schema,)
        ).fetchall()
    assert ("checkpoints_metadata_idx",) not in indexes


def test_setup_packs_the_metadata_of_the_schema_before_it(pg_url, fresh_schema):
    """A database at the version before metadata was packed (``json`` column):
    upgraded, every row's metadata is stored packed, reads back identically, and
    metadata filters still match."""
    before = _write_old(pg_url, fresh_schema, PACKED_META)
    _, _, raw_before = _state(pg_url, fresh_schema)
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        columns, upgraded, raw_after = _state(pg_url, fresh_schema)
        assert upgraded == list(range(len(MIGRATIONS)))
        assert ("checkpoints", "metadata", "text") in columns
        stored = [r[6] for r in raw_after["checkpoints"]]
        assert stored and all("\x01" in m or "\x02" in m or "\x03" in m for m in stored)
        assert _unpacked_ckpts(raw_after["checkpoints"]) == _unpacked_ckpts(
            raw_before["checkpoints"]
        )
        assert snapshot(saver) == before
        for thread in before:
            cfg = {"configurable": {"thread_id": thread}}
            loop = [t.metadata for t in saver.list(cfg, filter={"source": "loop"})]
            every = [t.metadata for t in saver.list(cfg)]
            assert loop == [m for m in every if m["source"] == "loop"] != []
