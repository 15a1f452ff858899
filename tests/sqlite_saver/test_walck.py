"""Background WAL checkpoints (sqlite/walck.py): only on a WAL file the saver
opened, triggered by rows written, stopped by close(); nothing read differs."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.walck import WalCheckpointer


def _put(saver: SqliteSaver, thread_id: str, n: int) -> str:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=n))
    cp["channel_values"] = {"n": n}
    cp["channel_versions"] = {"n": str(n)}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saver.put(config, cp, {"source": "loop", "step": n}, {"n": str(n)})
    return cp["id"]


def test_checkpoints_run_in_the_background_and_reads_are_exact(tmp_path) -> None:
    path = str(tmp_path / "w.db")
    ids = {}
    with SqliteSaver.from_conn_string(path) as saver:
        assert saver.walck is not None and saver.executor.on_commit is not None
        saver.walck.every = 8
        for i in range(60):
            ids[f"t{i}"] = _put(saver, f"t{i}", i)
        walck = saver.walck
        walck.close()  # waits for a running checkpoint
        assert walck.runs >= 1
        for i in range(60):
            got = saver.get_tuple({"configurable": {"thread_id": f"t{i}"}})
            assert got.checkpoint["id"] == ids[f"t{i}"]
            assert got.checkpoint["channel_values"] == {"n": i}
    assert saver.walck is None
    with sqlite3.connect(path) as conn:  # the file holds every row
        assert conn.execute("SELECT count(*) FROM tl_checkpoints").fetchone()[0] == 60


def test_only_files_the_saver_opened(tmp_path) -> None:
    with SqliteSaver.from_conn_string(":memory:") as saver:
        assert saver.walck is None
    conn = sqlite3.connect(str(tmp_path / "u.db"), isolation_level=None, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    assert saver.walck is None and saver.executor.on_commit is None
    conn.close()


def test_trigger_counts_rows_and_close_stops_it(tmp_path) -> None:
    path = str(tmp_path / "c.db")
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x)")
        walck = WalCheckpointer(path, every=10)
        conn.execute("INSERT INTO t VALUES (1)")
        walck.committed(5)  # below the threshold: nothing starts
        assert walck._thread is None
        walck.committed(12)
        assert walck._thread is not None
        walck._thread.join()
        assert walck.runs == 1
        walck.close()
        walck.committed(100)  # closed: no new checkpoint
        assert walck.runs == 1 and not walck._thread.is_alive() and walck._conn is None


def _no_thread(self) -> None:
    raise RuntimeError("can't start new thread")


def test_a_thread_that_cannot_start_is_skipped(tmp_path, monkeypatch) -> None:
    """A committed put returns although no checkpoint thread could start, and
    close() still works and closes the connection (found in review)."""
    path = str(tmp_path / "s.db")
    with SqliteSaver.from_conn_string(path) as saver:
        saver.walck.every = 1
        with monkeypatch.context() as patch:
            patch.setattr(threading.Thread, "start", _no_thread)
            cp_id = _put(saver, "t", 1)
        assert saver.walck._thread is None and saver.walck.runs == 0
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["id"] == cp_id
        _put(saver, "t", 2)  # threads start again
        saver.walck._thread.join()
        assert saver.walck.runs == 1
        conn = saver.conn
    with pytest.raises(sqlite3.ProgrammingError):  # closed
        conn.execute("SELECT 1")


def test_a_failing_on_commit_never_fails_a_committed_put(tmp_path) -> None:
    path = str(tmp_path / "o.db")
    with SqliteSaver.from_conn_string(path) as saver:

        def boom(changes: int) -> None:
            raise RuntimeError("hook failed")

        saver.executor.on_commit = boom
        cp_id = _put(saver, "t", 1)
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["id"] == cp_id


def test_close_closes_the_connection_when_stopping_checkpoints_fails(tmp_path) -> None:
    path = str(tmp_path / "x.db")
    ctx = SqliteSaver.from_conn_string(path)
    saver = ctx.__enter__()
    conn = saver.conn

    def fail() -> None:
        raise RuntimeError("join failed")

    saver.walck.close = fail
    with pytest.raises(RuntimeError, match="join failed"):
        ctx.__exit__(None, None, None)
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")


def test_the_checkpoint_connection_runs_at_full(tmp_path, monkeypatch) -> None:
    """Its own level decides whether a checkpoint syncs before copying frames:
    FULL even where connections start at OFF (a build default)."""
    path = str(tmp_path / "f.db")
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x)")
        connect = sqlite3.connect

        def connect_off(*args, **kwargs) -> sqlite3.Connection:
            opened = connect(*args, **kwargs)
            opened.execute("PRAGMA synchronous = OFF")
            return opened

        monkeypatch.setattr(sqlite3, "connect", connect_off)
        walck = WalCheckpointer(path, every=1)
        conn.execute("INSERT INTO t VALUES (1)")
        walck.committed(1)
        walck._thread.join()
        assert walck.runs == 1
        assert walck._conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        walck.close()


async def test_the_async_saver_checkpoints_in_the_background_too(tmp_path) -> None:
    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = str(tmp_path / "a.db")
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        walck = saver.walck
        assert walck is not None and saver.executor.on_commit == saver._wal_committed
        walck.every = 8
        ids = []
        for i in range(40):
            cp = empty_checkpoint()
            cp["id"] = str(uuid6(clock_seq=i))
            cp["channel_values"] = {"n": i}
            cp["channel_versions"] = {"n": str(i)}
            await saver.aput(config, cp, {"source": "loop", "step": i}, {"n": str(i)})
            ids.append(cp["id"])
        got = await saver.aget_tuple(config)
        assert got.checkpoint["id"] == ids[-1] and got.checkpoint["channel_values"] == {"n": 39}
    assert saver.walck is None and walck._closed and walck._conn is None
    assert walck.runs >= 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM tl_checkpoints").fetchone()[0] == 40


async def test_the_async_saver_leaves_connections_it_was_given_alone(tmp_path) -> None:
    import aiosqlite

    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
        assert saver.walck is None
    async with aiosqlite.connect(str(tmp_path / "g.db"), isolation_level=None) as conn:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        assert saver.walck is None and saver.executor.on_commit is None


async def test_a_failing_on_commit_never_fails_an_async_put(tmp_path) -> None:
    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "f.db")) as saver:

        def boom(changes: int) -> None:
            raise RuntimeError("walck broke")

        saver.executor.on_commit = boom
        out = await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert (await saver.aget_tuple(out)) is not None
