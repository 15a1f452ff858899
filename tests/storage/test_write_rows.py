"""A task's pending-writes row: a blob entry does not repeat its hash (it is
the next of the row's ``hashes``), the usual tags are small ints and empty
payloads are left out; rows written before (every entry ``[idx, channel, tag,
payload]``) read the same and are rewritten in the new layout by a merge."""

from __future__ import annotations

import sqlite3
from typing import Any

import ormsgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.storage.upgrade_scenario import resume_all, snapshot, write_history
from threadloom.checkpoint.base import WRITES_IDX_MAP
from threadloom.checkpoint.serde.jsonplus import JsonPlusSerializer
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.storage import puts
from threadloom.checkpoint.storage.ops import WriteRow
from threadloom.checkpoint.storage.rows import blob_hash
from threadloom.checkpoint.storage.writes import _stored, decode_entries, merge_writes
from threadloom.constants import INTERRUPT, RESUME
from threadloom.errors import CorruptBlobError

SERDE = JsonPlusSerializer()
INLINE_MAX = 64
KEY = ("t", "", "c1", "task-1")
BIG = "x" * 100


def _old_row(writes: list[tuple[str, Any]], indices: list[int] | None = None) -> WriteRow:
    """A row as threadloom wrote it before this layout (``indices``: the
    writes' indices when not their positions / special indices)."""
    entries = []
    for i, (channel, value) in enumerate(writes):
        idx = indices[i] if indices is not None else WRITES_IDX_MAP.get(channel, i)
        tag, data = SERDE.dumps_typed(value)
        if len(data) > INLINE_MAX:
            entries.append([idx, channel, None, blob_hash(tag, data)])
        else:
            entries.append([idx, channel, tag, data])
    entries.sort(key=lambda e: e[0])
    hashes = b"".join(e[3] for e in entries if e[2] is None)
    return WriteRow(*KEY, "~__pregel_pull, agent", ormsgpack.packb(entries), hashes)


def _merge(existing: WriteRow | None, writes: list[tuple[str, Any]]) -> tuple[WriteRow, dict]:
    row, blobs = merge_writes(SERDE, INLINE_MAX, existing, KEY, "~__pregel_pull, agent", writes)
    assert row is not None
    return row, {b.hash: b for b in blobs}


def _values(row: WriteRow, blobs: dict[bytes, Any]) -> list[tuple[int, str, Any]]:
    out = []
    for idx, channel, tag, payload in decode_entries(row):
        if tag is None:
            blob = blobs[payload]
            out.append((idx, channel, SERDE.loads_typed((blob.tag, blob.data))))
        else:
            out.append((idx, channel, SERDE.loads_typed((tag, payload))))
    return out


def test_new_row_byte_layout():
    writes = [("messages", [BIG]), ("turn", 3), ("branch:to:agent", None), ("raw", b"\x01")]
    row, blobs = _merge(None, writes)
    (h,) = blobs
    assert ormsgpack.unpackb(row.data) == [
        [0, "messages"],  # blob: the hash is only in ``hashes``
        [1, "turn", 0, b"\x03"],  # "msgpack" -> 0
        [2, ["agent"], 1],  # branch:to:agent; "null" -> 1, empty payload left out
        [3, "raw", 2, b"\x01"],  # "bytes" -> 2
    ]
    assert row.hashes == h
    assert len(row.data) == 43
    assert len(_old_row(writes).data) == 89  # the layout before
    assert decode_entries(row) == [
        [0, "messages", None, h],
        [1, "turn", "msgpack", b"\x03"],
        [2, "branch:to:agent", "null", b""],
        [3, "raw", "bytes", b"\x01"],
    ]


def test_unusual_tags_stay_text():
    class Serde:
        def dumps_typed(self, value: Any) -> tuple[str, bytes]:
            return value

    row, _ = merge_writes(
        Serde(), INLINE_MAX, None, KEY, "", [("a", ("mine", b"v")), ("b", ("x", b""))]
    )
    assert ormsgpack.unpackb(row.data) == [[0, "a", "mine", b"v"], [1, "b", "x"]]
    assert decode_entries(row) == [[0, "a", "mine", b"v"], [1, "b", "x", b""]]


