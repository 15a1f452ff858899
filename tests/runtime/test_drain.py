"""Draining a run (``control=RunControl()``), threadloom's side: what a deploy needs.

The parity file (tests/parity/test_drain.py) pins what a user sees against
LangGraph. These tests pin what LangGraph does not promise and a deploy relies
on: a drained thread is resumed by another saver instance (another process) on
every durable backend, with nothing lost under ``durability="async"``/``"exit"``;
the thread lease is free once ``GraphDrained`` is raised; a real SIGTERM handler
that calls ``request_drain()`` leaves a resumable thread.
"""

from __future__ import annotations

import operator
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.concurrency.backends import PROCESS_KINDS, make_spec, open_saver
from tests.concurrency.test_async_savers import _open as open_async
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import Lease
from threadloom.errors import GraphBubbleUp, GraphDrained, ThreadBusyError
from threadloom.graph import START, StateGraph
from threadloom.runtime import RunControl, Runtime

ROOT = Path(__file__).resolve().parents[2]
DURABILITIES = ["sync", "async", "exit"]


class State(TypedDict):
    v: Annotated[list[str], operator.add]


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def chain(saver: Any, drain_at: str | None = "b", seen: list | None = None) -> Any:
    """START -> a -> b -> c; ``drain_at`` asks its run to drain; ``seen`` collects
    (node, runtime.control) as each node runs."""

    def make(tag: str):
        def fn(state: State, runtime: Runtime) -> dict:
            if seen is not None:
                seen.append((tag, runtime.control))
            if tag == drain_at:
                runtime.control.request_drain(f"drain in {tag}")
            return {"v": [tag]}

        return fn

    builder = StateGraph(State)
    for name in "abc":
        builder.add_node(name, make(name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    return builder.compile(checkpointer=saver)


def lease_is_free(saver: Any, thread: str) -> bool:
    """Nobody holds the thread's lease (read in the store, not by taking it: a
    lease of a dead process on this host would be taken over anyway)."""
    return _free(saver._run(lo.read_flow(thread), True))


async def alease_is_free(saver: Any, thread: str) -> bool:
    return _free(await saver._arun(lo.read_flow(thread), True))


def _free(info: Any) -> bool:
    return info is None or not info.holder or info.expires_in_ms <= 0


@pytest.fixture(params=PROCESS_KINDS)
def spec(request, tmp_path) -> dict[str, Any]:
    return make_spec(request.param, str(tmp_path), request)


# -- the error and the control ---------------------------------------------------------


def test_graph_drained_is_a_bubble_up_with_its_reason() -> None:
    exc = GraphDrained("deploy")
    assert isinstance(exc, GraphBubbleUp) and exc.reason == "deploy"
    assert str(exc) == "Graph drained: deploy" and GraphDrained().reason == "shutdown"
    again = pickle.loads(pickle.dumps(exc))  # crosses process pools with its reason
    assert type(again) is GraphDrained and again.reason == "deploy" and str(again) == str(exc)


def test_nodes_and_subgraphs_see_the_run_control() -> None:
    """The caller's control reaches every node and a subgraph's nodes; without one,
    each run gets its own fresh control (a drain asked in one run ends only that run)."""
    seen: list = []
    inner = chain(None, drain_at=None, seen=seen)
    builder = StateGraph(State)
    builder.add_node("sub", inner)
    builder.add_edge(START, "sub")
    outer = builder.compile()
    control = RunControl()
    outer.invoke({"v": []}, control=control)
    assert [tag for tag, _ in seen] == ["a", "b", "c"]
    assert all(c is control for _, c in seen)
    seen.clear()
    outer.invoke({"v": []})
    outer.invoke({"v": []})
    first, second = seen[0][1], seen[3][1]
    assert isinstance(first, RunControl) and first is not second and first is not control
    assert not first.drain_requested and repr(first) == "RunControl(drain_reason=None)"


def test_a_drained_control_stops_every_run_it_is_given(saver) -> None:
    """A control stays drained (as LangGraph's): each run given it stops before its
    first step, the input saved; only a run with a fresh control goes on."""
    calls: list = []
    graph = chain(saver, drain_at=None, seen=calls)
    control = RunControl()
    control.request_drain("now")
    with pytest.raises(GraphDrained, match="now"):
        graph.invoke({"v": ["x"]}, cfg("t"), control=control)
    with pytest.raises(GraphDrained, match="now"):
        graph.invoke(None, cfg("t"), control=control, version="v2")
    assert calls == [] and graph.get_state(cfg("t")).next == ("__start__",)
    assert control.drain_requested and control.drain_reason == "now"
    assert graph.invoke(None, cfg("t")) == {"v": ["x", "a", "b", "c"]}


# -- resuming elsewhere, nothing lost --------------------------------------------------


@pytest.mark.parametrize("durability", DURABILITIES)
def test_resume_after_drain_from_a_new_saver_instance(spec, durability: str) -> None:
    thread = f"drain-{durability}"
    with open_saver(spec) as saver:
        graph = chain(saver)
        with pytest.raises(GraphDrained) as err:
            graph.invoke({"v": ["x"]}, cfg(thread), durability=durability)
        assert err.value.reason == "drain in b"
        assert lease_is_free(saver, thread)
    with open_saver(spec) as other:  # another process would open the store the same way
        graph = chain(other, drain_at=None)
        state = graph.get_state(cfg(thread))
        assert state.values == {"v": ["x", "a", "b"]} and state.next == ("c",)
        steps = [s.metadata["step"] for s in graph.get_state_history(cfg(thread))]
        assert steps == ([2] if durability == "exit" else [2, 1, 0, -1])
        assert graph.invoke(None, cfg(thread), durability=durability) == {"v": ["x", "a", "b", "c"]}
        assert graph.get_state(cfg(thread)).next == ()
        assert lease_is_free(other, thread)


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("kind", PROCESS_KINDS)
async def test_async_drain_then_resume_from_a_new_saver(
    kind: str, durability: str, tmp_path, request
) -> None:
    """ainvoke on the async savers: queued saves are stored and the lease is free
    before GraphDrained leaves; a new saver instance resumes the thread."""
    tag = uuid.uuid4().hex[:10]
    async with open_async(kind, tmp_path, request, tag) as saver:
        with pytest.raises(GraphDrained):
            await chain(saver).ainvoke({"v": ["x"]}, cfg("t"), durability=durability)
        assert await alease_is_free(saver, "t")
    async with open_async(kind, tmp_path, request, tag) as saver:
        graph = chain(saver, drain_at=None)
        state = await graph.aget_state(cfg("t"))
        assert state.values == {"v": ["x", "a", "b"]} and state.next == ("c",)
        assert await graph.ainvoke(None, cfg("t")) == {"v": ["x", "a", "b", "c"]}


def test_the_lease_is_released_on_drain(spec) -> None:
    """Right after GraphDrained, a run that refuses to wait gets the thread."""
    with open_saver(spec) as saver:
        graph = chain(saver)
        with pytest.raises(GraphDrained):
            graph.invoke({"v": ["x"]}, cfg("t"), multitask_strategy="reject")
        probe = Lease(saver, "t", "probe", ttl=30)
        assert probe.try_acquire() is None  # None: taken at once
        assert not lease_is_free(saver, "t")  # (the check sees a held lease)
        with pytest.raises(ThreadBusyError):  # (the probe really holds it)
            chain(saver, drain_at=None).invoke(None, cfg("t"), multitask_strategy="reject")
        probe.release()
        out = chain(saver, drain_at=None).invoke(None, cfg("t"), multitask_strategy="reject")
        assert out == {"v": ["x", "a", "b", "c"]}


def test_drain_from_another_thread_during_a_parallel_step(saver) -> None:
    """Two parallel nodes; a drain asked while both run lets both finish and saves them."""
    control = RunControl()
    started = threading.Barrier(3, timeout=30)

    def par(tag: str):
        def fn(state: State) -> dict:
            started.wait()  # both running, and the drain asked, before either returns
            started.wait()
            return {"v": [tag]}

        return fn

    builder = StateGraph(State)
    builder.add_node("p", par("p"))
    builder.add_node("q", par("q"))
    builder.add_node("end", lambda s: {"v": ["end"]})
    builder.add_edge(START, "p")
    builder.add_edge(START, "q")
    builder.add_edge(["p", "q"], "end")
    graph = builder.compile(checkpointer=saver)

    def drain() -> None:
        started.wait()
        control.request_drain("sigterm")
        started.wait()

    other = threading.Thread(target=drain)
    other.start()
    try:
        with pytest.raises(GraphDrained, match="sigterm"):
            graph.invoke({"v": []}, cfg("t"), control=control)
    finally:
        other.join(30)
    state = graph.get_state(cfg("t"))
    assert sorted(state.values["v"]) == ["p", "q"] and state.next == ("end",)
    assert sorted(graph.invoke(None, cfg("t"))["v"]) == ["end", "p", "q"]


# -- a real SIGTERM --------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, operator, signal, sys, time
    from typing import Annotated
    from typing_extensions import TypedDict
    from tests.concurrency.backends import open_saver
    from threadloom.errors import GraphDrained
    from threadloom.graph import START, StateGraph
    from threadloom.runtime import RunControl, Runtime

    args = json.loads(sys.argv[1])

    class State(TypedDict):
        v: Annotated[list[str], operator.add]

    def slow(state: State, runtime: Runtime) -> dict:
        print("ready", flush=True)
        deadline = time.monotonic() + 60  # the parent's SIGTERM comes long before
        while not runtime.drain_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"v": ["b"]}

    control = RunControl()
    signal.signal(signal.SIGTERM, lambda signum, frame: control.request_drain("SIGTERM"))
    with open_saver(args["spec"]) as saver:
        builder = StateGraph(State)
        builder.add_node("a", lambda s: {"v": ["a"]})
        builder.add_node("b", slow)
        builder.add_node("c", lambda s: {"v": ["c"]})
        builder.add_edge(START, "a")
        builder.add_edge("a", "b")
        builder.add_edge("b", "c")
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "deploy"}}
        try:
            graph.invoke({"v": ["x"]}, config, control=control, durability=args["durability"])
            print("finished", flush=True)
        except GraphDrained as exc:
            print("drained", exc.reason, flush=True)
    """
)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_sigterm_handler_drains_a_subprocess_run(spec, durability: str) -> None:
    import json

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = json.dumps({"spec": spec, "durability": durability})
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, args], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and out.split() == ["drained", "SIGTERM"], out
    with open_saver(spec) as saver:
        assert lease_is_free(saver, "deploy")
        graph = chain(saver, drain_at=None)
        state = graph.get_state(cfg("deploy"))
        assert state.values == {"v": ["x", "a", "b"]} and state.next == ("c",)
        assert graph.invoke(None, cfg("deploy")) == {"v": ["x", "a", "b", "c"]}


ACHILD = textwrap.dedent(
    """
    import asyncio, operator, signal, sys
    from typing import Annotated
    from typing_extensions import TypedDict
    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
    from threadloom.errors import GraphDrained
    from threadloom.graph import START, StateGraph
    from threadloom.runtime import RunControl, Runtime

    class State(TypedDict):
        v: Annotated[list[str], operator.add]

    async def slow(state: State, runtime: Runtime) -> dict:
        print("ready", flush=True)
        for _ in range(6000):  # the parent's SIGTERM comes long before 60 s
            if runtime.drain_requested:
                break
            await asyncio.sleep(0.01)
        return {"v": ["b"]}

    async def main() -> None:
        control = RunControl()
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGTERM, control.request_drain, "SIGTERM"
        )
        async with AsyncSqliteSaver.from_conn_string(sys.argv[1]) as saver:
            builder = StateGraph(State)
            builder.add_node("a", lambda s: {"v": ["a"]})
            builder.add_node("b", slow)
            builder.add_node("c", lambda s: {"v": ["c"]})
            builder.add_edge(START, "a")
            builder.add_edge("a", "b")
            builder.add_edge("b", "c")
            graph = builder.compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "deploy"}}
            try:
                await graph.ainvoke({"v": ["x"]}, config, control=control)
                print("finished", flush=True)
            except GraphDrained as exc:
                print("drained", exc.reason, flush=True)

    asyncio.run(main())
    """
)


def test_sigterm_drains_an_async_run_on_an_async_saver(tmp_path) -> None:
    """An asyncio server's way: ``loop.add_signal_handler`` asks the drain; the
    ainvoke on AsyncSqliteSaver stops after the step, its queued saves stored."""
    from threadloom.checkpoint.sqlite import SqliteSaver

    path = str(tmp_path / "adrain.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", ACHILD, path], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and out.split() == ["drained", "SIGTERM"], out
    with SqliteSaver.from_conn_string(path) as saver:
        assert lease_is_free(saver, "deploy")
        graph = chain(saver, drain_at=None)
        assert graph.get_state(cfg("deploy")).next == ("c",)
        assert graph.invoke(None, cfg("deploy")) == {"v": ["x", "a", "b", "c"]}


def test_docs_example_runs(tmp_path) -> None:
    """docs/runtime.md, "Draining a run": the example runs as written (in a child
    process: it installs a SIGTERM handler and signals itself)."""
    import re

    text = (ROOT / "docs" / "runtime.md").read_text()
    section = text[text.index("## Draining a run") :]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "docs/runtime.md lost its drain example"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", block.group(1)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "drained: SIGTERM ('index',)",
        "{'done': ['fetch', 'embed', 'index']}",
    ]
