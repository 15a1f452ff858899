"""Repeated reads (sqlite/memo.py ``Reads``): a read of an unchanged database
sends no SELECT, and any change since (another connection's commit, this
connection's own writes, another saver or the caller's SQL on it) is seen."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.memo import ABSENT, READ_ROWS, Reads

BIG = "x" * 300


def _config(checkpoint_id: str | None = None) -> dict[str, Any]:
    conf = {"thread_id": "t", "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _put(saver: SqliteSaver, value: Any) -> str:
    version = f"{1:032}.0.8147236863931789"
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    checkpoint["channel_values"] = {"a": value}
    checkpoint["channel_versions"] = {"a": version}
    saver.put(_config(), checkpoint, {"step": 1}, {"a": version})
    return checkpoint["id"]


def _selects(sent: list[str]) -> list[str]:
    return [s for s in sent if s.startswith(("SELECT", "WITH"))]


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "r.db")


def test_an_unchanged_database_is_read_without_selects(path) -> None:
    with SqliteSaver.from_conn_string(path) as saver:
        cid = _put(saver, {"text": BIG})
        saver.put_writes(_config(cid), [("a", BIG)], "task")
        sent: list[str] = []
        saver.conn.set_trace_callback(sent.append)
        first = saver.get_tuple(_config())  # right after our write: no check, nothing kept
        assert "PRAGMA data_version" not in sent and _selects(sent)
        saver.get_tuple(_config())
        listed = [t.checkpoint["id"] for t in saver.list(_config(), limit=5)]
        sent.clear()
        again = saver.get_tuple(_config())
        assert sent == ["BEGIN", "PRAGMA data_version", "COMMIT"]
        assert again.checkpoint == first.checkpoint and again.pending_writes == [("task", "a", BIG)]
        assert [t.checkpoint["id"] for t in saver.list(_config(), limit=5)] == listed
        assert _selects(sent) == []


def test_another_connection_commit_is_seen(path) -> None:
    with SqliteSaver.from_conn_string(path) as reader, SqliteSaver.from_conn_string(path) as writer:
        cid = _put(writer, {"text": BIG})
        assert reader.get_tuple(_config()).pending_writes == []
        writer.put_writes(_config(cid), [("a", BIG)], "task")
        assert reader.get_tuple(_config()).pending_writes == [("task", "a", BIG)]
        newer = _put(writer, 7)
        assert reader.get_tuple(_config()).checkpoint["id"] == newer


def test_own_and_shared_connection_changes_are_seen(path) -> None:
    with SqliteSaver.from_conn_string(path) as saver:
        cid = _put(saver, {"text": BIG})
        saver.put_writes(_config(cid), [("a", BIG)], "task")
        assert len(saver.get_tuple(_config()).pending_writes) == 1
        saver.conn.execute("DELETE FROM tl_writes")  # the caller's SQL on the connection
        assert saver.get_tuple(_config()).pending_writes == []
        other = SqliteSaver(saver.conn)  # another saver sharing the connection
        newer = _put(other, 8)
        assert saver.get_tuple(_config()).checkpoint["id"] == newer
        saver.delete_thread("t")
        assert saver.get_tuple(_config()) is None


def test_a_rolled_back_caller_transaction_is_not_trusted(path) -> None:
    with SqliteSaver.from_conn_string(path) as saver:
        _put(saver, 1)
        saver.get_tuple(_config())
        conn: sqlite3.Connection = saver.conn
        conn.execute("BEGIN")
        newer = _put(saver, 2)  # inside the caller's transaction: a savepoint
        assert saver.get_tuple(_config()).checkpoint["id"] == newer
        conn.execute("ROLLBACK")
        assert saver.get_tuple(_config()).checkpoint["id"] != newer


def test_results_are_copies_and_long_ones_are_not_kept() -> None:
    reads = Reads()
    reads.validate(1, 10)
    reads.put(("k",), [1, 2])
    got = reads.get(("k",))
    got.append(3)
    assert reads.get(("k",)) == [1, 2]
    reads.put(("long",), list(range(READ_ROWS + 1)))
    assert reads.get(("long",)) is ABSENT
    reads.validate(1, 11)  # this connection changed a row: nothing holds
    assert reads.get(("k",)) is ABSENT
