"""multitask_strategy on invoke/stream: reject, enqueue, interrupt, rollback."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from tests.concurrency.backends import KINDS, make_spec, open_saver
from tests.concurrency.graphs import chain
from threadloom.checkpoint.lease import lease as lease_mod
from threadloom.checkpoint.lease import ops as lo
from threadloom.errors import ConfigError, LeaseLostError, ThreadBusyError


@pytest.fixture(params=KINDS)
def spec(request, tmp_path):
    return make_spec(request.param, str(tmp_path), request)


class Background:
    """Run ``fn`` in a thread, keep its result or exception."""

    def __init__(self, fn: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Any) -> None:
        try:
            self.result = fn()
        except BaseException as exc:
            self.error = exc

    def join(self) -> Background:
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self


def _cfg(thread: str, run_id: str | None = None) -> dict:
    conf = {"thread_id": thread}
    if run_id:
        conf["run_id"] = run_id
    return {"configurable": conf}


def _wait_for(pred: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _holding(saver: Any, graph: Any, thread: str, gate: Any, started: Any, durability="sync"):
    first = Background(
        lambda: graph.invoke({"log": []}, _cfg(thread, "run-A"), durability=durability)
    )
    assert started.wait(20)
    return first


def test_reject_names_thread_and_holder(spec):
    gate, started = threading.Event(), threading.Event()
    with open_saver(spec) as saver:
        graph = chain(2, gate, started).compile(checkpointer=saver)
        first = _holding(saver, graph, "t", gate, started)
        with pytest.raises(ThreadBusyError) as err:
            graph.invoke({"log": []}, _cfg("t"))
        assert "'t'" in str(err.value) and "run-A" in str(err.value)
        assert err.value.holder == "run-A" and err.value.thread_id == "t"
        gate.set()
        assert first.join().result == {"log": ["s0", "s1"]}


def test_enqueue_waits_then_runs_after(spec):
    gate, started = threading.Event(), threading.Event()
    with open_saver(spec) as saver:
        graph = chain(2, gate, started).compile(checkpointer=saver)
        first = _holding(saver, graph, "t", gate, started)
        with pytest.raises(ThreadBusyError):  # enqueue gives up after its timeout
            graph.invoke(
                {"log": []}, _cfg("t"), multitask_strategy="enqueue", multitask_timeout=0.2
            )
        second = Background(
            lambda: graph.invoke({"log": ["B"]}, _cfg("t"), multitask_strategy="enqueue")
        )
        gate.set()
        assert first.join().result == {"log": ["s0", "s1"]}
        assert second.join().result == {"log": ["s0", "s1", "B", "s0", "s1"]}


def _stop_requested(saver: Any, thread: str, mode: str) -> bool:
    info = saver._run(lo.read_flow(thread), True)
    return info is not None and info.stop == mode


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("mode", ["interrupt", "rollback"])
def test_interrupt_and_rollback_stop_the_holder_at_a_step_boundary(
    spec, mode, durability, monkeypatch
):
    # the first boundary after the request: "async"/"exit" runs re-read the lease
    # at a boundary only when it was last seen POLL_EVERY ago (0 here: every step;
    # the window itself is tested below)
    monkeypatch.setattr(lease_mod, "POLL_EVERY", 0.0)
    gate, started = threading.Event(), threading.Event()
    with open_saver(spec) as saver:
        graph = chain(3, gate, started).compile(checkpointer=saver)
        first = _holding(saver, graph, "t", gate, started, durability)
        second = Background(
            lambda: graph.invoke({"log": ["B"]}, _cfg("t"), multitask_strategy=mode)
        )
        _wait_for(lambda: _stop_requested(saver, "t", mode), "the stop request")
        gate.set()
        assert isinstance(first.join().error, LeaseLostError)
        assert mode in str(first.error) and "run-A" in str(first.error)
        log = second.join().result["log"]
        # the error says what became of A's checkpoints (it said "saved" after a rollback)
        said_kept = "checkpoints up to this step are saved" in str(first.error)
        assert said_kept is (mode == "interrupt")
        if mode == "interrupt":  # A's finished step is kept
            assert log[0] == "s0" and "B" in log
        else:  # A's checkpoints are gone: as if B ran on a fresh thread
            assert log == ["B", "s0", "s1", "s2"]
            assert [c.metadata["step"] for c in saver.list(_cfg("t"))] == [3, 2, 1, 0, -1]


def test_unknown_strategy_and_saver_without_leases():
    from threadloom.checkpoint.memory import InMemorySaver

    graph = chain(1).compile(checkpointer=InMemorySaver())
    with pytest.raises(ConfigError):
        graph.invoke({"log": []}, _cfg("t"), multitask_strategy="queue")
    assert graph.invoke({"log": []}, _cfg("t"), lease=False) == {"log": ["s0"]}


async def test_async_runs_take_the_lease_too(tmp_path, request):
    spec = make_spec("sqlite", str(tmp_path), request)
    gate, started = threading.Event(), threading.Event()
    with open_saver(spec) as saver:
        graph = chain(2, gate, started).compile(checkpointer=saver)
        first = asyncio.create_task(graph.ainvoke({"log": []}, _cfg("a", "run-A")))
        await asyncio.to_thread(started.wait, 20)
        with pytest.raises(ThreadBusyError):
            await graph.ainvoke({"log": []}, _cfg("a"))
        queued = asyncio.create_task(
            graph.ainvoke({"log": ["B"]}, _cfg("a"), multitask_strategy="enqueue")
        )
        gate.set()
        assert (await first) == {"log": ["s0", "s1"]}
        assert (await queued)["log"] == ["s0", "s1", "B", "s0", "s1"]


def test_update_state_is_refused_while_a_run_holds_the_thread(spec):
    gate, started = threading.Event(), threading.Event()
    with open_saver(spec) as saver:
        graph = chain(2, gate, started).compile(checkpointer=saver)
        first = _holding(saver, graph, "u", gate, started)
        with pytest.raises(ThreadBusyError) as err:
            graph.update_state(_cfg("u"), {"log": ["sneaky"]})
        assert err.value.holder == "run-A"
        gate.set()
        assert first.join().result == {"log": ["s0", "s1"]}
        graph.update_state(_cfg("u"), {"log": ["after"]})
        assert graph.get_state(_cfg("u")).values["log"] == ["s0", "s1", "after"]


async def test_async_rollback_deletes_what_the_async_run_stored(tmp_path, request, monkeypatch):
    monkeypatch.setattr(lease_mod, "POLL_EVERY", 0.0)  # (default durability: "async")
    spec = make_spec("sqlite", str(tmp_path), request)
    gate, started = threading.Event(), threading.Event()
    with open_saver(spec) as saver:
        graph = chain(3, gate, started).compile(checkpointer=saver)
        first = asyncio.create_task(graph.ainvoke({"log": []}, _cfg("r", "run-A")))
        assert await asyncio.to_thread(started.wait, 20)
        second = asyncio.create_task(
            graph.ainvoke({"log": ["B"]}, _cfg("r"), multitask_strategy="rollback")
        )
        while not _stop_requested(saver, "r", "rollback"):
            await asyncio.sleep(0.01)
        gate.set()
        with pytest.raises(LeaseLostError):
            await first
        assert (await second)["log"] == ["B", "s0", "s1", "s2"]
        assert [c.metadata["step"] for c in saver.list(_cfg("r"))] == [3, 2, 1, 0, -1]
