"""A class defined again under the same name (a notebook cell re-run) revives as the newest."""

from __future__ import annotations

import dataclasses

import pydantic
import pytest

from threadloom.checkpoint.serde import MsgpackSerializer, register
from threadloom.checkpoint.serde.registry import Registry, entry_for

_CELL = """
import dataclasses
@dataclasses.dataclass
class Note:
    text: str
"""


def _define() -> type:
    """A fresh ``Note`` class with the same module and qualified name on every call."""
    scope: dict = {"__name__": "tests.serde.notebook"}
    exec(compile(_CELL, "<cell>", "exec", dont_inherit=True), scope)
    return scope["Note"]


def test_allowlist_the_latest_class_under_a_name_wins() -> None:
    old, new = _define(), _define()
    serde = MsgpackSerializer(allowed=[old])
    stored = serde.dumps_typed(old("a"))
    assert type(serde.loads_typed(stored)) is old
    widened = serde.with_allowlist([new])
    assert type(widened.loads_typed(stored)) is new
    assert type(MsgpackSerializer(allowed=[old, new]).loads_typed(stored)) is new
    # trusting the old one again makes it the latest
    assert type(widened.with_allowlist([old]).loads_typed(stored)) is old
    assert widened.with_allowlist([new]) is widened  # nothing changes: the same serializer


def test_registering_a_redefined_class_replaces_it() -> None:
    registry = Registry()
    old, new = _define(), _define()
    registry.add(entry_for(old))
    serde = MsgpackSerializer(registry=registry)
    stored = serde.dumps_typed(old("a"))
    assert type(serde.loads_typed(stored)) is old  # now cached per name...
    registry.add(entry_for(new))
    revived = serde.loads_typed(stored)  # ...and the cache was dropped
    assert type(revived) is new and revived.text == "a"
    assert serde.dumps_typed(old("b"))  # instances of the old class still store


def test_register_refuses_another_class_under_a_taken_name() -> None:
    @dataclasses.dataclass
    class Other:
        text: str

    registry = Registry()
    registry.add(entry_for(_define()))
    with pytest.raises(ValueError, match="already taken"):
        registry.add(entry_for(Other, name="tests.serde.notebook.Note"))


def test_register_decorator_on_a_rerun_cell_does_not_raise() -> None:
    scope: dict = {"__name__": "tests.serde.notebook_register", "register": register}
    source = "import dataclasses\n@register\n@dataclasses.dataclass\nclass Card:\n    n: int\n"
    cell = compile(source, "<cell>", "exec", dont_inherit=True)
    exec(cell, scope)
    old = scope["Card"]
    stored = MsgpackSerializer().dumps_typed(old(1))
    exec(cell, scope)
    assert type(MsgpackSerializer().loads_typed(stored)) is scope["Card"] is not old


def test_private_attributes_revive_with_their_defaults() -> None:
    """As documented (docs/serde.md): private attributes are not stored."""

    class WithPrivate(pydantic.BaseModel):
        x: int
        _seen: int = pydantic.PrivateAttr(default=0)

    obj = WithPrivate(x=1)
    obj._seen = 5
    serde = MsgpackSerializer(allowed=[WithPrivate])
    revived = serde.loads_typed(serde.dumps_typed(obj))
    assert revived.x == 1 and revived._seen == 0