def test_old_rows_read_the_same():
    writes = [("messages", [BIG]), ("turn", 3), ("other", {"k": BIG}), ("branch:to:x", None)]
    old = _old_row(writes)
    new, blobs = _merge(None, writes)
    assert len(new.data) < len(old.data) and new.hashes == old.hashes
    assert decode_entries(old) == decode_entries(new)
    assert _values(old, blobs) == _values(new, blobs)


def test_merge_into_an_old_row_writes_the_new_layout():
    old = _old_row([("messages", [BIG]), ("note", "n"), (INTERRUPT, BIG), ("branch:to:b", None)])
    _, blobs = _merge(None, [("messages", [BIG]), (INTERRUPT, BIG), (RESUME, ["r" * 90])])
    row, new_blobs = _merge(old, [(RESUME, ["r" * 90])])
    blobs.update(new_blobs)
    assert ormsgpack.unpackb(row.data) == [
        [-4, RESUME],
        [-3, INTERRUPT],
        [0, "messages"],
        [1, "note", 0, b"\xa1n"],
        [3, ["b"], 1],
    ]
    assert len(row.hashes) == 48
    assert _values(row, blobs) == [
        (-4, RESUME, ["r" * 90]),
        (-3, INTERRUPT, BIG),
        (0, "messages", [BIG]),
        (1, "note", "n"),
        (3, "branch:to:b", None),
    ]
    assert merge_writes(SERDE, INLINE_MAX, old, KEY, "", [("messages", 1)]) == (None, [])


def _corrupt(data: list[Any], hashes: bytes = b"") -> WriteRow:
    return WriteRow(*KEY, "", ormsgpack.packb(data), hashes)


@pytest.mark.parametrize(
    ("row", "what"),
    [
        (_corrupt([[0, "a"], [1, "b"]], b"h" * 16), "names no blob"),
        (_corrupt([[0, "a"]], b"h" * 8), "names no blob"),
        (_corrupt([[0, "a", 9, b"v"]]), "tag code 9"),
        (_corrupt([[0, "a", 7]]), "tag code 7"),
        (_corrupt([[0, "a", None]]), "has no tag"),
        (_corrupt([[0, ["a", "b"], 0, b"v"]]), "channel ['a', 'b']"),
        (_corrupt([[0, 5, 0, b"v"]]), "channel 5"),
        (_corrupt([[0, "a", 0, b"", 1]]), "entry of 5 items"),
        (WriteRow(*KEY, "", b"\xc1", b""), "cannot be decoded"),
    ],
)
def test_corrupt_rows_name_thread_checkpoint_and_task(row: WriteRow, what: str):
    with pytest.raises(CorruptBlobError) as err:
        decode_entries(row)
    assert what in str(err.value) and "'task-1'" in str(err.value)
    assert (err.value.thread_id, err.value.checkpoint_id) == ("t", "c1")


_CHANNELS = st.sampled_from(
    ["messages", "a", "branch:to:b", "branch:to:", "branch:", *WRITES_IDX_MAP]
)
_VALUES = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=120),
    st.binary(max_size=100),
    st.lists(st.text(max_size=30), max_size=5),
)
_WRITES = st.lists(st.tuples(_CHANNELS, _VALUES), min_size=1, max_size=5)


def _model(model: dict[int, tuple[str, Any]], writes: list[tuple[str, Any]]) -> None:
    """LangGraph's rule: all-special writes replace by index, else first wins."""
    upsert = all(c in WRITES_IDX_MAP for c, _ in writes)
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        if upsert or idx not in model:
            model[idx] = (channel, value)


