"""Big bytea arrays sent pre-encoded in the binary format (postgres/binarray.py)."""

from __future__ import annotations

import os

import psycopg
import pytest
from psycopg.adapt import PyFormat

from threadloom.checkpoint.postgres.binarray import BINARY_MIN, ByteaArray, use_binary_arrays
from threadloom.checkpoint.postgres.params import wire_params
from threadloom.checkpoint.postgres.stmt import Stmt

pytestmark = pytest.mark.postgres

BIG = bytes(range(256)) * (BINARY_MIN // 256)  # big enough on its own


@pytest.mark.parametrize(
    "values",
    [
        [b"", b'\x00\xff\\"{},', BIG, None],
        [BIG, BIG[::-1]],
        [None, BIG, b"", None],
    ],
)
def test_big_bytea_arrays_go_binary_and_read_back_unchanged(pg_url: str, values: list) -> None:
    stmt = Stmt("SELECT %s::bytea[]", (values,), "one")
    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=0) as conn:
        assert use_binary_arrays(conn)
        params = wire_params(stmt)
        assert isinstance(params[0], ByteaArray)  # the list went pre-encoded
        assert len(params[0]) < sum(len(v) for v in values if v) + 100  # no hex
        for _ in range(2):  # unprepared, then prepared
            assert conn.execute(stmt.sql, params).fetchone()[0] == values


@pytest.mark.parametrize(
    ("values", "cast"),
    [
        ([b"small", None], "bytea[]"),  # below BINARY_MIN: the literal is cheaper
        ([BIG, "text"], "bytea[]"),  # an element of another type
        (["a", 'q"uote', None], "text[]"),  # no binary encoder for the type
        ([1, 2**40], "bigint[]"),
    ],
)
def test_other_arrays_go_as_literals(pg_url: str, values: list, cast: str) -> None:
    stmt = Stmt(f"SELECT %s::{cast}", (values,), "one")
    params = wire_params(stmt)
    assert isinstance(params[0], str)
    if cast != "bytea[]" or all(type(v) is not str for v in values):
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute(stmt.sql, params).fetchone()[0] == values


WRITTEN = os.urandom(2500)  # incompressible: a blob bigger than BINARY_MIN


def test_saver_round_trip_with_binary_arrays(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dumper is registered on the saver's connection itself when first
    needed (registering it globally would miss connections already open)."""
    from threadloom.checkpoint.base import empty_checkpoint
    from threadloom.checkpoint.postgres import PostgresSaver, lean
    from threadloom.checkpoint.postgres import connection as pgconn

    binary = []

    def recording(stmt: Stmt) -> object:
        params = wire_params(stmt)
        binary.extend(p for p in params or () if isinstance(p, ByteaArray))
        return params

    monkeypatch.setattr(pgconn, "wire_params", recording)
    monkeypatch.setattr(lean, "wire_params", recording)  # a commit's held statements

    with psycopg.connect(pg_url, autocommit=True) as conn:
        saver = PostgresSaver(conn, schema=pg_schema)
        saver.setup()
        cp = empty_checkpoint()
        cp["channel_values"] = {"doc": os.urandom(3000), "text": 'é✓ \\ " {}' * 200}
        cp["channel_versions"] = {"doc": "1", "text": "1"}
        config = {"configurable": {"thread_id": "binarr", "checkpoint_ns": ""}}
        config = saver.put(config, cp, {"step": 0}, {"doc": "1", "text": "1"})
        saver.put_writes(config, [("doc", WRITTEN)], "task")
        tup = saver.get_tuple(config)
        assert conn.adapters.get_dumper(ByteaArray, PyFormat.AUTO).oid == 1001
    assert tup.checkpoint["channel_values"] == cp["channel_values"]
    assert tup.pending_writes[0][2] == WRITTEN
    assert len(binary) >= 2  # the put's blobs and the write's went binary


def _client_cursor_put(thread: str) -> tuple[object, object]:
    """A 5 KB value (refs of one version name one value per thread: own threads)."""
    from threadloom.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_values"] = {"doc": os.urandom(5000)}
    cp["channel_versions"] = {"doc": "1"}
    return cp, {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def test_client_side_binding_keeps_literals(pg_url: str, pg_schema: str) -> None:
    """``cursor_factory=ClientCursor`` merges parameters into the text: the binary
    array would be dumped as a ``bytea`` literal that cannot be cast to
    ``bytea[]`` (found in review), so such connections keep sending literals and
    skip the plan-mode statement (they never prepare)."""
    from threadloom.checkpoint.postgres import PostgresSaver
    from threadloom.checkpoint.postgres.binarray import binds_on_client

    with psycopg.connect(pg_url, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        assert binds_on_client(conn) and not use_binary_arrays(conn)
        saver = PostgresSaver(conn, schema=pg_schema)
        saver.setup()
        cp, config = _client_cursor_put("cc-sync")
        config = saver.put(config, cp, {"step": 0}, {"doc": "1"})
        saver.put_writes(config, [("doc", WRITTEN)], "task")
        tup = saver.get_tuple(config)
    assert tup.checkpoint["channel_values"] == cp["channel_values"]
    assert tup.pending_writes[0][2] == WRITTEN


async def test_async_client_side_binding_keeps_literals(pg_url: str, pg_schema: str) -> None:
    from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver

    async with await psycopg.AsyncConnection.connect(
        pg_url, autocommit=True, cursor_factory=psycopg.AsyncClientCursor
    ) as conn:
        assert not use_binary_arrays(conn)
        saver = AsyncPostgresSaver(conn, schema=pg_schema)
        await saver.setup()
        cp, config = _client_cursor_put("cc-async")
        config = await saver.aput(config, cp, {"step": 0}, {"doc": "1"})
        await saver.aput_writes(config, [("doc", WRITTEN)], "task")
        tup = await saver.aget_tuple(config)
    assert tup.checkpoint["channel_values"] == cp["channel_values"]
    assert tup.pending_writes[0][2] == WRITTEN
