"""SQLite specifics: setup/migrations, errors, PRAGMAs, threads, processes, async bridge."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.checkpoint.sqlite.schema import MIGRATIONS
from threadloom.errors import ConfigError, StorageError


def _put(saver, thread: str = "t", value: object = 1) -> dict:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=1))
    cp["channel_values"] = {"x": value}
    cp["channel_versions"] = {"x": str(uuid6())}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"source": "loop", "step": 1}, cp["channel_versions"])


def test_setup_is_idempotent_and_versioned(tmp_path) -> None:
    path = str(tmp_path / "s.db")
    for _ in range(2):
        with SqliteSaver.from_conn_string(path) as saver:
            saver.setup()
            _put(saver)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT max(v) FROM tl_migrations").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT count(*) FROM tl_checkpoints").fetchone()[0] == 2


def test_not_a_database_and_newer_schema(tmp_path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(StorageError, match="not a threadloom SQLite database"):
        with SqliteSaver.from_conn_string(str(junk)):
            pass
    newer = str(tmp_path / "newer.db")
    with SqliteSaver.from_conn_string(newer):
        pass
    conn = sqlite3.connect(newer)
    conn.execute("INSERT INTO tl_migrations (v) VALUES (999)")
    conn.commit()
    with pytest.raises(StorageError, match="newer than this threadloom"):
        with SqliteSaver.from_conn_string(newer):
            pass


def test_synchronous_is_configurable(tmp_path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "f.db"), synchronous="FULL") as saver:
        assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert saver.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    with pytest.raises(ConfigError):
        SqliteSaver(sqlite3.connect(":memory:"), synchronous="SOMETIMES")


def test_given_connection_is_not_closed_and_its_transaction_is_kept() -> None:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    with SqliteSaver(conn) as saver:
        _put(saver)
    assert conn.execute("SELECT count(*) FROM tl_checkpoints").fetchone()[0] == 1
    conn.execute("CREATE TABLE mine (x)")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO mine VALUES (1)")
    _put(SqliteSaver(conn))  # runs inside a savepoint of the caller's transaction
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM mine").fetchone()[0] == 0


def test_many_threads_one_saver(tmp_path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "mt.db")) as saver:
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for j in range(15):
                    _put(saver, f"thread-{i}", "v" * (j * 40))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert saver.stats()["checkpoints"] == 90


def test_two_connections_on_one_file(tmp_path) -> None:
    """Two savers (as two processes would) write the same file without 'locked'."""
    path = str(tmp_path / "shared.db")
    with SqliteSaver.from_conn_string(path) as a, SqliteSaver.from_conn_string(path) as b:
        barrier = threading.Barrier(2)

        def work(saver, name: str) -> None:
            barrier.wait()
            for _ in range(20):
                _put(saver, name, "x" * 500)

        threads = [threading.Thread(target=work, args=(s, n)) for s, n in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(list(a.list(None))) == 40
        assert (
            b.get_tuple({"configurable": {"thread_id": "a"}}).checkpoint["channel_values"]["x"]
            == "x" * 500
        )


def test_tracer_sees_every_statement() -> None:
    seen: list[str] = []
    with SqliteSaver.from_conn_string(
        ":memory:", tracer=lambda sql, params: seen.append(sql)
    ) as saver:
        config = _put(saver)
        seen.clear()
        saver.codec.states.clear()
        saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert 1 <= len(seen) <= 6  # checkpoint, (ancestors), refs, (blobs), writes
        assert saver.get_tuple(config) is not None


async def test_async_saver_sync_methods_refuse_its_own_loop(tmp_path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        with pytest.raises(StorageError, match="from another thread"):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
        config = await asyncio.to_thread(_put, saver)  # another thread: bridged
        tup = await saver.aget_tuple(config)
        assert tup.checkpoint["channel_values"] == {"x": 1}
        listed = await asyncio.to_thread(lambda: list(saver.list(None)))
        assert [t.config for t in listed] == [config]


async def test_async_saver_on_a_given_connection(tmp_path) -> None:
    import aiosqlite

    conn = await aiosqlite.connect(str(tmp_path / "g.db"))
    try:
        async with AsyncSqliteSaver(conn) as saver:
            await saver.setup()
            cp = empty_checkpoint()
            stored = await saver.aput({"configurable": {"thread_id": "t"}}, cp, {}, {})
            assert (await saver.aget_tuple(stored)).config == stored
        async with conn.execute("SELECT count(*) FROM tl_checkpoints") as cur:
            assert (await cur.fetchone())[0] == 1  # still open: not ours to close
    finally:
        await conn.close()


def test_corrupt_blob_names_thread_checkpoint_and_channel() -> None:
    from threadloom.errors import CorruptBlobError

    with SqliteSaver.from_conn_string(":memory:") as saver:
        config = _put(saver, "t", ["a long message " * 20])
        saver.conn.execute("UPDATE tl_blobs SET data = x'c1c1c1'")
        saver.codec.chunks.clear()
        with pytest.raises(CorruptBlobError) as err:
            saver.get_tuple(config)
        assert (err.value.thread_id, err.value.channel) == ("t", "x")
        assert err.value.checkpoint_id == config["configurable"]["checkpoint_id"]
        saver.conn.execute("UPDATE tl_checkpoints SET data = x'00'")
        saver.codec.states.clear()
        with pytest.raises(CorruptBlobError, match="checkpoint"):
            saver.get_tuple(config)


def test_writer_recovers_when_another_process_deleted_its_bases(tmp_path) -> None:
    """A's caches say 'diff against the parent, reuse these chunks'; B deleted
    them. A's next put notices (stale), re-encodes in full and stays readable."""
    path = str(tmp_path / "race.db")
    with SqliteSaver.from_conn_string(path) as a, SqliteSaver.from_conn_string(path) as b:
        config, messages = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, []
        for i in range(5):
            messages = messages + [f"message {i} " * 20]
            cp = empty_checkpoint()
            cp["id"] = str(uuid6(clock_seq=i))
            cp["channel_values"] = {"messages": messages}
            cp["channel_versions"] = {"messages": f"{i + 1:032}.0.5"}
            config = a.put(config, cp, {"step": i}, cp["channel_versions"])
        b.delete_thread("t")
        messages = messages + ["after the purge " * 20]
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=9))
        cp["channel_values"] = {"messages": messages}
        cp["channel_versions"] = {"messages": f"{9:032}.0.5"}
        stored = a.put(config, cp, {"step": 9}, cp["channel_versions"])
        got = b.get_tuple(stored)
        assert got.checkpoint["channel_values"]["messages"] == messages


def _writer_process(path: str, name: str, n: int) -> None:
    with SqliteSaver.from_conn_string(path, busy_timeout=20.0) as saver:
        for i in range(n):
            _put(saver, name, f"{name} value {i} " * 30)


def test_several_processes_on_one_file(tmp_path) -> None:
    import multiprocessing

    path = str(tmp_path / "procs.db")
    with SqliteSaver.from_conn_string(path):
        pass  # schema first, so the writers race on data, not on setup
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer_process, args=(path, f"p{i}", 15)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    with SqliteSaver.from_conn_string(path) as saver:
        assert saver.stats()["checkpoints"] == 45
        latest = saver.get_tuple({"configurable": {"thread_id": "p2"}})
        assert latest.checkpoint["channel_values"]["x"] == "p2 value 14 " * 30
