"""Collect the classes a state schema mentions, for the graph layer's allowlist.

``StateGraph`` compiles with ``saver.serde.with_allowlist(allowlist_from_annotations(schema))``
so the state's own dataclasses, models, enums and NamedTuples round-trip
without a global ``register`` call.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import itertools
import sys
import typing
from collections.abc import Iterator
from typing import Any

import typing_extensions

from threadloom.checkpoint.serde.fielddefaults import field_defaults
from threadloom.checkpoint.serde.structs import (
    is_namedtuple,
    is_pydantic_model,
    is_pydantic_v1_model,
    is_structured,
)

__all__ = ["allowlist_from_annotations"]

_ATOMIC = (type(None), bool, int, float, complex, str, bytes)


def allowlist_from_annotations(tp: Any) -> set[type]:
    """Every Enum, dataclass, NamedTuple, pydantic model and exception class reachable from ``tp``.

    Walks ``Annotated``, ``Optional``/``Union``, ``Literal`` (enum members),
    containers (``list[...]``, ``dict[K, V]``...), TypedDicts and the fields of
    the classes found, and the classes of those fields' default values (a
    stored default is stored data: ``status: str = Status.PENDING`` stores a
    ``Status``; see ``fielddefaults.py``; a class as a default is walked like
    ``type[X]``). Unresolvable forward references are skipped.
    """
    found: set[type] = set()
    _walk(tp, found, set())
    return found


# items looked at per default value (every item counts, atomic ones too): a huge or
# deeply nested default is walked only this far, so a compile stays fast
_VALUE_BUDGET = 10_000

_SEQUENCES = (list, tuple, set, frozenset, collections.deque)
_END = object()


class _One:
    """Holds one annotation so it can be resolved alone."""

    def __init__(self, name: str, annotation: Any) -> None:
        self.__annotations__ = {name: annotation}


def _hints(cls: type) -> dict[str, Any]:
    """Resolved field annotations; unresolvable ones are skipped, the rest kept."""
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:
        pass
    module = sys.modules.get(cls.__module__)
    globalns = dict(vars(module)) if module is not None else {}
    localns = {**dict(vars(cls)), cls.__name__: cls}
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        for name, annotation in vars(base).get("__annotations__", {}).items():
            try:
                one = typing.get_type_hints(
                    _One(name, annotation), globalns, localns, include_extras=True
                )
            except Exception:  # a forward reference that does not resolve
                continue
            hints[name] = one[name]
    return hints


def _field_types(cls: type) -> list[Any]:
    if is_pydantic_model(cls):
        return [f.annotation for f in cls.__pydantic_fields__.values()]  # type: ignore[attr-defined]
    if is_pydantic_v1_model(cls):
        return [f.outer_type_ for f in cls.__fields__.values()]  # type: ignore[attr-defined]
    # typing_extensions' check knows both TypedDict flavours (typing's does not,
    # before 3.12, recognise ``typing_extensions.TypedDict``)
    if dataclasses.is_dataclass(cls) or is_namedtuple(cls) or typing_extensions.is_typeddict(cls):
        return list(_hints(cls).values())
    return []


def _walk(tp: Any, found: set[type], seen: set[int]) -> None:
    if id(tp) in seen or tp is None or isinstance(tp, (str, typing.ForwardRef)):
        return
    seen.add(id(tp))
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        for value in typing.get_args(tp):
            if isinstance(value, enum.Enum):
                found.add(type(value))
        return
    if origin is not None:
        if isinstance(origin, type) and is_structured(origin):
            _walk(origin, found, seen)
        for arg in typing.get_args(tp):
            _walk(arg, found, seen)
        return
    if not isinstance(tp, type):
        return
    if is_structured(tp):
        found.add(tp)
        meta = getattr(tp, "__pydantic_generic_metadata__", None)
        if meta and meta.get("origin") is not None:
            found.add(meta["origin"])
            for arg in meta.get("args", ()):
                _walk(arg, found, seen)
    for field_type in _field_types(tp):
        _walk(field_type, found, seen)
    values, factories = field_defaults(tp)
    for factory in factories:
        _walk(factory, found, seen)
    for value in values:
        _walk_value(value, found, seen)


def _walk_value(value: Any, found: set[type], seen: set[int]) -> None:
    """Trust the classes of a default value: enum members, structured instances (their
    field values, an exception's args), through lists, tuples, sets, deques and dicts.

    A class as a value is walked as a type, as the annotation ``type[X]`` is. ``seen``
    is the type walk's: the values' own ids go in a set of their own here, or a default
    that *is* a class would mark it seen and hide it from the type walk. Iterative and
    bounded by ``_VALUE_BUDGET`` (items, depth included): no RecursionError on a deep
    default, no full pass over a huge one.
    """
    budget = _VALUE_BUDGET
    visited: dict[int, Any] = {}  # id -> the value, held so a walked id is never reused
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack and budget > 0:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        budget -= 1
        if isinstance(item, type):
            _walk(item, found, seen)
            continue
        cls = type(item)
        if isinstance(item, enum.Enum):  # before the atomic test: str and int enums are atomic
            found.add(cls)
            continue
        if cls in _ATOMIC or id(item) in visited:
            continue
        visited[id(item)] = item
        if isinstance(item, dict):
            stack.append(itertools.chain.from_iterable(item.items()))
        elif cls in _SEQUENCES:
            stack.append(iter(item))
        elif is_structured(cls):
            _walk(cls, found, seen)
            stack.append(iter(_instance_values(item)))


def _instance_values(obj: Any) -> list[Any]:
    """The field values of a dataclass, NamedTuple or pydantic instance (extras included),
    or an exception's args and attributes (its codec stores plain ones, str-enums too);
    empty when reading them raises (a property: the walk must not fail a compile)."""
    try:
        if is_namedtuple(type(obj)):
            return list(obj)
        if dataclasses.is_dataclass(obj):
            return [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
        values = list(getattr(obj, "__dict__", {}).values())
        if isinstance(obj, BaseException):
            values.extend(obj.args)
        extra = getattr(obj, "__pydantic_extra__", None)
        if extra:
            values.extend(extra.values())
        return values
    except Exception:
        return []
