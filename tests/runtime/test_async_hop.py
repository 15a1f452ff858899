"""Async runs: sync node functions go to the pool (``POOL.run_async``), internal
plumbing marked ``runs_inline`` (the START node's input read) stays on the loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, TypedDict

import pytest

from threadloom.graph import END, START, StateGraph
from threadloom.pregel.node import _identity, call_style, runs_inline
from threadloom.pregel.pool import POOL


async def test_run_async_returns_the_result_from_a_pool_thread() -> None:
    loop = asyncio.get_running_loop()
    assert await POOL.run_async(loop, threading.get_ident) != threading.get_ident()
    assert await POOL.run_async(loop, lambda: 42) == 42


async def test_run_async_raises_the_function_error() -> None:
    loop = asyncio.get_running_loop()

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await POOL.run_async(loop, boom)


async def test_run_async_converts_what_a_future_cannot_hold() -> None:
    loop = asyncio.get_running_loop()

    def stop() -> None:
        raise StopIteration

    def cancelled() -> None:
        raise concurrent.futures.CancelledError()

    with pytest.raises(RuntimeError, match="StopIteration"):
        await POOL.run_async(loop, stop)
    with pytest.raises(asyncio.CancelledError):
        await POOL.run_async(loop, cancelled)


async def test_run_async_cancelled_before_start_skips_the_job() -> None:
    loop = asyncio.get_running_loop()
    ran: list[int] = []
    gate = threading.Event()
    blocker = POOL.run_async(loop, gate.wait)  # one worker busy
    fut = POOL.run_async(loop, lambda: ran.append(1))
    fut.cancel()
    gate.set()
    await blocker
    await asyncio.sleep(0.05)
    assert fut.cancelled()
    with pytest.raises(asyncio.CancelledError):
        await fut


def test_call_style_marks_only_sync_functions_marked_inline() -> None:
    assert call_style(_identity)[4] is True

    def plain(x: Any) -> Any:
        return x

    assert call_style(plain)[4] is False

    @runs_inline
    async def coro(x: Any) -> Any:
        return x

    assert call_style(coro)[4] is False  # async functions are awaited anyway


class S(TypedDict):
    log: list[str]


async def test_start_node_runs_on_the_loop_and_user_nodes_in_the_pool() -> None:
    from threadloom.graph import compile as graph_compile

    main = threading.get_ident()
    seen: list[bool] = []
    start_input = graph_compile._start_input
    assert call_style(start_input)[4] is True

    def node(state: S) -> dict[str, Any]:
        seen.append(threading.get_ident() == main)
        return {"log": [*state["log"], "n"]}

    b = StateGraph(S)
    b.add_node("n", node)
    b.add_edge(START, "n")
    b.add_edge("n", END)
    out = await b.compile().ainvoke({"log": ["in"]})
    assert out == {"log": ["in", "n"]}
    assert seen == [False]  # a user's sync node still runs off the event loop
