"""add_messages on plain dict messages and on langchain_core objects."""

from __future__ import annotations

import pytest

from threadloom.graph.message import REMOVE_ALL_MESSAGES, RemoveMessage, add_messages


def test_append_assigns_ids_without_mutating_inputs() -> None:
    left = [{"role": "user", "content": "hi"}]
    out = add_messages(left, {"role": "assistant", "content": "hello"})
    assert [m["content"] for m in out] == ["hi", "hello"]
    assert all(m["id"] for m in out)
    assert "id" not in left[0]


def test_shorthands_become_dicts() -> None:
    out = add_messages([], ["plain", ("ai", "answer")])
    assert [(m["role"], m["content"]) for m in out] == [("user", "plain"), ("assistant", "answer")]


def test_replace_by_id_keeps_position() -> None:
    left = [
        {"role": "user", "content": "a", "id": "1"},
        {"role": "user", "content": "b", "id": "2"},
    ]
    out = add_messages(left, [{"role": "user", "content": "A", "id": "1"}])
    assert [m["content"] for m in out] == ["A", "b"]


def test_remove_by_id_and_unknown_id() -> None:
    left = [
        {"role": "user", "content": "a", "id": "1"},
        {"role": "user", "content": "b", "id": "2"},
    ]
    assert [m["id"] for m in add_messages(left, RemoveMessage("1"))] == ["2"]
    with pytest.raises(ValueError, match="doesn't exist \\('9'\\)"):
        add_messages(left, RemoveMessage("9"))


def test_remove_marker_survives_as_plain_dict() -> None:
    left = [{"role": "user", "content": "a", "id": "1"}]
    assert add_messages(left, [dict(RemoveMessage("1"))]) == []


def test_remove_all_keeps_only_what_follows() -> None:
    left = [{"role": "user", "content": "a", "id": "1"}]
    out = add_messages(
        left, [RemoveMessage(REMOVE_ALL_MESSAGES), {"role": "user", "content": "new", "id": "n"}]
    )
    assert out == [{"role": "user", "content": "new", "id": "n"}]


def test_langchain_objects_kept_as_objects() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    left = [lc.HumanMessage("hi", id="1")]
    out = add_messages(left, [lc.AIMessage("yo", id="2"), lc.HumanMessage("HI", id="1")])
    assert [type(m).__name__ for m in out] == ["HumanMessage", "AIMessage"]
    assert out[0].content == "HI"
    assert add_messages(out, lc.RemoveMessage(id="2")) == [out[0]]


def test_matches_langgraph_on_langchain_messages() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    lg = pytest.importorskip("langgraph.graph.message")
    left = [lc.HumanMessage("a", id="1"), lc.AIMessage("b", id="2")]
    right = [lc.AIMessage("B", id="2"), lc.RemoveMessage(id="1"), lc.HumanMessage("c", id="3")]
    assert add_messages(left, right) == lg.add_messages(left, right)


def _remove_graph(saver):
    """bot deletes message "1"; wipe clears everything and leaves one message."""
    from threadloom.graph import START, MessagesState, StateGraph

    return (
        StateGraph(MessagesState)
        .add_node("bot", lambda s: {"messages": [RemoveMessage("1")]})
        .add_node(
            "wipe",
            lambda s: {
                "messages": [RemoveMessage(REMOVE_ALL_MESSAGES), {"role": "user", "content": "z"}]
            },
        )
        .add_edge(START, "bot")
        .add_edge("bot", "wipe")
        .compile(checkpointer=saver, interrupt_before=["wipe"])
    )


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_remove_message_is_stored_and_revived(backend: str) -> None:
    """Node outputs and update_state values holding RemoveMessage go through the saver."""
    import sqlite3

    from threadloom.checkpoint.memory import InMemorySaver
    from threadloom.checkpoint.sqlite import SqliteSaver

    saver = (
        InMemorySaver()
        if backend == "memory"
        else SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    )
    graph = _remove_graph(saver)
    cfg = {"configurable": {"thread_id": "t"}}
    start = [{"role": "user", "content": c, "id": i} for c, i in (("a", "1"), ("b", "2"))]
    out = graph.invoke({"messages": start}, cfg)
    assert [m["id"] for m in out["messages"]] == ["2"]
    before_bot = next(s for s in graph.get_state_history(cfg) if s.next == ("bot",))
    stored = saver.get_tuple(before_bot.config)
    assert stored is not None
    written = [v for _, ch, v in stored.pending_writes if ch == "messages"]
    assert written == [[RemoveMessage("1")]] and type(written[0][0]) is RemoveMessage
    graph.update_state(cfg, {"messages": [RemoveMessage("2")]}, as_node="bot")
    assert graph.get_state(cfg).values["messages"] == []
    out = graph.invoke(None, cfg)
    assert [m["content"] for m in out["messages"]] == ["z"]


