"""Races of the optimistic one-round-trip writes (postgres/optimistic.py) with
another transaction that commits while the write's statement waits.

A Postgres statement takes its snapshot before it waits (for an advisory lock,
for a row another transaction is inserting): whatever that transaction commits
meanwhile is invisible to the statement's reads. Each test holds a gate
transaction open, starts the optimistic write in a thread, waits until the
server shows it blocked, commits the gate and checks that what was stored is
what the pessimistic path stores (and still reads back).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.postgres.conftest import drop_schema
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres import optimistic as opt
from threadloom.checkpoint.postgres.optimistic import thread_lock_key
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.storage.ops import BlobRow

pytestmark = pytest.mark.postgres

THREAD = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
ITEMS = [f"item-{i}-" + "x" * 300 for i in range(2)]


@pytest.fixture
def schemas(pg_url: str) -> Iterator[list[str]]:
    names = [f"tl_race_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    yield names
    for name in names:
        drop_schema(pg_url, name)


def wait_blocked(url: str, schema: str, n: int) -> None:
    """Until ``n`` statements naming ``schema`` (or, for a bare advisory lock,
    any statement of a backend of this test) wait for a lock."""
    deadline = time.monotonic() + 4
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            got = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND (query LIKE %s OR application_name = %s)",
                (f"%{schema}%", schema),
            ).fetchone()[0]
            if got >= n:
                return
            time.sleep(0.02)
    raise AssertionError(f"{n} statements on {schema} never blocked")


def saver(url: str, schema: str, **kw: Any) -> Any:
    """A saver whose backends say ``schema`` as their application name (a bare
    ``SELECT pg_advisory_xact_lock(...)`` does not name the schema)."""
    sep = "&" if "?" in url else "?"
    return PostgresSaver.from_conn_string(
        f"{url}{sep}application_name={schema}", schema=schema, **kw
    )


def ck(**values: Any) -> dict[str, Any]:
    c = empty_checkpoint()
    c["channel_values"] = dict(values)
    c["channel_versions"] = {k: 1 for k in values}
    return c


def start(fn: Any, *args: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    th = threading.Thread(target=run)
    th.start()
    return th, errors


def test_a_put_never_diffs_against_a_parent_deleted_while_it_waited(
    pg_url, schemas, refusals
) -> None:
    """delete_thread holds the thread lock; an optimistic put (values inline,
    parent state cached) waits behind it. The put's base check must see the
    thread as the delete left it: refused, then stored as a keyframe."""
    with saver(pg_url, schemas[0]) as a, saver(pg_url, schemas[0]) as b:
        a.setup()
        cfg = a.put(THREAD, ck(a=1, b="x"), {"step": 1}, {"a": 1, "b": 1})
        c2 = ck(a=2, b="x")
        c2["channel_versions"] = {"a": 2, "b": 1}
        cfg = a.put(cfg, c2, {"step": 2}, {"a": 2})
        with psycopg.connect(pg_url) as gate:
            gate.execute("SELECT pg_advisory_xact_lock(%s)", (thread_lock_key(a.sql, "t"),))
            deleting, derr = start(b.delete_thread, "t")
            wait_blocked(pg_url, schemas[0], 1)
            c3 = ck(a=3, b="x")
            c3["channel_versions"] = {"a": 3, "b": 1}
            putting, perr = start(a.put, cfg, c3, {"step": 3}, {"a": 3})
            wait_blocked(pg_url, schemas[0], 2)
        deleting.join()
        putting.join()
        assert derr == perr == []
    with saver(pg_url, schemas[0]) as fresh:
        got = fresh.get_tuple(THREAD)
        assert got is not None and got.checkpoint["channel_values"] == {"a": 3, "b": "x"}
        assert len(list(fresh.list(THREAD))) == 1  # the rest went with the thread
    assert refusals == [frozenset({"t"})]  # the base check saw the delete


def _id(sql: SQL) -> str:
    """A count row's key, found by its blob's hash."""
    return f"id = (SELECT id FROM {sql.blobs} WHERE hash = %s)"


def _segment(url: str, schema: str) -> tuple[bytes, list[Any]]:
    """The segment a compacting put of ``ITEMS`` inserts, and its blob row
    (content-addressed: the same in every schema)."""
    with saver(url, schema, compact_every=2) as s:
        s.setup()
        cfg = s.put(THREAD, ck(msgs=ITEMS[:1]), {"step": 1}, {"msgs": 1})
        with psycopg.connect(url, autocommit=True) as conn:
            before = {bytes(r[0]) for r in conn.execute(f"SELECT hash FROM {s.sql.blobs}")}
        c2 = ck(msgs=ITEMS)
        c2["channel_versions"] = {"msgs": 2}
        s.put(cfg, c2, {"step": 2}, {"msgs": 2})
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(f"SELECT hash, tag, data, children FROM {s.sql.blobs}").fetchall()
    new = {bytes(r[0]): r for r in rows if bytes(r[0]) not in before}
    kids = {bytes(r[3])[i : i + 16] for r in new.values() for i in range(0, len(r[3]), 16)}
    seg = next(h for h in sorted(kids) if h in new)
    return seg, list(new[seg])


@pytest.mark.parametrize("wait", ["thread lock", "same row"])
@pytest.mark.parametrize("optimistic", [True, False])
def test_a_new_manifest_counts_a_segment_committed_while_it_waited(
    pg_url, schemas, wait, optimistic
) -> None:
    """Another transaction commits the segment of a compacting put (held once
    elsewhere) while the put's blob insert waits for it (the thread lock, or
    that very row): the new manifest's hold must still be counted (2), so the
    segment outlives the other holder's release."""
    seg, row = _segment(pg_url, schemas[1])
    schema = schemas[0]
    with saver(pg_url, schema, compact_every=2) as s:
        s.setup()
        if not optimistic:
            s.executor.optimistic_transaction = None
        cfg = s.put(THREAD, ck(msgs=ITEMS[:1]), {"step": 1}, {"msgs": 1})
        c2 = ck(msgs=ITEMS)
        c2["channel_versions"] = {"msgs": 2}
        other = (
            f"INSERT INTO {s.sql.blobs} (hash, tag, data, children) VALUES (%s, %s, %s, %s)",
            f"INSERT INTO {s.sql.counts} (id, refs) SELECT id, 1 FROM {s.sql.blobs}"
            " WHERE hash = %s",
        )
        with psycopg.connect(pg_url) as gate:
            if wait == "same row":
                gate.execute(other[0], row)
                gate.execute(other[1], (seg,))
            else:
                gate.execute("SELECT pg_advisory_xact_lock(%s)", (thread_lock_key(s.sql, "t"),))
            putting, errors = start(s.put, cfg, c2, {"step": 2}, {"msgs": 2})
            wait_blocked(pg_url, schema, 1)
            if wait == "thread lock":
                gate.execute(other[0], row)
                gate.execute(other[1], (seg,))
        putting.join()
        assert errors == []
        with psycopg.connect(pg_url, autocommit=True) as conn:
            refs = conn.execute(f"SELECT refs FROM {s.sql.counts} WHERE {_id(s.sql)}", (seg,))
            assert refs.fetchone()[0] == 2  # the other holder + the new manifest
            # the other holder lets go (a release, then DropUnreferenced)
            conn.execute(f"UPDATE {s.sql.counts} SET refs = refs - 1 WHERE {_id(s.sql)}", (seg,))
            conn.execute(
                f"DELETE FROM {s.sql.blobs} WHERE hash = %s"
                f" AND (SELECT refs FROM {s.sql.counts} WHERE {_id(s.sql)}) <= 0",
                (seg, seg),
            )
    with saver(pg_url, schema, compact_every=2) as fresh:
        got = fresh.get_tuple(THREAD)
        assert got is not None and got.checkpoint["channel_values"]["msgs"] == ITEMS


