"""``Annotated[list, DeltaChannel(reducer)]`` behaves on threadloom as on LangGraph.

LangGraph stores a DeltaChannel's value only every ``snapshot_frequency``
updates and rebuilds it from ancestor writes in between; threadloom stores the
value (docs/compatibility.md). A user must not see the difference: the same
streams, ``get_state`` values, history values, ``update_state`` results,
``Overwrite`` rules, subgraph use and errors, on both savers and every
durability. A small ``snapshot_frequency`` makes LangGraph run both its
snapshot and its replay paths inside each scenario.
"""

import importlib
import operator
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h


def extend(state: list, writes: Sequence[Any]) -> list:
    """Batch reducer: every write (a list or one item) appended in order."""
    out = list(state)
    for w in writes:
        out.extend(w if isinstance(w, list) else [w])
    return out


def delta_cls(lib: Any) -> Any:
    """``DeltaChannel`` imported the way a user does: ``<lib>.channels``."""
    return importlib.import_module(f"{lib.name}.channels").DeltaChannel


def state_of(lib: Any, freq: int = 2) -> Any:
    Delta = delta_cls(lib)

    class State(TypedDict):
        items: Annotated[list, Delta(extend, snapshot_frequency=freq)]
        n: int

    return State


def _history(graph: Any, cfg: dict) -> list:
    return [(s.values, s.next) for s in graph.get_state_history(cfg)]


async def _ahistory(graph: Any, cfg: dict) -> list:
    return [(s.values, s.next) async for s in graph.aget_state_history(cfg)]


def _chain(lib: Any, saver: Any, freq: int = 2) -> Any:
    b = lib.StateGraph(state_of(lib, freq))
    b.add_node("a", lambda s: {"items": [f"a{s['n']}"], "n": s["n"] + 1})
    b.add_node("b", lambda s: {"items": [f"b{s['n']}", f"c{s['n']}"]})
    b.add_edge(lib.START, "a")
    b.add_edge("a", "b")
    return b.compile(checkpointer=saver)


def chain_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    graph = _chain(lib, saver)
    cfg = {"configurable": {"thread_id": "t"}}
    obs: h.Observations = []
    for i in range(4):
        chunks = list(graph.stream({"items": [f"in{i}"], "n": i}, cfg, **h.kw(durability)))
        obs.append((f"stream {i}", chunks))
    obs.append(("state", graph.get_state(cfg).values))
    obs.append(("history", _history(graph, cfg)))
    values = graph.invoke(None, cfg, stream_mode="values", **h.kw(durability))
    obs.append(("resume none", values))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_chain(saver, durability):
    h.run_parity(chain_scenario, saver, durability)


