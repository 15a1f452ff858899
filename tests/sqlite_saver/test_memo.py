"""The executor's memo (sqlite/memo.py): thread ids, diff bases and lease rows
are answered without SQL across transactions, and asked again as soon as
anyone else may have changed them (another connection, another saver on the
same connection, a rolled-back caller transaction)."""

from __future__ import annotations

import sqlite3

import pytest

from threadloom.checkpoint.base import uuid6
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.memo import LIMIT, Memo
from threadloom.checkpoint.storage import ops as o


def _row(parent: o.CheckpointRow | None = None, thread: str = "t") -> o.CheckpointRow:
    cid = str(uuid6())
    return o.CheckpointRow(
        thread, "", cid, parent.checkpoint_id if parent else None, "tl1", b"x", "{}", None
    )


def _save(saver: SqliteSaver, row: o.CheckpointRow) -> o.SaveResult:
    with saver.executor.transaction(True):
        base = row.parent_checkpoint_id
        return saver.executor.execute(o.SaveCheckpoint(row, (), (), base=base))


def _traced(saver: SqliteSaver) -> list[str]:
    seen: list[str] = []
    saver.executor.tracer = lambda sql, params: seen.append(sql)
    return seen


def _lookups(seen: list[str]) -> list[str]:
    return [s for s in seen if "tl_threads" in s or s.startswith(("SELECT EXISTS", "SELECT h"))]


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "m.db")


def test_a_chain_of_saves_asks_thread_and_base_once(path) -> None:
    with SqliteSaver.from_conn_string(path) as saver:
        first = _row()
        _save(saver, first)
        seen = _traced(saver)
        row = first
        for _ in range(3):
            row = _row(row)
            assert not _save(saver, row).stale
        assert _lookups(seen) == []
        assert seen.count("PRAGMA data_version") == 3  # one check per transaction
        assert len(seen) == 6


def test_another_connection_deleting_the_base_is_seen(path) -> None:
    with SqliteSaver.from_conn_string(path) as a, SqliteSaver.from_conn_string(path) as b:
        first = _row()
        _save(a, first)
        second = _row(first)
        assert not _save(a, second).stale
        with b.executor.transaction(True):
            b.executor.execute(o.DeleteCheckpoints("t", "", (second.checkpoint_id,)))
        seen = _traced(a)
        assert _save(a, _row(second)).stale  # asked again, found gone
        assert any(s.startswith("SELECT EXISTS") for s in seen)


def test_another_connection_recreating_the_thread_is_seen(path) -> None:
    with SqliteSaver.from_conn_string(path) as a, SqliteSaver.from_conn_string(path) as b:
        _save(a, _row())
        with b.executor.transaction(True):
            b.executor.execute(o.DeleteCheckpoints("t", "", None))  # thread row goes
            b.executor.execute(o.SaveCheckpoint(_row(thread="other"), (), ()))
            b.executor.execute(o.SaveCheckpoint(_row(), (), ()))  # t gets a new id
        last = _row()
        _save(a, last)
        with a.executor.transaction(False):
            got = a.executor.execute(o.GetCheckpoint("t", "", last.checkpoint_id))
        assert got == last  # written under the thread's current id: readable


def _two_savers_one_connection() -> tuple[SqliteSaver, SqliteSaver, o.CheckpointRow]:
    """Savers a and b sharing one connection (data_version cannot tell them apart);
    a saved a chain of two checkpoints and returns the second."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    a, b = SqliteSaver(conn), SqliteSaver(conn)
    a.setup()
    first = _row()
    _save(a, first)
    second = _row(first)
    _save(a, second)
    return a, b, second


def test_another_saver_on_the_same_connection_is_seen() -> None:
    a, b, second = _two_savers_one_connection()
    with b.executor.transaction(True):
        b.executor.execute(o.DeleteCheckpoints("t", "", (second.checkpoint_id,)))
    assert _save(a, _row(second)).stale
    a.conn.close()


def test_a_read_in_between_does_not_hide_another_savers_delete() -> None:
    # a transaction that never validated the memo must not mark the count as seen
    a, b, second = _two_savers_one_connection()
    b.delete_thread("t")
    assert a.get_tuple({"configurable": {"thread_id": "other", "checkpoint_ns": ""}}) is None
    assert _save(a, _row(second)).stale
    a.conn.close()


def test_a_rolled_back_caller_transaction_is_forgotten() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    conn.execute("BEGIN")
    first = _row()
    _save(saver, first)  # creates the thread row inside the caller's transaction
    conn.execute("ROLLBACK")
    second = _row()
    _save(saver, second)
    with saver.executor.transaction(False):
        assert saver.executor.execute(o.GetCheckpoint("t", "", None)) == second
    conn.close()


def test_our_own_rollback_is_forgotten(path) -> None:
    with SqliteSaver.from_conn_string(path) as saver:
        with pytest.raises(RuntimeError):
            with saver.executor.transaction(True):
                saver.executor.execute(o.SaveCheckpoint(_row(), (), ()))
                raise RuntimeError("roll back")
        assert saver.executor.memo.rows == {}
        row = _row()
        _save(saver, row)
        assert saver.conn.execute("SELECT count(*) FROM v_checkpoints").fetchone() == (1,)


def _lease(saver: SqliteSaver, op):
    with saver.executor.transaction(True):
        return saver.executor.execute(op)


def test_lease_fence_is_answered_from_memory_until_someone_writes(path) -> None:
    with SqliteSaver.from_conn_string(path) as a, SqliteSaver.from_conn_string(path) as b:
        assert _lease(a, lo.AcquireLease("t", "me", "tok", 60_000)) is None
        seen = _traced(a)  # the acquire wrote the whole row: known
        for _ in range(3):
            assert _lease(a, lo.CheckLease("t", "tok", 60_000)) == ""
        assert not any("tl_leases" in s for s in seen)
        assert _lease(b, lo.RequestStop("t", "cancel")) is not None  # another process
        assert _lease(a, lo.CheckLease("t", "tok", 60_000)) == "cancel"
        assert _lease(a, lo.ReleaseLease("t", "tok")) is None
        assert _lease(a, lo.CheckLease("t", "tok", 60_000)) is None  # released: asked again
        assert _lease(a, lo.ReadLease("t")) is None
        assert _lease(a, lo.AcquireLease("t", "me", "tok2", 60_000)) is None
        assert a.conn.execute("SELECT holder, token, stop FROM tl_leases").fetchall() == [
            ("me", "tok2", "")
        ]
        assert _lease(a, lo.ReadLease("t")).token == "tok2"


def test_memo_is_bounded_and_keeps_only_positive_answers() -> None:
    memo = Memo()
    memo.learn("base", (1, "", b"x"), (0,))
    memo.learn("thread", ("t",), [])
    memo.learn("lease", ("t",), None)
    assert memo.rows == {}
    for i in range(LIMIT + 1):
        memo.learn("thread", (f"t{i}",), [(i,)])
    assert len(memo.rows) <= LIMIT
    memo.wrote("saved", (1, "", b"y", None))
    assert memo.rows[("base", 1, "", b"y")] == (1,)
    memo.wrote("drop", ("t",))
    assert memo.rows == {}
