"""Postgres' own blob compression (postgres/blobpack.py) holds the msgpack it
inflates to the saver's serializer's ``max_decoded_items`` (it used the default
whatever the serializer said, so raising the bound as the error advised did not
help), never compresses a value that could hold more items than the default
bound or the writing serializer's (it stores it raw: a bound of 100,000 could
not read its own ``[0] * 150_000``), never inflates a row to delete it (a row an
older threadloom compressed past the default bound could be neither pruned nor
deleted, whatever bound the saver had), and a damaged row names the thread and
checkpoint (both were None)."""

from __future__ import annotations

import os

import ormsgpack
import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver, blobpack
from threadloom.checkpoint.serde import MsgpackSerializer
from threadloom.checkpoint.serde.codec import compress
from threadloom.checkpoint.storage.ops import BlobRow
from threadloom.errors import CorruptBlobError

psycopg = pytest.importorskip("psycopg")

CFG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


def _put(saver: PostgresSaver, value: object, version: str = "1", cfg: dict = CFG) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"xs": value}
    cp["channel_versions"] = {"xs": version}
    return saver.put(cfg, cp, {"step": 0}, {"xs": version})


def _serde(bound: int) -> MsgpackSerializer:
    return MsgpackSerializer(compress_threshold=None, max_decoded_items=bound)


def test_the_serializers_bound_applies_to_rows_postgres_compressed(pg_url, fresh_schema):
    value = [0] * 200_000  # 200 KB of msgpack: compressed by blobpack, not the serializer
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, serde=_serde(1 << 24)) as s:
        s.setup()
        cfg = _put(s, value)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tags = conn.execute(f'SELECT tag FROM "{fresh_schema}".checkpoint_blobs').fetchall()
    assert ("~zm",) in tags
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, serde=_serde(100_000)) as s:
        with pytest.raises(CorruptBlobError, match="max_decoded_items=") as info:
            s.get_tuple(cfg)
        assert info.value.thread_id == "t1"
        assert info.value.checkpoint_id == cfg["configurable"]["checkpoint_id"]
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, serde=_serde(300_000)) as s:
        assert s.get_tuple(cfg).checkpoint["channel_values"]["xs"] == value


@pytest.mark.parametrize("tag, data", [("~zm", b"plain-not-zstd"), ("~q", b"\x90")])
def test_a_damaged_blob_row_names_thread_and_checkpoint(pg_url, fresh_schema, tag, data):
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        cfg = _put(saver, os.urandom(4000).hex())  # a blob row
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            f'UPDATE "{fresh_schema}".checkpoint_blobs SET tag = %s, data = %s', (tag, data)
        )
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        with pytest.raises(CorruptBlobError) as info:
            saver.get_tuple(cfg)
    err = info.value
    assert (err.thread_id, err.checkpoint_id) == ("t1", cfg["configurable"]["checkpoint_id"])
    assert "blob " in str(err)


def test_a_value_past_the_packing_limit_is_stored_raw(monkeypatch):
    monkeypatch.setattr(blobpack, "MAX_PACKED", 1000)
    data = ormsgpack.packb([0] * 2000)
    assert blobpack.pack("msgpack", data) == ("~m", data)
    small = ormsgpack.packb([0] * 500)
    assert blobpack.pack("msgpack", small)[0] == "~zm"


def test_unpack_takes_the_readers_bound():
    raw = ormsgpack.packb([0] * 200_000)
    row = BlobRow(b"h" * 16, "~zm", compress(raw), b"")
    with pytest.raises(CorruptBlobError, match="more than 100000"):
        blobpack.unpack(row, 100_000)
    assert blobpack.unpack(row, 300_000).data == raw
    with pytest.raises(CorruptBlobError) as info:
        blobpack.unpack(BlobRow(b"h" * 16, "~q", b"", b""), None, "t", "c")
    assert (info.value.thread_id, info.value.checkpoint_id) == ("t", "c")


