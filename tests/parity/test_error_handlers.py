"""Parity: node error handlers (``add_node(..., error_handler=)``,
``set_node_defaults(error_handler=)``), LangGraph 1.2's semantics.

Compared on both libraries: results and errors, stream chunks, ``get_state``,
the whole history and every checkpoint's pending writes (ids normalised; errors
as their repr, which is what LangGraph stores).
"""

from __future__ import annotations

import asyncio
import importlib
import operator
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _errors(lib: Any) -> Any:
    return importlib.import_module(f"{lib.name}.errors")


def _masked(error: Any) -> Any:
    """An error's text with its timing masked (LangGraph stores the repr)."""
    if error is None:
        return None
    text = error if isinstance(error, str) else repr(error)
    return re.sub(r"elapsed: [0-9.]+s", "elapsed: <t>s", text)


def _stored(graph: Any, saver: Any) -> list[Any]:
    """History, then each checkpoint's pending writes, by namespace (root first) and
    step (newest first): the two savers list a subgraph's checkpoints in another order."""
    out: list[Any] = [("history", list(graph.get_state_history(CFG)))]
    stored = []
    for tup in saver.list(CFG):
        ns = tup.config["configurable"].get("checkpoint_ns", "").split(":")[0]
        writes = [  # a stored tuple stays a tuple in threadloom (docs/compatibility.md)
            (tid, chan, list(value) if isinstance(value, tuple) else value)
            for tid, chan, value in tup.pending_writes or []
        ]
        step = tup.metadata.get("step")
        stored.append((ns, -step, f"writes@{ns}:{step}", sorted(writes, key=lambda w: w[1])))
    out.extend((label, writes) for _, _, label, writes in sorted(stored, key=lambda s: s[:2]))
    return out


def _handled_graph(lib: Any, saver: Any, calls: list[str], *, goto: bool = False) -> Any:
    NodeError = _errors(lib).NodeError

    def bad(state: State) -> dict:
        calls.append("bad")
        raise ValueError("boom")

    def handler(state: State, error: NodeError) -> Any:  # type: ignore[valid-type]
        calls.append("handler")
        note = f"handled {error.node}: {error.error!r}"
        return lib.Command(update={"log": [note]}, goto="after") if goto else {"log": [note]}

    def after(state: State) -> dict:
        calls.append("after")
        return {"log": ["after"]}

    builder = lib.StateGraph(State)
    builder.add_node("bad", bad, error_handler=handler).add_node("after", after)
    builder.add_edge(lib.START, "bad").add_edge("bad", "after")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("saver", h.SAVERS)
@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("goto", [False, True])
def test_a_handler_takes_over_a_failed_node(saver: str, durability: str, goto: bool) -> None:
    def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        calls: list[str] = []
        graph = _handled_graph(lib, checkpointer, calls, goto=goto)
        chunks = list(
            graph.stream({"log": []}, CFG, stream_mode=["updates", "tasks"], **h.kw(durability))
        )
        return [
            ("nodes", list(graph.nodes)),
            ("chunks", chunks),
            ("calls", calls),
            ("state", graph.get_state(CFG)),
            *_stored(graph, checkpointer),
        ]

    h.run_parity(scenario, saver, durability)


@pytest.mark.parametrize("saver", h.SAVERS)
async def test_async_nodes_handlers_and_timeouts(saver: str) -> None:
    async def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        NodeError = _errors(lib).NodeError

        async def hangs(state: State) -> dict:
            await asyncio.Event().wait()
            return {}

        async def handler(state: State, runtime: Any, error: NodeError) -> dict:  # type: ignore[valid-type]
            return {"log": [f"{error.node}: {type(error.error).__name__}"]}

        builder = lib.StateGraph(State).set_node_defaults(error_handler=handler)
        builder.add_node("slow", hangs, timeout=0.05).add_edge(lib.START, "slow")
        graph = builder.compile(checkpointer=checkpointer)
        out = await graph.ainvoke({"log": []}, CFG)
        history = [
            (
                s.metadata["step"],
                s.values,
                s.next,
                [(t.name, t.path, _masked(t.error)) for t in s.tasks],
            )
            async for s in graph.aget_state_history(CFG)
        ]
        return [("out", out), ("nodes", list(graph.nodes)), ("history", history)]

    await h.arun_parity(scenario, saver)


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_defaults_precedence_fan_out_and_sends(run: str) -> None:
    async def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        def fails(state: Any) -> dict:
            raise KeyError(state.get("who", "x") if isinstance(state, dict) else "x")

        def ok(state: State) -> dict:
            return {"log": ["ok"]}

        def own(state: Any) -> dict:
            return {"log": ["own handler"]}

        def default(state: Any) -> dict:
            return {"log": ["default handler"]}

        def fan(state: State) -> list[Any]:
            return [lib.Send("sent", {"log": [], "who": "s1"}), "a", "b", "ok"]

        builder = lib.StateGraph(State).set_node_defaults(error_handler=default)
        builder.add_node("a", fails, error_handler=own).add_node("b", fails)
        builder.add_node("ok", ok).add_node("sent", fails)
        builder.add_conditional_edges(lib.START, fan)
        graph = builder.compile(checkpointer=checkpointer)
        if run == "invoke":
            out = graph.invoke({"log": []}, CFG)
        else:
            out = await graph.ainvoke({"log": []}, CFG)
        return [
            ("out", sorted(out["log"])),
            ("nodes", list(graph.nodes)),
            *_stored(graph, checkpointer),
        ]

    await h.arun_parity(scenario)


