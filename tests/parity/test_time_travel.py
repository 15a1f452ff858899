"""Parity: get_state, history, replay and forks behave as in LangGraph 1.2.22.

Every test runs the same scenario on LangGraph and on threadloom and compares the
normalised observations (see helpers.py). Scenarios only use the public API.
"""

from __future__ import annotations

import operator
import threading
from typing import Annotated

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


def asker(lib, question: str, tag: str, log: list[str] | None = None):
    def node(state: State) -> dict:
        if log is not None:
            log.append(tag)
        answer = lib.interrupt(question)
        return {"value": [f"{tag}:{answer}"]}

    return node


def chain(lib, saver, *names: str, ask: tuple[str, ...] = (), log=None, **compile_kw):
    """START -> names[0] -> names[1] -> ...; nodes in ``ask`` interrupt first."""
    builder = lib.StateGraph(State)
    for name in names:
        node = asker(lib, f"{name}?", name, log) if name in ask else appender(name, log)
        builder.add_node(name, node)
    builder.add_edge(lib.START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=saver, **compile_kw)


def history(graph, config=CFG, **kwargs) -> list:
    return list(graph.get_state_history(config, **kwargs))


# -- get_state and get_state_history ------------------------------------------------


def sc_linear_history(lib, saver, durability):
    graph = chain(lib, saver, "a", "b", "c")
    obs = [("invoke", graph.invoke({"value": ["in"]}, CFG, **h.kw(durability)))]
    obs.append(("state", graph.get_state(CFG)))
    full = history(graph)
    obs.append(("history", full))
    obs.append(("limit", history(graph, limit=2)))
    obs.append(("before", history(graph, before=full[len(full) // 2].config)))
    obs.append(("before+limit", history(graph, before=full[0].config, limit=1)))
    obs.append(("filter loop", history(graph, filter={"source": "loop"})))
    obs.append(("filter step", history(graph, filter={"step": 1})))
    for i, snap in enumerate(full):
        obs.append((f"get_state #{i}", graph.get_state(snap.config)))
    obs.append(("second run", graph.invoke({"value": ["again"]}, CFG, **h.kw(durability))))
    obs.append(("history 2", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_linear_history(saver: str, durability: str) -> None:
    h.run_parity(sc_linear_history, saver, durability)


def test_oracle_history_is_newest_first() -> None:
    """Pin the oracle fact the suite relies on: steps run -1, 0, 1, ... newest first."""
    obs = h.oracle_only(sc_linear_history)
    steps = [s["snapshot"]["metadata"]["step"] for s in obs[2][1]]
    assert steps == [3, 2, 1, 0, -1]


def sc_empty_thread(lib, saver, durability):
    graph = chain(lib, saver, "a")
    return [
        ("missing thread", graph.get_state({"configurable": {"thread_id": "nope"}})),
        ("missing history", history(graph, {"configurable": {"thread_id": "nope"}})),
    ]


def test_empty_thread_gives_empty_snapshot() -> None:
    h.run_parity(sc_empty_thread)


def sc_error_live_vs_historical(lib, saver, durability):
    ok_done = threading.Event()

    def ok(state: State) -> dict:
        ok_done.set()
        return {"value": ["ok"]}

    def bad(state: State) -> dict:
        ok_done.wait(5)  # fail only after the sibling finished: deterministic writes
        raise ValueError("boom")

    graph = (
        lib.StateGraph(State)
        .add_node("a", appender("a"))
        .add_node("ok", ok)
        .add_node("bad", bad)
        .add_edge(lib.START, "a")
        .add_edge("a", "ok")
        .add_edge("a", "bad")
        .compile(checkpointer=saver)
    )
    obs = [("invoke", h.raises(lambda: graph.invoke({"value": []}, CFG, **h.kw(durability)), lib))]
    live = graph.get_state(CFG)
    obs.append(("live", live))
    obs.append(("historical", graph.get_state(live.config)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_failed_task_live_and_historical(durability: str) -> None:
    h.run_parity(sc_error_live_vs_historical, "memory", durability)


# -- replay ---------------------------------------------------------------------------


def sc_replay(lib, saver, durability):
    log: list[str] = []
    graph = chain(lib, saver, "a", "b", "c", log=log)
    graph.invoke({"value": []}, CFG)  # full history first, then replay under `durability`
    before_b = next(s for s in history(graph) if s.next == ("b",))
    log.clear()
    obs = [("replay", graph.invoke(None, before_b.config, **h.kw(durability))), ("ran", list(log))]
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("history", history(graph)))
    final = graph.get_state(CFG)
    log.clear()
    obs.append(("replay final", graph.invoke(None, final.config, **h.kw(durability))))
    obs.append(("ran final", list(log)))
    obs.append(("history 2", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_replay_reruns_later_nodes_and_keeps_old_branch(saver: str, durability: str) -> None:
    h.run_parity(sc_replay, saver, durability)


def sc_replay_stream(lib, saver, durability):
    graph = chain(lib, saver, "a", "b")
    graph.invoke({"value": []}, CFG)
    before_b = next(s for s in history(graph) if s.next == ("b",))
    chunks = list(graph.stream(None, before_b.config, stream_mode="updates"))
    return [("chunks", chunks), ("history", history(graph))]


def test_replay_stream_updates() -> None:
    h.run_parity(sc_replay_stream)


# -- interrupts, resume, replay of interrupts ---------------------------------------


def sc_interrupt_resume(lib, saver, durability):
    log: list[str] = []
    graph = chain(lib, saver, "a", "ask", "b", ask=("ask",), log=log)
    obs = [("first", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("interrupted", graph.get_state(CFG)))
    obs.append(("history", history(graph)))
    obs.append(("resume", graph.invoke(lib.Command(resume="yes"), CFG, **h.kw(durability))))
    obs.append(("done", graph.get_state(CFG)))
    obs.append(("history 2", history(graph)))
    obs.append(("ran", list(log)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_interrupt_and_resume(saver: str, durability: str) -> None:
    h.run_parity(sc_interrupt_resume, saver, durability)


def sc_replay_refires_interrupt(lib, saver, durability):
    log: list[str] = []
    graph = chain(lib, saver, "a", "ask", "b", ask=("ask",), log=log)
    graph.invoke({"value": []}, CFG, **h.kw(durability))
    graph.invoke(lib.Command(resume="first"), CFG, **h.kw(durability))
    before_ask = [s for s in history(graph) if s.next == ("ask",)][-1]
    log.clear()
    obs = [("replay", graph.invoke(None, before_ask.config, **h.kw(durability)))]
    obs.append(("ran", list(log)))
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("again", graph.invoke(None, before_ask.config, **h.kw(durability))))
    obs.append(("resume branch", graph.invoke(lib.Command(resume="second"), CFG)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_replay_refires_interrupt(saver: str, durability: str) -> None:
    h.run_parity(sc_replay_refires_interrupt, saver, durability)


def sc_resume_old_checkpoint(lib, saver, durability):
    """Command(resume) addressed at an old interrupted checkpoint resumes that branch."""
    graph = chain(lib, saver, "a", "ask", "b", ask=("ask",))
    graph.invoke({"value": []}, CFG)
    interrupted = graph.get_state(CFG)
    graph.invoke(lib.Command(resume="one"), CFG)
    obs = [("resume old", graph.invoke(lib.Command(resume="two"), interrupted.config))]
    obs.append(("state", graph.get_state(CFG)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
def test_resume_from_old_checkpoint(saver: str) -> None:
    h.run_parity(sc_resume_old_checkpoint, saver)


def sc_two_interrupts_one_node(lib, saver, durability):
    def node(state: State) -> dict:
        first = lib.interrupt("q1")
        second = lib.interrupt("q2")
        return {"value": [first, second]}

    graph = (
        lib.StateGraph(State)
        .add_node("n", node)
        .add_edge(lib.START, "n")
        .compile(checkpointer=saver)
    )
    obs = [("first", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("s1", graph.get_state(CFG)))
    obs.append(("second", graph.invoke(lib.Command(resume="y1"), CFG, **h.kw(durability))))
    obs.append(("s2", graph.get_state(CFG)))
    obs.append(("done", graph.invoke(lib.Command(resume="y2"), CFG, **h.kw(durability))))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_two_interrupts_in_one_node(durability: str) -> None:
    h.run_parity(sc_two_interrupts_one_node, "memory", durability)


def sc_parallel_interrupts_resume_map(lib, saver, durability):
    graph = (
        lib.StateGraph(State)
        .add_node("x", asker(lib, "x?", "x"))
        .add_node("y", asker(lib, "y?", "y"))
        .add_edge(lib.START, "x")
        .add_edge(lib.START, "y")
        .compile(checkpointer=saver)
    )
    first = graph.invoke({"value": []}, CFG)
    # the two tasks finish in any order: compare what was asked, not the order
    obs = [("first", sorted(i.value for i in first["__interrupt__"]))]
    state = graph.get_state(CFG)
    obs.append(("state", state))
    answers = {i.id: f"ans-{i.value}" for i in state.interrupts}
    obs.append(("resume", graph.invoke(lib.Command(resume=answers), CFG)))
    obs.append(("history", history(graph)))
    return obs


def test_parallel_interrupts_resume_map() -> None:
    h.run_parity(sc_parallel_interrupts_resume_map)


def sc_interrupt_before_after(lib, saver, durability):
    graph = chain(lib, saver, "a", "b", "c", interrupt_before=["b"], interrupt_after=["c"])
    obs = [("first", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("before b", graph.get_state(CFG)))
    obs.append(("continue", graph.invoke(None, CFG, **h.kw(durability))))
    obs.append(("after c", graph.get_state(CFG)))
    obs.append(("finish", graph.invoke(None, CFG, **h.kw(durability))))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_interrupt_before_and_after(durability: str) -> None:
    h.run_parity(sc_interrupt_before_after, "memory", durability)


def sc_send_fanout(lib, saver, durability):
    def fan(state: State) -> list:
        return [lib.Send("work", {"value": [f"item{i}"]}) for i in range(3)]

    def work(state: State) -> dict:
        return {"value": [f"done:{state['value'][-1]}"]}

    graph = (
        lib.StateGraph(State)
        .add_node("start", appender("start"))
        .add_node("work", work)
        .add_edge(lib.START, "start")
        .add_conditional_edges("start", fan, ["work"])
        .compile(checkpointer=saver, interrupt_before=["work"])
    )
    obs = [("first", graph.invoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("pending sends", graph.get_state(CFG)))
    obs.append(("continue", graph.invoke(None, CFG, **h.kw(durability))))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_send_tasks_in_snapshots(durability: str) -> None:
    h.run_parity(sc_send_fanout, "memory", durability)


def sc_error_recovery(lib, saver, durability):
    """A failed step resumes without re-running its finished sibling; or is patched by hand."""
    log: list[str] = []
    attempts = {"bad": 0}
    ok_done = threading.Event()

    def ok(state: State) -> dict:
        log.append("ok")
        ok_done.set()
        return {"value": ["ok"]}

    def bad(state: State) -> dict:
        ok_done.wait(5)
        attempts["bad"] += 1
        log.append("bad")
        if attempts["bad"] == 1:
            raise ValueError("first attempt fails")
        return {"value": ["bad-fixed"]}

    graph = (
        lib.StateGraph(State)
        .add_node("a", appender("a", log))
        .add_node("ok", ok)
        .add_node("bad", bad)
        .add_node("end", appender("end", log))
        .add_edge(lib.START, "a")
        .add_edge("a", "ok")
        .add_edge("a", "bad")
        .add_edge(["ok", "bad"], "end")
        .compile(checkpointer=saver)
    )
    obs = [("fail", h.raises(lambda: graph.invoke({"value": []}, CFG, **h.kw(durability)), lib))]
    obs.append(("failed state", graph.get_state(CFG)))
    log.clear()
    obs.append(("retry", graph.invoke(None, CFG, **h.kw(durability))))
    obs.append(("ran on retry", sorted(log)))
    failed_step = next(s for s in history(graph) if set(s.next) == {"ok", "bad"})
    cfg = graph.update_state(failed_step.config, {"value": ["patched"]}, as_node="bad")
    obs.append(("patched", graph.get_state(cfg)))
    obs.append(("history", history(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
def test_error_recovery_and_patch(saver: str, durability: str) -> None:
    h.run_parity(sc_error_recovery, saver, durability)


def sc_raw_pregel(lib, saver, durability):
    """Plain Pregel + NodeBuilder (no StateGraph): foo -> bar1 (interrupts) + bar2."""

    def handle(name: str, ask: bool = False) -> list[str]:
        if ask:
            return [f"{name}:{lib.interrupt(name + '?')}"]
        return [name]

    foo = (
        lib.NodeBuilder()
        .subscribe_to("foo")
        .do(lambda _: handle("foo"))
        .write_to(nodes=lambda x: x, bar=lambda _: "from foo")
    )
    bar1 = (
        lib.NodeBuilder().subscribe_to("bar").do(lambda _: handle("bar1", True)).write_to("nodes")
    )
    bar2 = lib.NodeBuilder().subscribe_to("bar").do(lambda _: handle("bar2")).write_to("nodes")
    app = lib.Pregel(
        nodes={"foo": foo, "bar1": bar1, "bar2": bar2},
        channels={
            "foo": lib.LastValue(str),
            "bar": lib.LastValue(str),
            "nodes": lib.BinaryOperatorAggregate(list, operator.add),
        },
        checkpointer=saver,
        input_channels=["foo"],
        output_channels=["nodes"],
    )
    obs = [("first", app.invoke({"foo": "go"}, CFG, **h.kw(durability)))]
    live = app.get_state(CFG)
    obs.append(("live", live))
    obs.append(("historical", app.get_state(live.config)))
    obs.append(("update", app.update_state(CFG, ["patched"], as_node="bar2")))
    obs.append(("after update", app.get_state(CFG)))
    obs.append(("history", history(app)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_raw_pregel_snapshots(durability: str) -> None:
    h.run_parity(sc_raw_pregel, "memory", durability)
