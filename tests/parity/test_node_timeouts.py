"""Parity: LangGraph 1.2's node timeouts (``add_node(timeout=)``, ``TimeoutPolicy``,
``NodeTimeoutError``, ``runtime.heartbeat()``) and ``set_node_defaults``.

Each scenario runs on both libraries and the observations must be equal. No
timing assertions: a node that must time out waits on an ``asyncio.Event`` that
never fires; a node that must survive refreshes its idle clock far more often
than the limit (or finishes at once).
"""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from typing_extensions import TypedDict

LIBS = ("langgraph", "threadloom")
CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    n: int


def _lib(name: str) -> SimpleNamespace:
    mod = lambda sub: importlib.import_module(f"{name}.{sub}")  # noqa: E731
    return SimpleNamespace(
        name=name,
        StateGraph=mod("graph").StateGraph,
        START=mod("graph").START,
        TimeoutPolicy=mod("types").TimeoutPolicy,
        RetryPolicy=mod("types").RetryPolicy,
        errors=mod("errors"),
        saver=mod("checkpoint.memory").InMemorySaver,
        Runtime=mod("runtime").Runtime,
    )


def _text(err: Any) -> str:
    """An error as text with timings masked (LangGraph's snapshot holds its repr as a str)."""
    text = err if isinstance(err, str) else repr(err)
    return re.sub(r"elapsed: [0-9.]+s", "elapsed: <t>s", text)


async def _never(*_: Any) -> None:
    await asyncio.Event().wait()


def _one_node(lib: SimpleNamespace, fn: Any, **node_kw: Any) -> Any:
    builder = lib.StateGraph(State).add_node("work", fn, **node_kw)
    return builder.add_edge(lib.START, "work").compile(checkpointer=lib.saver())


async def _failure(lib: SimpleNamespace, graph: Any) -> dict[str, Any]:
    """What a failed run shows: the error, then the stored state of the thread."""
    with pytest.raises(Exception) as info:
        await graph.ainvoke({"n": 1}, CFG)
    err = info.value
    snap = await graph.aget_state(CFG)
    writes = graph.checkpointer.get_tuple(CFG).pending_writes
    return {
        "type": type(err).__name__,
        "fields": {k: getattr(err, k, None) for k in ("node", "kind", "timeout")},
        "limits": (getattr(err, "run_timeout", None), getattr(err, "idle_timeout", None)),
        "message": _text(str(err)),
        "is_builtin_timeout": isinstance(err, TimeoutError),
        "next": snap.next,
        "tasks": [(t.name, _text(t.error)) for t in snap.tasks],
        "pending": [(chan, _text(val)) for _, chan, val in writes],
    }


async def _both(scenario: Any) -> list[Any]:
    results = [await scenario(_lib(name)) for name in LIBS]
    assert results[0] == results[1], f"langgraph: {results[0]}\nthreadloom: {results[1]}"
    return results[0]


async def test_run_timeout_fails_the_node_and_is_stored() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        return await _failure(lib, _one_node(lib, _never, timeout=0.05))

    seen = await _both(scenario)
    assert seen["type"] == "NodeTimeoutError" and seen["fields"]["kind"] == "run"
    assert seen["is_builtin_timeout"] is False
    assert seen["tasks"][0][0] == "work" and "run timeout of 0.050s" in seen["tasks"][0][1]


async def test_idle_timeout_fires_without_progress() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        policy = lib.TimeoutPolicy(idle_timeout=0.05, run_timeout=600)
        return await _failure(lib, _one_node(lib, _never, timeout=policy))

    seen = await _both(scenario)
    assert seen["fields"] == {"node": "work", "kind": "idle", "timeout": 0.05}
    assert seen["limits"] == (600.0, 0.05)


async def test_heartbeat_keeps_an_idle_node_alive() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        async def busy(state: State, runtime: Any) -> dict:
            for _ in range(40):  # 40 x 20 ms: longer than the limit, beating in between
                runtime.heartbeat()
                await asyncio.sleep(0.02)
            return {"n": state["n"] + 1}

        policy = lib.TimeoutPolicy(idle_timeout=0.5, refresh_on="heartbeat")
        return await _one_node(lib, busy, timeout=policy).ainvoke({"n": 1}, CFG)

    assert await _both(scenario) == {"n": 2}


