"""The public names of threadloom.graph (mirrors langgraph.graph)."""

from __future__ import annotations

import threadloom.graph as graph


def test_all_is_pinned() -> None:
    assert sorted(graph.__all__) == [
        "CompiledStateGraph",
        "END",
        "InvalidGraphError",
        "MessageGraph",
        "MessagesState",
        "RemoveMessage",
        "START",
        "StateGraph",
        "add_messages",
    ]


def test_names_match_langgraph_graph() -> None:
    import pytest

    lg = pytest.importorskip("langgraph.graph")
    shared = {"END", "START", "MessagesState", "StateGraph", "add_messages"}
    assert shared <= set(dir(lg))
    assert graph.START == lg.START and graph.END == lg.END
    assert graph.CompiledStateGraph.__name__ == "CompiledStateGraph"
