"""interrupt(), Command(resume=...), resume maps, interrupt_before/after."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadloom.channels import BinaryOperatorAggregate, LastValue
from threadloom.constants import INTERRUPT, RESUME
from threadloom.pregel import NodeBuilder, Pregel
from threadloom.pregel.ids import interrupt_id
from threadloom.types import Command, Interrupt, interrupt


def asking_graph(saver, log):
    def ask(_):
        a = interrupt("first?")
        b = interrupt("second?")
        log.append((a, b))
        return [f"{a}+{b}"]

    return Pregel(
        nodes={"ask": NodeBuilder().subscribe_only("inp").do(ask).write_to("out")},
        channels={"inp": LastValue(str), "out": BinaryOperatorAggregate(list, operator.add)},
        input_channels="inp",
        output_channels="out",
        checkpointer=saver,
    )


def test_two_interrupts_in_one_node_resume_one_at_a_time(saver):
    log: list = []
    app = asking_graph(saver, log)
    cfg = {"configurable": {"thread_id": "t"}}
    first = app.invoke("x", cfg)
    (i1,) = first[INTERRUPT]
    assert isinstance(i1, Interrupt) and i1.value == "first?"
    second = app.invoke(Command(resume="A"), cfg)
    (i2,) = second[INTERRUPT]
    assert i2.value == "second?" and i2.id != i1.id
    writes = saver.get_tuple(cfg).pending_writes
    assert (RESUME, ["A"]) in [(c, v) for _, c, v in writes]
    assert app.invoke(Command(resume="B"), cfg) == ["A+B"]
    assert log == [("A", "B")]


def test_interrupt_id_is_hash_of_task_namespace(saver):
    app = asking_graph(saver, [])
    cfg = {"configurable": {"thread_id": "ids"}}
    (i1,) = app.invoke("x", cfg)[INTERRUPT]
    tup = saver.get_tuple(cfg)
    task_id = next(t for t, c, _ in tup.pending_writes if c == INTERRUPT)
    assert i1.id == interrupt_id(f"ask:{task_id}")


def test_resume_map_answers_parallel_interrupts(saver):
    def asker(name):
        return lambda _: [f"{name}={interrupt(name)}"]

    app = Pregel(
        nodes={
            n: NodeBuilder().subscribe_only("inp").do(asker(n)).write_to("out") for n in ("a", "b")
        },
        channels={"inp": LastValue(str), "out": BinaryOperatorAggregate(list, operator.add)},
        input_channels="inp",
        output_channels="out",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "map"}}
    ints = app.invoke("x", cfg)[INTERRUPT]
    assert sorted(i.value for i in ints) == ["a", "b"]
    with pytest.raises(RuntimeError, match="multiple pending interrupts"):
        app.invoke(Command(resume="same"), cfg)
    answers = {i.id: i.value.upper() for i in ints}
    assert app.invoke(Command(resume=answers), cfg) == ["a=A", "b=B"]


def test_resume_needs_checkpointer():
    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(lambda x: x).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    with pytest.raises(RuntimeError, match="checkpointer"):
        app.invoke(Command(resume=1))


@pytest.mark.parametrize("where", ["before", "after"])
def test_interrupt_before_and_after(saver, where):
    ran: list[str] = []

    def node(name):
        def fn(x):
            ran.append(name)
            return x + 1

        return fn

    app = Pregel(
        nodes={
            "one": NodeBuilder().subscribe_only("a").do(node("one")).write_to("b"),
            "two": NodeBuilder().subscribe_only("b").do(node("two")).write_to("c"),
        },
        channels={k: LastValue(int) for k in "abc"},
        input_channels="a",
        output_channels="c",
        checkpointer=saver,
        **{f"interrupt_{where}_nodes": ["two"] if where == "before" else "*"},
    )
    cfg = {"configurable": {"thread_id": where}}
    out = app.invoke(1, cfg)
    assert ran == (["one"] if where == "before" else ["one"])
    assert out is None
    while ran[-1] != "two":
        app.invoke(None, cfg)
    assert ran == ["one", "two"]
    assert saver.get_tuple(cfg).checkpoint["channel_values"]["c"] == 3


def test_interrupt_before_given_at_invoke(saver):
    app = Pregel(
        nodes={
            "one": NodeBuilder().subscribe_only("a").do(lambda x: x + 1).write_to("b"),
            "two": NodeBuilder().subscribe_only("b").do(lambda x: x * 10).write_to("c"),
        },
        channels={k: LastValue(int) for k in "abc"},
        input_channels="a",
        output_channels=["b", "c"],
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "kw"}}
    assert app.invoke(1, cfg, interrupt_before=["two"]) == {"b": 2}
    assert app.invoke(None, cfg) == {"b": 2, "c": 20}


class ThreeQuestions(TypedDict):
    log: Annotated[list, operator.add]


def _three_questions(saver):
    from threadloom.graph import START, StateGraph

    def ask(_):
        return {"log": [interrupt("q1"), interrupt("q2"), interrupt("q3")]}

    b = StateGraph(ThreeQuestions)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    return b.compile(checkpointer=saver)


def test_a_plain_answer_is_not_given_again_after_an_answer_by_id(saver):
    """q1 answered plainly, q2 by id map: q3 was answered with q1's answer and
    never shown (LangGraph does the same). It must be asked."""
    graph, cfg = _three_questions(saver), {"configurable": {"thread_id": "t"}}
    assert [i.value for i in graph.invoke({"log": []}, cfg)[INTERRUPT]] == ["q1"]
    (q2,) = graph.invoke(Command(resume="a1"), cfg)[INTERRUPT]
    assert q2.value == "q2"
    out = graph.invoke(Command(resume={q2.id: "a2"}), cfg)
    assert [i.value for i in out[INTERRUPT]] == ["q3"]
    assert [i.value for i in graph.get_state(cfg).interrupts] == ["q3"]
    # a run started again without an answer (after a crash, say) asks q3 again
    assert [i.value for i in graph.invoke(None, cfg)[INTERRUPT]] == ["q3"]
    assert graph.invoke(Command(resume="a3"), cfg) == {"log": ["a1", "a2", "a3"]}


def test_an_answer_by_id_then_plain_still_works(saver):
    graph, cfg = _three_questions(saver), {"configurable": {"thread_id": "t"}}
    (q1,) = graph.invoke({"log": []}, cfg)[INTERRUPT]
    (q2,) = graph.invoke(Command(resume={q1.id: "a1"}), cfg)[INTERRUPT]
    assert q2.value == "q2"
    (q3,) = graph.invoke(Command(resume="a2"), cfg)[INTERRUPT]
    assert q3.value == "q3"
    assert graph.invoke(Command(resume={q3.id: "a3"}), cfg) == {"log": ["a1", "a2", "a3"]}


def test_tasks_finished_together_are_reported_in_task_order(saver, monkeypatch):
    """Three nodes interrupt in one step; they finish c, b, a while the driver is
    busy. They were committed in arrival order, so ``invoke()["__interrupt__"]``
    (and the ``updates`` stream) came out in a different order from run to run
    and from ``get_state().interrupts``; LangGraph's wait on its set of futures
    reports them in task order."""
    import time

    from threadloom.graph import START, StateGraph
    from threadloom.pregel import driver

    def node(name, delay):
        def run(_):
            time.sleep(delay)
            return {"log": [interrupt(name)]}

        return run

    b = StateGraph(ThreeQuestions)
    for name, delay in (("a", 0.09), ("b", 0.06), ("c", 0.03)):
        b.add_node(name, node(name, delay))
        b.add_edge(START, name)
    graph = b.compile(checkpointer=saver)
    next_event = driver._SyncRun._next

    def busy_next(self, *args):
        time.sleep(0.3)  # the driver is busy (a slow save, say) while all three finish
        return next_event(self, *args)

    monkeypatch.setattr(driver._SyncRun, "_next", busy_next)
    cfg = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"log": []}, cfg)
    assert [i.value for i in out[INTERRUPT]] == ["a", "b", "c"]
    assert [i.value for i in graph.get_state(cfg).interrupts] == ["a", "b", "c"]