@pytest.mark.parametrize("refresh_on", ["auto", "heartbeat"])
async def test_custom_stream_writes_count_only_under_auto(refresh_on: str) -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        async def chatty(state: State, runtime: Any) -> dict:
            for i in range(40):
                runtime.stream_writer({"i": i})
                await asyncio.sleep(0.02)
            await _never() if refresh_on == "heartbeat" else None
            return {"n": 2}

        policy = lib.TimeoutPolicy(idle_timeout=0.5, refresh_on=refresh_on)
        graph = _one_node(lib, chatty, timeout=policy)
        if refresh_on == "heartbeat":
            return (await _failure(lib, graph))["fields"]
        chunks = [c async for c in graph.astream({"n": 1}, CFG, stream_mode="custom")]
        return len(chunks)

    seen = await _both(scenario)
    assert seen == (
        40 if refresh_on == "auto" else {"node": "work", "kind": "idle", "timeout": 0.5}
    )


async def test_retry_policy_retries_a_timed_out_attempt() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        attempts: list[int] = []

        async def flaky(state: State, runtime: Any) -> dict:
            attempts.append(runtime.execution_info.node_attempt)
            if len(attempts) == 1:
                await _never()
            return {"n": state["n"] + 1}

        retry = lib.RetryPolicy(initial_interval=0.01, jitter=False)
        graph = _one_node(lib, flaky, timeout=0.05, retry_policy=retry)
        out = await graph.ainvoke({"n": 1}, CFG)
        return out, attempts, (await graph.aget_state(CFG)).tasks

    assert await _both(scenario) == ({"n": 2}, [1, 2], ())


@pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="3.10 has no Task.cancelling(): both libraries let a node's own CancelledError propagate",
)
async def test_a_node_raising_cancelled_error_fails_with_node_cancelled_error() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        async def quits(state: State) -> dict:
            raise asyncio.CancelledError()

        plain = await _failure(lib, _one_node(lib, quits))
        timed = await _failure(lib, _one_node(lib, quits, timeout=5))
        return plain["type"], plain["message"], timed["type"]

    assert await _both(scenario) == (
        "NodeCancelledError",
        "Node 'work' raised asyncio.CancelledError",
        "NodeCancelledError",
    )


async def test_sync_nodes_refuse_timeouts() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        def sync(state: State) -> dict:
            return {}

        builder = lib.StateGraph(State).add_node("work", sync, timeout=1)
        with pytest.raises(ValueError) as at_compile:
            builder.add_edge(lib.START, "work").compile()
        graph = _one_node(lib, _never, timeout=1)
        with pytest.raises(ValueError) as sync_run:
            graph.invoke({"n": 1}, CFG)
        return str(at_compile.value), str(sync_run.value)

    compile_msg, run_msg = await _both(scenario)
    assert "only supported for async nodes" in compile_msg and "'work' is sync" in run_msg


@pytest.mark.parametrize(
    "value",
    [0, -1.5, {"idle_timeout": 0}, {"refresh_on": "never", "run_timeout": 1}, {}, 2, 0.25],
)
async def test_timeout_policy_coercion(value: Any) -> None:
    from datetime import timedelta

    async def scenario(lib: SimpleNamespace) -> Any:
        arg = lib.TimeoutPolicy(**value) if isinstance(value, dict) else value
        out = []
        for given in (arg, timedelta(seconds=value) if isinstance(value, (int, float)) else arg):
            try:
                policy = lib.TimeoutPolicy.coerce(given)
            except ValueError as exc:
                out.append(("ValueError", str(exc)))
            else:
                fields = ("run_timeout", "idle_timeout", "refresh_on")
                out.append(policy and tuple(getattr(policy, f) for f in fields))
        return out

    seen = await _both(scenario)
    assert seen  # both sides gave the same answer for a float and a timedelta


async def test_node_defaults_precedence() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        own_retry = lib.RetryPolicy(max_attempts=7)
        inner = lib.StateGraph(State).add_node("deep", _never).add_edge(lib.START, "deep")
        sub = inner.compile()
        builder = (
            lib.StateGraph(State)
            .set_node_defaults(retry_policy=lib.RetryPolicy(max_attempts=2), timeout=0.05)
            .add_node("plain", _never)
            .add_node(
                "own", _never, retry_policy=own_retry, timeout=lib.TimeoutPolicy(idle_timeout=9)
            )
            .add_node("sub", sub)
            .add_edge(lib.START, "plain")
        )
        builder.set_node_defaults(timeout=0.07)  # later defaults replace earlier ones
        builder.compile()
        specs = {name: builder.nodes[name] for name in ("plain", "own", "sub")}

        def show(spec: Any) -> Any:
            t = spec.timeout
            return (spec.retry_policy.max_attempts, t and (t.run_timeout, t.idle_timeout))

        return {name: show(spec) for name, spec in specs.items()}, inner.nodes["deep"].timeout

    per_node, deep = await _both(scenario)
    assert per_node == {
        "plain": (2, (0.07, None)),
        "own": (7, (None, 9.0)),
        "sub": (2, (0.07, None)),
    }
    assert deep is None  # a subgraph's own nodes do not inherit the parent's defaults


