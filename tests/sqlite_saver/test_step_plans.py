"""The per-step write plans (a checkpoint row without refs/blobs, a task's
writes without blobs) through a real executor: the thread id looked up for the
staleness probe is the one the row is written with, a missing base still makes
the save stale and writes nothing, a new thread still gets its row, and the
statements are the same as the general path's."""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.base import uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.storage import ops as o


def _row(thread: str, cid: str, parent: str | None) -> o.CheckpointRow:
    return o.CheckpointRow(thread, "", cid, parent, "tl1", b"rec", b"{}", None)


def _run(saver: SqliteSaver, op: Any, trace: list[str]) -> Any:
    ex = saver.executor
    ex.tracer = lambda sql, params: trace.append(sql.split(" (")[0])
    try:
        with ex.transaction(True):
            return ex.execute(op)
    finally:
        ex.tracer = None


def test_row_only_save_new_thread_then_diff_on_known_base() -> None:
    with SqliteSaver.from_conn_string(":memory:") as saver:
        first, second = str(uuid6()), str(uuid6())
        trace: list[str] = []
        got = _run(saver, o.SaveCheckpoint(_row("t", first, None), (), ()), trace)
        assert got == o.SaveResult(frozenset(), ())
        assert [s.split()[0] for s in trace] == ["PRAGMA", "SELECT", "INSERT", "INSERT"]
        trace.clear()
        op = o.SaveCheckpoint(_row("t", second, first), (), (), base=first)
        assert _run(saver, op, trace) == o.SaveResult(frozenset(), ())
        # thread and base answered by the memo: the checkpoint row alone
        assert trace == ["PRAGMA data_version", "INSERT OR REPLACE INTO tl_checkpoints"]
        rows = saver.conn.execute(
            "SELECT t.thread_id, c.thread FROM tl_checkpoints c JOIN tl_threads t"
            " ON t.id = c.thread ORDER BY c.checkpoint_id"
        ).fetchall()
        assert [r[0] for r in rows] == ["t", "t"] and rows[0][1] == rows[1][1]


def test_row_only_save_on_a_missing_base_is_stale_and_writes_nothing() -> None:
    with SqliteSaver.from_conn_string(":memory:") as saver:
        first = str(uuid6())
        _run(saver, o.SaveCheckpoint(_row("t", first, None), (), ()), [])
        gone, cid = str(uuid6()), str(uuid6())
        op = o.SaveCheckpoint(_row("t", cid, gone), (), (), base=gone)
        got = _run(saver, op, [])
        assert got.stale is True
        assert saver.conn.execute("SELECT count(*) FROM tl_checkpoints").fetchone() == (1,)
        # an unknown thread with a base: stale too, and no thread row created
        op = o.SaveCheckpoint(_row("u", cid, first), (), (), base=first)
        assert _run(saver, op, []).stale is True
        assert saver.conn.execute("SELECT count(*) FROM tl_threads").fetchone() == (1,)


def test_writes_without_blobs_return_no_new_blobs_and_store_the_row() -> None:
    with SqliteSaver.from_conn_string(":memory:") as saver:
        cid, task = str(uuid6()), str(uuid6())
        row = o.WriteRow("t", "", cid, task, "", b"w", b"")
        op = o.SaveWrites((row,), expected=(None,), strict=True)  # none expected
        assert _run(saver, op, []) == frozenset()
        again = o.SaveWrites((row._replace(data=b"x"),), expected=(None,), strict=True)
        assert _run(saver, again, []) is None  # a row was there: nothing written
        got = saver.conn.execute("SELECT data FROM tl_writes").fetchall()
        assert got == [(b"w",)]
