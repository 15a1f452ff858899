"""One saver transaction per superstep: ``put_step`` and the persister's write buffer.

A step's last writes travel with its checkpoint in one ``put_step``; writes of
tasks that finish while others still run are saved before the driver waits;
nothing buffered is lost on errors, interrupts or at exit; savers that only
implement ``put``/``put_writes`` (or wrap one) still get those calls.
"""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.saver import BaseCheckpointSaver
from threadloom.constants import ERROR
from threadloom.graph import END, START, StateGraph
from threadloom.pregel.persist import AsyncPersister, SyncPersister, uses_put_step
from threadloom.types import Send


class S(TypedDict):
    log: Annotated[list[str], operator.add]


def chain(n: int, saver: Any, fail: str | None = None) -> Any:
    b = StateGraph(S)
    prev = START
    for i in range(n):

        def node(state: S, name: str = f"n{i}") -> dict[str, Any]:
            if name == fail:
                raise ValueError(f"{name} failed")
            return {"log": [name]}

        b.add_node(f"n{i}", node)
        b.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    b.add_edge(prev, END)
    return b.compile(checkpointer=saver)


def fanout(k: int, saver: Any, fail: int | None = None) -> Any:
    b = StateGraph(S)

    def work(item: int) -> dict[str, Any]:
        if item == fail:
            raise ValueError(f"item {item} failed")
        return {"log": [f"w{item}"]}

    b.add_node("work", work)
    b.add_conditional_edges(START, lambda s: [Send("work", i) for i in range(k)])
    b.add_edge("work", END)
    return b.compile(checkpointer=saver)


class Spy(InMemorySaver):
    """Counts what the runtime calls: put_step (with / without checkpoint), put, put_writes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def put_step(self, writes: Any, checkpoint: Any = None) -> Any:
        with self.lock:
            self.calls.append("step+cp" if checkpoint is not None else f"writes*{len(writes)}")
        return super().put_step(writes, checkpoint)

    async def aput_step(self, writes: Any, checkpoint: Any = None) -> Any:
        with self.lock:
            self.calls.append("step+cp" if checkpoint is not None else f"writes*{len(writes)}")
        return await super().aput_step(writes, checkpoint)


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def run(graph: Any, inp: Any, thread: str, durability: str) -> Any:
    """Without the lease, so the spy's own put_step is what the runtime calls."""
    return graph.invoke(inp, cfg(thread), durability=durability, lease=False)


def test_sync_chain_saves_each_step_in_one_put_step():
    saver = Spy()
    out = run(chain(4, saver), {"log": []}, "t", "sync")
    assert out == {"log": ["n0", "n1", "n2", "n3"]}
    # input checkpoint + 1 per step (__start__ and 4 nodes): each one put_step with its writes
    assert saver.calls == ["step+cp"] * 6
    history = list(saver.list(cfg("t")))
    assert [h.metadata["step"] for h in history] == [4, 3, 2, 1, 0, -1]
    # the writes of each step are stored against the checkpoint they followed
    assert [w[1] for w in history[1].pending_writes] == ["log"]
    assert history[0].pending_writes == []


async def test_async_driver_chain_saves_each_step_in_one_put_step():
    saver = Spy()
    out = await chain(3, saver).ainvoke({"log": []}, cfg("t"), durability="sync", lease=False)
    assert out == {"log": ["n0", "n1", "n2"]}
    assert saver.calls == ["step+cp"] * 5


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_fanout_writes_are_all_saved_and_coalesced(durability):
    saver = Spy()
    out = run(fanout(20, saver), {"log": []}, "f", durability)
    assert sorted(out["log"]) == sorted(f"w{i}" for i in range(20))
    saved = sum(int(c.split("*")[1]) for c in saver.calls if c.startswith("writes*"))
    cps = saver.calls.count("step+cp")
    assert cps == 3  # input, start, the fan-out step
    assert saved <= 20  # the rest went with the checkpoint
    step_writes = list(saver.list(cfg("f")))[1].pending_writes
    assert sorted(v[0] for _, c, v in step_writes if c == "log") == sorted(
        f"w{i}" for i in range(20)
    )


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_failed_step_keeps_the_finished_tasks_writes(durability):
    saver = Spy()
    graph = fanout(6, saver, fail=3)
    with pytest.raises(ValueError, match="item 3 failed"):
        run(graph, {"log": []}, "e", durability)
    pending = saver.get_tuple(cfg("e")).pending_writes
    done = sorted(v[0] for _, c, v in pending if c == "log")
    errors = [v for _, c, v in pending if c == ERROR]
    assert done == sorted(f"w{i}" for i in range(6) if i != 3)
    assert len(errors) == 1
    # resuming runs only the failed task again
    graph = fanout(6, saver)
    out = run(graph, None, "e", durability)
    assert sorted(out["log"]) == sorted(f"w{i}" for i in range(6))