@pytest.mark.parametrize("compress_threshold", [None, 1024])
def test_a_value_over_the_writers_bound_is_not_compressed_by_postgres(
    pg_url, fresh_schema, compress_threshold
):
    """The serializer stored [0] * 150_000 raw (over its bound), then blobpack
    compressed it (its limit was the default bound), and the same saver's read
    refused it as a bomb."""
    serde = MsgpackSerializer(compress_threshold=compress_threshold, max_decoded_items=100_000)
    value = [0] * 150_000
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, serde=serde) as s:
        s.setup()
        cfg = _put(s, value)
        assert s.get_tuple(cfg).checkpoint["channel_values"]["xs"] == value
        s.put_writes(cfg, [("xs", value)], "task-1", "~p")  # a pending write's blob too
        assert s.get_tuple(cfg).pending_writes == [("task-1", "xs", value)]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tags = conn.execute(f'SELECT tag FROM "{fresh_schema}".checkpoint_blobs').fetchall()
    assert tags == [("~m",)]  # raw, and the same value: one row


def test_pack_holds_msgpack_to_the_writers_bound():
    data = ormsgpack.packb([0] * 2000)
    assert blobpack.pack("msgpack", data, len(data) - 1) == ("~m", data)
    assert blobpack.pack("msgpack", data, len(data))[0] == "~zm"  # cannot hold more items
    assert blobpack.pack("msgpack", data, 1 << 30)[0] == "~zm"
    assert blobpack.pack("msgpack", data)[0] == "~zm"
    assert blobpack.pack("bytes", bytes(2000), 1000)[0] == "~zb"  # never counted when read


def _over_the_default_bound(pg_url: str, schema: str) -> None:
    """Make the thread's one blob row what an earlier threadloom wrote for
    [0] * 17M: ~zm, 17 MB of msgpack inflating to more items than the
    default bound (built directly: this threadloom no longer writes it)."""
    n = 17_000_000
    packed = compress(b"\xdd" + n.to_bytes(4, "big") + bytes(n))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        done = conn.execute(
            f'UPDATE "{schema}".checkpoint_blobs SET tag = %s, data = %s', ("~zm", packed)
        )
        assert done.rowcount == 1


def _blobs(pg_url: str, schema: str) -> int:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return conn.execute(f'SELECT count(*) FROM "{schema}".checkpoint_blobs').fetchone()[0]


@pytest.mark.parametrize("bound", [100_000, 1 << 24, 1 << 28])
def test_a_row_compressed_past_any_bound_is_deleted(pg_url, fresh_schema, bound):
    """delete_thread (a shared blob: on the copy's delete) never inflates it."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, serde=_serde(bound)) as s:
        s.setup()
        _put(s, [0] * 2000)
        s.copy_thread("t1", "t2")
        _over_the_default_bound(pg_url, fresh_schema)
        s.delete_thread("t1")
        assert _blobs(pg_url, fresh_schema) == 1  # t2 still holds it
        s.delete_thread("t2")
        assert _blobs(pg_url, fresh_schema) == 0
        assert s.get_tuple(CFG) is None


@pytest.mark.parametrize("bound", [100_000, 1 << 24])
def test_a_row_compressed_past_any_bound_is_pruned(pg_url, fresh_schema, bound):
    """prune, dry and real, drops the older checkpoint holding it, reading
    only the kept one; both report the same (the row's stored size)."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, serde=_serde(bound)) as s:
        s.setup()
        first = _put(s, [0] * 2000)
        _put(s, [1], "2", first)
        _over_the_default_bound(pg_url, fresh_schema)
        dry = s.prune(["t1"], strategy="keep_latest", dry_run=True)
        real = s.prune(["t1"], strategy="keep_latest")
        assert dry == real._replace(dry_run=True)
        assert real.checkpoints == 1 and real.blobs == 1
        assert _blobs(pg_url, fresh_schema) == 0
        assert s.get_tuple(CFG).checkpoint["channel_values"]["xs"] == [1]
