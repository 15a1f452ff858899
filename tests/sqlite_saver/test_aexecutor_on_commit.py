"""AsyncSqliteExecutor: a failing ``on_commit`` hook (background WAL checkpoints) is
logged, not swallowed, and the write it follows stays committed."""

from __future__ import annotations

import logging
import sqlite3

import aiosqlite

from threadloom.checkpoint.sqlite.aexecutor import AsyncSqliteExecutor


async def test_failing_on_commit_is_logged_and_the_commit_stands(tmp_path, caplog):
    path = str(tmp_path / "c.db")
    calls: list[int] = []

    def broken(total_changes: int) -> None:
        calls.append(total_changes)
        raise RuntimeError("walck is broken")

    async with aiosqlite.connect(path, isolation_level=None) as conn:
        executor = AsyncSqliteExecutor(conn, path)
        await executor.setup(True, [])
        await conn.execute("CREATE TABLE t (x INTEGER)")
        executor.on_commit = broken
        with caplog.at_level(logging.WARNING, logger="threadloom.checkpoint.sqlite"):
            async with executor.atransaction(True):
                await conn.execute("INSERT INTO t VALUES (42)")
        assert not conn.in_transaction
    assert len(calls) == 1
    (record,) = [r for r in caplog.records if r.name == "threadloom.checkpoint.sqlite"]
    assert record.levelno == logging.WARNING and path in record.getMessage()
    assert "on_commit" in record.getMessage() and "walck is broken" in str(record.exc_info[1])
    with sqlite3.connect(path) as check:  # committed, seen by another connection
        assert check.execute("SELECT x FROM t").fetchall() == [(42,)]
