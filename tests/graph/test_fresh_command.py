"""A Command as the first input of a new thread (LangGraph raises nothing but applies
the update twice and runs START's edges next to ``goto``; threadloom does what the
caller means): the update counts once, then the run goes where ``goto`` says, or on
from START when there is no goto."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import InvalidUpdateError
from threadloom.graph import END, START, StateGraph
from threadloom.types import Command, Send


class S(TypedDict):
    x: Annotated[list, operator.add]


def _app(checkpointer=None):
    g = StateGraph(S)
    g.add_node("a", lambda s: {"x": ["a"]})
    g.add_node("b", lambda s: {"x": ["b"]})
    g.add_edge(START, "a")
    return g.compile(checkpointer=checkpointer)


def cfg(t: str) -> dict:
    return {"configurable": {"thread_id": t}}


CASES = [
    (Command(goto="b"), ["b"]),
    (Command(update={"x": ["u"]}), ["u", "a"]),
    (Command(update={"x": ["u"]}, goto="b"), ["u", "b"]),
    (Command(goto=["a", "b"]), ["a", "b"]),
    (Command(goto=Send("b", {"x": []})), ["b"]),
    (Command(update={"x": ["u"]}, goto=END), ["u"]),
]


@pytest.mark.parametrize("saver", [True, False], ids=["saver", "nosaver"])
@pytest.mark.parametrize(("cmd", "want"), CASES)
def test_fresh_command_runs_once(cmd: Command, want: list, saver: bool) -> None:
    app = _app(InMemorySaver() if saver else None)
    assert app.invoke(cmd, cfg("t") if saver else None) == {"x": want}


@pytest.mark.parametrize(("cmd", "want"), CASES[:3])
async def test_fresh_command_async(cmd: Command, want: list) -> None:
    app = _app(InMemorySaver())
    assert await app.ainvoke(cmd, cfg("t")) == {"x": want}


def test_fresh_command_history() -> None:
    app = _app(InMemorySaver())
    app.invoke(Command(update={"x": ["u"]}, goto="b"), cfg("t"))
    hist = [
        (s.next, s.metadata["source"], s.metadata["step"], s.values)
        for s in app.get_state_history(cfg("t"))
    ]
    assert hist == [((), "loop", 0, {"x": ["u", "b"]}), (("b",), "input", -1, {"x": ["u"]})]
    # the thread now exists: a later Command resumes it as usual (update applied once)
    assert app.invoke(Command(update={"x": ["v"]}), cfg("t")) == {"x": ["u", "b", "v"]}


def test_update_only_runs_from_start() -> None:
    app = _app(InMemorySaver())
    app.invoke(Command(update={"x": ["u"]}), cfg("t"))
    hist = [(s.next, s.metadata["step"], s.values) for s in app.get_state_history(cfg("t"))]
    assert hist[-1] == (("__start__",), -1, {"x": ["u"]})
    assert hist[0] == ((), 1, {"x": ["u", "a"]})


def test_fresh_command_unknown_goto() -> None:
    app = _app(InMemorySaver())
    with pytest.raises(InvalidUpdateError, match="nope"):
        app.invoke(Command(goto="nope"), cfg("t"))


def test_fresh_command_streams_values_like_a_dict_input() -> None:
    app = _app(InMemorySaver())
    by_cmd = list(app.stream(Command(update={"x": ["u"]}), cfg("c"), stream_mode="values"))
    by_dict = list(app.stream({"x": ["u"]}, cfg("d"), stream_mode="values"))
    assert by_cmd == by_dict == [{"x": ["u"]}, {"x": ["u", "a"]}]


def test_fresh_command_interrupt_before_goto() -> None:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"x": ["a"]})
    g.add_node("b", lambda s: {"x": ["b"]})
    g.add_edge(START, "a")
    app = g.compile(checkpointer=InMemorySaver(), interrupt_before=["b"])
    assert app.invoke(Command(update={"x": ["u"]}, goto="b"), cfg("t")) == {"x": ["u"]}
    assert app.get_state(cfg("t")).next == ("b",)
    assert app.invoke(None, cfg("t")) == {"x": ["u", "b"]}
