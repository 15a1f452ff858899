"""Packed ids of ``checkpoint_writes`` (idpack): one-to-one, exact round trip, and
the migration's SQL encoding is byte-for-byte the Python one (so rows converted
by the migration are found by the ids the savers look up later)."""

from __future__ import annotations

import uuid

import pytest

from threadloom.checkpoint.postgres.idpack import pack_id, sql_pack, unpack_id

psycopg = pytest.importorskip("psycopg")

IDS = [
    str(uuid.uuid4()),
    "1f1e61ad-d0d7-66e7-8094-59d6d45d2ce2",
    "00000000-0000-0000-0000-000000000000",
    str(uuid.uuid4()).upper(),  # not canonical: kept as text
    "1f1e61ad-d0d7-66e7-8094-59d6d45d2ce2x",
    "",
    "1",
    "x" * 15,  # 1 marker byte would make 16 bytes, the length of a packed uuid
    "x" * 16,
    "é" * 7 + "a",  # 15 UTF-8 bytes
    "task:with:colons|and spaces",
]


def test_pack_is_one_to_one_and_round_trips():
    packed = [pack_id(i) for i in IDS]
    assert len(set(packed)) == len(IDS)
    assert [unpack_id(p) for p in packed] == IDS
    assert all(len(p) == 16 for p in packed[:3])
    assert all(len(p) != 16 for p in packed[3:])


def test_sql_encoding_matches_python(pg_url):
    expr = sql_pack("x").format()  # a migration template: braces doubled
    with psycopg.connect(pg_url, autocommit=True) as conn:
        got = conn.execute(
            f"SELECT {expr} FROM unnest(%s::text[]) WITH ORDINALITY AS t(x, n) ORDER BY n",
            (IDS,),
        ).fetchall()
    assert [bytes(r[0]) for r in got] == [pack_id(i) for i in IDS]
