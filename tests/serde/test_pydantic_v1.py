"""``pydantic.v1`` models (LangChain-era state) declared in a state schema are
stored and revived like v2 models, and read from LangGraph's rows (probe12 #5)."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from typing_extensions import TypedDict

pv1 = pytest.importorskip("pydantic.v1")


class Inner(pv1.BaseModel):
    n: int


class Old(pv1.BaseModel):
    a: int
    tags: list[str] = []
    inner: Inner | None = None


class State(TypedDict):
    m: Old
    log: Annotated[list[Old], operator.add]


def test_state_round_trip_on_sqlite(tmp_path) -> None:
    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.graph import START, StateGraph

    def node(state: State) -> dict:
        return {"m": Old(a=state["m"].a + 1, inner=Inner(n=7)), "log": [Old(a=9)]}

    builder = StateGraph(State).add_node("n", node).add_edge(START, "n")
    cfg = {"configurable": {"thread_id": "v1"}}
    path = str(tmp_path / "v1.db")
    with SqliteSaver.from_conn_string(path) as saver:
        builder.compile(checkpointer=saver).invoke({"m": Old(a=1), "log": []}, cfg)
    with SqliteSaver.from_conn_string(path) as saver:
        values = builder.compile(checkpointer=saver).get_state(cfg).values
    assert values["m"] == Old(a=2, inner=Inner(n=7)) and isinstance(values["m"].inner, Inner)
    assert values["log"] == [Old(a=9)]
    assert values["log"][0].__fields_set__ == {"a"}  # which fields were set survives


def test_reads_langgraphs_pydantic_v1_rows() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from threadloom.checkpoint.serde import MsgpackSerializer

    row = JsonPlusSerializer().dumps_typed(Old(a=3, tags=["x"], inner=Inner(n=1)))
    value = MsgpackSerializer(allowed=[Old, Inner]).loads_typed(row)
    assert value == Old(a=3, tags=["x"], inner=Inner(n=1)) and isinstance(value.inner, Inner)


def test_unlisted_v1_model_is_refused() -> None:
    from threadloom.checkpoint.serde import MsgpackSerializer
    from threadloom.errors import SerializationError

    with pytest.raises(SerializationError, match="Old"):
        MsgpackSerializer().dumps_typed(Old(a=1))


class Loose(pv1.BaseModel):
    a: int = 1

    class Config:
        extra = pv1.Extra.allow


class Strict(pv1.BaseModel):  # the same stored name, extras not allowed
    a: int = 1


def test_extra_fields_of_an_extra_allow_model_round_trip() -> None:
    """``Config.extra = "allow"`` extras are data: LangGraph keeps them; they were dropped."""
    from threadloom.checkpoint.serde import MsgpackSerializer

    ser = MsgpackSerializer(allowed=[Loose])
    back = ser.loads_typed(ser.dumps_typed(Loose(zz=3, b=[1])))
    assert back.dict() == {"a": 1, "zz": 3, "b": [1]}
    assert back.__fields_set__ == {"zz", "b"}  # a stays unset
    assert back == Loose(zz=3, b=[1])


def test_extra_fields_are_dropped_by_a_model_that_forbids_them() -> None:
    from threadloom.checkpoint.serde import MsgpackSerializer
    from threadloom.checkpoint.serde.registry import Registry, entry_for

    def ser(cls: type) -> MsgpackSerializer:
        registry = Registry()
        registry.add(entry_for(cls, "app.M"))
        return MsgpackSerializer(registry=registry)

    back = ser(Strict).loads_typed(ser(Loose).dumps_typed(Loose(a=2, zz=3)))
    assert type(back) is Strict and back.dict() == {"a": 2}


def test_reads_langgraphs_v1_rows_with_extras() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from threadloom.checkpoint.serde import MsgpackSerializer

    row = JsonPlusSerializer().dumps_typed(Loose(zz=3))
    assert MsgpackSerializer(allowed=[Loose]).loads_typed(row).dict() == {"a": 1, "zz": 3}
