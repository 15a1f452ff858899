"""add_messages keeps one history one kind: langchain objects, or plain dicts.

A list that holds a langchain_core message gets its dicts, ``(role, content)``
tuples and strings converted to langchain messages (as LangGraph's reducer
does), so nodes never see a mix; with no langchain object involved, dicts stay.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from threadloom.graph.message import REMOVE_ALL_MESSAGES, RemoveMessage, add_messages

lc = pytest.importorskip("langchain_core.messages")


def _kinds(messages: list) -> list[tuple[str, str, str]]:
    return [(type(m).__name__, m.content, m.id) for m in messages]


def test_shorthands_join_a_langchain_history_as_objects() -> None:
    left = [lc.HumanMessage("hi", id="1")]
    out = add_messages(left, [("ai", "yo"), "more", {"role": "user", "content": "d", "id": "4"}])
    assert [type(m).__name__ for m in out] == [
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
        "HumanMessage",
    ]
    assert out[0] is left[0] and out[3].id == "4" and all(m.id for m in out)


def test_a_langchain_update_converts_a_dict_history() -> None:
    left = [{"role": "user", "content": "a", "id": "1"}, {"role": "assistant", "content": "b"}]
    out = add_messages(left, lc.AIMessage("c", id="3"))
    assert [type(m).__name__ for m in out] == ["HumanMessage", "AIMessage", "AIMessage"]
    assert out[0].id == "1" and out[1].id  # ids kept or given
    assert isinstance(left[0], dict)  # the input is not changed


def test_same_result_as_langgraph_when_langchain_is_involved() -> None:
    lg = pytest.importorskip("langgraph.graph.message")
    left = [lc.HumanMessage("a", id="1"), {"role": "assistant", "content": "b", "id": "2"}]
    right = [("user", "c"), {"role": "ai", "content": "B", "id": "2"}, lc.RemoveMessage(id="1")]
    ours, theirs = add_messages(left, right), lg.add_messages(left, right)
    assert [(type(m).__name__, m.content) for m in ours] == [
        (type(m).__name__, m.content) for m in theirs
    ]
    assert [m.id for m in ours][:1] == ["2"]


def test_without_langchain_objects_dicts_stay_dicts() -> None:
    out = add_messages([{"role": "user", "content": "a"}], [("ai", "b"), "c"])
    assert all(type(m) is dict for m in out)
    duck = SimpleNamespace(content="x", id="9")  # not a langchain message: nothing to convert to
    mixed = add_messages([duck], [("ai", "b")])
    assert mixed[0] is duck and type(mixed[1]) is dict


def test_remove_markers_and_remove_all_with_langchain() -> None:
    left = [lc.HumanMessage("a", id="1"), lc.AIMessage("b", id="2")]
    out = add_messages(left, [RemoveMessage("1"), ("user", "c")])
    assert [type(m).__name__ for m in out] == ["AIMessage", "HumanMessage"]
    tail = add_messages(
        left, [RemoveMessage(REMOVE_ALL_MESSAGES), lc.AIMessage("z", id="z"), ("user", "c")]
    )
    assert [type(m).__name__ for m in tail] == ["AIMessage", "HumanMessage"]
    only_marker = add_messages(left, [RemoveMessage("1")])  # a marker alone converts nothing
    assert _kinds(only_marker) == [("AIMessage", "b", "2")]


def test_graph_node_returning_a_tuple_on_langchain_input() -> None:
    from threadloom.graph import START, MessagesState, StateGraph

    g = StateGraph(MessagesState)
    g.add_node("bot", lambda s: {"messages": [("ai", "reply")]})
    g.add_edge(START, "bot")
    out = g.compile().invoke({"messages": [lc.HumanMessage("hi", id="1")]})
    assert [(type(m).__name__, m.content) for m in out["messages"]] == [
        ("HumanMessage", "hi"),
        ("AIMessage", "reply"),
    ]
    plain = g.compile().invoke({"messages": [("user", "hi")]})
    assert [type(m) for m in plain["messages"]] == [dict, dict]


def test_a_chunk_history_makes_a_dict_update_a_langchain_message() -> None:
    """A streamed chunk in the history is a langchain message (coerced to one): a dict
    replacing it by id is converted too (hypothesis found the chunk counted as a dict)."""
    lc = pytest.importorskip("langchain_core.messages")
    out = add_messages(
        [lc.AIMessageChunk(content="", id="1")], [{"role": "user", "content": "", "id": "1"}]
    )
    assert [type(m) for m in out] == [lc.HumanMessage] and out[0].id == "1"
