"""A field's default value is stored data: the schema walk trusts its class.

pydantic models store every field, an unset default too, so
``status: str = Status.PENDING`` stores a ``Status`` the annotation never names.
Before, the first write of such a graph raised "Status is not registered"
(LangGraph stores it).
"""

from __future__ import annotations

import dataclasses
import enum
import typing
import warnings
from typing import Any, TypedDict

import pydantic

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.serde import allowlist_from_annotations
from threadloom.graph import END, START, StateGraph


class Status(str, enum.Enum):
    PENDING = "pending"
    DONE = "done"


class Color(enum.Enum):
    RED = "r"


class Size(enum.IntEnum):
    S = 1


class Shade(enum.Enum):
    DARK = "d"


class Ticket(pydantic.BaseModel):
    title: str
    status: str = Status.PENDING  # a str-enum default annotated as str


class Shape(pydantic.BaseModel):
    name: str
    fill: Any = Color.RED
    sizes: list = [Size.S]  # containers of such values
    by_shade: dict = {"x": (Shade.DARK,)}


@dataclasses.dataclass
class Inner:
    shade: Any = Shade.DARK


@dataclasses.dataclass
class Outer:
    color: Any = Color.RED
    inner: Any = dataclasses.field(default_factory=Inner)  # a class as factory: walked


class Point(typing.NamedTuple):
    x: int
    color: Any = Color.RED


class Holder(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    held: Any = Outer()  # an instance default: its class and its field values


def test_pydantic_enum_default_under_a_str_annotation_is_trusted():
    assert Status in allowlist_from_annotations(Ticket)


def test_defaults_under_any_and_inside_containers_are_trusted():
    assert {Color, Size, Shade} <= allowlist_from_annotations(Shape)


def test_dataclass_namedtuple_and_instance_defaults_are_trusted():
    assert {Color, Inner, Shade} <= allowlist_from_annotations(Outer)
    assert Color in allowlist_from_annotations(Point)
    assert {Outer, Inner, Color, Shade} <= allowlist_from_annotations(Holder)


def test_pydantic_v1_default_is_trusted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pydantic.v1 as v1

        class Old(v1.BaseModel):
            status: str = Status.PENDING

    assert Status in allowlist_from_annotations(Old)


def test_a_default_factory_function_is_never_called():
    calls = []

    def factory() -> list:
        calls.append(1)
        return [Color.RED]

    @dataclasses.dataclass
    class Lazy:
        items: list = dataclasses.field(default_factory=factory)

    class LazyModel(pydantic.BaseModel):
        items: list = pydantic.Field(default_factory=factory)

    allowlist_from_annotations(Lazy)
    allowlist_from_annotations(LazyModel)
    assert calls == []


class _S(TypedDict):
    t: Ticket
    s: Shape


def test_graph_stores_a_model_left_at_its_enum_defaults():
    b = StateGraph(_S)
    b.add_node("a", lambda s: {})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    app = b.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "1"}}
    app.invoke({"t": Ticket(title="x"), "s": Shape(name="y")}, cfg)
    values = app.get_state(cfg).values
    assert values["t"].status is Status.PENDING
    assert values["s"].fill is Color.RED
    assert values["s"].sizes == [Size.S]
