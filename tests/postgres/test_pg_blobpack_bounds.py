"""Postgres' own blob compression (postgres/blobpack.py) holds the msgpack it
inflates to the saver's serializer's ``max_decoded_items`` (it used the default
whatever the serializer said, so raising the bound as the error advised did not
help), never compresses a value that could hold more items than the default
bound (it stores it raw), and a damaged row names the thread and checkpoint
(both were None)."""

from __future__ import annotations

import os

import ormsgpack
import pytest

from threadloom.checkpoint.postgres import PostgresSaver, blobpack
from threadloom.checkpoint.serde import MsgpackSerializer
from threadloom.checkpoint.serde.codec import compress
from threadloom.checkpoint.storage.ops import BlobRow
from threadloom.errors import CorruptBlobError

psycopg = pytest.importorskip("psycopg")

CFG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


def _put(saver: PostgresSaver, value: object) -> dict:
    from threadloom.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_values"] = {"xs": value}
    cp["channel_versions"] = {"xs": "1"}
    return saver.put(CFG, cp, {"step": 0}, {"xs": "1"})


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
