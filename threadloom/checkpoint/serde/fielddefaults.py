"""The default values a class's fields declare, for the schema walk's allowlist.

A model stores every field, an unset default too (see ``models.py``), so the
class of a default is stored data exactly like the class of an annotation:
``status: str = Status.PENDING`` stores a ``Status`` although the annotation
says ``str``. The walk in ``annotations.py`` trusts the classes of these values.

Only what the class already holds is read: a plain default value, and a
``default_factory`` that is itself a class (``Field(default_factory=Inner)``),
which is walked like an annotation. Other factories (lambdas, functions) are
never called: a schema walk at compile time must not run application code with
side effects or cost. The classes such a factory returns must appear in an
annotation or be registered.

A pydantic dataclass keeps ``pydantic.Field(default=...)`` as the stdlib
field's default (a ``FieldInfo``, not the value): its defaults are read from
``__pydantic_fields__``, as for a model, and a ``FieldInfo`` left in a stdlib
field (``pydantic.v1`` dataclasses) is unwrapped.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from threadloom.checkpoint.serde.structs import (
    is_namedtuple,
    is_pydantic_model,
    is_pydantic_v1_model,
)

__all__ = ["field_defaults"]

# pydantic's "no default" markers (v2, v1), matched by name: pydantic is optional
_UNDEFINED = frozenset({"PydanticUndefinedType", "UndefinedType"})


def field_defaults(cls: type) -> tuple[list[Any], list[type]]:
    """``(default values, factory classes)`` of the fields of a pydantic model (v2 or
    v1), dataclass (pydantic's too) or NamedTuple ``cls``; both empty for other kinds."""
    pydantic_fields = vars(cls).get("__pydantic_fields__") if isinstance(cls, type) else None
    if is_pydantic_model(cls) or (
        dataclasses.is_dataclass(cls) and isinstance(pydantic_fields, dict)
    ):
        fields = cls.__pydantic_fields__.values()  # type: ignore[attr-defined]
        return _pairs((f.default, f.default_factory) for f in fields)
    if is_pydantic_v1_model(cls):
        fields = cls.__fields__.values()  # type: ignore[attr-defined]
        return _pairs((f.default, f.default_factory) for f in fields)
    if dataclasses.is_dataclass(cls):
        return _pairs(
            _unwrap(
                None if f.default is dataclasses.MISSING else f.default,
                None if f.default_factory is dataclasses.MISSING else f.default_factory,
            )
            for f in dataclasses.fields(cls)
        )
    if is_namedtuple(cls):
        return list(getattr(cls, "_field_defaults", {}).values()), []
    return [], []


def _unwrap(default: Any, factory: Any) -> tuple[Any, Any]:
    """A pydantic ``FieldInfo`` used as a stdlib dataclass default stands for its own
    default and factory; anything else is itself."""
    kind = type(default)
    if kind.__name__ == "FieldInfo" and kind.__module__.startswith("pydantic"):
        return getattr(default, "default", None), getattr(default, "default_factory", None)
    return default, factory


def _pairs(pairs: Any) -> tuple[list[Any], list[type]]:
    values: list[Any] = []
    factories: list[type] = []
    for default, factory in pairs:
        if default is not None and type(default).__name__ not in _UNDEFINED:
            values.append(default)
        if isinstance(factory, type):  # a class as factory: its instances, walked as a type
            factories.append(factory)
    return values, factories
