"""Pydantic models for the compact-encoding tests (shared by test modules and the frozen payloads).

Registered under fixed names: the frozen legacy payloads in test_serde_compact.py
refer to them.
"""

from __future__ import annotations

import enum
from functools import cached_property
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, RootModel, field_validator

from threadloom.checkpoint.serde import register

T = TypeVar("T")


class Color(enum.Enum):
    RED = "r"
    BLUE = "b"


class Sub(BaseModel):
    x: int = 0
    label: str = "s"


class Item(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    qty: int = 1
    tags: list[str] = Field(default_factory=list)
    note: str | None = None
    sub: Sub = Field(default_factory=Sub)


class Page(BaseModel, Generic[T]):
    items: list[T] = Field(default_factory=list)
    cursor: str | None = None


class Kitchen(BaseModel):
    """One field of every default kind the encoder distinguishes."""

    model_config = ConfigDict(extra="allow")
    req: int
    s: str = "d"
    n: int | None = None
    i: int = 0
    f: float = 0.0
    b: bool = False
    raw: bytes = b""
    color: Color = Color.RED
    lst: list[Any] = Field(default_factory=list)
    dct: dict[str, Any] = {}
    tup: tuple[int, ...] = ()
    filled: list[int] = [1, 2]
    made: list[int] = Field(default_factory=lambda: [7])
    sub: Sub = Field(default_factory=Sub)
    derived: str = Field(default_factory=lambda data: data["s"] + "!")


class Aliased(BaseModel):
    """Field ``x`` has the alias ``y``, which is also the name of another field."""

    model_config = ConfigDict(populate_by_name=True)
    x: int = Field(default=0, alias="y")
    y: int = Field(default=0, alias="z")

    @field_validator("x")
    @classmethod
    def _double(cls, v: int) -> int:
        return v * 2


class Private(BaseModel):
    value: int = 0
    _seen: list[int] = PrivateAttr(default_factory=lambda: [1])


class Cached(BaseModel):
    value: int = 3

    @cached_property
    def double(self) -> int:
        return self.value * 2


class Ints(RootModel[list[int]]):
    pass


class Score(RootModel[int]):
    root: int = 5


for _cls, _name in (
    (Sub, "tests.compact.Sub"),
    (Item, "tests.compact.Item"),
    (Page, "tests.compact.Page"),
    (Color, "tests.compact.Color"),
    (Kitchen, "tests.compact.Kitchen"),
    (Aliased, "tests.compact.Aliased"),
    (Private, "tests.compact.Private"),
    (Cached, "tests.compact.Cached"),
    (Ints, "tests.compact.Ints"),
    (Score, "tests.compact.Score"),
):
    register(_cls, name=_name)
