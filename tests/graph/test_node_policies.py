"""Node policies threadloom decides alone (LangGraph parity is in
tests/parity/test_node_timeouts.py): refused error handlers, trace_policy kept,
raw Pregel timeouts, a cancel from outside, heartbeat outside a timed attempt."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from typing_extensions import TypedDict

from threadloom.channels import LastValue
from threadloom.errors import InvalidGraphError, NodeTimeoutError
from threadloom.graph import START, StateGraph
from threadloom.graph.runtime import Runtime
from threadloom.pregel import NodeBuilder, Pregel
from threadloom.types import RetryPolicy, TimeoutPolicy


class S(TypedDict):
    n: int


async def never(state: S) -> dict:
    await asyncio.Event().wait()
    return {}


def test_error_handler_nodes_are_named_and_checked() -> None:
    builder = StateGraph(S).add_node("a", never, error_handler=lambda state: {})
    assert list(builder.nodes) == ["__error_handler__a", "a"]
    assert builder.nodes["a"].error_handler_node == "__error_handler__a"
    assert builder.nodes["__error_handler__a"].is_error_handler
    taken = StateGraph(S).add_node("__error_handler__b", never)
    with pytest.raises(InvalidGraphError, match="'__error_handler__b' already exists"):
        taken.add_node("b", never, error_handler=lambda state: {})


def test_a_second_compile_reuses_the_default_handler_node() -> None:
    builder = StateGraph(S).add_node("a", never).add_edge(START, "a")
    builder.set_node_defaults(error_handler=lambda state: {"n": 0})
    first, second = builder.compile(), builder.compile()  # LangGraph raises on the second
    assert (
        list(first.nodes) == list(second.nodes) == ["__start__", "a", "__default_error_handler__"]
    )
    assert second.nodes["a"].error_handler_node == "__default_error_handler__"


async def test_a_handler_gets_the_node_error_and_the_runtime() -> None:
    from threadloom.errors import NodeError

    async def bad(state: S) -> dict:
        raise LookupError("missing")

    async def handler(state: S, runtime: Runtime, *, error: NodeError) -> dict:
        assert isinstance(error, NodeError) and runtime.execution_info is not None
        return {"n": len(error.node) + len(str(error.error))}

    builder = StateGraph(S).add_node("bad", bad, error_handler=handler)
    out = await builder.add_edge(START, "bad").compile().ainvoke({"n": 0})
    assert out == {"n": len("bad") + len(str(LookupError("missing")))}


def test_trace_policy_is_kept_on_the_node_spec() -> None:
    policy = object()
    builder = StateGraph(S).add_node("a", never, trace_policy=policy)
    assert builder.nodes["a"].trace_policy is policy


def test_a_bad_timeout_is_refused_at_add_node() -> None:
    with pytest.raises(ValueError, match="idle_timeout must be greater than 0"):
        StateGraph(S).add_node("a", never, timeout=TimeoutPolicy(idle_timeout=-1))
    with pytest.raises(ValueError, match="run_timeout must be greater than 0"):
        StateGraph(S).set_node_defaults(timeout=0)


def test_defaults_fill_only_unset_policies_and_survive_recompiles() -> None:
    mine = RetryPolicy(max_attempts=9)
    builder = StateGraph(S).add_node("a", never).add_node("b", never, retry_policy=mine)
    builder.add_edge(START, "a").set_node_defaults(retry_policy=RetryPolicy(max_attempts=2))
    builder.compile()
    builder.set_node_defaults(retry_policy=RetryPolicy(max_attempts=4))
    builder.compile()  # as LangGraph: the first compile wrote the default into "a"
    assert builder.nodes["a"].retry_policy.max_attempts == 2
    assert builder.nodes["b"].retry_policy is mine


def _pregel(fn: Any, timeout: Any) -> Pregel:
    node = NodeBuilder().subscribe_only("a").do(fn).write_to("b").set_timeout(timeout)
    return Pregel(
        nodes={"one": node},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )


async def test_raw_pregel_nodes_take_a_timeout_policy() -> None:
    async def slow(x: int) -> int:
        await asyncio.Event().wait()
        return x

    async def quick(x: int) -> int:
        return x + 1

    assert await _pregel(quick, 5).ainvoke(1) == 2
    with pytest.raises(NodeTimeoutError) as info:
        await _pregel(slow, TimeoutPolicy(run_timeout=0.05)).ainvoke(1)
    assert (info.value.node, info.value.kind) == ("one", "run")
    with pytest.raises(InvalidGraphError, match="only supported for async nodes"):
        _pregel(lambda x: x, 1)


async def test_a_cancel_from_outside_still_cancels_a_timed_run() -> None:
    started = asyncio.Event()

    async def waits(state: S) -> dict:
        started.set()
        await asyncio.Event().wait()
        return {}

    graph = StateGraph(S).add_node("a", waits, timeout=600).add_edge(START, "a").compile()
    run = asyncio.ensure_future(graph.ainvoke({"n": 1}))
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


async def test_heartbeat_is_a_no_op_outside_an_idle_timed_attempt() -> None:
    beats: list[bool] = []

    async def node(state: S, runtime: Runtime) -> dict:
        runtime.heartbeat()  # must not raise, with or without a run timeout
        beats.append(runtime.heartbeat is not Runtime().heartbeat)
        return {"n": state["n"] + 1}

    for timeout in (None, 600, TimeoutPolicy(idle_timeout=600)):
        graph = StateGraph(S).add_node("a", node, timeout=timeout).add_edge(START, "a")
        assert await graph.compile().ainvoke({"n": 1}) == {"n": 2}
    assert beats == [False, False, True]
    assert Runtime().heartbeat() is None
