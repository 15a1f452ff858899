"""``Pregel.copy``: LangGraph's ``copy(update: dict)`` form replaces attributes
(it used to set an attribute named ``update`` and return the graph unchanged)."""

from __future__ import annotations

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.graph import START, StateGraph


def _graph():
    builder = StateGraph(dict).add_node("a", lambda s: {"x": 1}).add_node("b", lambda s: {})
    builder.add_edge(START, "a").add_edge("a", "b")
    return builder.compile(checkpointer=InMemorySaver(), interrupt_before=["b"])


def test_copy_with_an_update_dict_applies_it() -> None:
    app = _graph()
    free = app.copy({"interrupt_before_nodes": []})
    free.invoke({"x": 0}, {"configurable": {"thread_id": "1"}})
    assert free.get_state({"configurable": {"thread_id": "1"}}).next == ()
    app.invoke({"x": 0}, {"configurable": {"thread_id": "2"}})
    assert app.get_state({"configurable": {"thread_id": "2"}}).next == ("b",)
    assert app.copy(update={"name": "renamed"}).name == "renamed"
    assert app.copy(name="kw").name == "kw" and app.name != "kw"
