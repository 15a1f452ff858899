"""The smallest graph a test needs to see steps land: nodes that each append
their name to ``n``, chained from START (shared by the saver, Postgres and Redis
tests that only need *a* run, not a particular graph)."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from threadloom.graph import END, START, StateGraph


class State(TypedDict):
    n: Annotated[list, operator.add]


def appending(*names: str, end: bool = True) -> StateGraph:
    """START -> names[0] -> ... -> names[-1] (-> END); each node appends its name."""
    graph = StateGraph(State)
    previous = START
    for name in names:
        graph.add_node(name, lambda s, name=name: {"n": [name]})
        graph.add_edge(previous, name)
        previous = name
    if end:
        graph.add_edge(previous, END)
    return graph
