"""SaveWrites ``strict`` / ``add_refs`` on SQLite: a task's first put_writes is
one INSERT OR IGNORE (its rowcount says whether another writer came first),
blobs inserted holding their reference count, and nothing written when the
row differs from what the flow expected."""

from __future__ import annotations

import os

import pytest

from threadloom.checkpoint.base import uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.storage import ops as o

CID = str(uuid6())


def _blob(n: int) -> o.BlobRow:
    return o.BlobRow(bytes([n]) * 16, "msgpack", b"v%d" % n, b"")


def _wrow(task: str, *blobs: o.BlobRow, data: bytes = b"d") -> o.WriteRow:
    return o.WriteRow("t", "", CID, task, "p", data, b"".join(b.hash for b in blobs))


def _exec(saver: SqliteSaver, op: o.Op):
    with saver.executor.transaction(True):
        return saver.executor.execute(op)


@pytest.fixture
def saver():
    with SqliteSaver.from_conn_string(":memory:") as s:
        yield s


def _refs(saver: SqliteSaver) -> dict[bytes, int]:
    return dict(saver.conn.execute("SELECT hash, refs FROM tl_blobs").fetchall())


def test_strict_insert_counts_references_without_update(saver) -> None:
    seen: list[str] = []
    saver.executor.tracer = lambda sql, params: seen.append(sql)
    row = _wrow("a", _blob(1), _blob(2), _blob(1))
    new = _exec(saver, o.SaveWrites((row,), (_blob(1), _blob(2)), (None,), True, True))
    assert new == frozenset({_blob(1).hash, _blob(2).hash})
    assert _refs(saver) == {_blob(1).hash: 2, _blob(2).hash: 1}
    assert not any(s.startswith(("UPDATE", "SELECT")) and "tl_threads" not in s for s in seen)
    # a blob already stored gains its references by UPDATE
    again = _wrow("b", _blob(2))
    assert _exec(saver, o.SaveWrites((again,), (_blob(2),), (None,), True, True)) == frozenset()
    assert _refs(saver) == {_blob(1).hash: 2, _blob(2).hash: 2}


def test_strict_insert_over_an_existing_row_writes_nothing(saver) -> None:
    first = _wrow("a", _blob(1))
    _exec(saver, o.SaveWrites((first,), (_blob(1),), (None,), True, True))
    other = _wrow("a", _blob(3), data=b"other")
    assert _exec(saver, o.SaveWrites((other,), (_blob(3),), (None,), True, True)) is None
    assert _refs(saver) == {_blob(1).hash: 1}  # blob 3 never stored
    with saver.executor.transaction(False):
        rows = saver.executor.execute(o.LoadWrites("t", "", (CID,)))
    assert rows == [first]


def test_strict_with_expected_rows_compares_them(saver) -> None:
    a, b = _wrow("a"), _wrow("b")
    _exec(saver, o.SaveWrites((a,), (), (None,), True))
    a2, b2 = a._replace(data=b"a2"), b._replace(data=b"b2")
    assert _exec(saver, o.SaveWrites((a2, b2), (), (None, None), True)) is None  # a exists
    assert _exec(saver, o.SaveWrites((a2, b2), (), (a, None), True)) == frozenset()
    assert _exec(saver, o.SaveWrites((a, b), (), (o.ANY_ROW, a), True)) is None  # b is b2
    with saver.executor.transaction(False):
        rows = saver.executor.execute(o.LoadWrites("t", "", (CID,)))
    assert sorted(rows) == sorted([a2, b2])


def test_put_writes_of_a_new_task_is_three_statements(tmp_path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "w.db")) as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": CID}}
        big = [("x", os.urandom(300).hex()), ("y", os.urandom(300).hex())]
        saver.put_writes(config, big, "task-0")
        seen: list[str] = []
        saver.executor.tracer = lambda sql, params: seen.append(sql)
        saver.put_writes(config, [(c, v + "1") for c, v in big], "task-1")
        # memo check, the row (INSERT OR IGNORE), the blobs holding their count
        # (one statement executed per blob); no read, no refcount UPDATE
        assert len(seen) == 3, seen
        assert seen[1].startswith("INSERT OR IGNORE INTO tl_writes")
        saver.put_writes(config, [("x", "again")], "task-1")  # merges: reads the row
        with saver.executor.transaction(False):
            rows = saver.executor.execute(o.LoadWrites("t", "", (CID,)))
        assert sorted(r.task_id for r in rows) == ["task-0", "task-1"]
        assert len(rows[1].hashes) == 2 * o.HASH_SIZE  # the merge kept both blobs
        counts = saver.conn.execute("SELECT refs, count(*) FROM tl_blobs GROUP BY refs").fetchall()
        assert counts == [(1, 4)]
