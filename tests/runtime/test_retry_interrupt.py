"""A node that asks (``interrupt()``) and then fails transiently keeps its answers
across retries: the retried run takes the answer the user gave, as in LangGraph.

Before the fix a retry counted interrupts on from where the failed attempt
stopped, so the answered question was asked again under a new id.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.graph import START, StateGraph
from threadloom.types import Command, RetryPolicy, interrupt

POLICY = RetryPolicy(max_attempts=5, initial_interval=0.001, jitter=False, retry_on=ValueError)


class S(TypedDict, total=False):
    x: Annotated[list, operator.add]


def _conf() -> dict:
    return {"configurable": {"thread_id": "t"}}


def _asking_node(calls: list[int], questions: tuple[str, ...], fail_on: int):
    def node(state: S) -> dict:
        calls.append(1)
        answers = [interrupt(q) for q in questions]
        if len(calls) == fail_on:
            raise ValueError("transient failure after the answers")
        return {"x": answers}

    return node


def _graph(calls: list[int], questions: tuple[str, ...], fail_on: int, in_subgraph: bool):
    node = _asking_node(calls, questions, fail_on)
    inner = StateGraph(S)
    inner.add_node("ask", node, retry_policy=POLICY)
    inner.add_edge(START, "ask")
    if not in_subgraph:
        return inner.compile(checkpointer=InMemorySaver())
    outer = StateGraph(S)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    return outer.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("in_subgraph", [False, True])
def test_a_retry_after_the_answer_uses_it(in_subgraph: bool) -> None:
    calls: list[int] = []
    app = _graph(calls, ("ask",), fail_on=2, in_subgraph=in_subgraph)
    first = app.invoke({"x": []}, _conf())
    assert [i.value for i in first["__interrupt__"]] == ["ask"]
    assert app.invoke(Command(resume="R"), _conf()) == {"x": ["R"]}
    assert len(calls) == 3  # asked, answered then failed, retried with the answer
    assert app.get_state(_conf()).values == {"x": ["R"]}
    assert app.get_state(_conf()).next == ()


def test_two_answers_survive_a_retry() -> None:
    calls: list[int] = []
    app = _graph(calls, ("q1", "q2"), fail_on=3, in_subgraph=False)
    assert [i.value for i in app.invoke({"x": []}, _conf())["__interrupt__"]] == ["q1"]
    assert [i.value for i in app.invoke(Command(resume="A"), _conf())["__interrupt__"]] == ["q2"]
    assert app.invoke(Command(resume="B"), _conf()) == {"x": ["A", "B"]}
    assert len(calls) == 4


async def test_the_async_runner_keeps_the_answer_too() -> None:
    calls: list[int] = []
    app = _graph(calls, ("ask",), fail_on=2, in_subgraph=False)
    first = await app.ainvoke({"x": []}, _conf())
    assert [i.value for i in first["__interrupt__"]] == ["ask"]
    assert await app.ainvoke(Command(resume="R"), _conf()) == {"x": ["R"]}
    assert len(calls) == 3
