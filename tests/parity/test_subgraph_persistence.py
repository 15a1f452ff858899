"""Parity: subgraph state (namespaces, checkpoint_map, checkpointer None/True/False,
interrupts, resume, replay and forks at every level, three levels deep)."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    value: Annotated[list[str], operator.add]


def appender(tag: str, log: list[str] | None = None):
    def node(state: State) -> dict:
        if log is not None:
            log.append(tag)
        return {"value": [tag]}

    return node


def asker(lib, tag: str, log: list[str] | None = None):
    def node(state: State) -> dict:
        if log is not None:
            log.append(tag)
        return {"value": [f"{tag}:{lib.interrupt(tag + '?')}"]}

    return node


def child_graph(lib, *, ask: bool = True, checkpointer: Any = None, log=None):
    """START -> c1 -> (c_ask) -> c2"""
    builder = lib.StateGraph(State).add_node("c1", appender("c1", log))
    names = ["c1"]
    if ask:
        builder.add_node("c_ask", asker(lib, "c_ask", log))
        names.append("c_ask")
    builder.add_node("c2", appender("c2", log))
    names.append("c2")
    builder.add_edge(lib.START, "c1")
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=checkpointer)


def parent_graph(lib, saver, child, log=None, name: str = "child"):
    """START -> p1 -> child -> p2"""
    return (
        lib.StateGraph(State)
        .add_node("p1", appender("p1", log))
        .add_node(name, child)
        .add_node("p2", appender("p2", log))
        .add_edge(lib.START, "p1")
        .add_edge("p1", name)
        .add_edge(name, "p2")
        .compile(checkpointer=saver)
    )


def three_level_graph(lib, saver, log=None):
    """root: p1 -> middle -> p2; middle: m1 -> inner; inner: c1 -> c_ask -> c2."""
    inner = child_graph(lib, log=log)
    middle = (
        lib.StateGraph(State)
        .add_node("m1", appender("m1", log))
        .add_node("inner", inner)
        .add_edge(lib.START, "m1")
        .add_edge("m1", "inner")
        .compile()
    )
    return parent_graph(lib, saver, middle, log, name="middle")


def history(graph, config=CFG, **kwargs) -> list:
    return list(graph.get_state_history(config, **kwargs))


def sc_interrupt_in_subgraph(lib, saver, durability):
    log: list[str] = []
    graph = parent_graph(lib, saver, child_graph(lib, log=log), log)
    obs = [("first", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    parent = graph.get_state(CFG)
    obs.append(("parent", parent))
    obs.append(("nested", graph.get_state(CFG, subgraphs=True)))
    obs.append(("nested historical", graph.get_state(parent.config, subgraphs=True)))
    sub_cfg = parent.tasks[0].state
    obs.append(("child via task.state", graph.get_state(sub_cfg)))
    obs.append(("child history", history(graph, sub_cfg)))
    obs.append(("resume", graph.invoke(lib.Command(resume="ok"), CFG, **h.kw(durability))))
    obs.append(("done", graph.get_state(CFG, subgraphs=True)))
    obs.append(("old parent nested", graph.get_state(parent.config, subgraphs=True)))
    obs.append(("history", history(graph)))
    obs.append(("ran", list(log)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_interrupt_inside_subgraph(saver: str, durability: str) -> None:
    h.run_parity(sc_interrupt_in_subgraph, saver, durability)


def sc_update_subgraph_state(lib, saver, durability):
    graph = parent_graph(lib, saver, child_graph(lib))
    graph.invoke({"value": []}, CFG)
    sub_cfg = graph.get_state(CFG).tasks[0].state
    obs = [("update child", graph.update_state(sub_cfg, {"value": ["patched"]}, as_node="c1"))]
    obs.append(("nested", graph.get_state(CFG, subgraphs=True)))
    obs.append(("resume", graph.invoke(lib.Command(resume="ok"), CFG)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
def test_update_state_of_subgraph(saver: str) -> None:
    h.run_parity(sc_update_subgraph_state, saver)


def sc_replay_parent_before_subgraph(lib, saver, durability):
    log: list[str] = []
    graph = parent_graph(lib, saver, child_graph(lib, log=log), log)
    graph.invoke({"value": []}, CFG)
    graph.invoke(lib.Command(resume="first"), CFG)
    before_child = next(s for s in history(graph) if s.next == ("child",))
    log.clear()
    obs = [("replay", graph.invoke(None, before_child.config, **h.kw(durability)))]
    obs.append(("ran", list(log)))
    obs.append(("nested", graph.get_state(CFG, subgraphs=True)))
    obs.append(("resume", graph.invoke(lib.Command(resume="second"), CFG)))
    fork = graph.update_state(before_child.config, {"value": ["forked"]}, as_node="p1")
    obs.append(("fork", graph.invoke(None, fork)))
    obs.append(("fork nested", graph.get_state(CFG, subgraphs=True)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_replay_and_fork_parent_around_subgraph(saver: str, durability: str) -> None:
    h.run_parity(sc_replay_parent_before_subgraph, saver, durability)


def sc_three_levels(lib, saver, durability):
    log: list[str] = []
    graph = three_level_graph(lib, saver, log)
    obs = [("first", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    nested = graph.get_state(CFG, subgraphs=True)
    obs.append(("nested", nested))
    middle_cfg = graph.get_state(CFG).tasks[0].state
    obs.append(("middle", graph.get_state(middle_cfg, subgraphs=True)))
    inner_cfg = graph.get_state(middle_cfg).tasks[0].state
    obs.append(("inner", graph.get_state(inner_cfg)))
    obs.append(("inner history", history(graph, inner_cfg)))
    obs.append(("resume", graph.invoke(lib.Command(resume="deep"), CFG, **h.kw(durability))))
    obs.append(("done", graph.get_state(CFG, subgraphs=True)))
    obs.append(("ran", list(log)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_three_levels_deep(saver: str, durability: str) -> None:
    h.run_parity(sc_three_levels, saver, durability)


def sc_checkpointer_true(lib, saver, durability):
    """checkpointer=True: the subgraph keeps its own state across parent runs."""

    class Count(TypedDict):
        value: Annotated[list[str], operator.add]

    child = (
        lib.StateGraph(Count)
        .add_node("c", lambda s: {"value": [f"c{len(s['value'])}"]})
        .add_edge(lib.START, "c")
        .compile(checkpointer=True)
    )

    def call_child(state: State) -> dict:
        out = child.invoke({"value": []})
        return {"value": out["value"][-1:]}

    graph = (
        lib.StateGraph(State)
        .add_node("call", call_child)
        .add_edge(lib.START, "call")
        .compile(checkpointer=saver)
    )
    obs = [("run1", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("run2", graph.invoke({"value": []}, CFG, **h.kw(durability))))
    obs.append(("run3", graph.invoke({"value": []}, CFG, **h.kw(durability))))
    obs.append(("state", graph.get_state(CFG, subgraphs=True)))
    child_cfg = {"configurable": {"thread_id": "t1", "checkpoint_ns": "call"}}
    obs.append(("child state", graph.get_state(child_cfg)))
    obs.append(("child history", history(graph, child_cfg)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_checkpointer_true_keeps_subgraph_state(durability: str) -> None:
    h.run_parity(sc_checkpointer_true, "memory", durability)


def sc_checkpointer_false(lib, saver, durability):
    child = child_graph(lib, ask=False, checkpointer=False)
    graph = parent_graph(lib, saver, child)
    graph.invoke({"value": []}, CFG, **h.kw(durability))
    return [("state", graph.get_state(CFG, subgraphs=True)), ("history", history(graph))]


# LangGraph 1.2.22 crashes here with durability="sync" (AttributeError
# '_put_checkpoint_fut' in the checkpointer=False child loop): not a behaviour to copy.
@pytest.mark.parametrize("durability", ["async", "exit"])
def test_checkpointer_false_subgraph(durability: str) -> None:
    h.run_parity(sc_checkpointer_false, "memory", durability)


def sc_subgraph_called_in_node(lib, saver, durability):
    """A subgraph invoked from inside a node function: interrupt, resume, replay."""
    log: list[str] = []
    child = child_graph(lib, log=log)

    def wrapper(state: State) -> dict:
        out = child.invoke({"value": []})
        return {"value": out["value"]}

    graph = (
        lib.StateGraph(State)
        .add_node("p1", appender("p1", log))
        .add_node("wrapper", wrapper)
        .add_edge(lib.START, "p1")
        .add_edge("p1", "wrapper")
        .compile(checkpointer=saver)
    )
    obs = [("first", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("resume", graph.invoke(lib.Command(resume="yes"), CFG, **h.kw(durability))))
    obs.append(("ran", list(log)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_subgraph_called_inside_node(durability: str) -> None:
    h.run_parity(sc_subgraph_called_in_node, "memory", durability)


def sc_stateful_grandchild_after_resume(lib, saver, durability):
    """root -> middle (asks, then calls inner) -> inner (checkpointer=True), two turns.

    The resume reaches the tasks of middle's first step only: inner, started by
    middle's next step, is a new call on the second turn (threadloom used to
    resume inner's finished first-turn run and return its stale output over the
    new input)."""
    log: list[str] = []

    def work(state: State) -> dict:
        log.append(f"work:{state['value'][-1]}")
        return {"value": ["worked"]}

    inner = (
        lib.StateGraph(State)
        .add_node("work", work)
        .add_edge(lib.START, "work")
        .compile(checkpointer=True)
    )
    middle = (
        lib.StateGraph(State)
        .add_node("confirm", asker(lib, "confirm", log))
        .add_node("inner", inner)
        .add_edge(lib.START, "confirm")
        .add_edge("confirm", "inner")
        .compile()
    )
    graph = (
        lib.StateGraph(State)
        .add_node("middle", middle)
        .add_edge(lib.START, "middle")
        .compile(checkpointer=saver)
    )
    obs = []
    for turn in ("first", "second"):
        obs.append((turn, graph.invoke({"value": [turn]}, CFG, **h.kw(durability))))
        obs.append((f"{turn} resumed", graph.invoke(lib.Command(resume=turn), CFG)))
        obs.append((f"{turn} state", graph.get_state(CFG)))
    obs.append(("ran", list(log)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_stateful_grandchild_is_a_new_call_after_a_resume(saver: str, durability: str) -> None:
    h.run_parity(sc_stateful_grandchild_after_resume, saver, durability)


# replay from a subgraph's own checkpoint: tests/parity/test_subgraph_replay.py


def sc_fork_from_subgraph_checkpoint(lib, saver, durability):
    """update_state on an *older* checkpoint of the child's own history, then resume."""
    log: list[str] = []
    graph = parent_graph(lib, saver, child_graph(lib, log=log), log)
    graph.invoke({"value": []}, CFG)  # full child history first; resume under `durability`
    sub_cfg = graph.get_state(CFG).tasks[0].state
    child_hist = history(graph, sub_cfg)
    obs = [("child history", child_hist)]
    old = next(s for s in child_hist if s.next == ("c1",))
    fork = graph.update_state(old.config, {"value": ["child-fork"]}, as_node="c1")
    obs.append(("fork cfg", fork))
    obs.append(("child after fork", graph.get_state(sub_cfg)))
    obs.append(("nested", graph.get_state(CFG, subgraphs=True)))
    log.clear()
    obs.append(("resume", graph.invoke(lib.Command(resume="r"), CFG, **h.kw(durability))))
    obs.append(("ran", list(log)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_fork_from_subgraph_checkpoint(saver: str, durability: str) -> None:
    h.run_parity(sc_fork_from_subgraph_checkpoint, saver, durability)


def sc_three_levels_replay(lib, saver, durability):
    """Replay the root from before the middle graph: the deep interrupt fires again."""
    log: list[str] = []
    graph = three_level_graph(lib, saver, log)
    graph.invoke({"value": []}, CFG)
    graph.invoke(lib.Command(resume="first"), CFG)
    before = next(s for s in history(graph) if s.next == ("middle",))
    log.clear()
    obs = [("replay", graph.invoke(None, before.config, **h.kw(durability)))]
    obs.append(("ran", list(log)))
    obs.append(("nested", graph.get_state(CFG, subgraphs=True)))
    obs.append(("resume", graph.invoke(lib.Command(resume="second"), CFG, **h.kw(durability))))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_three_levels_replay(saver: str, durability: str) -> None:
    h.run_parity(sc_three_levels_replay, saver, durability)


def sc_send_to_subgraph_interrupt(lib, saver, durability):
    """Send fans out to a subgraph that interrupts: one snapshot task per Send."""
    child = child_graph(lib, ask=True)

    def fan(state: State) -> list:
        return [lib.Send("child", {"value": [f"item{i}"]}) for i in range(2)]

    graph = (
        lib.StateGraph(State)
        .add_node("p1", appender("p1"))
        .add_node("child", child)
        .add_edge(lib.START, "p1")
        .add_conditional_edges("p1", fan, ["child"])
        .compile(checkpointer=saver)
    )
    first = graph.invoke({"value": []}, CFG, **h.kw(durability))
    # the two tasks finish in any order: compare what was asked, not the order
    obs = [("first", sorted(i.value for i in first["__interrupt__"]))]
    state = graph.get_state(CFG, subgraphs=True)
    obs.append(("nested", state))
    answers = {i.id: f"ans{n}" for n, i in enumerate(state.interrupts)}
    obs.append(("resume", graph.invoke(lib.Command(resume=answers), CFG, **h.kw(durability))))
    obs.append(("done", graph.get_state(CFG)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_send_to_interrupting_subgraph(durability: str) -> None:
    h.run_parity(sc_send_to_subgraph_interrupt, "memory", durability)


def sc_checkpoints_stream(lib, saver, durability):
    """Streamed checkpoint configs carry the same checkpoint_map as get_state's."""
    graph = parent_graph(lib, saver, child_graph(lib))
    chunks = list(graph.stream({"value": []}, CFG, stream_mode="checkpoints", subgraphs=True))
    return [("configs", [(ns, c["config"], c["parent_config"]) for ns, c in chunks])]


def test_checkpoints_stream_configs() -> None:
    h.run_parity(sc_checkpoints_stream)


@pytest.mark.parametrize("sub_checkpointer", [None, True], ids=["inherit", "own"])
def test_fork_subgraph_checkpoint_full_flow(sub_checkpointer: Any) -> None:
    """Fork the child's own head (config from get_state(subgraphs=True)), invoke with that
    child config: the interrupt fires again; resuming completes child and parent."""

    def sc(lib, saver, durability):
        log: list[str] = []
        child = child_graph(lib, log=log, checkpointer=sub_checkpointer)
        graph = parent_graph(lib, saver, child, log)
        graph.invoke({"value": []}, CFG)
        sub_config = graph.get_state(CFG, subgraphs=True).tasks[0].state.config
        fork = graph.update_state(sub_config, {"value": ["sub-forked"]})
        obs = [("fork cfg", fork)]
        log.clear()
        obs.append(("invoke fork", graph.invoke(None, fork)))
        obs.append(("resume", graph.invoke(lib.Command(resume="new"), fork)))
        # not compared: which child nodes re-ran (LangGraph re-runs c1 here, threadloom
        # starts the child at the fork; same values) - docs/time-travel.md, Subgraphs
        obs.append(("child finished", log[-3:]))
        obs.append(("state", graph.get_state(CFG, subgraphs=True)))
        return obs

    h.run_parity(sc)


def test_fork_parent_interrupt_checkpoint_with_own_subgraph_history() -> None:
    """checkpointer=True child: fork the parent at the step where the child interrupted."""

    def sc(lib, saver, durability):
        graph = parent_graph(lib, saver, child_graph(lib, checkpointer=True))
        graph.invoke({"value": []}, CFG)
        graph.invoke(lib.Command(resume="answer"), CFG)
        at = next(
            s for s in history(graph) if s.next == ("child",) and any(t.interrupts for t in s.tasks)
        )
        fork = graph.update_state(at.config, {"value": ["forked"]})
        return [("run", graph.invoke(None, fork)), ("state", graph.get_state(CFG, subgraphs=True))]

    h.run_parity(sc)


class Results(TypedDict):
    results: Annotated[list[str], operator.add]
    value: Annotated[list[str], operator.add]  # threadloom rejects undeclared keys from the child


@pytest.mark.parametrize("sub_checkpointer", [True, None], ids=["stateful", "stateless"])
@pytest.mark.parametrize("how", ["replay", "fork"])
def test_subgraph_state_seen_on_parent_replay(sub_checkpointer: Any, how: str) -> None:
    """Replaying/forking the parent from before the child in a *later* run: a stateful child
    (checkpointer=True) starts from what it had before that run, a stateless one from empty."""

    def sc(lib, saver, durability):
        started: list[tuple[str, list]] = []

        def step(name: str):
            def run(state: State) -> dict:
                started.append((name, list(state["value"])))
                return {"value": [f"{name}:{lib.interrupt(name + '?')}"]}

            return run

        sub = (
            lib.StateGraph(State)
            .add_node("step_a", step("a"))
            .add_node("step_b", step("b"))
            .add_edge(lib.START, "step_a")
            .add_edge("step_a", "step_b")
            .compile(checkpointer=sub_checkpointer)
        )
        graph = (
            lib.StateGraph(Results)
            .add_node("parent_node", lambda s: {"results": ["p"]})
            .add_node("sub_node", sub)
            .add_edge(lib.START, "parent_node")
            .add_edge("parent_node", "sub_node")
            .compile(checkpointer=saver)
        )
        for run in ("1", "2"):
            graph.invoke({"results": []}, CFG)
            graph.invoke(lib.Command(resume=f"a{run}"), CFG)
            graph.invoke(lib.Command(resume=f"b{run}"), CFG)
        obs = [("started", list(started))]
        before_sub_2nd = [s for s in history(graph) if s.next == ("sub_node",)][0]
        started.clear()
        if how == "fork":
            cfg = graph.update_state(before_sub_2nd.config, {"results": ["forked"]})
        else:
            cfg = before_sub_2nd.config
        obs.append(("run", graph.invoke(None, cfg)))
        obs.append(("started again", list(started)))
        obs.append(("resume", graph.invoke(lib.Command(resume="a3"), CFG)))
        obs.append(("state", graph.get_state(CFG, subgraphs=True)))
        return obs

    h.run_parity(sc)