def test_remove_message_round_trips_as_itself() -> None:
    from threadloom.checkpoint.serde import default_serializer

    serde = default_serializer()
    for marker in (RemoveMessage("x", name="n"), RemoveMessage(REMOVE_ALL_MESSAGES)):
        back = serde.loads_typed(serde.dumps_typed({"messages": [marker]}))["messages"][0]
        assert type(back) is RemoveMessage
        assert back == marker and back.id == marker.id


# -- the by-type fast path (session 7) agrees with the item-by-item rules ----------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from threadloom.graph import message as _msg  # noqa: E402

_IDS = st.sampled_from(["1", "2", "3", "4"])


def _one_kind(messages, inputs):
    """Inputs holding a langchain message: the result's dicts are converted (session 8)."""
    lc = pytest.importorskip("langchain_core.messages")
    if not any(isinstance(m, lc.BaseMessage) for m in inputs):
        return messages
    return [lc.convert_to_messages([m])[0] if isinstance(m, dict) else m for m in messages]


def _reference(left, right):
    """Every item coerced one by one (the reducer before the fast path)."""
    inputs = _msg._as_list(left) + _msg._as_list(right)
    return _one_kind(_merged_one_by_one(left, right), inputs)


def _merged_one_by_one(left, right):
    left_list = [_msg._with_id(_msg._coerce(m)) for m in _msg._as_list(left)]
    right_list = [_msg._with_id(_msg._coerce(m)) for m in _msg._as_list(right)]
    for idx in range(len(right_list) - 1, -1, -1):
        m = right_list[idx]
        if _msg._is_remove(m) and _msg._get_id(m) == REMOVE_ALL_MESSAGES:
            return right_list[idx + 1 :]
    merged = list(left_list)
    position = {_msg._get_id(m): i for i, m in enumerate(merged)}
    removed = set()
    for m in right_list:
        mid = _msg._get_id(m)
        if mid in position:
            if _msg._is_remove(m):
                removed.add(mid)
            else:
                removed.discard(mid)
                merged[position[mid]] = m
        elif _msg._is_remove(m):
            raise ValueError(mid)
        else:
            position[mid] = len(merged)
            merged.append(m)
    return [m for m in merged if _msg._get_id(m) not in removed]


def _message(lc):
    kinds = st.sampled_from(["human", "ai", "chunk", "dict"])

    def build(kind, mid, text):
        if kind == "human":
            return lc.HumanMessage(text, id=mid)
        if kind == "ai":
            return lc.AIMessage(text, id=mid)
        if kind == "chunk":
            return lc.AIMessageChunk(content=text, id=mid)
        return {"role": "user", "content": text, "id": mid}

    return st.builds(build, kinds, _IDS, st.text(max_size=3))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_fast_path_matches_item_by_item_rules(data) -> None:
    lc = pytest.importorskip("langchain_core.messages")
    left = data.draw(st.lists(_message(lc), max_size=6))
    right = data.draw(
        st.lists(st.one_of(_message(lc), _IDS.map(lambda i: lc.RemoveMessage(id=i))), max_size=4)
    )
    try:
        expected = _reference(left, right)
    except ValueError:
        with pytest.raises(ValueError):
            add_messages(left, right)
        return
    assert add_messages(left, right) == expected


def test_fast_path_still_gives_ids_and_converts_chunks() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    no_id = lc.HumanMessage("hi")
    out = add_messages([lc.HumanMessage("a", id="1"), no_id], [lc.AIMessageChunk(content="c")])
    assert out[1] is no_id and no_id.id  # given an id in place, as LangGraph does
    assert type(out[2]).__name__ == "AIMessage" and out[2].id
    with pytest.raises(TypeError, match="cannot use int"):
        add_messages([lc.HumanMessage("a", id="1"), 7], [])


def test_duck_typed_messages_are_checked_one_by_one() -> None:
    """Review finding: a class was remembered as a message class after one instance,
    so a later instance without ``id`` raised AttributeError (and one without
    ``content`` was accepted)."""
    from dataclasses import dataclass
    from types import SimpleNamespace

    @dataclass
    class Msg:
        content: str

    out = add_messages([Msg("a"), Msg("b")], [Msg("c")])
    assert [m.content for m in out] == ["a", "b", "c"] and all(m.id for m in out)
    add_messages([], [SimpleNamespace(content="x", id="1")])
    with pytest.raises(TypeError, match="cannot use SimpleNamespace"):
        add_messages([SimpleNamespace(content="x", id="1"), SimpleNamespace(id="2")], [])