async def test_default_timeout_runs_and_retries() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        attempts: list[int] = []

        async def flaky(state: State, runtime: Any) -> dict:
            attempts.append(runtime.execution_info.node_attempt)
            await _never()

        retry = lib.RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False)
        builder = lib.StateGraph(State).add_node("work", flaky).add_edge(lib.START, "work")
        builder.set_node_defaults(timeout=0.05, retry_policy=retry)
        seen = await _failure(lib, builder.compile(checkpointer=lib.saver()))
        return seen["type"], attempts, seen["tasks"]

    kind, attempts, tasks = await _both(scenario)
    assert (kind, attempts, tasks[0][0]) == ("NodeTimeoutError", [1, 2], "work")


@pytest.mark.parametrize("pass_config", [True, False])
async def test_langchain_callback_events_count_under_auto(pass_config: bool) -> None:
    from langchain_core.runnables import RunnableConfig, RunnableLambda

    echo = RunnableLambda(lambda x: x)

    async def scenario(lib: SimpleNamespace) -> Any:
        async def steps(state: State, config: RunnableConfig) -> dict:
            for i in range(40):  # 40 x 20 ms: longer than the limit, a child run each time
                await echo.ainvoke(i, config if pass_config else None)
                await asyncio.sleep(0.02)
            return {"n": 2}

        policy = lib.TimeoutPolicy(idle_timeout=0.5)
        return await _one_node(lib, steps, timeout=policy).ainvoke({"n": 1}, CFG)

    assert await _both(scenario) == {"n": 2}


async def test_an_attempt_that_ignores_the_cancel_writes_nothing() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        finished = asyncio.Event()

        async def stubborn(state: State) -> dict:
            try:
                await _never()
            except asyncio.CancelledError:
                pass  # carries on after the timeout cancelled it
            finished.set()
            return {"n": 99}

        graph = _one_node(lib, stubborn, timeout=0.05)
        seen = await _failure(lib, graph)
        await finished.wait()
        for _ in range(5):  # let the abandoned attempt's writers run, if they would
            await asyncio.sleep(0)
        snap = await graph.aget_state(CFG)
        writes = graph.checkpointer.get_tuple(CFG).pending_writes
        return seen["type"], snap.values, [chan for _, chan, _ in writes]

    assert await _both(scenario) == ("NodeTimeoutError", {"n": 1}, ["__error__"])


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_subgraphs_steps_count_as_progress_under_auto(streamed: bool) -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        async def part(state: State) -> dict:
            await asyncio.sleep(0.35)  # each well inside the limit, all four beyond it
            return {"n": state["n"] + 1}

        inner = lib.StateGraph(State)
        names = ["a", "b", "c", "d"]
        for name in names:
            inner.add_node(name, part)
        inner.add_edge(lib.START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", "d")
        policy = lib.TimeoutPolicy(idle_timeout=1.2)  # (0.85 s margin a step on a loaded box)
        graph = _one_node(lib, inner.compile(), timeout=policy)
        if not streamed:
            return await graph.ainvoke({"n": 1}, CFG)
        chunks = graph.astream({"n": 1}, CFG, stream_mode="updates", subgraphs=True)
        return [(len(ns), update) async for ns, update in chunks]

    seen = await _both(scenario)
    assert seen == (
        {"n": 5}
        if not streamed
        else [*((1, {k: {"n": n}}) for k, n in zip("abcd", range(2, 6))), (0, {"work": {"n": 5}})]
    )


async def test_resuming_after_a_timed_out_run_runs_the_node_again() -> None:
    async def scenario(lib: SimpleNamespace) -> Any:
        calls: list[int] = []

        async def once_slow(state: State) -> dict:
            calls.append(len(calls))
            if len(calls) == 1:
                await _never()
            return {"n": state["n"] + 1}

        graph = _one_node(lib, once_slow, timeout=0.05)
        failed = await _failure(lib, graph)
        out = await graph.ainvoke(None, CFG)
        return failed["type"], out, calls, (await graph.aget_state(CFG)).tasks

    assert await _both(scenario) == ("NodeTimeoutError", {"n": 2}, [0, 1], ())
