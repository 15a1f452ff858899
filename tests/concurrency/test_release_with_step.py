"""The lease is released in the run's last checkpoint transaction when the loop can
tell the run ends there (no Send pending, no node triggered by what the step
updated); otherwise it is released on its own as before. Either way the thread is
free when the run returns, and a nested graph never releases its parent's lease.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from tests.concurrency.backends import KINDS, make_spec, open_saver
from tests.concurrency.graphs import chain
from threadloom.checkpoint.lease import lease as lease_mod
from threadloom.checkpoint.lease import ops as lo
from threadloom.graph import END, START, StateGraph
from threadloom.types import Send


class S(TypedDict):
    log: Annotated[list[str], operator.add]


@pytest.fixture(params=KINDS)
def spec(request, tmp_path):
    return make_spec(request.param, str(tmp_path), request)


@pytest.fixture
def releases(monkeypatch):
    """Counts separate ``Lease.release`` calls (the release the last save did not do)."""
    calls: list[str] = []
    real = lease_mod.Lease.release

    def counting(self: Any) -> None:
        calls.append(self.thread_id)
        real(self)

    monkeypatch.setattr(lease_mod.Lease, "release", counting)
    return calls


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _free(saver: Any, thread: str) -> bool:
    return saver._run(lo.read_flow(thread), True) is None


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_chain_releases_in_its_last_checkpoint(spec, releases, durability):
    with open_saver(spec) as saver:
        graph = chain(3).compile(checkpointer=saver)
        for _ in range(2):  # the thread is free again right away
            out = graph.invoke({"log": []}, _cfg("t"), durability=durability)
        assert out["log"] == ["s0", "s1", "s2"] * 2
        assert _free(saver, "t")
        assert releases == []


def test_fanout_join_releases_in_its_last_checkpoint(spec, releases):
    b = StateGraph(S)
    b.add_node("work", lambda i: {"log": [f"w{i}"]})
    b.add_node("join", lambda s: {"log": ["join"]})
    b.add_conditional_edges(START, lambda s: [Send("work", i) for i in range(4)])
    b.add_edge("work", "join")
    b.add_edge("join", END)
    with open_saver(spec) as saver:
        out = b.compile(checkpointer=saver).invoke({"log": []}, _cfg("f"), durability="sync")
        assert sorted(out["log"]) == ["join", "w0", "w1", "w2", "w3"]
        assert _free(saver, "f") and releases == []


def _nested() -> Any:
    sub = StateGraph(S)
    sub.add_node("inner", lambda s: {"log": ["inner"]})
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)
    b = StateGraph(S)
    b.add_node("sub", sub.compile())
    b.add_node("after", lambda s: {"log": ["after"]})
    b.add_edge(START, "sub")
    b.add_edge("sub", "after")
    b.add_edge("after", END)
    return b


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_subgraph_end_does_not_release_the_parents_lease(spec, releases, durability):
    with open_saver(spec) as saver:
        graph = _nested().compile(checkpointer=saver)
        out = graph.invoke({"log": []}, _cfg("n"), durability=durability)
        assert out["log"] == ["inner", "after"]
        assert _free(saver, "n") and releases == []


def test_interrupt_after_the_last_node_releases_separately(releases):
    from threadloom.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = chain(2).compile(checkpointer=saver, interrupt_after=["s1"])
    graph.invoke({"log": []}, _cfg("i"), durability="sync")
    assert _free(saver, "i") and releases == ["i"]
    out = graph.invoke(None, _cfg("i"), durability="sync")
    assert out["log"] == ["s0", "s1"]


def test_conditional_end_releases_the_lease_either_way(releases):
    from threadloom.checkpoint.memory import InMemorySaver

    b = StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_edge(START, "a")
    b.add_conditional_edges("a", lambda s: "a" if len(s["log"]) < 3 else END)
    saver = InMemorySaver()
    out = b.compile(checkpointer=saver).invoke({"log": []}, _cfg("c"), durability="sync")
    assert out["log"] == ["a", "a", "a"]
    assert _free(saver, "c") and releases == []  # routing to END writes no trigger


async def test_async_api_releases_in_its_last_checkpoint(releases, monkeypatch):
    from threadloom.checkpoint.memory import InMemorySaver

    arelease = []
    real = lease_mod.Lease.arelease

    async def counting(self: Any) -> None:
        arelease.append(self.thread_id)
        await real(self)

    monkeypatch.setattr(lease_mod.Lease, "arelease", counting)
    saver = InMemorySaver()
    graph = chain(3).compile(checkpointer=saver)
    for durability in ("sync", "async"):
        out = await graph.ainvoke({"log": []}, _cfg(durability), durability=durability)
        assert out["log"] == ["s0", "s1", "s2"]
        assert _free(saver, durability)
    assert arelease == []


def test_exit_durability_releases_in_the_final_save(spec, releases):
    with open_saver(spec) as saver:
        graph = chain(3).compile(checkpointer=saver)
        out = graph.invoke({"log": []}, _cfg("x"), durability="exit")
        assert out["log"] == ["s0", "s1", "s2"]
        assert saver.get_tuple(_cfg("x")).checkpoint["channel_values"]["log"] == out["log"]
        assert _free(saver, "x") and releases == []


def test_exit_durability_interrupt_releases_and_resumes(releases):
    from threadloom.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = chain(3).compile(checkpointer=saver, interrupt_before=["s1"])
    graph.invoke({"log": []}, _cfg("xi"), durability="exit")
    assert _free(saver, "xi") and releases == []
    out = graph.invoke(None, _cfg("xi"), durability="exit")
    assert out["log"] == ["s0", "s1", "s2"]