def test_lone_failing_task_error_write_is_saved():
    saver = Spy()
    with pytest.raises(ValueError):
        run(chain(3, saver, fail="n1"), {"log": []}, "x", "sync")
    tup = saver.get_tuple(cfg("x"))
    assert tup.checkpoint["channel_values"]["log"] == ["n0"]
    assert [c for _, c, _ in tup.pending_writes] == [ERROR]
    assert saver.calls[-1] == "writes*1"  # saved at exit, no checkpoint followed


class Wrapper:
    """Wraps a saver and customises put/put_writes (others through __getattr__)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put(self, *args: Any) -> Any:
        self.calls.append("put")
        return self.inner.put(*args)

    def put_writes(self, *args: Any) -> Any:
        self.calls.append("writes")
        return self.inner.put_writes(*args)


class OverridesPut(InMemorySaver):
    def __init__(self) -> None:
        super().__init__()
        self.puts = 0

    def put(self, *args: Any) -> Any:
        self.puts += 1
        return super().put(*args)


def test_leased_run_writes_one_transaction_per_step():
    saver = InMemorySaver()
    writes: list[bool] = []
    inner_run = saver._run

    def counting(flow: Any, write: bool = False) -> Any:
        writes.append(write)
        return inner_run(flow, write)

    saver._run = counting  # type: ignore[method-assign]
    chain(4, saver).invoke({"log": []}, cfg("l"), durability="sync")
    # lease acquire + 6 checkpoints (input, __start__, 4 nodes) in 5 transactions:
    # the input rides with __start__'s, the release with the last checkpoint's
    assert writes.count(True) == 6
    assert saver.get_tuple(cfg("l")).checkpoint["channel_values"]["log"] == [
        "n0",
        "n1",
        "n2",
        "n3",
    ]


def test_savers_customising_put_are_not_bypassed():
    wrapper = Wrapper(InMemorySaver())
    assert not uses_put_step(wrapper)
    chain(2, wrapper).invoke({"log": []}, cfg("w"), durability="sync")
    assert wrapper.calls == ["put", "writes", "put", "writes", "put", "writes", "put"]
    sub = OverridesPut()
    assert not uses_put_step(sub) and uses_put_step(sub, True)  # aput is not overridden
    run(chain(2, sub), {"log": []}, "w", "sync")
    assert sub.puts == 4
    assert uses_put_step(InMemorySaver()) and uses_put_step(InMemorySaver(), True)


class Recorder(BaseCheckpointSaver):
    """Implements put/put_writes only: the base put_step calls them in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Any] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.calls.append(("put", checkpoint))
        return {"configurable": {"checkpoint_id": checkpoint}}

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("writes", task_id))

    async def aput(self, *args: Any) -> Any:
        return self.put(*args)

    async def aput_writes(self, *args: Any) -> None:
        self.put_writes(*args)


async def test_default_put_step_calls_put_writes_then_put():
    rec = Recorder()
    writes = [({}, [("a", 1)], "t1", ""), ({}, [("b", 2)], "t2", "")]
    out = rec.put_step(writes, ({}, "cp1", {}, {}))
    assert out == {"configurable": {"checkpoint_id": "cp1"}}
    assert rec.put_step(writes[:1]) is None
    assert await rec.aput_step(writes, ({}, "cp2", {}, {})) is not None
    assert rec.calls == [
        ("writes", "t1"),
        ("writes", "t2"),
        ("put", "cp1"),
        ("writes", "t1"),
        ("writes", "t1"),
        ("writes", "t2"),
        ("put", "cp2"),
    ]


