"""Parity: cooperative draining (LangGraph 1.2's ``RunControl`` / ``GraphDrained``).

A run given ``control=RunControl()`` (or reading ``runtime.control`` in a node)
stops before the step after ``request_drain()``: the step that was running
finishes and is saved, no event of the next step is streamed, and the run raises
``GraphDrained(reason)``; ``invoke(None, config)`` later runs the rest. Each
scenario runs on LangGraph and threadloom with both savers and every durability,
and compares the streamed events, the error, ``get_state``, the history and the
resumed run.
"""

from __future__ import annotations

import importlib
import operator
import threading
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h
from tests.parity.test_stream_modes import _scrub

CFG = {"configurable": {"thread_id": "t1"}}
MODES = ["values", "updates", "tasks", "checkpoints"]


class State(TypedDict):
    v: Annotated[list[str], operator.add]


def names(lib) -> tuple[Any, Any, Any]:
    """``RunControl``, ``Runtime`` and ``GraphDrained`` of ``lib``, imported as a user would."""
    runtime = importlib.import_module(f"{lib.name}.runtime")
    errors = importlib.import_module(f"{lib.name}.errors")
    return runtime.RunControl, runtime.Runtime, errors.GraphDrained


def node(lib, tag: str, drain: str | None = None, once: list | None = None, runs=None):
    """A node appending ``tag``; with ``drain``, it asks its run to drain (once);
    ``runs`` records each run of it."""
    _, Runtime, _ = names(lib)

    def fn(state: State, runtime: Runtime) -> dict:
        assert runtime.control is not None
        if runs is not None:
            runs.append(tag)
        if drain is not None and (once is None or not once):
            if once is not None:
                once.append(tag)
            runtime.control.request_drain(drain)
        return {"v": [tag]}

    return fn


