"""A class renamed or moved by a deploy: reading its old rows is refused (nothing
is imported by a stored name), and the error says how to read them again."""

from __future__ import annotations

import dataclasses

import pytest

from threadloom.checkpoint.serde import MsgpackSerializer
from threadloom.checkpoint.serde.registry import Registry, TypeEntry
from threadloom.checkpoint.serde.structs import codec_for
from threadloom.errors import SerializationError


@dataclasses.dataclass
class Order:
    sku: str


def _moved_order() -> type:
    @dataclasses.dataclass
    class Order:  # the same class name, another module: what a move looks like
        sku: str

    Order.__module__ = "shop.models"
    Order.__qualname__ = "Order"
    return Order


def test_the_refusal_says_how_to_register_the_class_under_the_stored_name() -> None:
    row = MsgpackSerializer(allowed=[Order]).dumps_typed(Order("s1"))
    moved = _moved_order()
    with pytest.raises(SerializationError) as info:
        MsgpackSerializer(allowed=[moved]).loads_typed(row)
    text = str(info.value)
    stored = f"{__name__}.Order"
    assert f"register(NewClass, name={stored!r})" in text
    assert "'shop.models.Order'" in text  # the trusted class that is likely the same one
    assert info.value.type_name == stored


def test_following_the_advice_reads_the_row() -> None:
    row = MsgpackSerializer(allowed=[Order]).dumps_typed(Order("s1"))
    moved = _moved_order()
    reader = Registry()
    encode, decode = codec_for(moved)
    reader.add(TypeEntry(f"{__name__}.Order", moved, encode, decode))
    back = MsgpackSerializer(registry=reader).loads_typed(row)
    assert type(back) is moved and back.sku == "s1"
