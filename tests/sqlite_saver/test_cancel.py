"""A cancelled async transaction, or a failing ROLLBACK, never leaves a FULL
connection at synchronous NORMAL nor a transaction open: aiosqlite's worker
runs a queued job even when its awaiting task is cancelled, so a cancelled
caller sees CancelledError only once its flow has settled (found in review).
Since a flow runs in one hop (sqlite/worker.py) a cancel stops it at its next
op or before its COMMIT and it rolls back; one not started is skipped."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.checkpoint.sqlite.durability import RELAX
from threadloom.errors import StorageError

FULL = 2
CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _one(op):
    return (yield op)


def _acquire(thread_id: str = "t") -> lo.AcquireLease:
    return lo.AcquireLease(thread_id, "me", str(uuid6()), 60_000)


async def _level(saver: AsyncSqliteSaver) -> int:
    async with saver.conn.execute("PRAGMA synchronous") as cur:
        return (await cur.fetchone())[0]


async def _cancel_at(saver: AsyncSqliteSaver, sql: str, flow, write: bool = True) -> asyncio.Task:
    """Run ``flow`` and cancel it from the SQLite trace callback when ``sql``
    starts on the worker thread: the statement waits until the loop has called
    ``cancel()`` (the flow, on that thread, sees it from its next op on)."""
    loop = asyncio.get_running_loop()
    box: dict[str, asyncio.Task] = {}

    def trace(text: str) -> None:
        if text == sql and "t" in box:
            asked = threading.Event()

            def cancel() -> None:
                box.pop("t").cancel()
                asked.set()

            loop.call_soon_threadsafe(cancel)
            asked.wait(30)

    await saver.conn.set_trace_callback(trace)
    task = asyncio.ensure_future(saver._arun(flow, write))
    box["t"] = task
    with pytest.raises(asyncio.CancelledError):
        await task
    await saver.conn.set_trace_callback(None)
    return task


@pytest.mark.parametrize("sql", [RELAX, "BEGIN IMMEDIATE", "COMMIT", "PRAGMA synchronous = FULL"])
async def test_cancel_at_any_control_statement_of_a_relaxed_lease(tmp_path: Path, sql) -> None:
    path = str(tmp_path / "a.db")
    async with AsyncSqliteSaver.from_conn_string(path, synchronous="FULL") as saver:
        task = await _cancel_at(saver, sql, _one(_acquire()))
        assert task.cancelled()
        assert not saver.conn.in_transaction
        assert await _level(saver) == FULL
        # later writes commit (not a SAVEPOINT inside a leftover transaction)
        await saver.aput(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert not saver.conn.in_transaction
        assert await _level(saver) == FULL
    async with AsyncSqliteSaver.from_conn_string(path) as again:
        assert await again.aget_tuple(CONFIG) is not None  # durable after close


@pytest.mark.parametrize("sync", ["FULL", "NORMAL"])
async def test_cancel_before_begin_ran_leaves_no_transaction(tmp_path: Path, sync) -> None:
    path = str(tmp_path / "b.db")
    async with AsyncSqliteSaver.from_conn_string(path, synchronous=sync) as saver:
        await _cancel_at(saver, "BEGIN IMMEDIATE", _one(_acquire()))
        assert not saver.conn.in_transaction
        await saver.aput(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert not saver.conn.in_transaction
    async with AsyncSqliteSaver.from_conn_string(path) as again:
        assert await again.aget_tuple(CONFIG) is not None


async def test_cancel_before_a_read_begin_ran(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "r.db")) as saver:
        await saver.aput(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
        await _cancel_at(saver, "BEGIN", lo.read_flow("t"), write=False)
        assert not saver.conn.in_transaction


async def test_a_flow_cancelled_before_the_worker_started_it_never_runs(tmp_path: Path) -> None:
    """The whole flow is one job on aiosqlite's thread (sqlite/worker.py): a
    cancel landing while it waits in the queue skips it."""
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "q.db")) as saver:
        gate = threading.Event()
        blocker = asyncio.ensure_future(saver.conn._execute(gate.wait, 30))
        task = asyncio.ensure_future(saver._arun(_one(_acquire()), True))
        await asyncio.sleep(0.01)  # queued behind the blocker
        task.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await blocker is True
        assert await saver._arun(lo.read_flow("t")) is None  # never acquired
        assert not saver.conn.in_transaction


async def test_a_cancel_landing_mid_flow_rolls_it_back(tmp_path: Path) -> None:
    """The flow runs on aiosqlite's thread; its caller is cancelled after its
    lease op ran: the flow stops before its next op and nothing is kept (a
    lease acquired by a cancelled caller would never be released)."""
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "g.db")) as saver:
        started, gate = threading.Event(), threading.Event()

        def gated():
            yield _acquire()
            started.set()
            gate.wait(30)  # on the worker thread, inside the transaction
            yield lo.ReadLease("t")  # not sent: the flow stops before it

        task = asyncio.ensure_future(saver._arun(gated(), True))
        assert await asyncio.to_thread(started.wait, 30)
        task.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not saver.conn.in_transaction
        assert await saver._arun(lo.read_flow("t")) is None  # rolled back


async def test_many_cancellations_leave_full_and_no_transaction(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    async with AsyncSqliteSaver.from_conn_string(path, synchronous="FULL") as saver:
        for i in range(60):
            task = asyncio.ensure_future(saver._arun(_one(_acquire(f"t{i}")), True))
            for _ in range(i % 7):
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            assert await _level(saver) == FULL  # queued after the task's statements
            assert not saver.conn.in_transaction


def _failing_rollbacks(ex, calls: list[str]):
    """ROLLBACK fails: the first time before rolling back, later after it."""
    run = ex._exec_script

    def script(sql: str) -> None:
        if sql == "ROLLBACK":
            calls.append(sql)
            if len(calls) > 1:
                run(sql)
            raise StorageError("rollback failed")
        run(sql)

    return script


def test_a_failing_rollback_still_restores_full(tmp_path: Path, monkeypatch) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "s.db"), synchronous="FULL") as saver:
        calls: list[str] = []
        monkeypatch.setattr(
            saver.executor, "_exec_script", _failing_rollbacks(saver.executor, calls)
        )

        def mixed():
            yield _acquire()
            yield lo.CheckLease("t", "x", 60_000)  # refused in a relaxed transaction

        with pytest.raises(StorageError):
            saver._run(mixed(), True)
        assert calls == ["ROLLBACK", "ROLLBACK"]
        assert not saver.conn.in_transaction
        assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == FULL


async def test_async_a_failing_rollback_still_restores_full(tmp_path: Path, monkeypatch) -> None:
    """The async saver runs the sync executor on aiosqlite's thread: the same rule."""
    path = str(tmp_path / "as.db")
    async with AsyncSqliteSaver.from_conn_string(path, synchronous="FULL") as saver:
        ex, calls = saver.executor, []
        monkeypatch.setattr(ex, "_exec_script", _failing_rollbacks(ex, calls))

        def mixed():
            yield _acquire()
            yield lo.CheckLease("t", "x", 60_000)

        with pytest.raises(StorageError):
            await saver._arun(mixed(), True)
        assert calls == ["ROLLBACK", "ROLLBACK"]
        assert not saver.conn.in_transaction and await _level(saver) == FULL