async def achain_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    graph = _chain(lib, saver)
    cfg = {"configurable": {"thread_id": "t"}}
    obs: h.Observations = []
    for i in range(3):
        chunks = [c async for c in graph.astream({"items": [i], "n": i}, cfg, **h.kw(durability))]
        obs.append((f"astream {i}", chunks))
    obs.append(("state", (await graph.aget_state(cfg)).values))
    obs.append(("history", await _ahistory(graph, cfg)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
async def test_chain_async(saver, durability):
    await h.arun_parity(achain_scenario, saver, durability)


def fanout_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    """Parallel tasks and Sends write one key in one step: applied in task-path order."""
    b = lib.StateGraph(state_of(lib, 3))
    b.add_node("start", lambda s: {"items": ["s"]})
    b.add_node("left", lambda s: {"items": ["L"]})
    b.add_node("right", lambda s: {"items": ["R1", "R2"]})
    b.add_node("item", lambda s: {"items": [f"i{s['n']}"]})
    b.add_edge(lib.START, "start")
    b.add_edge("start", "left")
    b.add_edge("start", "right")
    b.add_conditional_edges(
        "start", lambda s: [lib.Send("item", {"items": [], "n": k}) for k in range(3)], ["item"]
    )
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "f"}}
    obs: h.Observations = []
    for i in range(2):
        out = graph.invoke({"items": [f"in{i}"], "n": 0}, cfg, **h.kw(durability))
        obs.append((f"invoke {i}", out))
    obs.append(("history", _history(graph, cfg)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_fanout(saver, durability):
    h.run_parity(fanout_scenario, saver, durability)


def overwrite_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    """A node's Overwrite replaces the value; two in one step fail the step."""
    from importlib import import_module

    Overwrite = import_module(f"{lib.name}.types").Overwrite
    b = lib.StateGraph(state_of(lib))
    b.add_node("grow", lambda s: {"items": ["g"], "n": s["n"] + 1})
    b.add_node("reset", lambda s: {"items": Overwrite(["fresh"]) if s["n"] % 2 else ["keep"]})
    b.add_node("twice", lambda s: {"items": Overwrite(["x"])} if s["n"] > 2 else {})
    b.add_edge(lib.START, "grow")
    b.add_edge("grow", "reset")
    b.add_edge("grow", "twice")
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "o"}}
    obs: h.Observations = []
    for i in range(4):
        inp = {"items": ["in"], "n": i}
        obs.append(
            (
                f"invoke {i}",
                h.raises(lambda inp=inp: graph.invoke(inp, cfg, **h.kw(durability)), lib),
            )
        )
        # the live view applies the failed step's writes too: it fails the same way
        obs.append((f"state {i}", h.raises(lambda: graph.get_state(cfg).values, lib)))
    obs.append(("history", h.raises(lambda: _history(graph, cfg), lib)))
    past = [s.config for s in graph.get_state_history(cfg, limit=3)][-1]
    obs.append(("past", graph.get_state(past).values))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_overwrite(saver, durability):
    h.run_parity(overwrite_scenario, saver, durability)


def update_state_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    """update_state as a node, as input, with Overwrite, then a run on top."""
    from importlib import import_module

    Overwrite = import_module(f"{lib.name}.types").Overwrite
    graph = _chain(lib, saver)
    cfg = {"configurable": {"thread_id": "u"}}
    obs: h.Observations = []
    graph.invoke({"items": ["x"], "n": 0}, cfg, **h.kw(durability))
    graph.update_state(cfg, {"items": ["by-a"]}, as_node="a")
    obs.append(("after as_node", graph.get_state(cfg).values))
    graph.update_state(cfg, {"items": ["more", "again"]})
    obs.append(("after plain", graph.get_state(cfg).values))
    graph.update_state(cfg, {"items": Overwrite(["only"])}, as_node="b")
    obs.append(("after overwrite", graph.get_state(cfg).values))
    both = {"items": [Overwrite(["p"]), Overwrite(["q"])]}
    obs.append(("two overwrites", h.raises(lambda: _bulk(graph, cfg, lib, both), lib)))
    graph.invoke({"items": ["y"], "n": 5}, cfg, **h.kw(durability))
    obs.append(("state", graph.get_state(cfg).values))
    obs.append(("history", _history(graph, cfg)))
    past = list(graph.get_state_history(cfg))[3].config
    graph.update_state(past, {"items": ["forked"]}, as_node="a")
    obs.append(("fork", graph.get_state(cfg).values))
    return obs


def _bulk(graph: Any, cfg: dict, lib: Any, values: dict) -> Any:
    updates = [lib.StateUpdate({"items": v}, "a") for v in values["items"]]
    return graph.bulk_update_state(cfg, [updates])


@pytest.mark.parametrize("saver", h.SAVERS)
def test_update_state(saver):
    h.run_parity(update_state_scenario, saver)


class Sub(TypedDict):
    items: Annotated[list, operator.add]


