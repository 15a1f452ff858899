"""Parity: RetryPolicy and CachePolicy on StateGraph nodes, sync and async.

What is compared: results, errors, how many times each node ran, stream updates
(cached ones carry ``__metadata__``), the state and the stored history.
"""

from __future__ import annotations

import importlib
import operator
from collections import Counter
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    value: Annotated[list[str], operator.add]
    n: int


def _types(lib):
    return importlib.import_module(f"{lib.name}.types")


def _cache(lib):
    return importlib.import_module(f"{lib.name}.cache.memory").InMemoryCache()


def retry_graph(lib, saver, calls: Counter, fail: int, exc: type[Exception], **policy):
    """START -> flaky (fails ``fail`` times with ``exc``) -> after."""

    def flaky(state: State) -> dict:
        calls["flaky"] += 1
        if calls["flaky"] <= fail:
            raise exc(f"attempt {calls['flaky']}")
        return {"value": [f"flaky@{calls['flaky']}"]}

    def after(state: State) -> dict:
        calls["after"] += 1
        return {"value": ["after"]}

    retry = _types(lib).RetryPolicy(initial_interval=0.0001, jitter=False, **policy)
    return (
        lib.StateGraph(State)
        .add_node("flaky", flaky, retry_policy=retry)
        .add_node("after", after)
        .add_edge(lib.START, "flaky")
        .add_edge("flaky", "after")
        .compile(checkpointer=saver)
    )


def _history(graph):
    return [(s.values, s.next, s.metadata, s.tasks) for s in graph.get_state_history(CFG)]


RETRY_CASES = {
    "recovers": dict(fail=2, exc=ConnectionError, max_attempts=3),
    "exhausted": dict(fail=5, exc=ConnectionError, max_attempts=2),
    "not_retried_by_default": dict(fail=1, exc=ValueError, max_attempts=3),
    "retry_on_class": dict(fail=1, exc=KeyError, max_attempts=3, retry_on=KeyError),
    "retry_on_callable": dict(
        fail=2, exc=RuntimeError, max_attempts=4, retry_on=lambda e: "attempt" in str(e)
    ),
}


@pytest.mark.parametrize("saver", h.SAVERS)
@pytest.mark.parametrize("case", sorted(RETRY_CASES))
def test_retry_policy(case: str, saver: str) -> None:
    def sc(lib, checkpointer, durability):
        calls: Counter = Counter()
        graph = retry_graph(lib, checkpointer, calls, **RETRY_CASES[case])
        chunks: list = []

        def run():
            for chunk in graph.stream({"value": [], "n": 0}, CFG, stream_mode="updates"):
                chunks.append(chunk)

        obs = [("run", h.raises(run, lib)), ("updates", chunks), ("calls", dict(calls))]
        obs.append(("state", graph.get_state(CFG)))
        obs.append(("history", _history(graph)))
        return obs

    h.run_parity(sc, saver)


async def test_retry_policy_async() -> None:
    async def sc(lib, checkpointer, durability):
        calls: Counter = Counter()
        graph = retry_graph(lib, checkpointer, calls, fail=2, exc=ConnectionError, max_attempts=3)

        async def aflaky(state: State) -> dict:  # an async node is retried too
            calls["aflaky"] += 1
            if calls["aflaky"] < 2:
                raise ConnectionResetError("reset")
            return {"value": ["aflaky"]}

        retry = _types(lib).RetryPolicy(initial_interval=0.0001, jitter=False)
        agraph = (
            lib.StateGraph(State)
            .add_node("aflaky", aflaky, retry_policy=retry)
            .add_edge(lib.START, "aflaky")
            .compile(checkpointer=checkpointer)
        )
        obs = [("sync node", await graph.ainvoke({"value": [], "n": 0}, CFG))]
        obs.append(
            (
                "async node",
                await agraph.ainvoke({"value": []}, {"configurable": {"thread_id": "t2"}}),
            )
        )
        obs.append(("calls", dict(calls)))
        return obs

    await h.arun_parity(sc)


def cache_graph(lib, saver, calls: Counter):
    """START -> square (cached, keyed by n) -> log (not cached)."""

    def square(state: State) -> dict:
        calls["square"] += 1
        return {"value": [f"sq={state['n'] ** 2}"]}

    def log(state: State) -> dict:
        calls["log"] += 1
        return {"value": ["log"]}

    policy = _types(lib).CachePolicy(key_func=lambda s: str(s["n"]))
    return (
        lib.StateGraph(State)
        .add_node("square", square, cache_policy=policy)
        .add_node("log", log)
        .add_edge(lib.START, "square")
        .add_edge("square", "log")
        .compile(checkpointer=saver, cache=_cache(lib))
    )


@pytest.mark.parametrize("saver", h.SAVERS)
def test_cache_policy(saver: str) -> None:
    def sc(lib, checkpointer, durability):
        calls: Counter = Counter()
        graph = cache_graph(lib, checkpointer, calls)
        obs = []
        for n, thread in ((3, "a"), (3, "b"), (4, "c"), (3, "d")):
            cfg = {"configurable": {"thread_id": thread}}
            obs.append((f"n={n} {thread}", list(graph.stream({"value": [], "n": n}, cfg))))
        obs.append(("calls", dict(calls)))
        graph.clear_cache()
        obs.append(("after clear", graph.invoke({"value": [], "n": 3}, CFG)))
        obs.append(("calls again", dict(calls)))
        return obs

    h.run_parity(sc, saver)


async def test_cache_policy_async() -> None:
    async def sc(lib, checkpointer, durability):
        calls: Counter = Counter()
        graph = cache_graph(lib, checkpointer, calls)
        obs = []
        for n, thread in ((2, "a"), (2, "b")):
            cfg = {"configurable": {"thread_id": thread}}
            obs.append((thread, [c async for c in graph.astream({"value": [], "n": n}, cfg)]))
        obs.append(("calls", dict(calls)))
        await graph.aclear_cache()
        obs.append(("after clear", await graph.ainvoke({"value": [], "n": 2}, CFG)))
        obs.append(("calls again", dict(calls)))
        return obs

    await h.arun_parity(sc)
