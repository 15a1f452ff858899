"""interrupt(), Command(resume=...), resume maps, interrupt_before/after."""

from __future__ import annotations

import operator

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
