"""A pydantic field left at its default is stored, so a deploy that only changes the
default does not change what past checkpoints read back as (LangGraph keeps the old
value too). LangChain's own messages still leave library-fixed defaults out."""

from __future__ import annotations

import enum
import operator
from typing import Annotated, TypedDict

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field

from threadloom.checkpoint.serde import MsgpackSerializer
from threadloom.checkpoint.serde.registry import Registry, entry_for
from threadloom.errors import SerializationError

EXT_OBJECT = 33
NAME = "tests.defaults.Customer"


class CustomerV1(BaseModel):
    name: str
    tier: int = 1
    tags: list[str] = Field(default_factory=list)
    note: str | None = None


class CustomerV2(BaseModel):  # the same class after a deploy changed only defaults
    name: str
    tier: int = 99
    tags: list[str] = Field(default_factory=lambda: ["new"])
    note: str | None = "changed"


def serde_for(cls: type) -> MsgpackSerializer:
    registry = Registry()
    registry.add(entry_for(cls, NAME))
    return MsgpackSerializer(registry=registry, compress_threshold=None)


def stored_state(data: bytes) -> dict:
    ext = ormsgpack.unpackb(data, ext_hook=lambda code, body: ormsgpack.unpackb(body))
    return ext[1]


def test_unset_defaults_are_stored_with_which_fields_were_set():
    _, data = serde_for(CustomerV1).dumps_typed(CustomerV1(name="ann"))
    assert stored_state(data) == {
        "name": "ann",
        "tier": 1,
        "tags": [],
        "note": None,
        "__unset__": ["tier", "tags", "note"],
    }


def test_changing_a_default_does_not_change_stored_values():
    row = serde_for(CustomerV1).dumps_typed(CustomerV1(name="ann", note="vip"))
    back = serde_for(CustomerV2).loads_typed(row)
    assert type(back) is CustomerV2
    assert (back.name, back.tier, back.tags, back.note) == ("ann", 1, [], "vip")
    assert back.model_fields_set == {"name", "note"}


def test_rows_that_left_defaults_out_still_read_with_the_current_default():
    body = ormsgpack.packb([NAME, {"name": "ann"}])  # the previous compact layout
    row = ("msgpack", ormsgpack.packb(ormsgpack.Ext(EXT_OBJECT, body)))
    back = serde_for(CustomerV2).loads_typed(row)
    assert (back.name, back.tier, back.tags, back.note) == ("ann", 99, ["new"], "changed")
    assert back.model_fields_set == {"name"}


def test_langchain_messages_still_leave_their_fixed_defaults_out():
    _, data = MsgpackSerializer(compress_threshold=None).dumps_typed(
        HumanMessage(content="hi", id="h-1")
    )
    assert stored_state(data) == {"content": "hi", "id": "h-1"}


class Shouted(HumanMessage):  # a subclass the application owns: its defaults can change
    name: str | None = "bot"


def test_an_application_subclass_of_a_message_stores_every_field():
    serde = MsgpackSerializer(allowed=[Shouted], compress_threshold=None)
    _, data = serde.dumps_typed(Shouted(content="hi", id="s-1"))
    state = stored_state(data)
    assert state["name"] == "bot" and "additional_kwargs" in state
    assert set(state["__unset__"]) == set(Shouted.model_fields) - {"content", "id"}


class Customer(BaseModel):
    name: str
    tier: int = 1


class S(TypedDict):
    cust: Customer
    log: Annotated[list, operator.add]


def test_history_keeps_the_old_default_after_a_redeploy(tmp_path):
    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.graph import END, START, StateGraph

    def build(state_cls: type) -> StateGraph:
        builder = StateGraph(state_cls)
        builder.add_node("a", lambda s: {"log": ["a"]})
        builder.add_edge(START, "a")
        builder.add_edge("a", END)
        return builder

    path = str(tmp_path / "s.db")
    cfg = {"configurable": {"thread_id": "t1"}}
    with SqliteSaver.from_conn_string(path) as saver:
        build(S).compile(checkpointer=saver).invoke({"cust": Customer(name="ann"), "log": []}, cfg)

    class Customer2(BaseModel):  # the deployed class: same stored name, new default
        name: str
        tier: int = 99

    Customer2.__module__, Customer2.__qualname__ = Customer.__module__, Customer.__qualname__
    S2 = TypedDict("S", {"cust": Customer2, "log": Annotated[list, operator.add]})  # noqa: UP013
    with SqliteSaver.from_conn_string(path) as saver:
        app = build(S2).compile(checkpointer=saver)
        latest = app.get_state(cfg).values["cust"]
        history = [s.values["cust"] for s in app.get_state_history(cfg) if "cust" in s.values]
    assert type(latest) is Customer2 and latest.tier == 1
    assert latest.model_fields_set == {"name"}
    assert history and all(c.tier == 1 for c in history)


class Color(enum.Enum):
    RED = "r"
    BLUE = "b"


class Painted(BaseModel):
    name: str
    color: Color = Color.RED


def test_an_enum_default_is_stored_and_its_class_must_be_trusted():
    serde = MsgpackSerializer(allowed=[Painted, Color])
    back = serde.loads_typed(serde.dumps_typed(Painted(name="p")))
    assert back.color is Color.RED and back.model_fields_set == {"name"}
    with pytest.raises(SerializationError, match="Color is not registered"):
        MsgpackSerializer(allowed=[Painted]).dumps_typed(Painted(name="p"))
