"""Stored rows of the wrong *shape* (valid msgpack or JSON, not what threadloom
writes) raise CorruptBlobError naming the thread, checkpoint and task, from
the shared decoding every backend goes through (writes.decode_entries,
record.apply, rows.load_metadata), never an IndexError/TypeError from deep
inside. The byte-flip sweep is what the probe ran (probecorrupt 07)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import ormsgpack
import pytest

from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.storage.ops import WriteRow
from threadloom.checkpoint.storage.writes import decode_entries
from threadloom.errors import CorruptBlobError, ThreadloomError

CFG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


def _row(data: Any, hashes: Any = b"", path: Any = "") -> WriteRow:
    return WriteRow("t1", "", "c1", "task-1", path, data, hashes)


@pytest.mark.parametrize(
    "data",
    [
        ormsgpack.packb(5),
        ormsgpack.packb(None),
        ormsgpack.packb([5]),
        ormsgpack.packb([None]),
        ormsgpack.packb([[]]),
        ormsgpack.packb([["x", "ch", 0]]),
        ormsgpack.packb([[0, "ch", 0, 7]]),
        ormsgpack.packb([[0, "ch", 0, b"", 1]]),
        ormsgpack.packb([[0, {"a": 1}, 0]]),
        ormsgpack.packb("s"),
    ],
)
def test_write_row_of_wrong_shape_names_thread_checkpoint_task(data: bytes) -> None:
    with pytest.raises(CorruptBlobError) as info:
        decode_entries(_row(data))
    err = info.value
    assert (err.thread_id, err.checkpoint_id) == ("t1", "c1")
    assert "task-1" in str(err)


@pytest.mark.parametrize("field", ["hashes", "task_path"])
def test_write_row_fields_of_wrong_type(field: str) -> None:
    row = _row(ormsgpack.packb([[0, "ch", 0]]), **{"hashes" if field == "hashes" else "path": 5})
    with pytest.raises(CorruptBlobError, match="task-1"):
        decode_entries(row)


def _saved(path: Path) -> None:
    with SqliteSaver.from_conn_string(str(path)) as saver:
        cfg = saver.put(CFG, _checkpoint("1", None), {"step": 0}, {"a": "1", "b": "1"})
        saver.put_writes(cfg, [("a", "x" * 10), ("b", 2)], "task-1")
        cfg = saver.put(cfg, _checkpoint("2", "1"), {"step": 1}, {"a": "2"})
        saver.put_writes(cfg, [("a", "y"), ("b", 3)], "task-2")


def _checkpoint(version: str, parent: str | None) -> dict[str, Any]:
    from threadloom.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_values"] = {"a": version * 3, "b": int(version)}
    cp["channel_versions"] = {"a": version, "b": "1"}
    cp["versions_seen"] = {"n": {"a": parent or "0"}}
    return cp


def _read_all(path: Path) -> None:
    with SqliteSaver.from_conn_string(str(path)) as saver:
        for t in saver.list(CFG):
            t.pending_writes  # noqa: B018


def test_byte_flips_of_records_and_write_rows_raise_only_typed_errors(tmp_path: Path) -> None:
    path = tmp_path / "flip.db"
    _saved(path)
    conn = sqlite3.connect(path)
    targets = [
        ("tl_checkpoints", "checkpoint_id", cid, data)
        for cid, data in conn.execute("select checkpoint_id, data from tl_checkpoints")
    ] + [
        ("tl_writes", "task_id", tid, data)
        for tid, data in conn.execute("select task_id, data from tl_writes")
    ]
    raw = []
    for table, col, key, data in targets:
        for i in range(len(data)):
            for op in (None, 0xC0, 0x90, 0x80, 0xA0, 0xCC):
                flipped = bytearray(data)
                flipped[i] = flipped[i] ^ 0xFF if op is None else op
                if bytes(flipped) == data:
                    continue
                conn.execute(f"update {table} set data=? where {col}=?", (bytes(flipped), key))
                conn.commit()
                try:
                    _read_all(path)
                except ThreadloomError:
                    pass
                except Exception as exc:  # what the sweep is for
                    raw.append(f"{table} byte {i} op {op}: {type(exc).__name__}: {exc}")
        conn.execute(f"update {table} set data=? where {col}=?", (data, key))
        conn.commit()
    conn.close()
    assert raw == []


@pytest.mark.parametrize("metadata", ["[1, 2]", '"text"', "3"])
def test_metadata_that_is_json_but_not_an_object(tmp_path: Path, metadata: str) -> None:
    path = tmp_path / "meta.db"
    _saved(path)
    conn = sqlite3.connect(path)
    conn.execute("update tl_checkpoints set metadata=?", (metadata,))
    conn.commit()
    conn.close()
    with SqliteSaver.from_conn_string(str(path)) as saver:
        with pytest.raises(CorruptBlobError, match="not a JSON object") as info:
            saver.get_tuple(CFG)
    assert info.value.thread_id == "t1"


def test_a_ref_row_of_unknown_kind_is_refused_not_read_as_a_list(tmp_path: Path) -> None:
    from threadloom.checkpoint.base import empty_checkpoint

    path = tmp_path / "kind.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        cp = empty_checkpoint()
        cp["channel_values"] = {"big": "x" * 5000, "items": [f"item {i}" for i in range(300)]}
        cp["channel_versions"] = {"big": "1", "items": "1"}
        saver.put(CFG, cp, {"step": 0}, {"big": "1", "items": "1"})
    conn = sqlite3.connect(path)
    assert conn.execute("update tl_refs set kind = 9").rowcount
    conn.commit()
    conn.close()
    with SqliteSaver.from_conn_string(str(path)) as saver:
        with pytest.raises(CorruptBlobError, match="kind 9") as info:
            saver.get_tuple(CFG)
    assert info.value.thread_id == "t1" and info.value.channel is not None


def test_a_class_not_allowlisted_is_a_refusal_not_corruption(tmp_path: Path) -> None:
    import dataclasses

    from threadloom.checkpoint.serde import MsgpackSerializer
    from threadloom.errors import SerializationError

    @dataclasses.dataclass
    class Point:
        x: int

    path = tmp_path / "refuse.db"
    with SqliteSaver.from_conn_string(str(path), serde=MsgpackSerializer(allowed=[Point])) as saver:
        from threadloom.checkpoint.base import empty_checkpoint

        cp = empty_checkpoint()
        cp["channel_values"] = {"p": [Point(i) for i in range(50)]}  # a blob
        cp["channel_versions"] = {"p": "1"}
        saver.put(CFG, cp, {"step": 0}, {"p": "1"})
    with SqliteSaver.from_conn_string(str(path)) as saver:  # Point not trusted here
        with pytest.raises(SerializationError) as info:
            saver.get_tuple(CFG)
    err = info.value
    assert not isinstance(err, CorruptBlobError)
    assert "not registered or allowlisted" in str(err) and "Point" in str(err)
    assert "thread 't1'" in str(err) and "channel 'p'" in str(err)


@pytest.mark.parametrize("record", [[1, 1], [1, 0], [3, 1, 4], [5, 0, None]])
def test_a_record_without_v_or_ts_is_corrupt(tmp_path: Path, record: list[Any]) -> None:
    """Every record format writes ``v`` and ``ts`` (ts may be None); one without
    them (``packb([1, 1])``: only k) was read by get_tuple and failed later, in
    get_state/history, with a bare KeyError('ts')."""
    from threadloom.graph import START, StateGraph

    path = tmp_path / "nots.db"
    _saved(path)
    conn = sqlite3.connect(path)
    (cid,) = conn.execute("select max(checkpoint_id) from tl_checkpoints").fetchone()
    conn.execute(
        "update tl_checkpoints set data=? where checkpoint_id=?", (ormsgpack.packb(record), cid)
    )
    conn.commit()
    conn.close()
    g = StateGraph(dict)
    g.add_node("n", lambda s: {})
    g.add_edge(START, "n")
    with SqliteSaver.from_conn_string(str(path)) as saver:
        with pytest.raises(CorruptBlobError, match="no 'v' or 'ts'") as info:
            saver.get_tuple(CFG)
        assert info.value.thread_id == "t1" and info.value.checkpoint_id is not None
        with pytest.raises(CorruptBlobError, match="no 'v' or 'ts'"):
            g.compile(checkpointer=saver).get_state(CFG)


def test_a_checkpoint_put_with_ts_none_still_reads(tmp_path: Path) -> None:
    from threadloom.checkpoint.base import empty_checkpoint

    with SqliteSaver.from_conn_string(str(tmp_path / "tsnone.db")) as saver:
        cp = empty_checkpoint()
        cp["ts"] = None  # type: ignore[typeddict-item]
        cfg = saver.put(CFG, cp, {"step": 0}, {})
        assert saver.get_tuple(cfg) is not None
