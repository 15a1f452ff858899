"""The stop-request poll under "async"/"exit" durability.

Saves lag behind the loop there, so the step boundary re-reads the lease, but
only when a fence, renewal or read last saw it ``POLL_EVERY`` ago or more: a
read per step would wait for the background save (one connection) and cost a
round trip per step. A stop request is still honoured at the first boundary
after it is read.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest

from tests.concurrency.test_multitask import Background, _cfg, _stop_requested, _wait_for
from threadloom.checkpoint.lease import lease as lease_mod
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import LeaseLostError
from threadloom.graph import END, START, StateGraph


class S(TypedDict):
    log: Annotated[list[str], operator.add]


def _chain(n: int, pause: float = 0.0, before: Callable[[str], None] | None = None) -> Any:
    b = StateGraph(S)
    prev = START
    for i in range(n):

        def node(state: S, name: str = f"s{i}") -> dict[str, Any]:
            if before is not None:
                before(name)
            if pause:
                time.sleep(pause)
            return {"log": [name]}

        b.add_node(f"s{i}", node)
        b.add_edge(prev, f"s{i}")
        prev = f"s{i}"
    b.add_edge(prev, END)
    return b


@pytest.mark.parametrize("durability", ["async", "exit"])
def test_fast_steps_do_not_read_the_lease_every_step(monkeypatch, durability):
    reads = []
    real = lo.read_flow
    monkeypatch.setattr(lo, "read_flow", lambda tid: reads.append(tid) or real(tid))
    monkeypatch.setattr(lease_mod, "POLL_EVERY", 60.0)
    graph = _chain(20).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"log": []}, _cfg("t"), durability=durability)
    assert out["log"] == [f"s{i}" for i in range(20)]
    assert reads == []  # taking the lease counts as the first read


@pytest.mark.parametrize("durability", ["async", "exit"])
async def test_async_runs_do_not_read_the_lease_at_the_first_boundary(monkeypatch, durability):
    reads = []
    real = lo.read_flow
    monkeypatch.setattr(lo, "read_flow", lambda tid: reads.append(tid) or real(tid))
    monkeypatch.setattr(lease_mod, "POLL_EVERY", 60.0)
    graph = _chain(5).compile(checkpointer=InMemorySaver())
    out = await graph.ainvoke({"log": []}, _cfg("t"), durability=durability)
    assert out["log"] == [f"s{i}" for i in range(5)]
    assert reads == []


def test_boundary_reads_the_lease_once_poll_every_passed_since_acquiring(monkeypatch):
    reads = []
    real = lo.read_flow
    monkeypatch.setattr(lo, "read_flow", lambda tid: reads.append(tid) or real(tid))
    monkeypatch.setattr(lease_mod, "POLL_EVERY", 0.0)
    graph = _chain(3).compile(checkpointer=InMemorySaver())
    graph.invoke({"log": []}, _cfg("t"), durability="async")
    assert reads  # with no grace period every boundary reads again


def test_slow_steps_still_see_a_stop_request(monkeypatch):
    """The first run's first step waits until the stop request is stored, so the
    request lands mid-run however slowly the second run starts (a loaded box
    could start it after the first run's 50 x 50 ms steps had all passed)."""
    monkeypatch.setattr(lease_mod, "POLL_EVERY", 0.01)
    saver = InMemorySaver()
    armed = [True]

    def hold_s0(name: str) -> None:
        if name == "s0" and armed and armed.pop():  # the first run's s0 only
            _wait_for(lambda: _stop_requested(saver, "t", "interrupt"), "the stop request")

    graph = _chain(50, pause=0.05, before=hold_s0).compile(checkpointer=saver)
    first = Background(lambda: graph.invoke({"log": []}, _cfg("t", "run-A"), durability="async"))
    _wait_for(lambda: saver.get_tuple(_cfg("t")) is not None, "the first checkpoint")
    second = Background(
        lambda: graph.invoke({"log": ["B"]}, _cfg("t"), multitask_strategy="interrupt")
    )
    assert isinstance(first.join().error, LeaseLostError)
    log = second.join().result["log"]
    assert "B" in log and len([x for x in log if x.startswith("s")]) < 100
