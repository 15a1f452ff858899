"""The SQLite plans' statement shapes: few statements per operation, constant SQL
text (prepared-statement cache hits), primary-key plans, exact op results."""

from __future__ import annotations

import os
import sqlite3

import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.checkpoint.sqlite.executor import SqliteExecutor
from threadloom.checkpoint.sqlite.worker import hop
from threadloom.checkpoint.storage import ops as o

BIG = os.urandom(600).hex()  # incompressible enough to be stored as a blob


def _checkpoint(values: dict, versions: dict) -> dict:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=1))
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    return cp


def _save(executor, op: o.Op):
    with executor.transaction(True):
        return executor.execute(op)


def _blob(n: int) -> o.BlobRow:
    return o.BlobRow(bytes([n]) * 16, "msgpack", b"v%d" % n, b"")


def _ref(channel: str, version: str, *hashes: bytes) -> o.RefRow:
    return o.RefRow("t", "", channel, version, o.KIND_BLOB, "", b"", b"".join(hashes), 0, 1)


@pytest.fixture
def saver():
    with SqliteSaver.from_conn_string(":memory:") as s:
        yield s


def test_put_of_new_large_values_needs_no_refcount_update(saver) -> None:
    seen: list[str] = []
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(config, _checkpoint({}, {}), {"source": "input", "step": -1}, {})
    versions = {f"c{i}": str(uuid6()) for i in range(5)}
    cp = _checkpoint({c: {"text": f"{c} {BIG}", "n": 1} for c in versions}, versions)
    saver.executor.tracer = lambda sql, params: seen.append(sql)
    saver.put(config, cp, {"source": "loop", "step": 1}, versions)
    # the memo's check (the thread id is known since the first put), refs and
    # blobs (one execution per row; blobs carry their final count), checkpoint
    assert len(seen) == 4, seen
    assert seen[0] == "PRAGMA data_version"
    assert not any("tl_threads" in s for s in seen)
    assert not any(s.startswith("UPDATE") for s in seen)
    counts = saver.conn.execute("SELECT refs, count(*) FROM tl_blobs GROUP BY refs").fetchall()
    assert counts == [(1, 5)]
    tup = saver.get_tuple(config)
    assert tup.checkpoint["channel_values"] == cp["channel_values"]


def test_save_checkpoint_reports_exactly_what_it_inserted(saver) -> None:
    ex = saver.executor
    first = _save(ex, o.SaveCheckpoint(None, (_ref("a", "1", _blob(1).hash),), (_blob(1),)))
    assert first == o.SaveResult(frozenset({_blob(1).hash}), (True,))
    refs = (
        _ref("a", "1", _blob(1).hash),  # exists: not inserted, no reference added
        _ref("a", "2", _blob(1).hash, _blob(2).hash),
        _ref("a", "2", _blob(2).hash),  # same key twice in one op: the first wins
        _ref("b", "1", _blob(2).hash),
    )
    result = _save(ex, o.SaveCheckpoint(None, refs, (_blob(1), _blob(2), _blob(2))))
    assert result.new_blobs == frozenset({_blob(2).hash})
    assert result.inserted_refs == (False, True, False, True)
    counts = dict(saver.conn.execute("SELECT hash, refs FROM tl_blobs").fetchall())
    assert counts == {_blob(1).hash: 2, _blob(2).hash: 2}


def test_save_checkpoint_over_one_statement_of_rows(saver) -> None:
    refs = tuple(_ref("c", str(i), _blob(i % 7).hash) for i in range(75))
    blobs = tuple(_blob(i) for i in range(7))
    result = _save(saver.executor, o.SaveCheckpoint(None, refs, blobs))
    assert result.inserted_refs == (True,) * 75 and len(result.new_blobs) == 7
    total = saver.conn.execute("SELECT sum(refs), count(*) FROM tl_blobs").fetchone()
    assert total == (75, 7)


