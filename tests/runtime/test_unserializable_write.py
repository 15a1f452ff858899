"""A node writes a value no serializer accepts: the run fails, but every step
finished before it stays stored on every backend (as LangGraph keeps them), so
the thread can be fixed and resumed without running finished nodes again.

Under the default ``durability="async"`` the queued steps are saved in one
transaction; the bad value used to roll back the whole batch (probe12 #2)."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.savers.backends import BACKENDS
from threadloom.errors import SerializationError
from threadloom.graph import END, START, StateGraph


class State(TypedDict):
    items: Annotated[list, operator.add]
    out: Any


def _graph(saver: Any, calls: list[str], bad: dict[str, bool]) -> Any:
    def a(state: State) -> dict[str, Any]:
        calls.append("a")
        return {"items": [1]}

    def b(state: State) -> dict[str, Any]:
        calls.append("b")
        return {"out": object() if bad["on"] else "fine"}

    builder = StateGraph(State).add_node("a", a).add_node("b", b)
    builder.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["async", "sync"])
@pytest.mark.parametrize("backend", BACKENDS, ids=[b.name for b in BACKENDS])
async def test_finished_steps_survive_an_unstorable_write(backend, durability, tmp_path, request):
    fixtures = {name: request.getfixturevalue(name) for name in backend.needs}
    cfg = {"configurable": {"thread_id": f"unstorable-{durability}"}}
    calls: list[str] = []
    bad = {"on": True}
    async with backend.open(str(tmp_path), fixtures) as saver:
        app = _graph(saver, calls, bad)
        with pytest.raises(SerializationError, match="out"):
            if backend.sync_api:
                app.invoke({"items": [0]}, cfg, durability=durability)
            else:
                await app.ainvoke({"items": [0]}, cfg, durability=durability)
        history = [
            (s.metadata["step"], s.values, s.next) async for s in app.aget_state_history(cfg)
        ]
        assert history == [
            (1, {"items": [0, 1]}, ("b",)),
            (0, {"items": [0]}, ("a",)),
            (-1, {"items": []}, ("__start__",)),
        ]
        bad["on"] = False
        done = await app.ainvoke(None, cfg, durability=durability)
        assert done == {"items": [0, 1], "out": "fine"}
        assert calls == ["a", "b", "b"]  # a ran once: its step was kept
