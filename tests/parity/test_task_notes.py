"""A node's exception names the task it failed in (``__notes__``), as LangGraph's.

In a fan-out or a subgraph the traceback alone does not say which task failed;
LangGraph adds "During task with name '<node>' and id '<task id>'", one line per
enclosing task. threadloom added none (probe5).
"""

from __future__ import annotations

import re
import sys
from typing import Any, TypedDict

import langgraph.graph as lg
import pytest

import threadloom.graph as tl
from threadloom.checkpoint.memory import InMemorySaver

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="add_note is Python 3.11+")


class S(TypedDict):
    x: int


def _bad(state: S) -> dict:
    raise ValueError("boom")


def _apps(m: Any) -> dict[str, Any]:
    inner = m.StateGraph(S)
    inner.add_node("bad", _bad)
    inner.add_edge(m.START, "bad")
    outer = m.StateGraph(S)
    outer.add_node("outer", inner.compile())
    outer.add_edge(m.START, "outer")
    return {"plain": inner.compile(), "nested": outer.compile()}


def _notes(exc: BaseException) -> list[str]:
    return [re.sub(r"id '[^']+'", "id <id>", n) for n in getattr(exc, "__notes__", [])]


@pytest.mark.parametrize("shape", ["plain", "nested"])
async def test_notes_match_langgraph(shape: str) -> None:
    got = {}
    for name, m in (("lg", lg), ("tl", tl)):
        app = _apps(m)[shape]
        with pytest.raises(ValueError) as sync_err:
            app.invoke({"x": 1})
        with pytest.raises(ValueError) as async_err:
            await app.ainvoke({"x": 1})
        got[name] = (_notes(sync_err.value), _notes(async_err.value))
    assert got["tl"] == got["lg"]
    assert got["tl"][0][0] == "During task with name 'bad' and id <id>"


def test_the_note_carries_the_task_id_get_state_shows() -> None:
    app = _apps(tl)["plain"]
    app = app.copy(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "n"}}
    with pytest.raises(ValueError) as err:
        app.invoke({"x": 1}, cfg)
    [task] = app.get_state(cfg).tasks
    assert err.value.__notes__ == [f"During task with name 'bad' and id '{task.id}'"]