def test_thread_id_is_read_once_per_transaction_and_forgotten_on_rollback(saver) -> None:
    seen: list[str] = []
    ex = saver.executor
    ex.tracer = lambda sql, params: seen.append(sql)
    with ex.transaction(True):
        for version in ("1", "2", "3"):
            ex.execute(o.SaveCheckpoint(None, (_ref("a", version),), ()))
    assert sum("tl_threads" in s for s in seen) == 2  # lookup (missing) + insert
    with pytest.raises(RuntimeError):
        with ex.transaction(True):
            ex.execute(o.SaveCheckpoint(None, (_ref("a", "4"),), ()))
            ex.execute(o.DeleteRefs("t", None, None))  # the thread row goes
            ex.execute(o.SaveCheckpoint(None, (_ref("a", "5"),), ()))  # and comes back
            raise RuntimeError("roll back")
    _save(ex, o.SaveCheckpoint(None, (_ref("b", "1"),), ()))
    with ex.transaction(False):
        rows = ex.execute(o.LoadThreadRefs("t", ""))
    assert sorted((r.channel, r.version) for r in rows) == [
        ("a", "1"),
        ("a", "2"),
        ("a", "3"),
        ("b", "1"),
    ]


def test_a_base_saved_in_this_transaction_is_not_asked_again(saver) -> None:
    seen: list[str] = []
    ex = saver.executor
    ex.tracer = lambda sql, params: seen.append(sql)
    first = o.CheckpointRow("t", "", str(uuid6()), None, "tl1", b"x", "{}", None)
    second = first._replace(checkpoint_id=str(uuid6()), parent_checkpoint_id=first.checkpoint_id)
    with ex.transaction(True):
        ex.execute(o.SaveCheckpoint(first, (), ()))
        assert not ex.execute(o.SaveCheckpoint(second, (), (), base=first.checkpoint_id)).stale
        assert not any(sql.startswith("SELECT EXISTS") for sql in seen)
        ex.execute(o.DeleteCheckpoints("t", "", (first.checkpoint_id,)))
        third = second._replace(checkpoint_id=str(uuid6()))
        assert ex.execute(o.SaveCheckpoint(third, (), (), base=first.checkpoint_id)).stale
    assert sum(sql.startswith("SELECT EXISTS") for sql in seen) == 1
    seen.clear()
    fourth = second._replace(checkpoint_id=str(uuid6()))
    assert not _save(ex, o.SaveCheckpoint(fourth, (), (), base=second.checkpoint_id)).stale
    assert sum(sql.startswith("SELECT EXISTS") for sql in seen) == 1  # a new transaction asks again


def test_stale_base_or_missing_blob_writes_nothing(saver) -> None:
    ex = saver.executor
    row = o.CheckpointRow("t", "", str(uuid6()), None, "tl1", b"x", "{}", None)
    assert _save(ex, o.SaveCheckpoint(row, (), (), base=str(uuid6()))).stale
    assert _save(ex, o.SaveCheckpoint(row, (), (), needs=(_blob(9).hash,))).stale
    assert saver.conn.execute("SELECT count(*) FROM tl_checkpoints").fetchone()[0] == 0
    _save(ex, o.SaveCheckpoint(None, (_ref("a", "1", _blob(9).hash),), (_blob(9),)))
    ok = _save(ex, o.SaveCheckpoint(row, (), (), needs=(_blob(9).hash,)))
    assert not ok.stale
    child = row._replace(checkpoint_id=str(uuid6()), parent_checkpoint_id=row.checkpoint_id)
    assert not _save(ex, o.SaveCheckpoint(child, (), (), base=row.checkpoint_id)).stale


def test_key_lists_find_exactly_the_stored_rows(saver) -> None:
    ex = saver.executor
    refs = tuple(_ref("c", str(i), _blob(i).hash) for i in range(5))
    _save(ex, o.SaveCheckpoint(None, refs, tuple(_blob(i) for i in range(5))))
    keys = tuple(("c", str(i)) for i in range(3, 450))  # over one statement's chunk
    with ex.transaction(False):
        found = ex.execute(o.LoadRefs("t", "", keys))
        blobs = ex.execute(o.LoadBlobs(tuple(_blob(i).hash for i in range(3, 9))))
    assert sorted(r.version for r in found) == ["3", "4"]
    assert set(blobs) == {_blob(3).hash, _blob(4).hash}


def test_drop_unreferenced_deletes_only_unheld(saver) -> None:
    ex = saver.executor
    _save(ex, o.SaveCheckpoint(None, (_ref("a", "1", _blob(1).hash),), (_blob(1), _blob(2))))
    dropped = _save(ex, o.DropUnreferenced((_blob(1).hash, _blob(2).hash, _blob(3).hash)))
    assert dropped == [_blob(2)]
    assert saver.conn.execute("SELECT hash FROM tl_blobs").fetchall() == [(_blob(1).hash,)]