def test_a_failing_handler_fails_the_run_and_a_resume_runs_it_again() -> None:
    def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        calls: list[str] = []

        def bad(state: State) -> dict:
            calls.append("bad")
            raise ValueError("boom")

        def handler(state: State) -> dict:
            calls.append("handler")
            if calls.count("handler") == 1:
                raise RuntimeError("handler broke")
            return {"log": ["recovered"]}

        builder = lib.StateGraph(State).add_node("bad", bad, error_handler=handler)
        graph = builder.add_edge(lib.START, "bad").compile(checkpointer=checkpointer)
        first = h.raises(lambda: graph.invoke({"log": []}, CFG), lib)
        failed = [("first", first), ("state", graph.get_state(CFG)), *_stored(graph, checkpointer)]
        out = graph.invoke(None, CFG)
        return [*failed, ("resumed", out), ("calls", calls), *_stored(graph, checkpointer)]

    h.run_parity(scenario)


def test_interrupts_and_retries_are_not_errors_to_handle() -> None:
    def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        attempts: list[int] = []

        def asks(state: State) -> dict:
            return {"log": [lib.interrupt("ok?")]}

        def flaky(state: State) -> dict:
            attempts.append(1)
            raise ConnectionError("down")

        def handler(state: State) -> dict:
            return {"log": ["handled"]}

        retry = importlib.import_module(f"{lib.name}.types").RetryPolicy
        builder = lib.StateGraph(State)
        builder.add_node("asks", asks, error_handler=handler)
        builder.add_node(
            "flaky",
            flaky,
            error_handler=handler,
            retry_policy=retry(max_attempts=2, initial_interval=0.001, jitter=False),
        )
        builder.add_edge(lib.START, "asks").add_edge("asks", "flaky")
        graph = builder.compile(checkpointer=checkpointer)
        paused = graph.invoke({"log": []}, CFG)
        done = graph.invoke(lib.Command(resume="yes"), CFG)
        return [
            ("paused", paused),
            ("done", done),
            ("attempts", len(attempts)),
            *_stored(graph, checkpointer),
        ]

    h.run_parity(scenario)


_CRASH = """
import operator, os, sys
from typing import Annotated
from typing_extensions import TypedDict
lib = sys.argv[1]
graph_mod = __import__(lib + ".graph", fromlist=["x"])
sqlite = __import__(lib + ".checkpoint.sqlite", fromlist=["x"])

class State(TypedDict):
    log: Annotated[list[str], operator.add]

def bad(state):
    raise ValueError("boom")

def handler(state):
    os._exit(7)  # the process dies between the failure and the handler's result

with sqlite.SqliteSaver.from_conn_string(sys.argv[2]) as saver:
    b = graph_mod.StateGraph(State).add_node("bad", bad, error_handler=handler)
    g = b.add_edge(graph_mod.START, "bad").compile(checkpointer=saver)
    g.invoke({"log": []}, {"configurable": {"thread_id": "t1"}}, durability="sync")
"""


