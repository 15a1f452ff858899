"""The executor's shared cursor (statements without rows, ``PRAGMA data_version``):
it follows a replaced connection, leaves no statement pending that would hold a
read snapshot past the COMMIT, and an op without a plan is a typed error."""

from __future__ import annotations

import os
import sqlite3

import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.sqlite import SqliteSaver, queries
from threadloom.errors import StorageError


def _put(saver: SqliteSaver, thread: str) -> None:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saved = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    saver.put_writes(saved, [("a", 1)], "task-1")


def test_cursor_follows_a_replaced_connection(tmp_path: os.PathLike) -> None:
    first, second = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    with SqliteSaver.from_conn_string(second) as other:
        other.setup()  # the schema in b.db
    with SqliteSaver.from_conn_string(first) as saver:
        _put(saver, "t1")
        assert saver.executor._cur is not None
        conn = sqlite3.connect(second, check_same_thread=False, isolation_level=None)
        try:
            saver.executor.conn = conn  # what AsyncSqliteSaver.setup does
            saver.forget_cached()
            _put(saver, "t2")
            assert saver.executor._cur.connection is conn
            got = conn.execute("SELECT thread_id FROM tl_threads").fetchall()
            assert got == [("t2",)]
        finally:
            saver.executor.conn = saver.conn
            conn.close()
        names = saver.conn.execute("SELECT thread_id FROM tl_threads").fetchall()
        assert names == [("t1",)]


def test_no_statement_left_pending_after_a_save(tmp_path: os.PathLike) -> None:
    path = str(tmp_path / "c.db")
    with SqliteSaver.from_conn_string(path) as saver:
        for i in range(3):
            _put(saver, f"t{i}")
        assert not saver.conn.in_transaction
        probe = sqlite3.connect(path, isolation_level=None)
        try:
            # a reader still holding a snapshot would stop a TRUNCATE checkpoint
            busy, _, _ = probe.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            probe.close()
        assert busy == 0
        assert os.path.getsize(path + "-wal") == 0


def test_an_op_without_a_plan_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match="no plan for object"):
        queries.plan(object())  # type: ignore[arg-type]


def test_a_closed_connection_is_a_storage_error() -> None:
    """Review finding (session 8): every call raised a bare sqlite3.ProgrammingError."""
    import asyncio

    saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    saver.setup()
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(cfg, empty_checkpoint(), {"step": 0}, {})
    saver.conn.close()
    with pytest.raises(StorageError, match="cannot be used"):
        saver.get_tuple(cfg)
    with pytest.raises(StorageError, match="cannot be used"):
        list(saver.list(cfg))
    with pytest.raises(StorageError, match="cannot be used"):
        saver.put(cfg, empty_checkpoint(), {"step": 1}, {})
    with pytest.raises(StorageError, match="cannot be used"):
        asyncio.run(saver.aget_tuple(cfg))


def test_public_cursor_runs_sql_of_ones_own_and_commits(tmp_path: os.PathLike) -> None:
    """LangGraph's ``SqliteSaver.cursor()``: SQL of the user's own on the saver's
    connection, committed at the block's end; the saver forgets what it
    remembered of rows the block changed."""
    path = str(tmp_path / "c.db")
    with SqliteSaver.from_conn_string(path) as saver:
        _put(saver, "t1")
        assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is not None
        with saver.cursor() as cur:
            cur.execute("CREATE TABLE notes (x)")
            cur.execute("INSERT INTO notes VALUES (1)")
            cur.execute("DELETE FROM tl_writes")
            cur.execute("DELETE FROM tl_checkpoints")
        assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is None
        other = sqlite3.connect(path)
        assert other.execute("SELECT x FROM notes").fetchall() == [(1,)]
        other.close()
        _put(saver, "t1")  # the saver works on after the block
        assert saver.get_tuple({"configurable": {"thread_id": "t1"}}).pending_writes
    with pytest.raises(Exception, match="closed"):
        with saver.cursor():
            pass
