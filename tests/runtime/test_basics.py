"""Core runtime behaviour: chains, fan-out/in, Sends, Commands, config, batch, async."""

from __future__ import annotations

import asyncio
import operator
import time

import pytest

from threadloom.channels import BinaryOperatorAggregate, EphemeralValue, LastValue, Topic
from threadloom.config import get_config
from threadloom.errors import EmptyInputError, GraphRecursionError, InvalidUpdateError
from threadloom.pregel import ChannelWrite, ChannelWriteEntry, NodeBuilder, Pregel
from threadloom.types import Command, Send


def chain(n: int, fn=lambda x: x + 1) -> Pregel:
    nodes = {
        f"n{i}": NodeBuilder().subscribe_only(f"c{i}").do(fn).write_to(f"c{i + 1}")
        for i in range(n)
    }
    channels = {f"c{i}": LastValue(int) for i in range(n + 1)}
    return Pregel(nodes=nodes, channels=channels, input_channels="c0", output_channels=f"c{n}")


def test_chain_sync_and_async():
    app = chain(10)
    assert app.invoke(1) == 11
    assert asyncio.run(app.ainvoke(1)) == 11


def test_async_nodes():
    async def add(x):
        await asyncio.sleep(0)
        return x + 1

    app = chain(3, add)
    assert asyncio.run(app.ainvoke(0)) == 3
    with pytest.raises(TypeError, match="async"):
        app.invoke(0)


def test_parallel_writes_apply_in_path_order_not_finish_order():
    def slow(name, delay):
        def fn(_):
            time.sleep(delay)
            return [name]

        return fn

    nodes = {
        "a": NodeBuilder().subscribe_only("inp").do(slow("a", 0.05)).write_to("out"),
        "b": NodeBuilder().subscribe_only("inp").do(slow("b", 0.0)).write_to("out"),
    }
    app = Pregel(
        nodes=nodes,
        channels={"inp": LastValue(str), "out": BinaryOperatorAggregate(list, operator.add)},
        input_channels="inp",
        output_channels="out",
    )
    assert app.invoke("x") == ["a", "b"]


