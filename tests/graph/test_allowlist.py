"""The classes a graph trusts in its saver: schemas, subgraphs, classes defined again."""

from __future__ import annotations

import dataclasses
import enum
import gc
import operator
from typing import Annotated, Generic, Literal, NamedTuple, Optional, TypeVar

import pydantic
from typing_extensions import TypedDict

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.serde import register
from threadloom.graph import START, StateGraph
from threadloom.graph.allowlist import graph_types
from threadloom.graph.schema import schema_types

T = TypeVar("T")


@dataclasses.dataclass
class Draft:
    text: str


class SubState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    draft: Draft


class Parent(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


class Item(pydantic.BaseModel):
    x: int


class Page(pydantic.BaseModel, Generic[T]):
    items: list[T]


class Point(NamedTuple):
    x: int
    y: int


class Mode(enum.Enum):
    FAST = "fast"


class Kinds(TypedDict, total=False):
    page: Optional[Page[Item]]  # noqa: UP045 (typing.Optional, as users write it)
    pt: Point
    mode: Literal[Mode.FAST]


def _sub() -> object:
    sub = StateGraph(SubState)
    sub.add_node("write", lambda s: {"draft": Draft("v1")})
    sub.add_node("use", lambda s: {"log": [s["draft"].text]})
    sub.add_edge(START, "write")
    sub.add_edge("write", "use")
    return sub.compile()


def test_subgraph_node_classes_are_trusted_by_the_parent_saver() -> None:
    parent = StateGraph(Parent)
    parent.add_node("child", _sub())
    parent.add_edge(START, "child")
    saver = InMemorySaver()
    app = parent.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "1"}}
    assert app.invoke({"log": []}, cfg) == {"log": ["v1"]}
    assert Draft in saver.serde.allowed  # trusted at compile, before any run


def test_classes_of_a_subgraph_two_levels_down_are_trusted_at_compile() -> None:
    middle = StateGraph(Parent)
    middle.add_node("child", _sub())
    middle.add_edge(START, "child")
    parent = StateGraph(Parent)
    parent.add_node("middle", middle.compile())
    parent.add_edge(START, "middle")
    saver = InMemorySaver()
    app = parent.compile(checkpointer=saver)
    assert Draft in saver.serde.allowed
    assert app.invoke({"log": []}, {"configurable": {"thread_id": "2"}}) == {"log": ["v1"]}


def test_subgraph_called_inside_a_node_function_trusts_its_classes() -> None:
    sub = _sub()
    parent = StateGraph(Parent)
    parent.add_node("call", lambda s: {"log": sub.invoke({"log": []})["log"]})
    parent.add_edge(START, "call")
    saver = InMemorySaver()
    app = parent.compile(checkpointer=saver)
    assert Draft not in saver.serde.allowed
    cfg = {"configurable": {"thread_id": "1"}}
    assert app.invoke({"log": []}, cfg) == {"log": ["v1"]}
    assert app.invoke({"log": []}, cfg) == {"log": ["v1", "v1"]}  # the widened serde is kept


async def test_subgraph_called_inside_an_async_node_trusts_its_classes() -> None:
    sub = _sub()

    async def call(state: Parent) -> dict:
        return {"log": (await sub.ainvoke({"log": []}))["log"]}

    parent = StateGraph(Parent)
    parent.add_node("call", call)
    parent.add_edge(START, "call")
    app = parent.compile(checkpointer=InMemorySaver())
    out = await app.ainvoke({"log": []}, {"configurable": {"thread_id": "a"}})
    assert out == {"log": ["v1"]}


def test_schema_types_finds_namedtuple_literal_enum_and_generic_arguments() -> None:
    assert schema_types(Kinds) == {Page[Item], Page, Item, Point, Mode}


def test_compile_trusts_namedtuple_literal_enum_and_generic_arguments() -> None:
    values = {"page": Page[Item](items=[Item(x=1)]), "pt": Point(1, 2), "mode": Mode.FAST}
    for key, value in values.items():
        graph = StateGraph(Kinds)
        graph.add_node("n", lambda s, k=key, v=value: {k: v})
        graph.add_edge(START, "n")
        app = graph.compile(checkpointer=InMemorySaver())
        cfg = {"configurable": {"thread_id": key}}
        app.invoke({}, cfg)
        assert app.get_state(cfg).values == {key: value}


def test_plain_annotated_class_schema_fields_are_walked() -> None:
    class Plain:
        draft: Draft
        n: int

    assert schema_types(Plain) == {Draft}


_CELL = """
from typing import Optional
import pydantic
class Thing(pydantic.BaseModel):
    x: int
class State(pydantic.BaseModel):
    thing: Optional[Thing] = None
    n: int = 0
graph = StateGraph(State)
graph.add_node("a", lambda s: {"thing": Thing(x=s.n), "n": s.n + 1})
graph.add_edge(START, "a")
app = graph.compile(checkpointer=saver)
"""