async def test_cancel_at_a_savepoint_in_the_callers_transaction(tmp_path: Path) -> None:
    """The saver's SAVEPOINT inside the caller's transaction is rolled back and
    released when the cancel lands on it: none of its rows commit with theirs."""
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "p.db")) as saver:
        async with saver.conn.execute("BEGIN"):
            pass
        await _cancel_at(saver, "SAVEPOINT tl", _one(_acquire()))
        assert saver.conn.in_transaction  # the caller's, still open
        with pytest.raises(sqlite3.OperationalError, match="no such savepoint"):
            async with saver.conn.execute("RELEASE tl"):
                pass
        async with saver.conn.execute("COMMIT"):
            pass
        assert await saver._arun(lo.read_flow("t")) is None


async def test_a_cancel_after_a_puts_last_op_commits_it(tmp_path: Path) -> None:
    """Cancelled while the checkpoint row (a put's last op) is written: the put
    commits. Rolling back then would leave the codec's caches, updated once the
    ops answered, describing a checkpoint that is not stored; later saves and
    another connection must read what was committed."""
    path = str(tmp_path / "l.db")
    loop = asyncio.get_running_loop()
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        config = await saver.aput(CONFIG, _cp(0), {"source": "input", "step": -1}, {"a": "1"})
        box: dict[str, asyncio.Task] = {}

        def trace(text: str) -> None:
            if text.startswith("INSERT OR REPLACE INTO tl_checkpoints") and "t" in box:
                asked = threading.Event()

                def cancel() -> None:
                    box.pop("t").cancel()
                    asked.set()

                loop.call_soon_threadsafe(cancel)
                asked.wait(30)

        await saver.conn.set_trace_callback(trace)
        cp = _cp(1)
        box["t"] = task = asyncio.ensure_future(
            saver.aput(config, cp, {"source": "loop", "step": 0}, {"a": "2"})
        )
        with pytest.raises(asyncio.CancelledError):
            await task
        await saver.conn.set_trace_callback(None)
        got = await saver.aget_tuple(CONFIG)
        assert got.checkpoint["id"] == cp["id"] and got.checkpoint["channel_values"] == {"a": 1}
        later = _cp(2)
        await saver.aput(got.config, later, {"source": "loop", "step": 1}, {"a": "3"})
    async with AsyncSqliteSaver.from_conn_string(path) as again:
        got = await again.aget_tuple(CONFIG)
        assert got.checkpoint["id"] == later["id"] and got.checkpoint["channel_values"] == {"a": 2}
        assert got.parent_config["configurable"]["checkpoint_id"] == cp["id"]


def _cp(n: int) -> dict:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=n))
    cp["channel_values"] = {"a": n}
    cp["channel_versions"] = {"a": str(n + 1)}
    return cp
