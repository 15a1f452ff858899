"""Blob parameters are bound as bytearray (no adapter lookup): the stored
columns are the same BLOBs, empty ones included, and read back as bytes."""

from __future__ import annotations

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.common import _cp_params, _w_params
from threadloom.checkpoint.storage import ops as o


def test_blob_params_are_bytearrays_except_the_memo_key() -> None:
    cid, pid = str(uuid6()), str(uuid6())
    cp = _cp_params(o.CheckpointRow("t", "", cid, pid, "tl1", b"rec", b"", None))
    assert type(cp[2]) is bytes  # keys the memo's "base" rows: hashable
    assert [type(v) for v in cp[3:7]] == [bytearray, str, bytearray, bytearray]
    w = _w_params(o.WriteRow("t", "", cid, "not-a-uuid", "", b"w", b""))
    assert type(w[2]) is bytearray and w[3] == "not-a-uuid"
    assert bytes(w[5]) == b"w" and bytes(w[6]) == b""


def test_stored_types_and_read_back() -> None:
    with SqliteSaver.from_conn_string(":memory:") as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        first = empty_checkpoint()
        config = saver.put(config, first, {"source": "input", "step": -1}, {})
        saver.put_writes(config, [("x", 1)], str(uuid6()), "")
        second = empty_checkpoint()
        second["id"] = str(uuid6())
        saver.put(config, second, {"source": "loop", "step": 0}, {})
        rows = saver.conn.execute(
            "SELECT typeof(parent_checkpoint_id), typeof(data) FROM tl_checkpoints"
            " ORDER BY checkpoint_id"
        ).fetchall()
        assert rows == [("null", "blob"), ("blob", "blob")]
        w = saver.conn.execute("SELECT typeof(task_id), typeof(hashes) FROM tl_writes").fetchall()
        assert w == [("blob", "blob")]
        got = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": first["id"]}})
        assert got.pending_writes[0][1:] == ("x", 1)
        latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert latest.checkpoint["id"] == second["id"]
        assert latest.parent_config["configurable"]["checkpoint_id"] == first["id"]


def test_refs_and_blobs_store_blobs_and_read_back() -> None:
    import os

    big = os.urandom(800).hex()
    with SqliteSaver.from_conn_string(":memory:") as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        cp = empty_checkpoint()
        cp["channel_values"] = {"a": {"text": big}}
        cp["channel_versions"] = {"a": "00000000000000000000000000000001.1"}
        config = saver.put(config, cp, {"source": "loop", "step": 0}, cp["channel_versions"])
        saver.put_writes(config, [("a", {"text": big[::-1]})], str(uuid6()), "")
        types = saver.conn.execute(
            "SELECT DISTINCT typeof(hash), typeof(data), typeof(children) FROM tl_blobs"
        ).fetchall()
        assert types == [("blob", "blob", "blob")]
        refs = saver.conn.execute("SELECT typeof(data), typeof(hashes) FROM tl_refs").fetchall()
        assert refs and all(t == ("blob", "blob") for t in refs)
        got = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert got.checkpoint["channel_values"] == {"a": {"text": big}}
        assert got.pending_writes[0][2] == {"text": big[::-1]}
