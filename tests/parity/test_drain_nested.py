"""Parity: draining around subgraphs, Sends, interrupts, breakpoints and replays.

The basics (where a drain stops, what is saved and streamed) are in test_drain.py,
whose helpers these scenarios share.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.parity import helpers as h
from tests.parity.test_drain import (
    CFG,
    MODES,
    State,
    chain,
    names,
    node,
    state_of,
    stream_until_drained,
)

# -- subgraphs, Sends, interrupts ------------------------------------------------------


def sc_subgraph(lib, saver, durability, nested: bool = True):
    """A subgraph node drains: the subgraph stops inside the parent's step, the parent
    stops with it, and the resume continues the subgraph from its own checkpoint.
    ``nested=False`` leaves out what differs under durability "exit" (below)."""
    RunControl, _, _ = names(lib)
    runs: list[str] = []
    sub = lib.StateGraph(State)
    sub.add_node("s1", node(lib, "s1", "sub", [], runs))
    sub.add_node("s2", node(lib, "s2", None, None, runs))
    sub.add_edge(lib.START, "s1")
    sub.add_edge("s1", "s2")
    builder = lib.StateGraph(State)
    builder.add_node("a", node(lib, "a"))
    builder.add_node("sub", sub.compile())
    builder.add_node("c", node(lib, "c"))
    builder.add_edge(lib.START, "a")
    builder.add_edge("a", "sub")
    builder.add_edge("sub", "c")
    graph = builder.compile(checkpointer=saver)
    kw = {"stream_mode": ["values", "updates"], "subgraphs": True, **h.kw(durability)}
    obs = stream_until_drained(lib, graph, {"v": ["x"]}, control=RunControl(), **kw)
    obs += state_of(graph, subgraphs=nested)
    obs.append(("resumed", graph.invoke(None, CFG, **h.kw(durability))))
    obs += state_of(graph)
    return obs + ([("subgraph runs", runs)] if nested else [])


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drain_inside_a_subgraph(saver: str, durability: str) -> None:
    if durability != "exit":
        h.run_parity(sc_subgraph, saver, durability)
        return
    # durability "exit": LangGraph saves no step of a drained subgraph, so the resume
    # runs s1 again; threadloom saves the subgraph where it stopped, as for an
    # interrupt (docs/compatibility.md). Everything else is compared.
    h.run_parity(lambda *a: sc_subgraph(*a, nested=False), saver, durability)
    oracle = dict(h.oracle_only(sc_subgraph, saver, durability))
    assert oracle["subgraph runs"] == ["s1", "s1", "s2"]
    lib = h._lib("threadloom")
    with h.open_saver(lib, saver) as checkpointer:
        obs = sc_subgraph(lib, checkpointer, durability)
    ours, drained = dict(obs), next(v for label, v in obs if label == "state")
    assert ours["subgraph runs"] == ["s1", "s2"]
    assert drained.tasks[0].state.next == ("s2",)
    assert drained.tasks[0].state.values == {"v": ["x", "a", "s1"]}
    assert ours["resumed"] == oracle["resumed"]


def fan_graph(lib, saver, drain_in: str):
    """a fans out three Sends to w, then c; ``drain_in`` ("a" or "w1") asks to drain."""
    once: list = []

    def w(state: State, runtime) -> dict:
        if drain_in == "w1" and state["v"] == ["1"] and not once:
            once.append(1)
            runtime.control.request_drain()
        return {"v": ["w" + state["v"][0]]}

    _, Runtime, _ = names(lib)
    w.__annotations__["runtime"] = Runtime
    builder = lib.StateGraph(State)
    builder.add_node("a", node(lib, "a", "fan" if drain_in == "a" else None, []))
    builder.add_node("w", w)
    builder.add_node("c", node(lib, "c"))
    builder.add_edge(lib.START, "a")
    builder.add_conditional_edges(
        "a", lambda s: [lib.Send("w", {"v": [str(i)]}) for i in range(3)], ["w"]
    )
    builder.add_edge("w", "c")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("drain_in", ["a", "w1"])
@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drain_with_sends(saver: str, durability: str, drain_in: str) -> None:
    """Drained before the Send tasks (they wait in the checkpoint), or in one of them
    (its siblings finish; the step is saved whole)."""

    def sc(lib, saver, durability):
        graph = fan_graph(lib, saver, drain_in)
        # values, not updates: the Send tasks finish (and stream updates) in any order
        kw = {"stream_mode": "values", **h.kw(durability)}
        obs = stream_until_drained(lib, graph, {"v": ["x"]}, **kw)
        obs += state_of(graph)
        obs.append(("resumed", graph.invoke(None, CFG, **h.kw(durability))))
        return obs

    h.run_parity(sc, saver, durability)


def sc_interrupt_same_step(lib, saver, durability):
    """An interrupt in the step that asked for the drain wins: the run pauses (no
    GraphDrained) and the resume answers the interrupt with a fresh control."""
    RunControl, _, _ = names(lib)

    def ask(state: State) -> dict:
        return {"v": [f"q:{lib.interrupt('q?')}"]}

    builder = lib.StateGraph(State)
    builder.add_node("a", node(lib, "a"))
    builder.add_node("b", node(lib, "b", "deploy", []))
    builder.add_node("q", ask)
    builder.add_node("c", node(lib, "c"))
    builder.add_edge(lib.START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("a", "q")
    builder.add_edge(["b", "q"], "c")
    graph = builder.compile(checkpointer=saver)
    control = RunControl()
    # values, not updates: b and q finish (and stream updates) in any order
    obs = stream_until_drained(
        lib, graph, {"v": ["x"]}, stream_mode="values", control=control, **h.kw(durability)
    )
    obs += state_of(graph)
    obs += stream_until_drained(
        lib, graph, lib.Command(resume="ok"), stream_mode="values", control=control
    )
    obs += state_of(graph)
    obs.append(("resumed", graph.invoke(lib.Command(resume="ok"), CFG, **h.kw(durability))))
    return obs + state_of(graph)


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drain_and_interrupt_in_one_step(saver: str, durability: str) -> None:
    h.run_parity(sc_interrupt_same_step, saver, durability)


def sc_breakpoint(lib, saver, durability):
    """A drained resume from ``interrupt_before``: it passes the breakpoint, then drains;
    the next resume runs the node."""
    RunControl, _, _ = names(lib)
    graph = chain(lib, None, drain_at=None)
    graph = graph.builder.compile(checkpointer=saver, interrupt_before=["b"])
    obs = [("first", graph.invoke({"v": ["x"]}, CFG, **h.kw(durability)))]
    control = RunControl()
    control.request_drain("later")
    obs += stream_until_drained(lib, graph, None, control=control, **h.kw(durability))
    obs += state_of(graph)
    obs.append(("resumed", graph.invoke(None, CFG, **h.kw(durability))))
    return obs + state_of(graph)


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drained_resume_from_a_breakpoint(saver: str, durability: str) -> None:
    h.run_parity(sc_breakpoint, saver, durability)


def sc_node_raises(lib, saver, durability):
    """A long node that sees ``runtime.drain_requested`` and raises GraphDrained itself:
    its step saves nothing for it (a sibling's writes are kept), the run raises, and
    the resume runs it again."""
    RunControl, Runtime, GraphDrained = names(lib)
    runs: list[str] = []

    def long(state: State, runtime: Runtime) -> dict:
        runs.append("long")
        if len(runs) == 1:
            runtime.control.request_drain("stop now")
        if runtime.drain_requested and len(runs) == 1:
            raise GraphDrained(runtime.drain_reason)
        return {"v": ["long"]}

    builder = lib.StateGraph(State)
    builder.add_node("a", node(lib, "a"))
    builder.add_node("long", long)
    builder.add_node("c", node(lib, "c"))
    builder.add_edge(lib.START, "a")
    builder.add_edge("a", "long")
    builder.add_edge("long", "c")
    graph = builder.compile(checkpointer=saver)
    obs = stream_until_drained(
        lib, graph, {"v": ["x"]}, stream_mode=MODES, control=RunControl(), **h.kw(durability)
    )
    obs += state_of(graph)
    obs.append(("resumed", graph.invoke(None, CFG, **h.kw(durability))))
    return obs + [("runs", runs)]


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_a_node_raising_graph_drained(saver: str, durability: str) -> None:
    h.run_parity(sc_node_raises, saver, durability)


def sc_replay(lib, saver, durability):
    """A drained control on a replay from an old checkpoint: nothing runs; then the
    replay with a fresh control forks from there."""
    RunControl, _, _ = names(lib)
    graph = chain(lib, saver, drain_at=None)
    graph.invoke({"v": ["x"]}, CFG, **h.kw(durability))
    old = [s for s in graph.get_state_history(CFG) if s.next == ("b",)][0]
    control = RunControl()
    control.request_drain("replay")
    obs = stream_until_drained(
        lib, graph, None, config=old.config, stream_mode=MODES, control=control, **h.kw(durability)
    )
    obs += state_of(graph)
    obs.append(("forked", graph.invoke(None, old.config, **h.kw(durability))))
    return obs + state_of(graph)


@pytest.mark.parametrize("durability", ["sync", "async"])  # "exit" keeps no old checkpoint
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drained_replay(saver: str, durability: str) -> None:
    h.run_parity(sc_replay, saver, durability)


def sc_subgraph_and_interrupt(lib, saver, durability):
    """A subgraph drains while a sibling node interrupts: the run raises GraphDrained
    (the interrupt is kept, pending); one resume answers it and finishes both."""
    RunControl, _, GraphDrained = names(lib)
    runs: list[str] = []
    sub = lib.StateGraph(State)
    sub.add_node("s1", node(lib, "s1", "sub", [], runs))
    sub.add_node("s2", node(lib, "s2", None, None, runs))
    sub.add_edge(lib.START, "s1")
    sub.add_edge("s1", "s2")

    def ask(state: State) -> dict:
        return {"v": [f"q:{lib.interrupt('q?')}"]}

    builder = lib.StateGraph(State)
    builder.add_node("sub", sub.compile())
    builder.add_node("ask", ask)
    builder.add_node("c", node(lib, "c"))
    builder.add_edge(lib.START, "sub")
    builder.add_edge(lib.START, "ask")
    builder.add_edge(["sub", "ask"], "c")
    graph = builder.compile(checkpointer=saver)
    try:
        obs = [("out", graph.invoke({"v": ["x"]}, CFG, control=RunControl(), **h.kw(durability)))]
    except GraphDrained as exc:
        obs = [("raised", exc.reason)]
    obs += state_of(
        graph, subgraphs=durability != "exit"
    )  # "exit": see test_drain_inside_a_subgraph
    obs.append(("resumed", graph.invoke(lib.Command(resume="ok"), CFG, **h.kw(durability))))
    return obs + state_of(graph)


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_subgraph_drains_while_a_sibling_interrupts(saver: str, durability: str) -> None:
    h.run_parity(sc_subgraph_and_interrupt, saver, durability)


ALL_MODES = ["values", "updates", "tasks", "checkpoints", "debug", "custom"]


def sc_subgraph_all_modes(lib, saver, durability):
    """Every stream mode with ``subgraphs=True``, drained inside the subgraph, then the
    resumed run's stream (durability "exit" differs by design: the resume continues
    the subgraph where LangGraph restarts it)."""
    RunControl, _, _ = names(lib)
    sub = lib.StateGraph(State)
    sub.add_node("s1", node(lib, "s1", "sub", []))
    sub.add_node("s2", node(lib, "s2"))
    sub.add_edge(lib.START, "s1")
    sub.add_edge("s1", "s2")
    builder = lib.StateGraph(State)
    builder.add_node("a", node(lib, "a"))
    builder.add_node("sub", sub.compile())
    builder.add_node("c", node(lib, "c"))
    builder.add_edge(lib.START, "a")
    builder.add_edge("a", "sub")
    builder.add_edge("sub", "c")
    graph = builder.compile(checkpointer=saver)
    kw = {"stream_mode": ALL_MODES, "subgraphs": True, **h.kw(durability)}
    obs = stream_until_drained(lib, graph, {"v": ["x"]}, control=RunControl(), **kw)
    return obs + stream_until_drained(lib, graph, None, **kw)


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("saver", h.SAVERS)
def test_subgraph_drain_every_stream_mode(saver: str, durability: str) -> None:
    h.run_parity(sc_subgraph_all_modes, saver, durability)


def sc_error_handler(lib, saver, durability):
    """A node asks for a drain and then fails: its error handler still runs in that
    step (the failure is handled, not lost); the run drains before the handler's goto."""
    RunControl, Runtime, _ = names(lib)
    NodeError = importlib.import_module(f"{lib.name}.errors").NodeError
    calls: list[str] = []

    def bad(state: State, runtime: Runtime) -> dict:
        calls.append("bad")
        runtime.control.request_drain("failing")
        raise ValueError("boom")

    def handler(state: State, error: NodeError) -> Any:  # type: ignore[valid-type]
        calls.append("handler")
        return lib.Command(update={"v": [f"handled {error.node}"]}, goto="after")

    def after(state: State) -> dict:
        calls.append("after")
        return {"v": ["after"]}

    builder = lib.StateGraph(State)
    builder.add_node("bad", bad, error_handler=handler).add_node("after", after)
    builder.add_edge(lib.START, "bad")
    graph = builder.compile(checkpointer=saver)
    kw = {"stream_mode": "updates", **h.kw(durability)}
    obs = stream_until_drained(lib, graph, {"v": []}, control=RunControl(), **kw)
    obs += [("calls", list(calls)), *state_of(graph)]
    obs.append(("resumed", graph.invoke(None, CFG, **h.kw(durability))))
    return obs + [("calls", calls)]


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_drain_with_an_error_handler(saver: str, durability: str) -> None:
    h.run_parity(sc_error_handler, saver, durability)
