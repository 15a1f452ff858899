"""Bad input gets a typed error naming what is wrong, never a raw KeyError/AttributeError."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import (
    CheckpointerRequiredError,
    CheckpointNotFoundError,
    ConfigError,
    SerializationError,
    UnknownInterruptError,
)
from threadloom.graph import END, START, StateGraph
from threadloom.types import Command, interrupt

MISSING_ID = "1f0f5200-24f1-6382-8000-bde4e02ab92b"


class State(TypedDict):
    items: Annotated[list, operator.add]


def _graph(checkpointer=None):
    b = StateGraph(State)
    b.add_node("a", lambda s: {"items": ["a"]})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    return b.compile(checkpointer=checkpointer)


def _two_interrupts():
    b = StateGraph(State)
    b.add_node("p", lambda s: {"items": [interrupt("p?")]})
    b.add_node("q", lambda s: {"items": [interrupt("q?")]})
    b.add_edge(START, "p")
    b.add_edge(START, "q")
    return b.compile(checkpointer=InMemorySaver())


def test_invoke_without_thread_id_names_the_missing_key() -> None:
    with pytest.raises(ConfigError, match="thread_id"):
        _graph(InMemorySaver()).invoke({"items": []})


async def test_ainvoke_without_thread_id_names_the_missing_key() -> None:
    with pytest.raises(ConfigError, match="thread_id"):
        await _graph(InMemorySaver()).ainvoke({"items": []}, {"configurable": {}})


def test_invoke_from_unknown_checkpoint_names_thread_and_id() -> None:
    g = _graph(InMemorySaver())
    g.invoke({"items": []}, {"configurable": {"thread_id": "t"}})
    config = {"configurable": {"thread_id": "t", "checkpoint_id": MISSING_ID}}
    with pytest.raises(CheckpointNotFoundError) as err:
        g.invoke(None, config)
    assert err.value.thread_id == "t" and err.value.checkpoint_id == MISSING_ID
    assert "'t'" in str(err.value) and MISSING_ID in str(err.value)


async def test_ainvoke_from_unknown_checkpoint() -> None:
    g = _graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "checkpoint_id": MISSING_ID}}
    with pytest.raises(CheckpointNotFoundError):
        await g.ainvoke({"items": []}, config)


def test_resume_without_checkpointer_is_typed_and_still_a_runtime_error() -> None:
    with pytest.raises(CheckpointerRequiredError, match="checkpointer") as err:
        _graph().invoke(Command(resume="yes"))
    assert isinstance(
        err.value, RuntimeError
    )  # what LangGraph raises: ported code still catches it


def test_ambiguous_resume_lists_the_pending_ids() -> None:
    g = _two_interrupts()
    config = {"configurable": {"thread_id": "t"}}
    out = g.invoke({"items": []}, config)
    ids = sorted(i.id for i in out["__interrupt__"])
    assert len(ids) == 2
    with pytest.raises(UnknownInterruptError) as err:
        g.invoke(Command(resume="answer"), config)
    assert all(i in str(err.value) for i in ids)


def test_resume_map_with_unknown_id_is_refused_and_nothing_is_lost() -> None:
    g = _two_interrupts()
    config = {"configurable": {"thread_id": "t"}}
    out = g.invoke({"items": []}, config)
    bogus = "0" * 32
    with pytest.raises(UnknownInterruptError, match=bogus):
        g.invoke(Command(resume={bogus: "x"}), config)
    # the pending interrupts are still there and can be answered properly
    answers = {i.id: f"answer-{i.value}" for i in out["__interrupt__"]}
    final = g.invoke(Command(resume=answers), config)
    assert sorted(final["items"]) == ["answer-p?", "answer-q?"]


def test_a_resume_dict_with_short_keys_says_they_are_not_interrupt_ids() -> None:
    g = _two_interrupts()
    config = {"configurable": {"thread_id": "t"}}
    g.invoke({"items": []}, config)
    with pytest.raises(UnknownInterruptError, match=r"keys '0123abcd' are not interrupt ids"):
        g.invoke(Command(resume={"0123abcd": "x"}), config)


def test_update_as_end_with_values_says_end_takes_none_only() -> None:
    from threadloom.errors import InvalidUpdateError

    g = _two_interrupts()
    config = {"configurable": {"thread_id": "t"}}
    g.invoke({"items": []}, config)
    with pytest.raises(InvalidUpdateError, match=r"END\) takes values=None only"):
        g.update_state(config, {"items": ["v"]}, as_node=END)
    g.update_state(config, None, as_node=END)  # the documented use still works
    assert g.get_state(config).next == ()


def test_unserializable_write_names_the_state_key_and_path() -> None:
    class Opaque:
        pass

    b = StateGraph(State)
    b.add_node("a", lambda s: {"items": [{"deep": [Opaque()]}]})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    g = b.compile(checkpointer=InMemorySaver())
    with pytest.raises(SerializationError) as err:
        g.invoke({"items": []}, {"configurable": {"thread_id": "t"}})
    assert err.value.path == "items[0].deep[0]"
    assert "Opaque" in err.value.type_name and "items[0].deep[0]" in str(err.value)
