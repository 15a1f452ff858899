"""A failing task must not make finished tasks run again; durability modes save as specified."""

from __future__ import annotations

import asyncio
import operator
import threading
from collections import Counter

import pytest

from threadloom.channels import BinaryOperatorAggregate, LastValue
from threadloom.constants import ERROR
from threadloom.pregel import NodeBuilder, Pregel

DURABILITIES = ["sync", "async", "exit"]


def crashy_graph(saver, runs: Counter, fail: dict):
    def make(name):
        def fn(_):
            runs[name] += 1
            if fail.get(name):
                raise ValueError(f"{name} failed")
            return [name]

        return fn

    nodes = {
        "start": NodeBuilder()
        .subscribe_only("inp")
        .do(make("start"))
        .write_to("log", fan=lambda _: "go"),
        "ok1": NodeBuilder().subscribe_only("fan").do(make("ok1")).write_to("log"),
        "ok2": NodeBuilder().subscribe_only("fan").do(make("ok2")).write_to("log"),
        "flaky": NodeBuilder().subscribe_only("fan").do(make("flaky")).write_to("log"),
    }
    return Pregel(
        nodes=nodes,
        channels={
            "inp": LastValue(str),
            "fan": LastValue(str),
            "log": BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="inp",
        output_channels="log",
        checkpointer=saver,
    )


@pytest.mark.parametrize("durability", DURABILITIES)
def test_crash_then_resume_runs_each_successful_node_once(saver, durability):
    runs: Counter = Counter()
    fail = {"flaky": True}
    app = crashy_graph(saver, runs, fail)
    cfg = {"configurable": {"thread_id": f"crash-{durability}"}}
    with pytest.raises(ValueError, match="flaky failed"):
        app.invoke("x", cfg, durability=durability)
    pending = saver.get_tuple(cfg).pending_writes
    assert {c for _, c, _ in pending} >= {ERROR, "log"}
    fail["flaky"] = False
    assert app.invoke(None, cfg, durability=durability) == ["start", "flaky", "ok1", "ok2"]
    assert runs == Counter({"start": 1, "ok1": 1, "ok2": 1, "flaky": 2})


def test_crash_async_driver(saver):
    runs: Counter = Counter()
    fail = {"flaky": True}
    app = crashy_graph(saver, runs, fail)
    cfg = {"configurable": {"thread_id": "crash-async"}}

    async def go():
        with pytest.raises(ValueError):
            await app.ainvoke("x", cfg)
        fail["flaky"] = False
        return await app.ainvoke(None, cfg)

    assert asyncio.run(go()) == ["start", "flaky", "ok1", "ok2"]
    assert runs["ok1"] == runs["ok2"] == runs["start"] == 1


def three_step(saver):
    nodes = {
        f"n{i}": NodeBuilder().subscribe_only(f"c{i}").do(lambda x: x + 1).write_to(f"c{i + 1}")
        for i in range(3)
    }
    return Pregel(
        nodes=nodes,
        channels={f"c{i}": LastValue(int) for i in range(4)},
        input_channels="c0",
        output_channels="c3",
        checkpointer=saver,
    )


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_sync_and_async_save_every_step(saver, durability):
    app = three_step(saver)
    cfg = {"configurable": {"thread_id": durability}}
    assert app.invoke(0, cfg, durability=durability) == 3
    steps = [t.metadata["step"] for t in saver.list(cfg)]
    assert steps == [2, 1, 0, -1]
    parents = [
        t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        for t in saver.list(cfg)
    ]
    ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg)]
    assert parents[:-1] == ids[1:] and parents[-1] is None


def test_exit_saves_one_checkpoint_and_no_writes(saver):
    app = three_step(saver)
    cfg = {"configurable": {"thread_id": "exit"}}
    assert app.invoke(0, cfg, durability="exit") == 3
    history = list(saver.list(cfg))
    assert len(history) == 1
    assert history[0].metadata["step"] == 2 and history[0].parent_config is None
    assert history[0].checkpoint["channel_values"]["c3"] == 3
    assert not history[0].pending_writes
    # a second run's single checkpoint hangs off the first
    assert app.invoke(5, cfg, durability="exit") == 8
    latest = saver.get_tuple(cfg)
    assert (
        latest.parent_config["configurable"]["checkpoint_id"]
        == history[0].config["configurable"]["checkpoint_id"]
    )


class SlowSaver:
    """Wraps a saver; records call order and the largest number of puts in flight."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def put(self, config, checkpoint, metadata, new_versions):
        self.calls.append(("put", checkpoint["id"]))
        return self.inner.put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):
        self.calls.append(("writes", config["configurable"]["checkpoint_id"]))
        return self.inner.put_writes(config, writes, task_id, task_path)


def test_async_durability_reaches_saver_in_order(saver):
    slow = SlowSaver(saver)
    from threadloom.pregel import ChannelWriteEntry

    stop_at_60 = ChannelWriteEntry("c", skip_none=True)
    nodes = {
        "loop": NodeBuilder()
        .subscribe_only("c")
        .do(lambda x: x + 1 if x < 60 else None)
        .write_to(stop_at_60)
    }
    app = Pregel(
        nodes=nodes,
        channels={"c": LastValue(int)},
        input_channels="c",
        output_channels="c",
        checkpointer=slow,
    )
    from threadloom.pregel.persist import SyncPersister

    persister = SyncPersister(slow, "async", max_pending=2)
    for i in range(5):
        persister.put_writes(
            {"configurable": {"thread_id": "q", "checkpoint_ns": "", "checkpoint_id": "x"}},
            [],
            str(i),
            "",
        )
    persister.flush()
    cfg = {"configurable": {"thread_id": "order"}}
    app.invoke(0, cfg, durability="async")
    put_ids = [cid for kind, cid in slow.calls if kind == "put"]
    assert put_ids == sorted(put_ids) and len(put_ids) == 62
    assert [t.metadata["step"] for t in saver.list(cfg, limit=3)] == [60, 59, 58]


def test_checkpoint_during_maps_to_durability_and_bad_modes_fail(saver):
    app = three_step(saver)
    with pytest.warns(DeprecationWarning):
        assert app.invoke(0, {"configurable": {"thread_id": "cd"}}, checkpoint_during=False) == 3
    assert len(list(saver.list({"configurable": {"thread_id": "cd"}}))) == 1  # == "exit"
    with pytest.raises(ValueError, match="durability"):
        app.invoke(0, {"configurable": {"thread_id": "bad"}}, durability="sometimes")
