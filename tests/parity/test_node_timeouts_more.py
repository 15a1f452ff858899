"""Parity: node timeouts against LangGraph 1.2, the review1 findings.

An abandoned attempt (one that ignores the timeout's cancel) must stay quiet
while the retry runs; a node's own ``CancelledError`` is not retried when timed;
what counts as "sync" for a timeout. No timing assertions: the attempt that must
time out waits on an event that never fires, and the retry only waits on events
the abandoned attempt sets at once, far inside the limit.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda

from tests.parity.test_node_timeouts import CFG, State, _both, _never, _one_node

LIMIT = 0.2  # the first attempt never finishes; the retry needs a few loop turns


def _stubborn(lib: SimpleNamespace, late: Any) -> tuple[Any, list[str]]:
    """A node whose first attempt ignores the timeout's cancel, waits until the
    retry has started, then calls ``late(runtime)`` (which tries to stream) and
    returns; the retry waits for that before it finishes."""
    retry_started, late_done = asyncio.Event(), asyncio.Event()
    trace: list[str] = []

    async def node(state: State, runtime: Any) -> dict:
        if runtime.execution_info.node_attempt == 1:
            try:
                await _never()
            except asyncio.CancelledError:
                pass  # carries on after the timeout cancelled it
            await retry_started.wait()
            await late(runtime)
            trace.append("late attempt streamed")
            late_done.set()
            return {"n": 99}
        retry_started.set()
        await late_done.wait()
        runtime.stream_writer({"ok": "retry"})
        return {"n": 2}

    return node, trace


def _graph(lib: SimpleNamespace, node: Any) -> Any:
    retry = lib.RetryPolicy(initial_interval=0.01, jitter=False)
    return _one_node(lib, node, timeout=LIMIT, retry_policy=retry)


async def test_an_abandoned_attempt_cannot_stream_custom_chunks() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        get_writer = importlib.import_module(f"{lib.name}.config").get_stream_writer

        async def late(runtime: Any) -> None:
            get_writer()({"late": "get_stream_writer"})
            runtime.stream_writer({"late": "runtime"})

        node, trace = _stubborn(lib, late)
        modes = ["custom", "values"]
        chunks = [c async for c in _graph(lib, node).astream({"n": 1}, CFG, stream_mode=modes)]
        return chunks, trace

    assert await _both(scenario) == (
        [("values", {"n": 1}), ("custom", {"ok": "retry"}), ("values", {"n": 2})],
        ["late attempt streamed"],
    )


async def test_an_abandoned_attempt_cannot_stream_a_subgraph() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        inner = lib.StateGraph(State).add_node("late_inner", lambda s: {"n": 0})
        inner = inner.add_edge(lib.START, "late_inner").compile()

        async def late(runtime: Any) -> None:
            await inner.ainvoke({"n": 5})

        node, trace = _stubborn(lib, late)
        chunks = _graph(lib, node).astream({"n": 1}, CFG, stream_mode="updates", subgraphs=True)
        return [(len(ns), update) async for ns, update in chunks], trace

    assert await _both(scenario) == ([(0, {"work": {"n": 2}})], ["late attempt streamed"])


@pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="3.10 has no Task.cancelling(): a node's own CancelledError propagates there",
)
@pytest.mark.parametrize("retry_on", [None, Exception])
async def test_a_timed_nodes_own_cancel_is_not_retried(retry_on: Any) -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        calls: list[int] = []

        async def quits(state: State) -> dict:
            calls.append(1)
            raise asyncio.CancelledError()

        kw = {"retry_on": retry_on} if retry_on else {}
        retry = lib.RetryPolicy(initial_interval=0.01, jitter=False, **kw)
        graph = _one_node(lib, quits, timeout=5, retry_policy=retry)
        with pytest.raises(Exception) as info:
            await graph.ainvoke({"n": 1}, CFG)
        err = info.value
        return type(err).__name__, len(calls), getattr(err, "__notes__", None)

    assert await _both(scenario) == ("NodeCancelledError", 1, None)


async def _inc_async(state: State) -> dict:
    return {"n": state["n"] + 1}


def _inc(state: State) -> dict:
    return {"n": state["n"] + 1}


_RUNNABLES = {  # case -> (runnable factory, timed node refused at compile)
    "sync lambda": (lambda: RunnableLambda(_inc), True),
    "async lambda": (lambda: RunnableLambda(_inc_async), False),
    "sync and async lambda": (lambda: RunnableLambda(_inc, afunc=_inc_async), False),
    "bound sync lambda": (lambda: RunnableLambda(_inc).with_config(tags=["t"]), True),
    "sequence with a sync step": (lambda: RunnableLambda(_inc_async) | RunnableLambda(_inc), True),
    "all-async sequence": (lambda: RunnableLambda(_inc_async) | RunnableLambda(_inc_async), False),
}


@pytest.mark.parametrize("case", list(_RUNNABLES))
async def test_a_runnable_is_timed_only_with_native_async(case: str) -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        builder = lib.StateGraph(State).add_node("work", _RUNNABLES[case][0](), timeout=5)
        try:
            graph = builder.add_edge(lib.START, "work").compile()
        except ValueError as exc:
            return "refused", str(exc)
        return "ran", await graph.ainvoke({"n": 1})

    seen = await _both(scenario)
    if _RUNNABLES[case][1]:
        assert seen[0] == "refused" and "'work' is sync" in seen[1], seen
    else:
        assert seen == ("ran", {"n": 3 if "sequence" in case else 2})
