"""Packed ids of ``checkpoint_writes`` and versions of ``checkpoint_refs`` (idpack): one-to-one, exact round trip, and
the migration's SQL encoding is byte-for-byte the Python one (so rows converted
by the migration are found by the ids the savers look up later)."""

from __future__ import annotations

import uuid

import pytest

from threadloom.checkpoint.postgres.idpack import (
    pack_id,
    pack_version,
    sql_pack,
    sql_pack_version,
    unpack_id,
    unpack_version,
)

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


VERSIONS = [
    "97.0.9798707268490134",
    "1.0.5",  # odd number of digits: padded
    "5.0.0123",  # leading zeros kept
    "999999999.0.12",
    "1000000000.0.1",  # counter too big for 4 bytes: kept as text
    "100.0.00000000000000.5",  # a short random fraction, zero-padded by LangGraph's format
    "1e-05",
    "0.0.1",
    "007.0.1",
    "3",
    "",
    "00000000000000000000000000000097.0.9798707268490134",
]


def test_versions_pack_one_to_one_and_round_trip():
    packed = [pack_version(v) for v in VERSIONS]
    assert len(set(packed)) == len(VERSIONS)
    assert [unpack_version(p) for p in packed] == VERSIONS
    assert len(packed[0]) == 13
    ordered = [pack_version(f"{n}.0.{d}") for n, d in ((9, "5"), (10, "1"), (99, "9"), (100, "0"))]
    assert ordered == sorted(ordered)  # appended in counter order, unlike the text


def test_sql_version_encoding_matches_python(pg_url):
    expr = sql_pack_version("x").format()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        got = conn.execute(
            f"SELECT {expr} FROM unnest(%s::text[]) WITH ORDINALITY AS t(x, n) ORDER BY n",
            (VERSIONS,),
        ).fetchall()
    assert [bytes(r[0]) for r in got] == [pack_version(v) for v in VERSIONS]