def test_delete_refs_by_key(saver) -> None:
    ex = saver.executor
    refs = (_ref("a", "1"), _ref("a", "2"), _ref("b", "1"))
    _save(ex, o.SaveCheckpoint(None, refs, ()))
    _save(ex, o.DeleteRefs("t", "", (("a", "2"), ("b", "1"), ("z", "9"))))
    left = saver.conn.execute("SELECT channel, version FROM tl_refs").fetchall()
    assert left == [("a", "1")]


def test_hot_reads_use_primary_keys(tmp_path) -> None:
    plans: list[tuple[str, list[str]]] = []
    with SqliteSaver.from_conn_string(str(tmp_path / "p.db")) as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for i in range(30):
            versions = {"a": str(uuid6()), "b": str(uuid6())}
            cp = _checkpoint({"a": {"text": f"{i} {BIG}"}, "b": i}, versions)
            config = saver.put(config, cp, {"source": "loop", "step": i}, versions)
        saver.put_writes(config, [("a", {"text": BIG})], "task")
        conn = saver.conn

        def explain(sql: str, params) -> None:
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
            plans.append((sql, [r[3] for r in rows]))

        saver.executor.tracer = explain
        saver.codec.states.clear()
        saver.get_tuple({"configurable": {"thread_id": "t"}})
        # the runtime's history/replay pages name the namespace; a thread-only list
        # (every namespace) sorts the thread's rows: no index serves it without growth
        list(saver.list(config, limit=5))
        list(saver.list(config, before=config, limit=5))
    assert len(plans) >= 6 and any("tl_blobs" in sql for sql, _ in plans)
    for sql, steps in plans:
        ctes = ("SCAN k", "SCAN chain", "SCAN CONSTANT ROW")  # key lists, ancestor walk
        scans = [s for s in steps if s.startswith("SCAN") and not s.startswith(ctes)]
        assert scans == [], (sql, steps)
        assert not any("TEMP B-TREE" in s for s in steps), (sql, steps)


async def test_async_saver_runs_the_same_plans_on_the_sync_executor(tmp_path) -> None:
    """AsyncSqliteSaver has no executor of its own: the sync one, on aiosqlite's
    thread (sqlite/worker.py)."""
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        ex = saver.executor
        assert type(ex) is SqliteExecutor

        def run(op, write):
            with ex.transaction(write):
                return ex.execute(op)

        refs = (_ref("a", "1", _blob(1).hash), _ref("a", "1", _blob(1).hash))
        result = await hop(saver.conn, run, o.SaveCheckpoint(None, refs, (_blob(1),)), True)
        assert result == o.SaveResult(frozenset({_blob(1).hash}), (True, False))
        found = await hop(saver.conn, run, o.LoadBlobs((_blob(1).hash,)), False)
        assert found == {_blob(1).hash: _blob(1)}
    conn = sqlite3.connect(str(tmp_path / "a.db"))
    assert conn.execute("SELECT refs FROM tl_blobs").fetchall() == [(1,)]


def test_read_transactions_begin_with_their_first_statement(tmp_path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "r.db")) as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for i in range(3):
            versions = {"a": str(uuid6())}
            cp = _checkpoint({"a": i}, versions)
            config = saver.put(config, cp, {"source": "loop", "step": i}, versions)
        sent: list[str] = []
        saver.conn.set_trace_callback(sent.append)
        with saver.executor.transaction(False):
            pass  # nothing read: nothing sent
        assert sent == []
        items = list(saver.list({"configurable": {"thread_id": "t"}}, limit=2))
        assert [t.metadata["step"] for t in items] == [2, 1]
        assert sent.count("BEGIN") == sent.count("COMMIT") == 1, sent
        sent.clear()
        with saver.executor.transaction(False):
            with saver.executor.transaction(False):  # nested in a read not yet begun
                saver.executor.execute(o.GetCheckpoint("t", "", None))
        assert sent[0] == "BEGIN" and sent[-1] == "COMMIT"
        assert not saver.conn.in_transaction