class StepRecorder(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.steps: list[tuple[list[str], Any]] = []
        self.gate = threading.Event()

    def put_step(self, writes: Any, checkpoint: Any = None) -> Any:
        self.gate.wait(5)
        self.steps.append(([w[2] for w in writes], checkpoint and checkpoint[1]))

    async def aput_step(self, writes: Any, checkpoint: Any = None) -> Any:
        return self.put_step(writes, checkpoint)


def test_async_durability_drain_coalesces_writes_into_the_next_checkpoint():
    rec = StepRecorder()
    p = SyncPersister(rec, "async")
    p.put({}, "cp0", {}, {})  # held by the gate: the rest queues behind it
    p.put_writes({}, [], "a", "")
    p.save_writes()
    p.put_writes({}, [], "b", "")
    p.put({}, "cp1", {}, {})
    p.put_writes({}, [], "c", "")
    rec.gate.set()
    p.flush()
    assert rec.steps == [([], "cp0"), (["a", "b"], "cp1"), (["c"], None)]


async def test_async_persister_buffers_until_put_or_flush():
    rec = StepRecorder()
    rec.gate.set()
    p = AsyncPersister(rec, "sync")
    p.put_writes({}, [], "a", "")
    await p.throttle()
    assert rec.steps == []  # buffered: waiting for the checkpoint
    p.put({}, "cp", {}, {})
    p.put_writes({}, [], "b", "")
    await p.flush()
    assert rec.steps == [(["a"], "cp"), (["b"], None)]


class GatedSaver(InMemorySaver):
    """Holds its first save until released, so later saves queue up behind it."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.batches: list[int] = []

    def put_step(self, writes: Any, checkpoint: Any = None) -> Any:
        self.gate.wait(5)
        self.batches.append(1)
        return super().put_step(writes, checkpoint)

    def put_steps(self, steps: Any) -> Any:
        self.gate.wait(5)
        self.batches.append(len(steps))
        return super().put_steps(steps)


def _checkpoint(step: int) -> dict[str, Any]:
    return {
        "v": 4,
        "id": f"1ef{step:05d}-0000-6000-8000-000000000000",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"log": [str(step)]},
        "channel_versions": {"log": f"{step + 1:032}.0.5"},
        "versions_seen": {},
        "updated_channels": ["log"],
    }


def test_async_durability_queued_steps_share_one_transaction():
    saver = GatedSaver()
    persister = SyncPersister(saver, "async")
    cfg_: dict[str, Any] = {"configurable": {"thread_id": "q", "checkpoint_ns": ""}}
    for step in range(4):  # each step: writes on the previous checkpoint, then its own
        if step:
            persister.put_writes(cfg_, [("log", [f"w{step}"])], f"task{step}", "")
        cp = _checkpoint(step)
        persister.put(cfg_, cp, {"step": step}, {"log": cp["channel_versions"]["log"]})
        cfg_ = {"configurable": {**cfg_["configurable"], "checkpoint_id": cp["id"]}}
    saver.gate.set()
    persister.flush()
    assert sum(saver.batches) == 4 and len(saver.batches) < 4  # queued ones coalesced
    history = list(saver.list({"configurable": {"thread_id": "q"}}))
    assert [h.metadata["step"] for h in history] == [3, 2, 1, 0]
    assert [[v for _, _, v in h.pending_writes] for h in history] == [
        [],
        [["w3"]],
        [["w2"]],
        [["w1"]],
    ]


def test_exit_durability_saves_writes_and_checkpoint_together():
    saver = Spy()
    graph = fanout(4, saver, fail=2)
    with pytest.raises(ValueError):
        run(graph, {"log": []}, "x", "exit")
    assert saver.calls == ["step+cp"]  # the final checkpoint with its pending writes
    pending = saver.get_tuple(cfg("x")).pending_writes
    assert sorted(v[0] for _, c, v in pending if c == "log") == ["w0", "w1", "w3"]
    out = run(fanout(4, saver), None, "x", "exit")
    assert sorted(out["log"]) == ["w0", "w1", "w2", "w3"]


async def test_async_sync_durability_boundary_trusts_the_runs_own_fence():
    saver = InMemorySaver()
    counts = {"read": 0, "write": 0}
    inner = saver._arun

    async def counting(flow: Any, write: bool = False) -> Any:
        counts["write" if write else "read"] += 1
        return await inner(flow, write)

    saver._arun = counting  # type: ignore[method-assign]
    graph = chain(3, saver)
    for i in range(2):
        out = await graph.ainvoke({"log": []}, cfg(f"a{i}"), durability="sync")
        assert out == {"log": ["n0", "n1", "n2"]}
    # per run: the initial read only (the step boundaries use the put_step fence;
    # the first one, with the input still held, the lease read when taken), lease
    # acquire + 4 saves (input + START in one), the last one releasing the lease too
    assert counts == {"read": 2, "write": 10}