def subgraph_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    """A subgraph whose own state uses a DeltaChannel, shared with its parent's key."""
    Delta = delta_cls(lib)

    class Inner(TypedDict):
        items: Annotated[list, Delta(extend, snapshot_frequency=2)]

    sb = lib.StateGraph(Inner)
    sb.add_node("s1", lambda s: {"items": ["s1"]})
    sb.add_node("s2", lambda s: {"items": [f"s2:{len(s['items'])}"]})
    sb.add_edge(lib.START, "s1")
    sb.add_edge("s1", "s2")
    b = lib.StateGraph(state_of(lib))
    b.add_node("pre", lambda s: {"items": ["pre"]})
    b.add_node("child", sb.compile())
    b.add_edge(lib.START, "pre")
    b.add_edge("pre", "child")
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "s"}}
    obs: h.Observations = []
    for i in range(2):
        chunks = list(graph.stream({"items": [i], "n": i}, cfg, subgraphs=True, **h.kw(durability)))
        obs.append((f"stream {i}", chunks))
    obs.append(("state", graph.get_state(cfg, subgraphs=True).values))
    obs.append(("history", _history(graph, cfg)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_subgraph(saver, durability):
    h.run_parity(subgraph_scenario, saver, durability)


def interrupt_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    """An interrupt between delta writes: the resumed run sees the value so far."""

    def ask(s: dict) -> dict:
        answer = lib.interrupt(len(s["items"]))
        return {"items": [f"ans:{answer}"]}

    b = lib.StateGraph(state_of(lib))
    b.add_node("a", lambda s: {"items": ["a"]})
    b.add_node("ask", ask)
    b.add_edge(lib.START, "a")
    b.add_edge("a", "ask")
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "i"}}
    obs: h.Observations = []
    obs.append(("first", graph.invoke({"items": ["x"], "n": 0}, cfg, **h.kw(durability))))
    obs.append(("paused", graph.get_state(cfg).values))
    resumed = graph.invoke(lib.Command(resume="yes"), cfg, **h.kw(durability))
    obs.append(("resumed", resumed))
    obs.append(("history", _history(graph, cfg)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_interrupt(saver, durability):
    h.run_parity(interrupt_scenario, saver, durability)


def errors_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    Delta = delta_cls(lib)
    obs: h.Observations = []
    obs.append(("zero", h.raises(lambda: Delta(extend, snapshot_frequency=0), lib)))
    obs.append(("negative", h.raises(lambda: Delta(extend, snapshot_frequency=-3), lib)))

    def boom(s: dict) -> dict:
        raise RuntimeError("boom")

    b = lib.StateGraph(state_of(lib))
    b.add_node("a", lambda s: {"items": ["a"]})
    b.add_node("boom", boom)
    b.add_edge(lib.START, "a")
    b.add_edge("a", "boom")
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "e"}}
    inp = {"items": ["x"], "n": 0}
    obs.append(("fails", h.raises(lambda: graph.invoke(inp, cfg, **h.kw(durability)), lib)))
    obs.append(("kept", graph.get_state(cfg).values))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_errors(saver, durability):
    h.run_parity(errors_scenario, saver, durability)


def _other(state: list, writes: Sequence[Any]) -> list:
    return state


def schemas_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    """The key declared with its own DeltaChannel in the state, input and output
    schemas is one key (LangGraph compares channels with ==); another reducer
    for it is an error."""
    Delta = delta_cls(lib)

    class State(TypedDict):
        items: Annotated[list, Delta(extend)]
        n: int

    class In(TypedDict):
        items: Annotated[list, Delta(extend)]

    class Out(TypedDict):
        items: Annotated[list, Delta(extend)]

    class Bad(TypedDict):
        items: Annotated[list, Delta(_other)]

    def build(input_schema: Any) -> Any:
        b = lib.StateGraph(State, input_schema=input_schema, output_schema=Out)
        b.add_node("a", lambda s: {"items": ["a"], "n": 1})
        b.add_edge(lib.START, "a")
        return b.compile(checkpointer=saver)

    cfg = {"configurable": {"thread_id": "sc"}}
    obs: h.Observations = []
    obs.append(("alike", build(In).invoke({"items": ["x"]}, cfg, **h.kw(durability))))
    obs.append(("state", build(In).get_state(cfg).values))
    obs.append(("other reducer", h.raises(lambda: build(Bad), lib)))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