def chain(lib, saver, drain_at: str | None = "b", reason: str = "deploy"):
    """START -> a -> b -> c; ``drain_at`` requests a drain while it runs."""
    builder = lib.StateGraph(State)
    for name in "abc":
        builder.add_node(name, node(lib, name, reason if name == drain_at else None, []))
    builder.add_edge(lib.START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    return builder.compile(checkpointer=saver)


def stream_until_drained(lib, graph, input, config=CFG, **kwargs) -> list[tuple[str, Any]]:
    """The chunks streamed, then what the run raised (type and reason)."""
    _, _, GraphDrained = names(lib)
    chunks = []
    try:
        for chunk in graph.stream(input, config, **kwargs):
            if isinstance(chunk, dict) and "type" in chunk and "data" in chunk:  # a v2 part
                chunk = {**chunk, "data": _scrub(chunk["data"])}
            chunks.append(_scrub(chunk))
        raised = None
    except GraphDrained as exc:
        raised = (type(exc).__name__, exc.reason, str(exc), isinstance(exc, Exception))
    return [("chunks", chunks), ("raised", raised)]


def _strip(snapshot: Any) -> Any:
    """Drop ``__pregel_*`` keys LangGraph leaks into a nested snapshot's config (its
    saver object: internal, and not what this file compares)."""
    if type(snapshot).__name__ != "StateSnapshot":
        return snapshot
    conf = {k: v for k, v in snapshot.config["configurable"].items() if not k.startswith("__")}
    tasks = tuple(t._replace(state=_strip(t.state)) for t in snapshot.tasks)
    return snapshot._replace(config={**snapshot.config, "configurable": conf}, tasks=tasks)


def state_of(graph, config=CFG, subgraphs: bool = False) -> list[tuple[str, Any]]:
    return [
        ("state", _strip(graph.get_state(config, subgraphs=subgraphs))),
        ("history", list(graph.get_state_history(config))),
    ]


# -- where a drain stops --------------------------------------------------------------


def sc_drain_in_node(lib, saver, durability):
    graph = chain(lib, saver)
    RunControl, _, _ = names(lib)
    obs = stream_until_drained(
        lib, graph, {"v": ["x"]}, stream_mode=MODES, control=RunControl(), **h.kw(durability)
    )
    obs += state_of(graph)
    obs.append(("resumed", graph.invoke(None, CFG, **h.kw(durability))))
    return obs + state_of(graph)


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drain_requested_by_a_node(saver: str, durability: str) -> None:
    h.run_parity(sc_drain_in_node, saver, durability)


def sc_drained_before_start(lib, saver, durability):
    """A control already drained: the input is saved, nothing runs; a second drained
    run on the same thread stops again; a fresh control runs it all."""
    graph = chain(lib, saver, drain_at=None)
    RunControl, _, _ = names(lib)
    control = RunControl()
    control.request_drain()
    obs = stream_until_drained(
        lib, graph, {"v": ["x"]}, stream_mode=MODES, control=control, **h.kw(durability)
    )
    obs += state_of(graph)
    obs += stream_until_drained(lib, graph, None, control=control, **h.kw(durability))
    obs.append(("control", (control.drain_requested, control.drain_reason)))
    obs.append(("resumed", graph.invoke(None, CFG, **h.kw(durability))))
    return obs + state_of(graph)


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drained_before_the_run_starts(saver: str, durability: str) -> None:
    h.run_parity(sc_drained_before_start, saver, durability)


def sc_drain_without_control(lib, saver, durability):
    """No ``control=``: nodes still get one, and a drain they ask for stops the run."""
    graph = chain(lib, saver, drain_at="a", reason="node")
    obs = stream_until_drained(lib, graph, {"v": ["x"]}, stream_mode="updates", **h.kw(durability))
    obs += state_of(graph)
    obs.append(("resumed", graph.invoke(None, CFG, stream_mode="updates", **h.kw(durability))))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drain_without_a_control_argument(saver: str, durability: str) -> None:
    h.run_parity(sc_drain_without_control, saver, durability)


def sc_no_checkpointer(lib, saver, durability):
    obs = stream_until_drained(lib, chain(lib, None, drain_at="b"), {"v": ["x"]}, config=None)
    return obs + [("again", chain(lib, None, drain_at=None).invoke({"v": ["x"]}))]


def test_drain_without_a_checkpointer() -> None:
    h.run_parity(sc_no_checkpointer)


def sc_from_another_thread(lib, saver, durability):
    """``request_drain`` from another thread while ``b`` runs: ``b``'s step ends, saved."""
    RunControl, _, _ = names(lib)
    control = RunControl()
    started, release = threading.Event(), threading.Event()

    def slow(state: State) -> dict:
        started.set()
        assert release.wait(30)
        return {"v": ["b"]}

    builder = lib.StateGraph(State)
    builder.add_node("a", node(lib, "a"))
    builder.add_node("b", slow)
    builder.add_node("c", node(lib, "c"))
    builder.add_edge(lib.START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    graph = builder.compile(checkpointer=saver)

    def drain() -> None:
        assert started.wait(30)
        control.request_drain("sigterm")
        release.set()

    other = threading.Thread(target=drain)
    other.start()
    try:
        obs = stream_until_drained(
            lib, graph, {"v": ["x"]}, stream_mode="updates", control=control, **h.kw(durability)
        )
    finally:
        release.set()
        other.join()
    obs += state_of(graph)
    obs.append(("resumed", graph.invoke(None, CFG, **h.kw(durability))))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drain_from_another_thread(saver: str, durability: str) -> None:
    h.run_parity(sc_from_another_thread, saver, durability)


def test_a_control_that_is_not_a_run_control_is_refused() -> None:
    """LangGraph fails inside the loop with an AttributeError; threadloom refuses the
    call with a ConfigError before anything runs (docs/compatibility.md)."""
    from threadloom.errors import ConfigError

    with pytest.raises(AttributeError):
        h.oracle_only(lambda lib, saver, d: chain(lib, saver).invoke({"v": []}, CFG, control="x"))
    lib = h._lib("threadloom")
    with h.open_saver(lib, "memory") as saver:
        graph = chain(lib, saver)
        with pytest.raises(ConfigError, match="RunControl"):
            graph.invoke({"v": []}, CFG, control="x")
        assert graph.get_state(CFG).values == {}  # nothing was saved


# -- async, version="v2" ---------------------------------------------------------------


async def sc_async(lib, saver, durability):
    RunControl, Runtime, GraphDrained = names(lib)

    async def a(state: State, runtime: Runtime) -> dict:
        runtime.control.request_drain("async")
        return {"v": ["a"]}

    builder = lib.StateGraph(State)
    builder.add_node("a", a)
    builder.add_node("b", node(lib, "b"))
    builder.add_edge(lib.START, "a")
    builder.add_edge("a", "b")
    graph = builder.compile(checkpointer=saver)
    chunks = []
    try:
        async for chunk in graph.astream(
            {"v": ["x"]}, CFG, stream_mode=MODES, control=RunControl(), **h.kw(durability)
        ):
            chunks.append(_scrub(chunk))
        raised = None
    except GraphDrained as exc:
        raised = exc.reason
    obs = [("chunks", chunks), ("raised", raised)]
    obs.append(("state", await graph.aget_state(CFG)))
    obs.append(("history", [s async for s in graph.aget_state_history(CFG)]))
    control = RunControl()
    control.request_drain("again")
    try:
        await graph.ainvoke(None, CFG, control=control, version="v2", **h.kw(durability))
    except GraphDrained as exc:
        obs.append(("v2 raised", exc.reason))
    out = await graph.ainvoke(None, CFG, version="v2", **h.kw(durability))
    obs.append(("resumed", (out.value, out.interrupts)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
async def test_async_drain(saver: str, durability: str) -> None:
    await h.arun_parity(sc_async, saver, durability)


def sc_v2(lib, saver, durability):
    graph = chain(lib, saver, drain_at="a")
    RunControl, _, _ = names(lib)
    kw = {"stream_mode": ["values", "updates", "debug"], "version": "v2", **h.kw(durability)}
    obs = stream_until_drained(lib, graph, {"v": ["x"]}, control=RunControl(), **kw)
    out = graph.invoke(None, CFG, version="v2", **h.kw(durability))
    return obs + [("resumed", (out.value, out.interrupts))]


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_version_v2(durability: str) -> None:
    h.run_parity(sc_v2, "sqlite", durability)


def sc_drain_in_last_step(lib, saver, durability):
    """A drain asked in the last step changes nothing: no step is left, the run
    finishes and returns (no GraphDrained)."""
    RunControl, _, _ = names(lib)
    control = RunControl()
    graph = chain(lib, saver, drain_at="c")
    obs = [("out", graph.invoke({"v": ["x"]}, CFG, control=control, **h.kw(durability)))]
    obs.append(("control", control.drain_reason))
    return obs + state_of(graph)


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drain_in_the_last_step_finishes(saver: str, durability: str) -> None:
    h.run_parity(sc_drain_in_last_step, saver, durability)
