"""Resuming a thread that has no checkpoint (a mistyped thread_id, a deleted
thread) says so, naming the thread, instead of only "Received no input"."""

from __future__ import annotations

from typing import TypedDict

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import EmptyInputError
from threadloom.graph import START, StateGraph
from threadloom.types import Command, interrupt


class S(TypedDict, total=False):
    x: str


def _graph(checkpointer=None):
    def ask(state: S) -> dict:
        return {"x": interrupt("q")}

    g = StateGraph(S)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    return g.compile(checkpointer=checkpointer)


@pytest.mark.parametrize(
    ("given", "named"), [(Command(resume="R"), "Command(resume=...)"), (None, "invoke(None)")]
)
def test_resuming_a_thread_without_checkpoints_names_the_thread(given, named) -> None:
    app = _graph(InMemorySaver())
    with pytest.raises(EmptyInputError) as info:
        app.invoke(given, {"configurable": {"thread_id": "order-l"}})
    assert "'order-l' has no checkpoint" in str(info.value) and named in str(info.value)


async def test_the_async_run_says_the_same() -> None:
    app = _graph(InMemorySaver())
    with pytest.raises(EmptyInputError, match="'order-7' has no checkpoint"):
        await app.ainvoke(Command(resume="R"), {"configurable": {"thread_id": "order-7"}})


def test_a_saved_thread_still_resumes_and_no_saver_keeps_the_short_message() -> None:
    app = _graph(InMemorySaver())
    conf = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": ""}, conf)
    assert app.invoke(Command(resume="R"), conf) == {"x": "R"}
    with pytest.raises(EmptyInputError) as info:
        _graph().invoke(None)
    assert "has no checkpoint" not in str(info.value)
