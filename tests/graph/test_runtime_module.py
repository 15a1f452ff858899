"""threadloom.runtime mirrors langgraph.runtime (Runtime, get_runtime)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from typing_extensions import TypedDict

from threadloom.graph import END, START, StateGraph
from threadloom.runtime import Runtime, get_runtime


@dataclass
class Ctx:
    user: str


class State(TypedDict):
    out: str


def test_get_runtime_inside_a_node_sees_the_context_and_runtime_param_matches() -> None:
    def node(state: State, runtime: Runtime[Ctx]) -> dict:
        here = get_runtime(Ctx)
        assert here.context is runtime.context
        return {"out": here.context.user}

    builder = StateGraph(State, context_schema=Ctx)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    assert builder.compile().invoke({"out": ""}, context={"user": "ada"}) == {"out": "ada"}


def test_get_runtime_outside_a_run_raises() -> None:
    with pytest.raises(RuntimeError):
        get_runtime()
