"""The async driver: AsyncSqliteSaver, subgraphs, interrupts, parallel async nodes, custom events."""

from __future__ import annotations

import asyncio
import operator

import pytest

from threadloom.channels import BinaryOperatorAggregate, LastValue
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.config import get_stream_writer
from threadloom.constants import INTERRUPT
from threadloom.pregel import NodeBuilder, Pregel
from threadloom.types import Command, interrupt


def async_savers():
    yield "memory", InMemorySaver
    try:
        import aiosqlite  # noqa: F401

        from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError:  # pragma: no cover
        return
    yield "aiosqlite", AsyncSqliteSaver


async def _open(kind, factory):
    if kind == "memory":
        return factory(), None
    cm = factory.from_conn_string(":memory:")
    return await cm.__aenter__(), cm


@pytest.mark.parametrize("kind,factory", list(async_savers()))
async def test_parallel_async_nodes_interrupt_and_resume(kind, factory):
    saver, cm = await _open(kind, factory)
    try:
        order: list[str] = []

        async def slow(x):
            await asyncio.sleep(0.02)
            order.append("slow")
            return ["slow"]

        async def asks(x):
            order.append("asks")
            return [interrupt("ok?")]

        app = Pregel(
            nodes={
                "slow": NodeBuilder().subscribe_only("inp").do(slow).write_to("out"),
                "asks": NodeBuilder().subscribe_only("inp").do(asks).write_to("out"),
                "sync": NodeBuilder().subscribe_only("inp").do(lambda x: ["sync"]).write_to("out"),
            },
            channels={"inp": LastValue(str), "out": BinaryOperatorAggregate(list, operator.add)},
            input_channels="inp",
            output_channels="out",
            checkpointer=saver,
        )
        cfg = {"configurable": {"thread_id": "a"}}
        first = await app.ainvoke("x", cfg)
        assert list(first) == [INTERRUPT]  # a single output channel: only the interrupts
        assert [i.value for i in first[INTERRUPT]] == ["ok?"]
        assert await app.ainvoke(Command(resume="yes"), cfg) == ["yes", "slow", "sync"]
        assert order.count("slow") == 1 and order.count("asks") == 2
        history = [t.metadata["step"] async for t in saver.alist(cfg)]
        assert history == [0, -1]
    finally:
        if cm is not None:
            await cm.__aexit__(None, None, None)


async def test_async_subgraph_and_custom_events():
    async def inner_node(v):
        get_stream_writer()({"inner saw": v})
        return v * 2

    inner = Pregel(
        nodes={"inner": NodeBuilder().subscribe_only("x").do(inner_node).write_to("y")},
        channels={"x": LastValue(int), "y": LastValue(int)},
        input_channels="x",
        output_channels="y",
    )
    outer = Pregel(
        nodes={"sub": NodeBuilder().subscribe_only("a").do(inner).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "s"}}
    chunks = [
        c async for c in outer.astream(4, cfg, stream_mode=["custom", "updates"], subgraphs=True)
    ]
    assert chunks[-1] == ((), "updates", {"sub": {"b": 8}})
    customs = [c for c in chunks if c[1] == "custom"]
    assert (
        len(customs) == 1
        and customs[0][2] == {"inner saw": 4}
        and customs[0][0][0].startswith("sub:")
    )
    assert (await outer.aget_state(cfg)).values["b"] == 8


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_async_durability_modes(durability):
    saver = InMemorySaver()
    nodes = {
        f"n{i}": NodeBuilder().subscribe_only(f"c{i}").do(lambda x: x + 1).write_to(f"c{i + 1}")
        for i in range(4)
    }
    app = Pregel(
        nodes=nodes,
        channels={f"c{i}": LastValue(int) for i in range(5)},
        input_channels="c0",
        output_channels="c4",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": durability}}
    assert await app.ainvoke(0, cfg, durability=durability) == 4
    steps = [t.metadata["step"] async for t in saver.alist(cfg)]
    assert steps == ([3] if durability == "exit" else [3, 2, 1, 0, -1])
