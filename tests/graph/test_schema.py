"""State schema parsing: fields, reducers, root schemas, allowlist types."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, ClassVar

import pytest
from pydantic import BaseModel
from typing_extensions import NotRequired, TypedDict

from threadloom.graph.schema import (
    ROOT,
    coerce_state,
    fields_of,
    needs_coercion,
    parse_schema,
    schema_types,
)


class TD(TypedDict):
    a: int
    items: Annotated[list[str], operator.add]
    maybe: NotRequired[Annotated[list[int], operator.add]]


@dataclass
class Item:
    sku: str


@dataclass
class DC:
    a: int
    items: Annotated[list[Item], operator.add] = field(default_factory=list)
    LIMIT: ClassVar[int] = 3


class PM(BaseModel):
    a: int = 0
    items: Annotated[list[str], operator.add] = []


def test_fields_of_each_kind_in_order() -> None:
    assert list(fields_of(TD)) == ["a", "items", "maybe"]
    assert list(fields_of(DC)) == ["a", "items"]  # ClassVar is not a field
    assert list(fields_of(PM)) == ["a", "items"]
    assert fields_of(list) == {}
    assert fields_of(42) == {}


def test_reducers_found_through_wrappers() -> None:
    specs = parse_schema(TD)
    assert specs["a"].reducer is None and specs["a"].type is int
    assert specs["items"].reducer is operator.add
    assert specs["maybe"].reducer is operator.add
    assert specs["maybe"].type == list[int]


def test_root_schema_is_one_channel() -> None:
    specs = parse_schema(Annotated[list, operator.add])
    assert list(specs) == [ROOT]
    assert specs[ROOT].reducer is operator.add


def test_bad_reducer_signature_is_rejected() -> None:
    class Bad(TypedDict):
        x: Annotated[int, lambda a: a]

    with pytest.raises(ValueError, match="invalid reducer for state key 'x'"):
        parse_schema(Bad)


def test_coercion_only_for_classes_with_constructors() -> None:
    assert needs_coercion(DC) and needs_coercion(PM)
    assert not needs_coercion(TD)
    assert coerce_state(DC, {"a": 1}) == DC(a=1)
    assert coerce_state(PM, {"a": 2}).a == 2


def test_schema_types_finds_nested_user_classes() -> None:
    assert schema_types(DC) == {DC, Item}
    assert schema_types(TD) == set()
    assert PM in schema_types(PM)


def test_unresolvable_annotation_is_an_error_not_a_lost_reducer() -> None:
    scope: dict = {"__name__": "not_a_module"}
    source = (
        "from __future__ import annotations\n"
        "import operator\n"
        "from typing import Annotated\n"
        "from typing_extensions import TypedDict\n"
        "class Lost(TypedDict):\n"
        "    notes: Annotated[list[str], operator.add]\n"
    )
    exec(compile(source, "<test>", "exec", dont_inherit=True), scope)
    with pytest.raises(ValueError, match="cannot resolve the annotations of Lost"):
        parse_schema(scope["Lost"])
