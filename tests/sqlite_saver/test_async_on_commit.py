"""SqliteSaver and AsyncSqliteSaver: a failing background WAL checkpointer (the
executor's ``on_commit`` hook) is logged, not swallowed, and the write it
follows stays committed. (Was tests/sqlite_saver/test_aexecutor_on_commit.py, on the async
executor the saver no longer has: sqlite/worker.py.)"""

from __future__ import annotations

import logging
import sqlite3

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


async def test_failing_on_commit_is_logged_and_the_commit_stands(
    tmp_path, caplog, monkeypatch
) -> None:
    path = str(tmp_path / "c.db")
    calls: list[int] = []

    def broken(total_changes: int) -> None:
        calls.append(total_changes)
        raise RuntimeError("walck is broken")

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        assert saver.walck is not None
        monkeypatch.setattr(saver.walck, "committed", broken)
        with caplog.at_level(logging.WARNING, logger="threadloom.checkpoint.sqlite"):
            await saver.aput(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert not saver.conn.in_transaction
    assert len(calls) == 1
    (record,) = [r for r in caplog.records if r.name == "threadloom.checkpoint.sqlite"]
    assert record.levelno == logging.WARNING and path in record.getMessage()
    assert "on_commit" in record.getMessage() and "walck is broken" in str(record.exc_info[1])
    with sqlite3.connect(path) as check:  # committed, seen by another connection
        assert check.execute("SELECT count(*) FROM tl_checkpoints").fetchone() == (1,)


def test_sync_saver_logs_a_failing_on_commit_too(tmp_path, caplog, monkeypatch) -> None:
    path = str(tmp_path / "s.db")

    def broken(total_changes: int) -> None:
        raise RuntimeError("walck is broken")

    with SqliteSaver.from_conn_string(path) as saver:
        monkeypatch.setattr(saver.executor, "on_commit", broken)
        with caplog.at_level(logging.WARNING, logger="threadloom.checkpoint.sqlite"):
            saver.put(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
    (record,) = [r for r in caplog.records if r.name == "threadloom.checkpoint.sqlite"]
    assert "on_commit" in record.getMessage() and "walck is broken" in str(record.exc_info[1])
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT count(*) FROM tl_checkpoints").fetchone() == (1,)
