"""Parity: update_state / bulk_update_state, forks and their errors, as in LangGraph 1.2.22."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    value: Annotated[list[str], operator.add]


class Plain(TypedDict, total=False):
    topic: str
    count: int


def appender(tag: str, log: list[str] | None = None):
    def node(state: State) -> dict:
        if log is not None:
            log.append(tag)
        return {"value": [tag]}

    return node


def chain(lib, saver, *names: str, log=None, ask: tuple[str, ...] = ()):
    builder = lib.StateGraph(State)
    for name in names:
        if name in ask:

            def node(state: State, _name=name) -> dict:
                return {"value": [f"{_name}:{lib.interrupt(_name + '?')}"]}

            builder.add_node(name, node)
        else:
            builder.add_node(name, appender(name, log))
    builder.add_edge(lib.START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=saver)


def history(graph, config=CFG, **kwargs) -> list:
    return list(graph.get_state_history(config, **kwargs))


# -- update_state on the latest checkpoint --------------------------------------------


def sc_update_latest(lib, saver, durability):
    log: list[str] = []
    graph = chain(lib, saver, "a", "b", ask=("b",), log=log)
    graph.invoke({"value": ["in"]}, CFG, **h.kw(durability))
    obs = [("inferred", graph.update_state(CFG, {"value": ["patched"]}))]
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("explicit", graph.update_state(CFG, {"value": ["as-b"]}, as_node="b")))
    obs.append(("after as b", graph.get_state(CFG)))
    obs.append(("unknown", h.raises(lambda: graph.update_state(CFG, {}, as_node="zzz"), lib)))
    obs.append(("continue", graph.invoke(None, CFG, **h.kw(durability))))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_update_latest(saver: str, durability: str) -> None:
    h.run_parity(sc_update_latest, saver, durability)


def sc_update_fresh_thread(lib, saver, durability):
    graph = chain(lib, saver, "a", "b")
    obs = [("update fresh", graph.update_state(CFG, {"value": ["seed"]}))]
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("run", graph.invoke(None, CFG)))
    obs.append(("history", history(graph)))
    cfg2 = {"configurable": {"thread_id": "t2"}}
    obs.append(("as a fresh", graph.update_state(cfg2, {"value": ["x"]}, as_node="a")))
    obs.append(("state2", graph.get_state(cfg2)))
    obs.append(("run2", graph.invoke(None, cfg2)))
    return obs


def test_update_fresh_thread() -> None:
    h.run_parity(sc_update_fresh_thread)


def sc_ambiguous_update(lib, saver, durability):
    graph = (
        lib.StateGraph(State)
        .add_node("x", appender("x"))
        .add_node("y", appender("y"))
        .add_node("z", appender("z"))
        .add_edge(lib.START, "x")
        .add_edge(lib.START, "y")
        .add_edge(["x", "y"], "z")
        .compile(checkpointer=saver, interrupt_before=["z"])
    )
    graph.invoke({"value": []}, CFG)
    obs = [("ambiguous", h.raises(lambda: graph.update_state(CFG, {"value": ["?"]}), lib))]
    obs.append(("as y", graph.update_state(CFG, {"value": ["y2"]}, as_node="y")))
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("finish", graph.invoke(None, CFG)))
    return obs


def test_ambiguous_update_needs_as_node() -> None:
    h.run_parity(sc_ambiguous_update)


def sc_update_as_input_copy_end(lib, saver, durability):
    graph = chain(lib, saver, "a", "b", "c")
    obs = [("input fresh", graph.update_state(CFG, {"value": ["i"]}, as_node="__input__"))]
    obs.append(("s0", graph.get_state(CFG)))
    obs.append(("run", graph.invoke(None, CFG)))
    obs.append(("input again", graph.update_state(CFG, {"value": ["j"]}, as_node="__input__")))
    obs.append(("s1", graph.get_state(CFG)))
    before_b = next(s for s in history(graph) if s.next == ("b",))
    obs.append(("copy", graph.update_state(before_b.config, None, as_node="__copy__")))
    obs.append(("s2", graph.get_state(CFG)))
    obs.append(("run copy", graph.invoke(None, CFG)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
def test_update_as_input_and_copy(saver: str) -> None:
    h.run_parity(sc_update_as_input_copy_end, saver)


def sc_update_as_end(lib, saver, durability):
    graph = chain(lib, saver, "a", "b", "c", ask=("b",))
    graph.invoke({"value": []}, CFG)
    obs = [("end", graph.update_state(CFG, None, as_node=lib.END))]
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("invoke", graph.invoke(None, CFG)))
    obs.append(
        (
            "end values",
            h.raises(lambda: graph.update_state(CFG, {"value": ["e"]}, as_node=lib.END), lib),
        )
    )
    obs.append(("history", history(graph)))
    return obs


def test_update_as_end_clears_tasks() -> None:
    h.run_parity(sc_update_as_end)


def sc_update_with_conditional_edge(lib, saver, durability):
    """update_state runs the node's writers: its conditional edge picks the next node."""

    def route(state: State) -> str:
        return "yes" if "go" in state["value"] else "no"

    graph = (
        lib.StateGraph(State)
        .add_node("decide", appender("decide"))
        .add_node("yes", appender("yes"))
        .add_node("no", appender("no"))
        .add_edge(lib.START, "decide")
        .add_conditional_edges("decide", route, ["yes", "no"])
        .compile(checkpointer=saver, interrupt_before=["yes", "no"])
    )
    graph.invoke({"value": []}, CFG)
    obs = [("state", graph.get_state(CFG))]
    obs.append(("update", graph.update_state(CFG, {"value": ["go"]}, as_node="decide")))
    obs.append(("routed", graph.get_state(CFG)))
    obs.append(("finish", graph.invoke(None, CFG)))
    return obs