def test_the_count_statement_adds_only_to_existing_count_rows(pg_url, schemas) -> None:
    """A new manifest's child with no count row gets none (as an adjustment
    ignores it: no count row for a blob that is not there), one with a row
    gains exactly one hold, and a manifest the transaction inserted earlier
    is not counted again when sent a second time."""
    sql = SQL(schemas[0])
    with saver(pg_url, schemas[0]) as s:
        s.setup()
    there, absent, manifest = b"t" * 16, b"a" * 16, b"m" * 16
    blobs = (BlobRow(manifest, "list", b"", there + absent + there),)
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            f"INSERT INTO {sql.blobs} (hash, tag, data, children) VALUES (%s, 'x', '', '')",
            (there,),
        )
        conn.execute(
            f"INSERT INTO {sql.counts} (id, refs) SELECT id, 1 FROM {sql.blobs} WHERE hash = %s",
            (there,),
        )
        for _ in range(2):  # the second insert of the manifest inserts nothing
            stmts = opt.insert_blobs(blobs, sql)
            assert len(stmts) == 2
            for stmt in stmts:
                conn.execute(stmt.sql.replace(opt.LOCK_SLOT, "TRUE"), stmt.params)
        counts = dict(
            conn.execute(
                f"SELECT b.hash, c.refs FROM {sql.counts} c JOIN {sql.blobs} b USING (id)"
            ).fetchall()
        )
    assert {bytes(h): n for h, n in counts.items()} == {there: 3, manifest: 0}
