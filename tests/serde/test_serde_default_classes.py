"""A field's default value is stored data: the schema walk trusts its class.

pydantic models store every field, an unset default too, so
``status: str = Status.PENDING`` stores a ``Status`` the annotation never names.
Before, the first write of such a graph raised "Status is not registered"
(LangGraph stores it).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import typing
import warnings
from typing import Any, TypedDict

import pydantic
import pydantic.dataclasses

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


def _stored(state: type, update: Any) -> dict[str, Any]:
    """What a one-node graph on ``state`` writing ``update()`` reads back from
    its saver: the values went through the compile's allowlist and the serializer."""
    graph = StateGraph(state)
    graph.add_node("a", lambda s: update())
    graph.add_edge(START, "a")
    graph.add_edge("a", END)
    app = graph.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "1"}}
    app.invoke({}, cfg)
    return app.get_state(cfg).values


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


# -- a class as a default value, pydantic dataclasses, deques, exceptions, budget --


class Answer(pydantic.BaseModel):
    text: str = ""


class Mood(enum.Enum):
    OK = "ok"


class AgentConfig(pydantic.BaseModel):
    response_format: Any = Answer  # a class as a default value (a structured-output schema)
    allowed: tuple = (Mood,)


class _AgentState(TypedDict):
    config: AgentConfig
    answer: Answer | None
    mood: Mood | None


def test_a_class_as_default_value_does_not_hide_it_from_the_annotations():
    # the value walk once shared the type walk's seen set: walking the default
    # ``Answer`` marked it seen, so the annotation ``Optional[Answer]`` skipped it
    assert {AgentConfig, Answer, Mood} <= allowlist_from_annotations(_AgentState)


def test_a_class_as_default_value_is_walked_like_type_of_it():
    class OnlyDefault(pydantic.BaseModel):
        schema_cls: Any = Answer
        kinds: list = [Mood]

    assert {Answer, Mood} <= allowlist_from_annotations(OnlyDefault)


def test_graph_with_a_class_default_stores_the_class_annotated_elsewhere():
    values = _stored(_AgentState, lambda: {"answer": Answer(text="x"), "mood": Mood.OK})
    assert values["answer"] == Answer(text="x")
    assert values["mood"] is Mood.OK


@pydantic.dataclasses.dataclass
class _PD:
    s: Any = pydantic.Field(default=Color.RED)  # stdlib field default: the FieldInfo
    inner: Any = pydantic.Field(default_factory=Answer)


class _PDState(TypedDict):
    p: _PD


def test_pydantic_dataclass_field_default_is_its_value_not_the_field_info():
    assert {Color, Answer} <= allowlist_from_annotations(_PD)
    values = _stored(_PDState, lambda: {"p": _PD()})
    assert values["p"].s is Color.RED


def test_pydantic_v1_dataclass_field_default_is_unwrapped():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pydantic.v1 as v1
        import pydantic.v1.dataclasses as v1dc

        @v1dc.dataclass
        class Old:
            s: Any = v1.Field(default=Shade.DARK)

    assert Shade in allowlist_from_annotations(Old)


class MyError(Exception):
    pass


class _Errs(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    err: Any = MyError(Status.PENDING)  # the exception codec keeps str-enum args
    plain: Any = MyError("x")


class _Deq(pydantic.BaseModel):
    d: Any = collections.deque([Color.RED])


def test_deque_items_and_exception_args_are_trusted():
    assert {MyError, Status} <= allowlist_from_annotations(_Errs)
    assert Color in allowlist_from_annotations(_Deq)


def test_graph_stores_exception_and_deque_defaults_as_their_classes():
    class S(TypedDict):
        e: _Errs
        q: _Deq

    values = _stored(S, lambda: {"e": _Errs(), "q": _Deq()})
    assert type(values["e"].plain) is MyError  # not a RevivedError
    assert values["e"].err.args == (Status.PENDING,)
    assert type(values["e"].err.args[0]) is Status
    assert values["q"].d == collections.deque([Color.RED])


def test_the_budget_stops_iterating_a_huge_default():
    yielded = []

    class CountingDict(dict):
        def items(self):
            for pair in super().items():
                yielded.append(1)
                yield pair

    class Huge(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
        x: Any = CountingDict((str(i), i) for i in range(100_000))  # atomic items only

    allowlist_from_annotations(Huge)
    assert len(yielded) <= 10_000  # every item counts, atomic ones too, and the walk stops


def test_a_deeply_nested_default_raises_no_recursion_error():
    deep: Any = [Color.RED]
    for _ in range(5_000):
        deep = [deep]

    class Deep(pydantic.BaseModel):
        x: Any = deep

    assert Color in allowlist_from_annotations(Deep)


class _OneErr(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    err: Any = MyError("x")


class _OneErrState(TypedDict):
    t: _OneErr


def test_an_exception_default_revives_as_its_class():
    # an exception instance as a default trusts its class (1cf62eb): before, it came
    # back as a RevivedError
    values = _stored(_OneErrState, lambda: {"t": _OneErr()})
    err = values["t"].err
    assert type(err) is MyError
    assert err.args == ("x",)
