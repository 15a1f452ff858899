"""Checkpoint ids packed in order (idpack.pack_ordered, migration 19): exact round
trip, byte order == string order for any strings (uuids, near-uuids, anything a
LangGraph user passes), the migration's PL/pgSQL twin is byte-for-byte the Python
one, existing text ids are converted by it, and the saver lists, pages and reads
mixed ids in the same order as before."""

from __future__ import annotations

import re
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.postgres.conftest import schema_at
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.idpack import (
    SQL_PACK_ORDERED,
    pack_id,
    pack_ordered,
    unpack_ordered,
)
from threadloom.checkpoint.postgres.schema import MIGRATIONS, quote_ident

psycopg = pytest.importorskip("psycopg")

ORDERED_IDS = next(i for i, m in enumerate(MIGRATIONS) if "tl_pack_ordered(checkpoint_id)" in m)

CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
EDGES = [
    "",
    "-",
    "0",
    "/",
    "00000000",
    "0000000-",
    "00000000-0000-0000-0000-000000000000",
    "00000000-0000-0000-0000-000000000000x",
    "00000000-0000-0000-0000-000000000001",
    "00000000,",
    "1f1e",
    "1f1e:",
    "1F1E",
    "1f1eg",
    "1f1e6350-dd",
    "1f1e6350_dd",
    "1f1e6350-dd76-6469-80c6-b92c69d8a2b3",
    "1f1e6350-dd76-6469-80c6-b92c69d8a2b3a",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "ffffffff-ffff-ffff-ffff-ffffffffffffz",
    "zzz",
    "é",
    "step-10",
    "step-9",
]


@st.composite
def ids(draw: st.DrawFn) -> str:
    """uuids, uuids cut short / with one character changed / extended, and any text."""
    u = str(uuid.UUID(int=draw(st.integers(0, (1 << 128) - 1))))
    kind = draw(st.sampled_from(["uuid", "cut", "change", "extend", "text"]))
    if kind == "uuid":
        return u
    if kind == "cut":
        return u[: draw(st.integers(0, 35))]
    if kind == "change":
        i = draw(st.integers(0, 35))
        return u[:i] + draw(st.characters(max_codepoint=0x2FF)) + u[i + 1 :]
    if kind == "extend":
        return u + draw(st.text(min_size=1, max_size=3))
    return draw(st.text(max_size=40))


@given(st.lists(ids(), min_size=2, max_size=8))
def test_ordered_ids_round_trip_and_keep_order(values):
    values += EDGES
    packed = [pack_ordered(v) for v in values]
    assert [unpack_ordered(p) for p in packed] == values
    assert sorted(values) == sorted(values, key=pack_ordered)
    for a, pa in zip(values, packed):
        assert len(pa) == 17 or not CANONICAL.fullmatch(a)  # a uuid takes 17 bytes
        for b, pb in zip(values, packed):
            assert (a < b) == (pa < pb) and (a == b) == (pa == pb)


@pytest.fixture(scope="module")
def pack_conn(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(SQL_PACK_ORDERED.format())
        yield conn


@settings(max_examples=60, deadline=None)
@given(st.lists(ids(), min_size=1, max_size=10))
def test_sql_twin_matches_python(pack_conn, values):
    # the twin converts text columns, which never hold NUL (Postgres refuses it in text)
    values = [v for v in values + EDGES if "\x00" not in v]
    rows = pack_conn.execute(
        "SELECT pg_temp.tl_pack_ordered(v) FROM unnest(%s::text[]) WITH ORDINALITY AS t(v, n)"
        " ORDER BY n",
        (values,),
    ).fetchall()
    assert [bytes(r[0]) for r in rows] == [pack_ordered(v) for v in values]


def test_migration_packs_existing_text_ids(pg_url, fresh_schema):
    """Rows as the schema before migration 19 holds them (text ids, parent ids
    packed by pack_id) come out packed in order, parents included."""
    s = quote_ident(fresh_schema)
    chain = [*EDGES, str(uuid.uuid4())]
    schema_at(pg_url, fresh_schema, ORDERED_IDS)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for i, cid in enumerate(chain):
            parent = pack_id(chain[i - 1]) if i else None
            conn.execute(
                f"INSERT INTO {s}.checkpoints (thread_id, checkpoint_id, parent_checkpoint_id,"
                " tag, data) VALUES ('t', %s, %s, 'x', '')",
                (cid, parent),
            )
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT checkpoint_id, parent_checkpoint_id FROM {s}.checkpoints"
            " ORDER BY checkpoint_id"
        ).fetchall()
    parents = {c: (chain[i - 1] if i else None) for i, c in enumerate(chain)}
    assert [unpack_ordered(r[0]) for r in rows] == sorted(chain)
    for cid, parent in rows:
        assert bytes(cid) == pack_ordered(unpack_ordered(cid))
        want = parents[unpack_ordered(cid)]
        assert (None if parent is None else bytes(parent)) == (
            None if want is None else pack_ordered(want)
        )


def test_saver_orders_and_pages_mixed_ids(pg_url, fresh_schema):
    """User-chosen ids next to uuids: list order, ``before`` paging, ``limit``,
    lookups by id and parent links are those of the strings."""
    chosen = ["step-9", "step-10", "1f1e6350-dd", "zzz", str(uuid.uuid4()), EDGES[6]]
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        config = {"configurable": {"thread_id": "mixed", "checkpoint_ns": ""}}
        for cid in chosen:
            cp = empty_checkpoint()
            cp["id"] = cid
            config = saver.put(config, cp, {"source": "loop", "step": 1}, {})
        thread = {"configurable": {"thread_id": "mixed"}}
        listed = [t.config["configurable"]["checkpoint_id"] for t in saver.list(thread)]
        assert listed == sorted(chosen, reverse=True)
        for i, cid in enumerate(listed):
            before = {"configurable": {"thread_id": "mixed", "checkpoint_id": cid}}
            page = [t.checkpoint["id"] for t in saver.list(thread, before=before, limit=2)]
            assert page == listed[i + 1 : i + 3]
            got = saver.get_tuple({"configurable": {"thread_id": "mixed", "checkpoint_id": cid}})
            assert got is not None and got.checkpoint["id"] == cid
            parent = chosen[chosen.index(cid) - 1] if chosen.index(cid) else None
            assert (got.parent_config or {}).get("configurable", {}).get("checkpoint_id") == (
                parent
            )
        latest = saver.get_tuple({"configurable": {"thread_id": "mixed"}})
        assert latest is not None and latest.checkpoint["id"] == max(chosen)