def test_send_creates_push_tasks_with_their_own_input():
    fan = (
        NodeBuilder()
        .subscribe_only("inp")
        .do(lambda items: [Send("worker", i) for i in items])
        .build()
    )
    fan.writers.append(
        ChannelWrite([ChannelWriteEntry("unused", skip_none=True, mapper=lambda _: None)])
    )
    from threadloom.pregel._write import ChannelWriteTupleEntry

    fan.writers.append(
        ChannelWrite([ChannelWriteTupleEntry(lambda sends: [("__pregel_tasks", s) for s in sends])])
    )
    worker = NodeBuilder().do(lambda x: [x * 10]).write_to("out")
    app = Pregel(
        nodes={"fan": fan, "worker": worker},
        channels={
            "inp": LastValue(list),
            "unused": LastValue(int),
            "out": BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="inp",
        output_channels="out",
    )
    assert app.invoke([1, 2, 3]) == [10, 20, 30]


def test_command_returned_by_node_updates_and_goes_to():
    first = (
        NodeBuilder()
        .subscribe_only("inp")
        .do(lambda x: Command(update={"log": ["first"]}, goto="second"))
    )
    second = (
        NodeBuilder().subscribe_only("branch:to:second").do(lambda _: ["second"]).write_to("log")
    )
    app = Pregel(
        nodes={"first": first, "second": second},
        channels={
            "inp": LastValue(str),
            "branch:to:second": EphemeralValue(str),
            "log": BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="inp",
        output_channels="log",
    )
    assert app.invoke("go") == ["first", "second"]


def test_command_as_input_needs_something():
    app = chain(1)
    with pytest.raises(EmptyInputError):
        app.invoke(Command())


def test_recursion_limit_raises_typed_error():
    loop = NodeBuilder().subscribe_only("c").do(lambda x: x + 1).write_to("c")
    app = Pregel(
        nodes={"loop": loop},
        channels={"c": LastValue(int)},
        input_channels="c",
        output_channels="c",
    )
    with pytest.raises(GraphRecursionError, match="Recursion limit of 5"):
        app.invoke(0, {"recursion_limit": 5})
    assert isinstance(GraphRecursionError("x"), RecursionError)


def test_two_writes_to_last_value_is_invalid_update():
    nodes = {
        n: NodeBuilder().subscribe_only("inp").do(lambda x: x).write_to("out") for n in ("a", "b")
    }
    app = Pregel(
        nodes=nodes,
        channels={"inp": LastValue(int), "out": LastValue(int)},
        input_channels="inp",
        output_channels="out",
    )
    with pytest.raises(InvalidUpdateError):
        app.invoke(1)


def test_get_config_inside_node_and_config_param(saver):
    seen = {}

    def node(x, config):
        seen["param"] = config["metadata"]["langgraph_node"]
        seen["ctx"] = get_config()["configurable"]["thread_id"]
        return x

    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(node).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        checkpointer=saver,
    )
    assert app.invoke(3, {"configurable": {"thread_id": "t1"}}) == 3
    assert seen == {"param": "n", "ctx": "t1"}


def test_batch_and_abatch():
    app = chain(2)
    assert app.batch([1, 2, 3]) == [3, 4, 5]
    assert asyncio.run(app.abatch([1, 2])) == [3, 4]


def test_metadata_sequence_and_versions(saver):
    app = chain(3)
    app.checkpointer = saver
    cfg = {"configurable": {"thread_id": "m"}}
    assert app.invoke(0, cfg, durability="sync") == 3
    history = list(saver.list(cfg))
    assert [(t.metadata["source"], t.metadata["step"]) for t in reversed(history)] == [
        ("input", -1),
        ("loop", 0),
        ("loop", 1),
        ("loop", 2),
    ]
    latest = history[0].checkpoint
    counters = sorted(int(v.split(".")[0]) for v in latest["channel_versions"].values())
    assert counters[-1] == 4  # one new version per step, input included


def test_topic_accumulates_and_checkpoint_is_a_snapshot():
    topic = Topic(int, accumulate=True)
    topic.update([1, [2, 3]])
    snap = topic.checkpoint()
    topic.update([4])
    assert snap == [1, 2, 3]
    assert topic.get() == [1, 2, 3, 4]


def test_step_timeout_sync_and_async():
    def slow(x):
        time.sleep(0.3)
        return x

    async def aslow(x):
        await asyncio.sleep(0.3)
        return x

    for fn in (slow, aslow):
        app = Pregel(
            nodes={"n": NodeBuilder().subscribe_only("a").do(fn).write_to("b")},
            channels={"a": LastValue(int), "b": LastValue(int)},
            input_channels="a",
            output_channels="b",
            step_timeout=0.05,
        )
        with pytest.raises(TimeoutError):
            if fn is slow:
                app.invoke(1)
            else:
                asyncio.run(app.ainvoke(1))


def test_fresh_local_read_sees_own_writes_without_touching_channels():
    from threadloom.pregel.context import current_task

    seen = {}

    def node(x):
        scope = current_task()
        scope.send([("b", x * 2)])
        seen["fresh"] = scope.read("b", fresh=True)
        seen["stale"] = scope.read(["a", "b"])
        return x

    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(node)},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels=["a", "b"],
    )
    assert app.invoke(3) == {"a": 3, "b": 6}
    assert seen == {"fresh": 6, "stale": {"a": 3}}


def test_command_to_parent_from_a_subgraph_node():
    inner = Pregel(
        nodes={
            "leaf": NodeBuilder()
            .subscribe_only("x")
            .do(lambda v: Command(graph=Command.PARENT, update={"b": v * 10}))
        },
        channels={"x": LastValue(int)},
        input_channels="x",
        output_channels="x",
    )
    outer = Pregel(
        nodes={"sub": NodeBuilder().subscribe_only("a").do(inner)},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels=["a", "b"],
    )
    assert outer.invoke(2) == {"a": 2, "b": 20}


def test_max_concurrency_limits_parallel_tasks():
    import threading

    running = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def work(_):
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
        time.sleep(0.01)
        with lock:
            running["now"] -= 1
        return [1]

    nodes = {
        f"w{i}": NodeBuilder().subscribe_only("inp").do(work).write_to("out") for i in range(12)
    }
    app = Pregel(
        nodes=nodes,
        channels={"inp": LastValue(int), "out": BinaryOperatorAggregate(list, operator.add)},
        input_channels="inp",
        output_channels="out",
    )
    assert len(app.invoke(0, {"max_concurrency": 3})) == 12
    assert running["peak"] <= 3

    async def awork(x):
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
        await asyncio.sleep(0.01)
        with lock:
            running["now"] -= 1
        return [1]

    running["peak"] = 0
    anodes = {
        f"w{i}": NodeBuilder().subscribe_only("inp").do(awork).write_to("out") for i in range(12)
    }
    aapp = Pregel(
        nodes=anodes,
        channels={"inp": LastValue(int), "out": BinaryOperatorAggregate(list, operator.add)},
        input_channels="inp",
        output_channels="out",
    )
    assert len(asyncio.run(aapp.ainvoke(0, {"max_concurrency": 2}))) == 12
    assert running["peak"] <= 2