def test_schemas(saver):
    h.run_parity(schemas_scenario, saver)


def _meta(metadata: dict) -> dict:
    """Checkpoint metadata without LangGraph's DeltaChannel snapshot counters
    (threadloom stores the value and writes none: docs/compatibility.md)."""
    return {k: v for k, v in metadata.items() if k != "counters_since_delta_snapshot"}


def modes_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    """checkpoints/tasks/updates/values streams, metadata, and a replay from the past."""
    graph = _chain(lib, saver)
    cfg = {"configurable": {"thread_id": "m"}}
    obs: h.Observations = []
    modes = ["checkpoints", "tasks", "updates", "values"]
    for i in range(3):
        chunks = list(
            graph.stream({"items": [i], "n": i}, cfg, stream_mode=modes, **h.kw(durability))
        )
        for mode, payload in chunks:
            if mode == "checkpoints":
                payload["metadata"] = _meta(payload["metadata"])
        obs.append((f"stream {i}", chunks))
    history = list(graph.get_state_history(cfg))
    obs.append(("metadata", [_meta(s.metadata) for s in history]))
    past = history[len(history) // 2].config
    replayed = list(graph.stream(None, past, stream_mode="values", **h.kw(durability)))
    obs.append(("replay", replayed))
    obs.append(("after", graph.get_state(cfg).values))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_stream_modes_and_replay(saver, durability):
    h.run_parity(modes_scenario, saver, durability)


def test_no_snapshot_counters_in_metadata():
    """LangGraph counts updates since its last snapshot in the metadata; threadloom
    stores the value in every checkpoint and writes no such key."""
    for name in h.LIBS:
        lib = h._lib(name)
        with h.open_saver(lib, "memory") as saver:
            graph = _chain(lib, saver)
            cfg = {"configurable": {"thread_id": "c"}}
            graph.invoke({"items": [], "n": 0}, cfg)
            keys = {k for s in graph.get_state_history(cfg) for k in s.metadata}
            assert ("counters_since_delta_snapshot" in keys) == (name == "langgraph"), name


def test_exit_durability_keeps_no_stub_checkpoint():
    """Under durability="exit", LangGraph adds a stub root checkpoint (step -2,
    the key's empty value) to anchor the run's unsnapshotted DeltaChannel writes;
    threadloom saves the final checkpoint with the value, and nothing else
    (docs/compatibility.md). The other history entries are the same."""
    seen = {}
    for name in h.LIBS:
        lib = h._lib(name)
        with h.open_saver(lib, "memory") as saver:
            graph = _chain(lib, saver, freq=100)
            cfg = {"configurable": {"thread_id": "x"}}
            for i in range(2):
                graph.invoke({"items": [i], "n": i}, cfg, durability="exit")
            seen[name] = [(s.metadata["step"], s.values) for s in graph.get_state_history(cfg)]
    assert seen["langgraph"][-1] == (-2, {"items": []})
    assert seen["threadloom"] == seen["langgraph"][:-1]


def chain_default_scenario(lib: Any, saver: Any, durability: str | None) -> h.Observations:
    """LangGraph's default snapshot_frequency (100): only its replay path runs."""
    graph = _chain(lib, saver, freq=100)
    cfg = {"configurable": {"thread_id": "t100"}}
    obs: h.Observations = []
    for i in range(3):
        obs.append((f"invoke {i}", graph.invoke({"items": [i], "n": i}, cfg, **h.kw(durability))))
    obs.append(("history", _history(graph, cfg)))
    return obs


@pytest.mark.parametrize("durability", ["sync", "async"])  # exit: see the stub test above
@pytest.mark.parametrize("saver", h.SAVERS)
def test_chain_default_frequency(saver, durability):
    h.run_parity(chain_default_scenario, saver, durability)
