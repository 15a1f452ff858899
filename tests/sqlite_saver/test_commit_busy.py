"""A COMMIT that fails (SQLITE_BUSY in a rollback-journal mode keeps the
transaction open) is rolled back: later saves commit instead of nesting as
SAVEPOINTs in a transaction nobody commits (they were lost at close)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.errors import StorageError

CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
META = {"source": "input", "step": -1}


def _reader(path: str) -> sqlite3.Connection:
    """A reader holding a SHARED lock: a DELETE-mode COMMIT cannot get EXCLUSIVE."""
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM tl_checkpoints").fetchall()
    return reader


def _stored(path: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM tl_checkpoints").fetchone()[0]


def test_a_busy_commit_is_rolled_back(tmp_path: Path) -> None:
    path = str(tmp_path / "b.db")
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    saver = SqliteSaver(conn, busy_timeout=0.05)
    saver.setup()
    conn.execute("PRAGMA journal_mode = DELETE")  # the caller's choice
    reader = _reader(path)
    with pytest.raises(StorageError, match="locked"):
        saver.put(CONFIG, empty_checkpoint(), META, {})
    assert not conn.in_transaction
    reader.execute("COMMIT")
    reader.close()
    saved = saver.put(CONFIG, empty_checkpoint(), META, {})
    assert not conn.in_transaction
    conn.close()
    assert _stored(path) == 1
    with SqliteSaver.from_conn_string(path) as again:
        got = again.get_tuple(CONFIG)
        assert got.checkpoint["id"] == saved["configurable"]["checkpoint_id"]


async def test_async_a_busy_commit_is_rolled_back(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    conn = await aiosqlite.connect(path, isolation_level=None, check_same_thread=False)
    saver = AsyncSqliteSaver(conn, busy_timeout=0.05)
    await saver.setup()
    async with conn.execute("PRAGMA journal_mode = DELETE"):
        pass
    reader = _reader(path)
    with pytest.raises(StorageError, match="locked"):
        await saver.aput(CONFIG, empty_checkpoint(), META, {})
    assert not conn.in_transaction
    reader.execute("COMMIT")
    reader.close()
    await saver.aput(CONFIG, empty_checkpoint(), META, {})
    assert not conn.in_transaction
    await conn.close()
    assert _stored(path) == 1
