"""allowlist_from_annotations walks typing annotations to the classes they name."""

from __future__ import annotations

import dataclasses
import enum
import typing

import typing_extensions

from threadloom.checkpoint.serde import allowlist_from_annotations


class Color(enum.Enum):
    RED = 1


class Status(enum.Enum):
    OK = "ok"


@dataclasses.dataclass
class Leaf:
    color: Color


class Coord(typing.NamedTuple):
    x: int
    leaf: Leaf | None = None


@dataclasses.dataclass
class Node:
    children: list[Node]
    coords: dict[str, tuple[Coord, ...]]
    status: typing.Literal[Status.OK] = Status.OK


class MyError(Exception):
    pass


class State(typing.TypedDict):
    root: typing.Annotated[Node, "reducer"]
    maybe: typing.Optional[set[frozenset[Color]]]  # noqa: UP045
    errors: list[MyError]
    plain: int
    unresolved: "DoesNotExist"  # noqa: F821, UP037


def test_walks_typeddict_dataclass_namedtuple_literal_and_containers():
    found = allowlist_from_annotations(State)
    assert found == {Node, Coord, Leaf, Color, Status, MyError}


def test_builtins_and_any_yield_nothing():
    assert allowlist_from_annotations(dict[str, typing.Any]) == set()
    assert allowlist_from_annotations(int | None) == set()
    assert allowlist_from_annotations(None) == set()


def test_recursive_types_terminate():
    assert allowlist_from_annotations(Node) == {Node, Coord, Leaf, Color, Status}


class ExtState(typing_extensions.TypedDict, total=False):
    """typing_extensions' TypedDict (what LangGraph's docs import) on Python < 3.12."""

    leaf: Leaf
    status: typing.Literal[Status.OK]


def test_walks_typing_extensions_typeddict():
    assert allowlist_from_annotations(ExtState) == {Leaf, Color, Status}
