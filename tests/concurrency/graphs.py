"""Small graphs for the lease tests: a chain whose nodes can be held on an event."""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any, TypedDict

from threadloom.graph import END, START, StateGraph


class ChainState(TypedDict):
    log: Annotated[list[str], operator.add]


def chain(steps: int, gate: threading.Event | None = None, started: Any = None) -> StateGraph:
    """``s0 -> s1 -> ...``; each appends its name. ``gate`` holds every node until set;
    ``started`` (an Event) is set when a node begins."""
    builder = StateGraph(ChainState)

    def make(name: str) -> Any:
        def node(state: ChainState) -> dict[str, Any]:
            if started is not None:
                started.set()
            if gate is not None:
                assert gate.wait(20), "test gate never opened"
            return {"log": [name]}

        return node

    names = [f"s{i}" for i in range(steps)]
    for name in names:
        builder.add_node(name, make(name))
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder


class CountState(TypedDict):
    count: int


def counting_chain(steps: int) -> StateGraph:
    """``n0 -> n1 -> ...``; each adds 1 to ``count`` (the bench's chain shape)."""
    builder = StateGraph(CountState)
    prev = START
    for i in range(steps):
        builder.add_node(f"n{i}", lambda s: {"count": s["count"] + 1})
        builder.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    builder.add_edge(prev, END)
    return builder
