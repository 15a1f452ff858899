"""Stream modes: values, updates, tasks, checkpoints, debug, custom, several at once, subgraphs."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.runtime import support
from threadloom.channels import LastValue
from threadloom.config import get_stream_writer
from threadloom.pregel import NodeBuilder, Pregel


def two_step(checkpointer=None) -> Pregel:
    def shout(x, writer):
        writer({"progress": x})
        return x.upper()

    return Pregel(
        nodes={
            "shout": NodeBuilder().subscribe_only("a").do(shout).write_to("b"),
            "bang": NodeBuilder().subscribe_only("b").do(lambda x: x + "!").write_to("c"),
        },
        channels={k: LastValue(str) for k in "abc"},
        input_channels="a",
        output_channels=["b", "c"],
        checkpointer=checkpointer,
    )


def test_values_and_updates():
    app = two_step()
    assert list(app.stream("hi")) == [{"a": "hi", "b": "HI"}, {"a": "hi", "b": "HI", "c": "HI!"}]
    assert list(app.stream("hi", stream_mode="updates")) == [
        {"shout": {"b": "HI"}},
        {"bang": {"c": "HI!"}},
    ]


def test_several_modes_give_tuples_and_custom_events():
    app = two_step()
    chunks = list(app.stream("hi", stream_mode=["custom", "updates"]))
    assert chunks == [
        ("custom", {"progress": "hi"}),
        ("updates", {"shout": {"b": "HI"}}),
        ("updates", {"bang": {"c": "HI!"}}),
    ]


def test_get_stream_writer_inside_node():
    def node(x):
        get_stream_writer()(f"saw {x}")
        return x

    app = Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(node).write_to("b")},
        channels={"a": LastValue(str), "b": LastValue(str)},
        input_channels="a",
        output_channels="b",
    )
    assert list(app.stream("x", stream_mode="custom")) == ["saw x"]
    assert app.invoke("y") == "y"  # no-op writer when nobody listens


def test_tasks_and_debug(saver):
    app = two_step(saver)
    cfg = {"configurable": {"thread_id": "dbg"}}
    tasks = list(app.stream("hi", cfg, stream_mode="tasks"))
    assert [(t["name"], "result" in t) for t in tasks] == [
        ("shout", False),
        ("shout", True),
        ("bang", False),
        ("bang", True),
    ]
    assert tasks[1]["result"] == {"b": "HI"} and tasks[1]["error"] is None
    debug = list(app.stream("yo", {"configurable": {"thread_id": "dbg2"}}, stream_mode="debug"))
    assert [d["type"] for d in debug] == [
        "checkpoint",
        "task",
        "task_result",
        "checkpoint",
        "task",
        "task_result",
        "checkpoint",
    ]
    assert [d["step"] for d in debug] == [-1, 0, 0, 0, 1, 1, 1]
    checkpoints = list(
        app.stream("z", {"configurable": {"thread_id": "dbg3"}}, stream_mode="checkpoints")
    )
    assert [c["metadata"]["source"] for c in checkpoints] == ["input", "loop", "loop"]
    assert checkpoints[0]["next"] == ["shout"] and checkpoints[-1]["next"] == []


def test_subgraph_events_carry_namespace():
    inner = Pregel(
        nodes={"inner": NodeBuilder().subscribe_only("x").do(lambda v: v * 2).write_to("y")},
        channels={"x": LastValue(int), "y": LastValue(int)},
        input_channels="x",
        output_channels="y",
    )
    outer = Pregel(
        nodes={"sub": NodeBuilder().subscribe_only("a").do(inner).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    chunks = list(outer.stream(3, stream_mode="updates", subgraphs=True))
    assert chunks[-1] == ((), {"sub": {"b": 6}})
    (ns, payload) = chunks[0]
    assert (
        len(ns) == 1 and ns[0].startswith("sub:") and payload == {"inner": 6}
    )  # the subgraph runs via invoke: output key "y"
    assert list(outer.stream(3, stream_mode="updates")) == [{"sub": {"b": 6}}]


def test_astream_modes():
    app = two_step()

    async def go():
        return [c async for c in app.astream("hi", stream_mode=["updates", "custom"])]

    assert asyncio.run(go()) == [
        ("custom", {"progress": "hi"}),
        ("updates", {"shout": {"b": "HI"}}),
        ("updates", {"bang": {"c": "HI!"}}),
    ]


def _chain(saver, calls: list[int] | None = None) -> Pregel:
    def bang(i: int):
        def node(x: str) -> str:
            if calls is not None:
                calls.append(i)
            return x + "!"

        return node

    nodes = {
        f"n{i}": NodeBuilder().subscribe_only(f"c{i}").do(bang(i)).write_to(f"c{i + 1}")
        for i in range(4)
    }
    return Pregel(
        nodes=nodes,
        channels={f"c{i}": LastValue(str) for i in range(5)},
        input_channels="c0",
        output_channels="c4",
        checkpointer=saver,
    )


def test_stopping_early_closes_cleanly_and_keeps_saved_steps(saver):
    app = _chain(saver)
    cfg = {"configurable": {"thread_id": "early"}}
    stream = app.stream("x", cfg, stream_mode="updates", durability="sync")
    assert next(stream) == {"n0": {"c1": "x!"}}
    stream.close()
    assert [t.metadata["step"] for t in saver.list(cfg)][0] in (0, 1)
    assert app.invoke(None, cfg) == "x!!!!"


@contextlib.asynccontextmanager
async def _async_saver(kind: str):
    if kind == "asqlite":
        from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(":memory:") as s:
            yield s
        return
    s = support.saver("threadloom", kind)
    try:
        yield s
    finally:
        getattr(s, "close", lambda: None)()


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("kind", ["memory", "sqlite", "asqlite"])
def test_leaving_astream_early_keeps_the_streamed_step(kind, durability):
    """The step a caller saw streamed is stored once it leaves (as in LangGraph,
    every durability): aclose() stores it before returning; after a bare
    ``break`` a new run on the thread waits for the dropped stream's closing
    (no ThreadBusyError) and resumes after that step."""

    async def go():
        async with _async_saver(kind) as saver:
            app = _chain(saver)
            cfg = {"configurable": {"thread_id": "closed"}}
            agen = app.astream("y", cfg, stream_mode="updates", durability=durability)
            assert await agen.__anext__() == {"n0": {"c1": "y!"}}
            await agen.aclose()
            state = await app.aget_state(cfg)
            assert (state.values, state.next) == ({"c0": "y", "c1": "y!"}, ("n1",))
            assert await app.ainvoke(None, cfg) == "y!!!!"

            calls: list[int] = []
            app = _chain(saver, calls)
            cfg = {"configurable": {"thread_id": "dropped"}}
            async for chunk in app.astream("z", cfg, stream_mode="updates", durability=durability):
                assert chunk == {"n0": {"c1": "z!"}}
                break
            assert await app.ainvoke(None, cfg) == "z!!!!"
            assert calls == [0, 1, 2, 3]  # resumed after n0: its step was stored

    asyncio.run(go())