def test_update_runs_conditional_edges() -> None:
    h.run_parity(sc_update_with_conditional_edge)


def sc_update_plain_state(lib, saver, durability):
    """LastValue channels, Command goto from a node, update with Command-free dict."""
    graph = (
        lib.StateGraph(Plain)
        .add_node("n", lambda s: {"count": s.get("count", 0) + 1})
        .add_edge(lib.START, "n")
        .compile(checkpointer=saver)
    )
    graph.invoke({"topic": "t", "count": 0}, CFG)
    obs = [("update", graph.update_state(CFG, {"topic": "u"}))]
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("history", history(graph)))
    return obs


def test_update_plain_state() -> None:
    h.run_parity(sc_update_plain_state)


# -- forks ------------------------------------------------------------------------------


def sc_fork_old_checkpoint(lib, saver, durability):
    log: list[str] = []
    graph = chain(lib, saver, "a", "b", "c", log=log)
    graph.invoke({"value": []}, CFG)  # full history first; forks run under `durability`
    before_b = next(s for s in history(graph) if s.next == ("b",))
    fork1 = graph.update_state(before_b.config, {"value": ["f1"]})
    obs = [("fork1 cfg", fork1), ("fork1 state", graph.get_state(fork1))]
    log.clear()
    obs.append(("run fork1", graph.invoke(None, fork1, **h.kw(durability))))
    obs.append(("ran", list(log)))
    fork2 = graph.update_state(before_b.config, {"value": ["f2"]}, as_node="a")
    obs.append(("run fork2", graph.invoke(None, fork2, **h.kw(durability))))
    obs.append(("latest", graph.get_state(CFG)))
    obs.append(("history", history(graph)))
    obs.append(("old branch", graph.get_state(before_b.config)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_fork_keeps_branches_apart(saver: str, durability: str) -> None:
    h.run_parity(sc_fork_old_checkpoint, saver, durability)


def sc_fork_interrupt(lib, saver, durability):
    graph = chain(lib, saver, "a", "ask", "b", ask=("ask",))
    graph.invoke({"value": []}, CFG)
    graph.invoke(lib.Command(resume="hello"), CFG)
    at_interrupt = next(
        s for s in history(graph) if s.next == ("ask",) and any(t.interrupts for t in s.tasks)
    )
    fork = graph.update_state(at_interrupt.config, {"value": ["forked"]})
    obs = [("fork state", graph.get_state(fork))]
    obs.append(("run fork", graph.invoke(None, fork)))
    obs.append(("resume fork", graph.invoke(lib.Command(resume="world"), fork)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
def test_fork_of_interrupt_refires(saver: str) -> None:
    h.run_parity(sc_fork_interrupt, saver)


# -- bulk_update_state ------------------------------------------------------------------


def sc_bulk_update(lib, saver, durability):
    graph = chain(lib, saver, "a", "b", "c")
    SU = lib.StateUpdate
    cfg = graph.bulk_update_state(
        CFG,
        [
            [SU({"value": ["in"]}, "__input__")],
            [SU({"value": ["a1"]}, "a")],
            [SU({"value": ["b1"]}, "b"), SU({"value": ["b2"]}, "b")],
        ],
    )
    obs = [("bulk cfg", cfg), ("state", graph.get_state(CFG)), ("history", history(graph))]
    obs.append(("run", graph.invoke(None, CFG)))
    obs.append(("empty", h.raises(lambda: graph.bulk_update_state(CFG, []), lib)))
    obs.append(("empty step", h.raises(lambda: graph.bulk_update_state(CFG, [[]]), lib)))
    obs.append(
        (
            "no as_node",
            h.raises(
                lambda: graph.bulk_update_state(
                    CFG, [[SU({"value": ["x"]}), SU({"value": ["y"]})]]
                ),
                lib,
            ),
        )
    )
    obs.append(("history after errors", history(graph)))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
def test_bulk_update_state(saver: str) -> None:
    h.run_parity(sc_bulk_update, saver)


def sc_bulk_copy_then_update(lib, saver, durability):
    graph = chain(lib, saver, "a", "b")
    graph.invoke({"value": []}, CFG)
    before_b = next(s for s in history(graph) if s.next == ("b",))
    SU = lib.StateUpdate
    cfg = graph.bulk_update_state(
        before_b.config,
        [[SU(None, "__copy__")], [SU({"value": ["x"]}, "a")]],
    )
    obs = [("cfg", cfg), ("state", graph.get_state(cfg)), ("run", graph.invoke(None, cfg))]
    obs.append(("history", history(graph)))
    return obs


def test_bulk_copy_then_update() -> None:
    h.run_parity(sc_bulk_copy_then_update)


def sc_copy_with_updates(lib, saver, durability):
    """update_state(values=[(v, node), ...], as_node="__copy__"): copy, then update as tasks."""
    graph = (
        lib.StateGraph(State)
        .add_node("x", appender("x"))
        .add_node("y", appender("y"))
        .add_node("z", appender("z"))
        .add_edge(lib.START, "x")
        .add_edge(lib.START, "y")
        .add_edge(["x", "y"], "z")
        .compile(checkpointer=saver)
    )
    graph.invoke({"value": []}, CFG)
    start = next(s for s in history(graph) if set(s.next) == {"x", "y"})
    cfg = graph.update_state(
        start.config, [({"value": ["x2"]}, "x"), ({"value": ["y2"]}, "y")], as_node="__copy__"
    )
    obs = [("cfg", cfg), ("state", graph.get_state(cfg)), ("run", graph.invoke(None, cfg))]
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
def test_copy_with_task_updates(saver: str) -> None:
    h.run_parity(sc_copy_with_updates, saver)


def messages_graph(lib, saver):
    from langchain_core.messages import AIMessage

    def bot(state: dict) -> dict:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"reply{n}", id=f"ai{n}")]}

    return (
        lib.StateGraph(lib.MessagesState)
        .add_node("bot", bot)
        .add_edge(lib.START, "bot")
        .compile(checkpointer=saver)
    )


def msgs(values: dict) -> list:
    return [(m.type, m.content, m.id) for m in values["messages"]]


def sc_messages_edit_and_fork(lib, saver, durability):
    """MessagesState: edit a message by id, fork the first turn with a rewritten message."""
    from langchain_core.messages import AIMessage, HumanMessage

    graph = messages_graph(lib, saver)
    graph.invoke({"messages": [HumanMessage(content="hi", id="h1")]}, CFG)
    graph.invoke({"messages": [HumanMessage(content="again", id="h2")]}, CFG)
    obs = [("values", msgs(graph.get_state(CFG).values))]
    graph.update_state(CFG, {"messages": [AIMessage(content="edited", id="ai1")]})
    obs.append(("edited", msgs(graph.get_state(CFG).values)))
    first_turn = next(s for s in history(graph) if s.next == ("bot",))
    fork = graph.update_state(
        first_turn.config, {"messages": [HumanMessage(content="rewritten", id="h1")]}
    )
    obs.append(("fork", msgs(graph.invoke(None, fork, **h.kw(durability)))))
    obs.append(
        ("history", [(s.metadata["source"], s.metadata["step"], s.next) for s in history(graph)])
    )
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_messages_edit_and_fork(saver: str, durability: str) -> None:
    h.run_parity(sc_messages_edit_and_fork, saver, durability)


def sc_messages_remove(lib, saver, durability):
    from langchain_core.messages import HumanMessage

    graph = messages_graph(lib, saver)
    graph.invoke({"messages": [HumanMessage(content="hi", id="h1")]}, CFG)
    graph.update_state(CFG, {"messages": [lib.RemoveMessage(id="h1")]}, as_node="bot")
    return [("removed", msgs(graph.get_state(CFG).values)), ("history", history(graph))]


def test_messages_remove_by_update() -> None:
    h.run_parity(sc_messages_remove)


def sc_metadata_filter(lib, saver, durability):
    graph = chain(lib, saver, "a", "b")
    tagged = {**CFG, "metadata": {"run_tag": "first"}}
    graph.invoke({"value": []}, tagged, **h.kw(durability))
    graph.invoke({"value": []}, {**CFG, "metadata": {"run_tag": "second"}}, **h.kw(durability))
    return [
        ("first", history(graph, filter={"run_tag": "first"})),
        ("second loop", history(graph, filter={"run_tag": "second", "source": "loop"})),
    ]


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_history_metadata_filter(saver: str, durability: str) -> None:
    h.run_parity(sc_metadata_filter, saver, durability)


def sc_update_with_task_id(lib, saver, durability):
    """update_state(..., task_id=t) records the writes as that planned task's result."""
    graph = (
        lib.StateGraph(State)
        .add_node("x", appender("x"))
        .add_node("y", appender("y"))
        .add_node("z", appender("z"))
        .add_edge(lib.START, "x")
        .add_edge(lib.START, "y")
        .add_edge(["x", "y"], "z")
        .compile(checkpointer=saver, interrupt_before=["x", "y"])
    )
    graph.invoke({"value": []}, CFG)
    state = graph.get_state(CFG)
    x_task = next(t for t in state.tasks if t.name == "x")
    cfg = graph.update_state(CFG, {"value": ["x-by-hand"]}, as_node="x", task_id=x_task.id)
    obs = [("state", state), ("cfg", cfg), ("after", graph.get_state(CFG))]
    obs.append(("old step", graph.get_state(state.config)))
    obs.append(("run", graph.invoke(None, CFG)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
def test_update_with_task_id(saver: str) -> None:
    h.run_parity(sc_update_with_task_id, saver)


def sc_run_superseded_fork(lib, saver, durability):
    """Two forks made first, then run: the first is no longer the head when it runs."""
    graph = chain(lib, saver, "a", "ask", "b", ask=("ask",))
    graph.invoke({"value": []}, CFG)
    graph.invoke(lib.Command(resume="orig"), CFG)
    before_ask = next(s for s in history(graph) if s.next == ("ask",))
    fork1 = graph.update_state(before_ask.config, {"value": ["f1"]}, as_node="a")
    fork2 = graph.update_state(before_ask.config, {"value": ["f2"]}, as_node="a")
    obs = [("run fork1", graph.invoke(None, fork1, **h.kw(durability)))]
    obs.append(("resume fork1", graph.invoke(lib.Command(resume="r1"), CFG, **h.kw(durability))))
    obs.append(("run fork2", graph.invoke(None, fork2, **h.kw(durability))))
    obs.append(("resume fork2", graph.invoke(lib.Command(resume="r2"), fork2)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_run_superseded_fork(saver: str, durability: str) -> None:
    h.run_parity(sc_run_superseded_fork, saver, durability)


def sc_update_with_command(lib, saver, durability):
    """A Command as update values: its update is applied and its goto picks the next node."""
    graph = (
        lib.StateGraph(State)
        .add_node("a", appender("a"))
        .add_node("b", appender("b"))
        .add_node("c", appender("c"))
        .add_edge(lib.START, "a")
        .compile(checkpointer=saver)
    )
    graph.invoke({"value": []}, CFG)
    cmd = lib.Command(update={"value": ["cmd"]}, goto="c")
    obs = [("update", h.raises(lambda: graph.update_state(CFG, cmd, as_node="a"), lib))]
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("run", graph.invoke(None, CFG)))
    return obs


def test_update_with_command_values() -> None:
    h.run_parity(sc_update_with_command)