def test_a_redefined_state_class_revives_as_the_current_one() -> None:
    saver = InMemorySaver()
    scope: dict = {"StateGraph": StateGraph, "START": START, "saver": saver}
    cfg = {"configurable": {"thread_id": "nb"}}
    cell = compile(_CELL, "<cell>", "exec", dont_inherit=True)  # annotations evaluated
    exec(cell, scope)  # a notebook cell...
    old = scope["Thing"]
    scope["app"].invoke({}, cfg)
    exec(cell, scope)  # ...run again: new classes of the same names
    assert scope["Thing"] is not old
    assert type(scope["app"].get_state(cfg).values["thing"]) is scope["Thing"]
    assert scope["app"].invoke({}, cfg)["n"] == 2


def test_a_redefinition_beats_a_registered_class_and_compiles_do_not_repeat_work() -> None:
    saver = InMemorySaver()
    scope: dict = {"StateGraph": StateGraph, "START": START, "saver": saver}
    scope["__name__"] = "tests.graph.notebook_registered"
    cfg = {"configurable": {"thread_id": "nb"}}
    cell = compile(_CELL, "<cell>", "exec", dont_inherit=True)
    exec(cell, scope)
    register(scope["Thing"])  # registered in another cell, which is not run again
    scope["app"].invoke({}, cfg)
    exec(cell, scope)  # the state cell run again
    assert type(scope["app"].get_state(cfg).values["thing"]) is scope["Thing"]
    assert scope["app"].invoke({}, cfg)["n"] == 2
    serde, dropped = saver.serde, []
    saver.forget_cached = lambda: dropped.append(1)  # type: ignore[method-assign]
    for _ in range(3):  # nothing changed: no copy of the serializer, caches kept
        scope["graph"].compile(checkpointer=saver)
    assert saver.serde is serde and dropped == []


def _factory(saver: object, tag: str) -> tuple[object, type]:
    """A graph whose state class is defined inside the function building it."""

    @dataclasses.dataclass
    class Box:
        v: str

    S = TypedDict("S", {"box": Box, "seen": Annotated[list, operator.add]}, total=False)  # noqa: UP013 (local classes under postponed annotations)

    def node(s: dict) -> dict:
        mine = isinstance(s.get("box"), Box)
        return {"box": Box(tag), "seen": [f"{tag}:{'mine' if mine else type(s.get('box'))}"]}

    graph = StateGraph(S)
    graph.add_node("n", node)
    graph.add_edge(START, "n")
    return graph.compile(checkpointer=saver), Box


def test_factory_graphs_compiled_per_request_do_not_pile_up_classes() -> None:
    saver = InMemorySaver()
    app1, box1 = _factory(saver, "one")
    cfg = {"configurable": {"thread_id": "t1"}}
    app1.invoke({}, cfg)
    for i in range(300):  # a server compiling a graph per request
        _factory(saver, f"r{i}")
    gc.collect()
    gc.collect()  # a class held by a dead schema's cached fields goes in the second pass
    boxes = [c for c in saver.serde.allowed if c.__qualname__.endswith("Box")]
    assert boxes == [box1]  # before: 301 classes, and O(N) work per compile
    # app1 still stores its own Box (revived as the latest live Box: docs/serde.md)
    assert app1.invoke({}, cfg)["box"] == box1("one")


def _writes(box: object) -> object:
    return lambda s: {"box": box}


def test_a_parent_class_wins_over_a_same_named_subgraph_class() -> None:
    for _ in range(10):  # set order follows addresses: one try could pass by luck
        scope: dict = {"__name__": "tests.graph.same_name"}
        source = "import dataclasses\n@dataclasses.dataclass\nclass Box:\n    v: str\n"
        code = compile(source, "<cell>", "exec", dont_inherit=True)
        exec(code, scope)
        inner = scope["Box"]
        exec(code, scope)
        outer = scope["Box"]

        SubS = TypedDict("SubS", {"box": inner}, total=False)  # noqa: UP013
        ParentS = TypedDict("ParentS", {"box": outer}, total=False)  # noqa: UP013

        sub = StateGraph(SubS)
        sub.add_node("s", lambda s: {})
        sub.add_edge(START, "s")
        parent = StateGraph(ParentS)
        parent.add_node("sub", sub.compile())
        parent.add_node("p", _writes(outer("x")))
        parent.add_edge(START, "p")
        parent.add_edge("p", "sub")
        assert [t for t in graph_types(parent) if t.__name__ == "Box"][-1] is outer
        saver = InMemorySaver()
        app = parent.compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "t"}}
        app.invoke({}, cfg)
        assert type(app.get_state(cfg).values["box"]) is outer
        assert parent.compile(checkpointer=saver).checkpointer.serde is saver.serde
