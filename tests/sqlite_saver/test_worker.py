"""AsyncSqliteSaver runs each storage flow in one hop to aiosqlite's worker
thread (sqlite/worker.py): hops per call, list() pages, the private aiosqlite
API it pins, context variables, errors, and a loop that keeps running."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path

import aiosqlite
import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.checkpoint.sqlite.worker import check, hop
from threadloom.errors import ConfigError, StorageError

CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def _checkpoint(step: int) -> dict:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=step))
    cp["channel_values"] = {"a": step}
    cp["channel_versions"] = {"a": str(step + 1)}
    return cp


def _count_hops(saver: AsyncSqliteSaver, monkeypatch) -> list[str]:
    """Every job queued on the saver's connection from now on."""
    calls: list[str] = []
    execute = saver.conn._execute

    async def counted(fn, *args, **kwargs):
        calls.append(getattr(getattr(fn, "fn", fn), "__name__", repr(fn)))
        return await execute(fn, *args, **kwargs)

    monkeypatch.setattr(saver.conn, "_execute", counted)
    return calls


async def _fill(saver: AsyncSqliteSaver, n: int) -> dict:
    config = CONFIG
    for step in range(n):
        cp = _checkpoint(step)
        meta = {"source": "loop", "step": step}
        config = await saver.aput(config, cp, meta, cp["channel_versions"])
    return config


async def test_one_hop_per_save_and_per_read(tmp_path: Path, monkeypatch) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "h.db")) as saver:
        calls = _count_hops(saver, monkeypatch)
        config = await _fill(saver, 3)
        assert calls == ["run", "run", "run"]
        calls.clear()
        await saver.aput_writes(config, [("a", 1), ("b", 2)], "task-1")
        found = await saver.aget_tuple(config)
        assert calls == ["run", "run"]
        assert found is not None and sorted(w[1] for w in found.pending_writes) == ["a", "b"]


async def test_list_is_one_hop_per_page_and_lazy(tmp_path: Path, monkeypatch) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "l.db")) as saver:
        await _fill(saver, 20)
        calls = _count_hops(saver, monkeypatch)
        steps = [
            t.metadata["step"] async for t in saver.alist({"configurable": {"thread_id": "t"}})
        ]
        assert steps == list(range(19, -1, -1))
        # pages of 8, then 16 (12 left), then the end: far fewer hops than items
        assert calls == ["page", "page", "page"]
        calls.clear()
        async for first in saver.alist({"configurable": {"thread_id": "t"}}):
            assert first.metadata["step"] == 19
            break
        assert calls == ["page"]  # stopping early reads no second page
        assert not saver.conn.in_transaction
        assert [t.metadata["step"] for t in await asyncio.to_thread(_sync_list, saver)] == list(
            range(19, -1, -1)
        )


def _sync_list(saver: AsyncSqliteSaver) -> list:
    return list(saver.list({"configurable": {"thread_id": "t"}}))


async def test_a_connection_without_the_private_api_fails_loudly() -> None:
    class Bare:
        pass

    with pytest.raises(ConfigError, match="_execute and _conn"):
        check(Bare())
    with pytest.raises(ConfigError, match="aiosqlite"):
        AsyncSqliteSaver(Bare())  # type: ignore[arg-type]


async def test_the_installed_aiosqlite_has_the_private_api() -> None:
    """Pins the assumption: if an aiosqlite upgrade drops them, this fails first."""
    async with aiosqlite.connect(":memory:") as conn:
        check(conn)
        assert await hop(conn, lambda: conn._conn.execute("SELECT 7").fetchone()) == (7,)


async def test_a_users_connection_still_works(tmp_path: Path) -> None:
    async with aiosqlite.connect(str(tmp_path / "u.db")) as conn:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        config = await _fill(saver, 2)
        found = await saver.aget_tuple(config)
        assert found is not None and found.metadata["step"] == 1


async def test_a_connection_awaited_after_the_saver_was_built(tmp_path: Path) -> None:
    conn = aiosqlite.connect(str(tmp_path / "late.db"))
    saver = AsyncSqliteSaver(conn)
    async with conn:
        config = await _fill(saver, 1)
        assert (await saver.aget_tuple(config)) is not None


async def test_the_callers_context_variables_reach_the_worker(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        WHO.set("caller")
        seen = await hop(saver.conn, lambda: (WHO.get(), threading.current_thread()))
        assert seen[0] == "caller" and seen[1] is not threading.current_thread()


async def test_errors_come_back_as_raised_and_the_loop_keeps_running(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "e.db")) as saver:

        def boom() -> None:
            raise ValueError("from the worker")

        with pytest.raises(ValueError, match="from the worker"):
            await hop(saver.conn, boom)
        gate = threading.Event()
        blocked = asyncio.ensure_future(hop(saver.conn, gate.wait, 30))
        for _ in range(5):  # the job ran on the worker: the loop went on meanwhile
            await asyncio.sleep(0)
        assert not blocked.done()
        gate.set()
        assert await blocked is True


async def test_a_job_raising_stopiteration_fails_instead_of_hanging(tmp_path: Path) -> None:
    """A future cannot hold StopIteration: left as is, the caller waited forever."""
    async with aiosqlite.connect(tmp_path / "s.db") as conn:

        def exhausted() -> None:
            next(iter(()))

        with pytest.raises(RuntimeError, match="exhausted iterator"):
            await asyncio.wait_for(hop(conn, exhausted), 5)


async def test_a_closed_connection_is_a_storage_error(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        await saver.aput(CONFIG, _checkpoint(0), {}, {"a": "1"})
        await saver.conn.close()
        with pytest.raises(StorageError, match="closed"):
            await saver.aget_tuple(CONFIG)