@settings(max_examples=150, deadline=None)
@given(puts=st.lists(_WRITES, min_size=1, max_size=4), old_first=st.booleans())
def test_round_trip_of_repeated_put_writes(puts: list[list[tuple[str, Any]]], old_first: bool):
    model: dict[int, tuple[str, Any]] = {}
    row: WriteRow | None = None
    blobs: dict[bytes, Any] = {}
    for n, writes in enumerate(puts):
        _model(model, writes)
        if n == 0 and old_first:  # a row stored before, merged into by this version
            _, blobs = _merge(None, writes)  # (the same blobs)
            first = {}
            _model(first, writes)
            row = _old_row([first[i] for i in sorted(first)], sorted(first))
            continue
        new, added = merge_writes(SERDE, INLINE_MAX, row, KEY, "p", writes)
        blobs.update({b.hash: b for b in added})
        row = new or row
    assert row is not None
    assert [(i, c, v) for i, c, v in _values(row, blobs)] == [(i, *model[i]) for i in sorted(model)]
    entries = decode_entries(row)
    assert row.hashes == b"".join(e[3] for e in entries if e[2] is None)


def _is_old_layout(data: bytes) -> bool:
    return all(len(e) == 4 and type(e[1]) is str for e in ormsgpack.unpackb(data))


def _to_new_layout(path: str) -> None:
    """Rewrite every stored writes row of ``path`` in the new layout, in place."""
    conn = sqlite3.connect(path, isolation_level=None)
    rows = conn.execute(
        "SELECT thread, checkpoint_ns, checkpoint_id, task_id, data, hashes FROM tl_writes"
    ).fetchall()
    for *pk, data, hashes in rows:
        entries = decode_entries(WriteRow("t", "", "c", "task", "", data, hashes))
        new = ormsgpack.packb([_stored(e)[0] for e in entries])
        conn.execute(
            "UPDATE tl_writes SET data = ? WHERE thread = ? AND checkpoint_ns = ?"
            " AND checkpoint_id = ? AND task_id = ?",
            (new, *pk),
        )
    conn.close()


def test_sqlite_rows_of_an_earlier_threadloom_read_the_same_and_resume(tmp_path, monkeypatch):
    """End to end: pending writes stored in the layout before (emulated: the new
    rows re-packed as full entries) read back exactly as the same rows in the new
    layout, and a resume merges into them."""
    real = puts.merge_writes

    def old_merge(*args: Any) -> Any:
        row, blobs = real(*args)
        if row is not None:
            row = row._replace(data=ormsgpack.packb(decode_entries(row)))
        return row, blobs

    path, copy = str(tmp_path / "old.db"), str(tmp_path / "new.db")
    monkeypatch.setattr(puts, "merge_writes", old_merge)
    with SqliteSaver.from_conn_string(path) as saver:
        write_history(saver)
    monkeypatch.undo()
    keyed = "SELECT thread, checkpoint_ns, checkpoint_id, task_id, data FROM tl_writes"
    with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
        stored = [r[-1] for r in src.execute(keyed)]
        before_keys = {tuple(r[:4]) for r in src.execute(keyed)}
        src.backup(dst)
    assert stored and all(_is_old_layout(d) for d in stored)
    assert any(e[2] is None for d in stored for e in ormsgpack.unpackb(d))  # blob entries
    _to_new_layout(copy)
    with SqliteSaver.from_conn_string(path) as old, SqliteSaver.from_conn_string(copy) as new:
        before = snapshot(old)
        assert before == snapshot(new)
        assert all(any(t[4] for t in snap["tuples"]) for snap in before.values())
        finals = resume_all(old)
    with sqlite3.connect(path) as conn:
        merged = [r[-1] for r in conn.execute(keyed) if tuple(r[:4]) in before_keys]
    assert any(not _is_old_layout(d) for d in merged)  # a resume merged into an old row
    for thread, values in finals.items():
        assert f"{thread}-after-upgrade" in values["answers"]
        assert (
            values["log"][: len(before[thread]["values"]["log"])]
            == (before[thread]["values"]["log"])
        )
