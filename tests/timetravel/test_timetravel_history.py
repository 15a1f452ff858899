"""threadloom-only behaviour of get_state / get_state_history (beyond LangGraph parity):
typed errors, lazy history, routing by checkpoint_ns."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import CheckpointNotFoundError, ConfigError
from threadloom.graph import END, START, StateGraph
from threadloom.types import Command, interrupt

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    value: Annotated[list[str], operator.add]


class Counter(TypedDict):
    n: int


def chain(saver: Any, *names: str) -> Any:
    builder = StateGraph(State)
    for name in names:
        builder.add_node(name, lambda s, _n=name: {"value": [_n]})
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=saver)


class CountingSaver(InMemorySaver):
    """Counts how many checkpoints ``list``/``alist`` actually handed out."""

    handed_out = 0

    def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
        for item in super().list(config, **kwargs):
            self.handed_out += 1
            yield item

    async def alist(self, config: Any, **kwargs: Any) -> Any:
        async for item in super().alist(config, **kwargs):
            self.handed_out += 1
            yield item


def looping_graph(saver: Any, steps: int) -> Any:
    def bump(state: Counter) -> dict:
        return {"n": state["n"] + 1}

    return (
        StateGraph(Counter)
        .add_node("bump", bump)
        .add_edge(START, "bump")
        .add_conditional_edges("bump", lambda s: END if s["n"] >= steps else "bump")
        .compile(checkpointer=saver)
    )


def test_unknown_checkpoint_id_names_thread_and_id() -> None:
    graph = chain(InMemorySaver(), "a")
    graph.invoke({"value": []}, CFG)
    bogus = "1f000000-0000-6000-8000-000000000000"
    with pytest.raises(CheckpointNotFoundError) as info:
        graph.get_state({"configurable": {"thread_id": "t1", "checkpoint_id": bogus}})
    assert info.value.thread_id == "t1" and info.value.checkpoint_id == bogus
    assert "t1" in str(info.value) and bogus in str(info.value)


def test_update_of_unknown_checkpoint_raises_and_writes_nothing() -> None:
    graph = chain(InMemorySaver(), "a")
    graph.invoke({"value": []}, CFG)
    before = len(list(graph.get_state_history(CFG)))
    bogus = {
        "configurable": {"thread_id": "t1", "checkpoint_id": "1f000000-0000-6000-8000-00000000000f"}
    }
    with pytest.raises(CheckpointNotFoundError):
        graph.update_state(bogus, {"value": ["x"]}, as_node="a")
    assert len(list(graph.get_state_history(CFG))) == before


def test_thread_that_never_ran_is_empty_not_an_error() -> None:
    snap = chain(InMemorySaver(), "a").get_state({"configurable": {"thread_id": "fresh"}})
    assert snap.values == {} and snap.next == () and snap.metadata is None and snap.tasks == ()


@pytest.mark.parametrize("config", [{}, {"configurable": {}}, {"configurable": {"thread_id": ""}}])
def test_missing_thread_id_is_config_error(config: dict) -> None:
    graph = chain(InMemorySaver(), "a")
    with pytest.raises(ConfigError, match="thread_id"):
        graph.get_state(config)
    with pytest.raises(ConfigError, match="thread_id"):
        list(graph.get_state_history(config))
    with pytest.raises(ConfigError, match="thread_id"):
        graph.update_state(config, {"value": ["x"]}, as_node="a")


def test_no_checkpointer_is_config_error_naming_the_fix() -> None:
    graph = chain(None, "a")
    with pytest.raises(ConfigError, match="checkpointer"):
        graph.get_state(CFG)


def test_history_is_lazy() -> None:
    """Taking 3 snapshots of a 300-step thread reads no more than 3 checkpoints."""
    saver = CountingSaver()
    graph = looping_graph(saver, 300)
    assert graph.invoke({"n": 0}, CFG) == {"n": 300}
    saver.handed_out = 0
    first = list(itertools.islice(graph.get_state_history(CFG), 3))
    assert [s.values["n"] for s in first] == [300, 299, 298]
    assert saver.handed_out <= 3
    assert len(list(graph.get_state_history(CFG, limit=5))) == 5


async def test_async_history_is_lazy() -> None:
    saver = CountingSaver()
    graph = looping_graph(saver, 120)
    await graph.ainvoke({"n": 0}, CFG)
    saver.handed_out = 0
    seen = []
    async for snap in graph.aget_state_history(CFG):
        seen.append(snap.values["n"])
        if len(seen) == 2:
            break
    assert seen == [120, 119] and saver.handed_out <= 2


def test_live_versus_historical_interrupts() -> None:
    """Live view: only unanswered interrupts; the checkpoint's own view keeps them all."""

    def ask(state: State) -> dict:
        return {"value": [interrupt("q1"), interrupt("q2")]}

    graph = (
        StateGraph(State)
        .add_node("ask", ask)
        .add_edge(START, "ask")
        .compile(checkpointer=InMemorySaver())
    )
    graph.invoke({"value": []}, CFG)
    graph.invoke(Command(resume="a1"), CFG)
    live = graph.get_state(CFG)
    assert [i.value for i in live.interrupts] == ["q2"]
    assert live.next == ("ask",)
    graph.invoke(Command(resume="a2"), CFG)
    done = graph.get_state(CFG)
    assert done.values == {"value": ["a1", "a2"]} and done.interrupts == () and done.next == ()


def test_subgraph_checkpointer_true_as_root_is_config_error() -> None:
    sub = StateGraph(State).add_node("x", lambda s: {"value": ["x"]}).add_edge(START, "x")
    graph = sub.compile(checkpointer=True)
    with pytest.raises(ConfigError, match="checkpointer=True"):
        graph.get_state(CFG)


def _savers() -> list[Any]:
    from threadloom.checkpoint.sqlite import SqliteSaver

    return ["memory", SqliteSaver]


@pytest.mark.parametrize("kind", _savers(), ids=["memory", "sqlite"])
def test_writing_while_walking_history(kind: Any, tmp_path: Any) -> None:
    """Lazy history must tolerate forks made while it is being walked."""
    import contextlib

    with contextlib.ExitStack() as stack:
        saver = (
            InMemorySaver()
            if kind == "memory"
            else stack.enter_context(kind.from_conn_string(str(tmp_path / "h.db")))
        )
        graph = chain(saver, "a", "b")
        graph.invoke({"value": []}, CFG)
        walked = 0
        for snap in graph.get_state_history(CFG):
            walked += 1
            if snap.next == ("b",):
                fork = graph.update_state(snap.config, {"value": ["x"]}, as_node="a")
                assert graph.invoke(None, fork) == {"value": ["a", "x", "b"]}
        assert walked == 4
        assert len(list(graph.get_state_history(CFG))) == 6