def test_resume_after_a_crash_between_the_error_and_its_handler(tmp_path: Path) -> None:
    def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        if lib.SqliteSaver is None:
            pytest.skip("no SqliteSaver")
        path = tmp_path / f"{lib.name}.db"
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run(
            [sys.executable, "-c", _CRASH, lib.name, str(path)], env=env, timeout=120
        )
        assert done.returncode == 7

        def bad(state: State) -> dict:
            raise AssertionError("a failed node must not run again on resume")

        def handler(state: State) -> dict:
            return {"log": ["handled after the crash"]}

        with lib.SqliteSaver.from_conn_string(str(path)) as saver:
            builder = lib.StateGraph(State).add_node("bad", bad, error_handler=handler)
            graph = builder.add_edge(lib.START, "bad").compile(checkpointer=saver)
            before = [("state", graph.get_state(CFG)), *_stored(graph, saver)]
            out = graph.invoke(None, CFG)
            return [*before, ("resumed", out), *_stored(graph, saver)]

    h.run_parity(scenario)


def test_a_handler_in_a_subgraph_that_asks_a_human() -> None:
    def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        def bad(state: State) -> dict:
            raise ValueError("x")

        def handler(state: State) -> dict:
            return {"log": [f"fixed: {lib.interrupt('fix?')}"]}

        inner = lib.StateGraph(State).add_node("bad", bad, error_handler=handler)
        sub = inner.add_edge(lib.START, "bad").compile()
        graph = lib.StateGraph(State).add_node("sub", sub).add_edge(lib.START, "sub")
        graph = graph.compile(checkpointer=checkpointer)
        paused = graph.invoke({"log": []}, CFG)
        inside = graph.get_state(CFG, subgraphs=True)
        done = graph.invoke(lib.Command(resume="ok"), CFG)
        return [
            ("paused", paused),
            ("inside", inside),
            ("done", done),
            *_stored(graph, checkpointer),
        ]

    h.run_parity(scenario)


def test_a_regular_node_asking_for_a_node_error_gets_none() -> None:
    def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        NodeError = _errors(lib).NodeError

        def plain(state: State, error: NodeError) -> dict:  # type: ignore[valid-type]
            return {"log": [repr(error)]}

        graph = lib.StateGraph(State).add_node("plain", plain).add_edge(lib.START, "plain")
        return [("out", graph.compile(checkpointer=checkpointer).invoke({"log": []}, CFG))]

    h.run_parity(scenario)


def _fan_out_to_failures(lib: Any, saver: Any, handler: Any, n: int) -> Any:
    def bad(state: Any) -> dict:
        raise ValueError("boom")

    def fan(state: State) -> list[Any]:
        return [lib.Send("bad", {"log": [], "who": str(i)}) for i in range(n)]

    builder = lib.StateGraph(State).add_node("bad", bad, error_handler=handler)
    return builder.add_conditional_edges(lib.START, fan).compile(checkpointer=saver)


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_a_steps_handlers_run_at_once(run: str) -> None:
    """Each handler waits until all four have started: run one after another, the
    first would wait in vain (LangGraph runs them on its runner, together)."""

    async def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        barrier, started, ready = threading.Barrier(4, timeout=10), [], asyncio.Event()

        def handler(state: Any) -> dict:
            barrier.wait()  # BrokenBarrierError after 10 s: the run fails, no hang
            return {"log": [f"h{state['who']}"]}

        async def ahandler(state: Any) -> dict:
            started.append(state["who"])
            if len(started) == 4:
                ready.set()
            await asyncio.wait_for(ready.wait(), 10)
            return {"log": [f"h{state['who']}"]}

        if run == "invoke":
            graph = _fan_out_to_failures(lib, checkpointer, handler, 4)
            out = await asyncio.to_thread(graph.invoke, {"log": []}, CFG)
        else:
            out = await _fan_out_to_failures(lib, checkpointer, ahandler, 4).ainvoke(
                {"log": []}, CFG
            )
        return [("out", sorted(out["log"]))]

    await h.arun_parity(scenario)


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_step_timeout_covers_the_steps_handlers(run: str) -> None:
    async def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        never = threading.Event()

        def handler(state: Any) -> dict:
            never.wait(2)  # ours is released below; LangGraph waits for it to end
            return {"log": ["late"]}

        async def ahandler(state: Any) -> dict:
            try:  # cancelled by the step timeout; else it ends (no hang) and says so
                await asyncio.wait_for(asyncio.Event().wait(), 5)
            except asyncio.TimeoutError:
                pass
            return {"log": ["late"]}

        graph = _fan_out_to_failures(lib, checkpointer, handler if run == "invoke" else ahandler, 1)
        graph.step_timeout = 0.2
        try:
            if run == "invoke":
                got = h.raises(lambda: graph.invoke({"log": []}, CFG), lib)
            else:
                got = await h.araises(graph.ainvoke({"log": []}, CFG), lib)
        finally:
            never.set()
        return [("out", got)]

    await h.arun_parity(scenario)
