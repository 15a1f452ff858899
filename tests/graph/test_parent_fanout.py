"""Parallel tasks of a subgraph each sending ``Command(graph=Command.PARENT, ...)``.

LangGraph raises the first ``ParentCommand`` of the step and drops the others:
three ``Send`` workers reporting to the parent give one report, no error
(probe5). threadloom merges them: updates in task order, gotos together.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import InvalidUpdateError
from threadloom.graph import START, StateGraph
from threadloom.types import Command, Send


class S(TypedDict):
    log: Annotated[list, operator.add]


def _fanout(n: int = 3, **child: Any) -> Any:
    def worker(s: S) -> Command:
        return Command(graph=Command.PARENT, update={"log": [f"from-{s['log'][0]}"]}, **child)

    sub = StateGraph(S)
    sub.add_node("worker", worker)
    sub.add_conditional_edges(START, lambda s: [Send("worker", {"log": [i]}) for i in range(n)])
    parent = StateGraph(S)
    parent.add_node("sub", sub.compile())
    parent.add_node("after", lambda s: {"log": ["after"]})
    parent.add_edge(START, "sub")
    return parent.compile(checkpointer=InMemorySaver())


def test_every_send_workers_report_reaches_the_parent_in_task_order() -> None:
    cfg = {"configurable": {"thread_id": "f"}}
    assert _fanout().invoke({"log": []}, cfg) == {"log": ["from-0", "from-1", "from-2"]}
    assert _fanout(goto="after").invoke({"log": []}, {"configurable": {"thread_id": "g"}}) == {
        "log": ["from-0", "from-1", "from-2", "after"]
    }


async def test_the_async_run_merges_them_too() -> None:
    out = await _fanout(5).ainvoke({"log": []}, {"configurable": {"thread_id": "a"}})
    assert out == {"log": [f"from-{i}" for i in range(5)]}


def test_two_parallel_nodes_both_report() -> None:
    sub = StateGraph(S)
    sub.add_node("a", lambda s: Command(graph=Command.PARENT, update={"log": ["a"]}))
    sub.add_node("b", lambda s: Command(graph=Command.PARENT, update=[("log", ["b"])]))
    sub.add_edge(START, "a")
    sub.add_edge(START, "b")
    parent = StateGraph(S)
    parent.add_node("sub", sub.compile())
    parent.add_edge(START, "sub")
    assert parent.compile().invoke({"log": []}) == {"log": ["a", "b"]}


def test_two_reports_to_a_plain_value_conflict_as_parallel_writes_do() -> None:
    class One(TypedDict):
        status: str

    sub = StateGraph(One)
    sub.add_node("a", lambda s: Command(graph=Command.PARENT, update={"status": "a"}))
    sub.add_node("b", lambda s: Command(graph=Command.PARENT, update={"status": "b"}))
    sub.add_edge(START, "a")
    sub.add_edge(START, "b")
    parent = StateGraph(One)
    parent.add_node("sub", sub.compile())
    parent.add_edge(START, "sub")
    with pytest.raises(InvalidUpdateError, match="status"):
        parent.compile().invoke({"status": ""})


def test_two_resume_values_for_the_parent_are_refused() -> None:
    with pytest.raises(InvalidUpdateError, match="one resume value"):
        _fanout(2, resume="x").invoke({"log": []}, {"configurable": {"thread_id": "r"}})
