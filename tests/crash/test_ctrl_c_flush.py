"""Ctrl-C landing while a sync run's final flush saves its queued steps
(``durability="async"``): the finished steps are still saved before the run
releases its thread. Before, the interrupted batch was left to the pool thread,
whose save came after the lease was released and was refused: the whole run
was lost (input included)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from typing_extensions import TypedDict

from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.graph import END, START, StateGraph


class State(TypedDict):
    n: int


def _chain() -> Any:
    builder = StateGraph(State)
    prev = START
    for i in range(6):
        builder.add_node(f"n{i}", lambda s: {"n": s["n"] + 1})
        builder.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    return builder.add_edge(prev, END)


@pytest.fixture
def late_pool(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The persister's pool job starts only once the run has returned (the worst
    schedule: on a busy GIL the pool thread often starts that late)."""
    from threadloom.pregel import pool

    held: list[Any] = []
    monkeypatch.setattr(pool.POOL, "spawn", held.append)
    return held


def test_ctrl_c_during_the_final_flush_loses_no_step(tmp_path, late_pool) -> None:
    path, cfg = str(tmp_path / "c.db"), {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(path) as saver:
        inner, writes = saver._run, []

        def run(flow: Any, write: bool = False) -> Any:
            if write:
                writes.append(threading.current_thread() is threading.main_thread())
                if len(writes) == 2 and writes[-1]:  # 1: the lease, 2: the flush's save
                    raise KeyboardInterrupt  # Ctrl-C lands on the run's thread
            return inner(flow, write)

        saver._run = run
        app = _chain().compile(checkpointer=saver)
        with pytest.raises(KeyboardInterrupt):
            app.invoke({"n": 0}, cfg, durability="async")
        saver._run = inner
        for job in late_pool:  # the pool jobs run now, after the lease was given back
            job()
        app.invoke(None, cfg, durability="async")  # the thread is free again
    with SqliteSaver.from_conn_string(path) as saver:
        app = _chain().compile(checkpointer=saver)
        assert app.get_state(cfg).values == {"n": 6}
        assert [s.metadata["step"] for s in app.get_state_history(cfg)] == [6, 5, 4, 3, 2, 1, 0, -1]


def _lines(fn: Any) -> list[int]:
    code = fn.__code__
    return sorted({line for _, _, line in code.co_lines() if line and line > code.co_firstlineno})


def _fuzz_points() -> list[tuple[str, int]]:
    from threadloom.pregel.persist_sync import SyncPersister

    return [
        (name, line)
        for name in ("flush", "_save_queued")
        for line in _lines(getattr(SyncPersister, name))
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", _fuzz_points(), ids=lambda w: f"{w[0]}:{w[1]}")
def test_one_ctrl_c_at_any_line_of_the_flush(tmp_path, late_pool, where) -> None:
    """One Ctrl-C landing at any line of the sync persister's final flush: the run
    neither hangs (a claim left set hung every later save, review2 F0) nor loses a
    step (a Ctrl-C in ``save_writes`` dropped the whole queue, F2); the thread is
    free afterwards."""
    import sys

    name, line = where
    fired: list[bool] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if (
            frame.f_code.co_name != name
            or threading.current_thread() is not threading.main_thread()
        ):
            return None

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line" and frame.f_lineno == line and not fired:
                fired.append(True)
                raise KeyboardInterrupt
            return local

        return local

    path, cfg = str(tmp_path / "f.db"), {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(path) as saver:
        app = _chain().compile(checkpointer=saver)
        sys.settrace(tracer)
        try:
            app.invoke({"n": 0}, cfg, durability="async")
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        for job in late_pool:
            job()
        assert app.get_state(cfg).values == {"n": 6}
        assert len(list(app.get_state_history(cfg))) == 8
        app.invoke({"n": 10}, cfg, durability="async")  # the thread is free
        assert app.get_state(cfg).values == {"n": 16}


@pytest.mark.parametrize("deadline", [0.02, 0.05, 0.08, 0.12, 0.2])
async def test_a_timeout_around_astream_keeps_every_streamed_step(tmp_path, deadline) -> None:
    """An ``asyncio`` timeout whose deadline lands anywhere in an ``astream``
    (``durability="async"``, slow saves): every value streamed is stored, and the
    thread is free. The cancel used to end the final flush's wait while its drain
    task still saved, the lease was released, and that task's saves were refused
    (review2 F1; LangGraph loses nothing here)."""
    import asyncio

    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    cfg = {"configurable": {"thread_id": "t"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        inner = saver._arun

        async def slow(flow: Any, write: bool = False) -> Any:
            if write:
                await asyncio.sleep(0.03)
            return await inner(flow, write)

        saver._arun = slow
        app = _chain().compile(checkpointer=saver)
        streamed: list[int] = []

        async def consume() -> None:
            async for values in app.astream(
                {"n": 0}, cfg, durability="async", stream_mode="values"
            ):
                streamed.append(values["n"])

        try:
            await asyncio.wait_for(consume(), deadline)
        except asyncio.TimeoutError:
            pass
        saver._arun = inner
        state = await app.aget_state(cfg)
        if streamed:
            assert state.values["n"] >= streamed[-1] - 1  # at most the step in flight
            assert state.values["n"] == streamed[-1] or state.next
        await app.ainvoke(None if state.next else {"n": 0}, cfg)  # the thread is free


def test_a_ctrl_c_in_the_lease_release_still_frees_the_thread(tmp_path, monkeypatch) -> None:
    """A second Ctrl-C landing in the lease release (review2 F4): the release runs
    again, so another run gets the thread at once instead of after the TTL."""
    from threadloom.checkpoint.lease.lease import Lease

    release, hits = Lease.release, []

    def interrupted_once(self: Any) -> Any:
        if not hits:
            hits.append(1)
            raise KeyboardInterrupt
        return release(self)

    monkeypatch.setattr(Lease, "release", interrupted_once)
    cfg = {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "r.db")) as saver:
        app = _chain().compile(checkpointer=saver, interrupt_before=["n5"])
        with pytest.raises(KeyboardInterrupt):  # paused runs give the lease back by release()
            app.invoke({"n": 0}, cfg)
        assert hits
        app.invoke(None, cfg, multitask_strategy="reject")  # free at once
        assert app.get_state(cfg).values == {"n": 6}


async def _slow_async_saver(saver: Any) -> Any:
    import asyncio

    inner = saver._arun

    async def slow(flow: Any, write: bool = False) -> Any:
        if write:
            await asyncio.sleep(0.03)
        return await inner(flow, write)

    saver._arun = slow
    return inner


@pytest.mark.parametrize("first", [0.04, 0.1, 0.16])
async def test_repeated_cancels_keep_every_streamed_step(tmp_path, first: float) -> None:
    """A cancel, then more cancels while the run saves what it owes (anyio cancel
    scopes cancel again and again): every value streamed is still stored (review3
    G1: the second cancel ended the wait and the lease went before the saves)."""
    import asyncio

    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    cfg = {"configurable": {"thread_id": "t"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        inner = await _slow_async_saver(saver)
        app = _chain().compile(checkpointer=saver)
        streamed: list[int] = []

        async def consume() -> None:
            async for values in app.astream(
                {"n": 0}, cfg, durability="async", stream_mode="values"
            ):
                streamed.append(values["n"])

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(first)
        for _ in range(5):  # cancel, and cancel again while it saves
            task.cancel()
            await asyncio.sleep(0.01)
        try:
            await task
        except asyncio.CancelledError:
            pass  # (or it had finished: the cancels then found nothing to stop)
        saver._arun = inner
        state = await app.aget_state(cfg)
        if streamed:
            assert state.values["n"] >= streamed[-1] - 1
        await app.ainvoke(None if state.next else {"n": 0}, cfg)  # the thread is free


@pytest.mark.parametrize("deadline", [0.02, 0.05, 0.1])
async def test_a_timeout_in_the_exit_save_still_stores_it(tmp_path, deadline: float) -> None:
    """``durability="exit"``: a timeout landing in the run's one save still stores
    it before the lease goes (review3 G2: it stayed queued and was lost)."""
    import asyncio

    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    cfg = {"configurable": {"thread_id": "t"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "e.db")) as saver:
        inner = await _slow_async_saver(saver)
        app = _chain().compile(checkpointer=saver)
        streamed: list[int] = []

        async def consume() -> None:
            async for values in app.astream({"n": 0}, cfg, durability="exit", stream_mode="values"):
                streamed.append(values["n"])

        try:
            await asyncio.wait_for(consume(), deadline)
        except asyncio.TimeoutError:
            pass
        saver._arun = inner
        state = await app.aget_state(cfg)
        if streamed and streamed[-1] == 6:  # the run reached its end: its exit save is stored
            assert state.values == {"n": 6}
        await app.ainvoke({"n": 0} if not state.next else None, cfg)  # the thread is free


async def test_a_cancelled_run_cancels_its_parallel_nodes() -> None:
    """Cancelling a run cancels its running parallel nodes, as LangGraph does
    (review3 G6: they ran on, side effects included)."""
    import asyncio

    from threadloom.graph import START, StateGraph

    effects: list[str] = []

    def node(name: str) -> Any:
        async def run(state: dict) -> dict:
            await asyncio.sleep(0.3)
            effects.append(name)
            return {}

        return run

    builder = StateGraph(dict)
    for name in ("a", "b", "c"):
        builder.add_node(name, node(name)).add_edge(START, name)
    app = builder.compile()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(app.ainvoke({"x": 1}), 0.05)
    await asyncio.sleep(0.5)
    assert effects == []
