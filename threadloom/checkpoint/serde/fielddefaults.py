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


def field_defaults(cls: type) -> tuple[list[Any], list[type]]:
    """``(default values, factory classes)`` of the fields of a pydantic model (v2 or
    v1), dataclass or NamedTuple ``cls``; both empty for other kinds."""
    if is_pydantic_model(cls):
        fields = cls.__pydantic_fields__.values()  # type: ignore[attr-defined]
        return _pairs((_v2_default(f), f.default_factory) for f in fields)
    if is_pydantic_v1_model(cls):
        fields = cls.__fields__.values()  # type: ignore[attr-defined]
        return _pairs((f.default, f.default_factory) for f in fields)
    if dataclasses.is_dataclass(cls):
        return _pairs(
            (
                None if f.default is dataclasses.MISSING else f.default,
                None if f.default_factory is dataclasses.MISSING else f.default_factory,
            )
            for f in dataclasses.fields(cls)
        )
    if is_namedtuple(cls):
        return list(getattr(cls, "_field_defaults", {}).values()), []
    return [], []


def _v2_default(field: Any) -> Any:
    """A v2 ``FieldInfo``'s default, None for "no default" (``PydanticUndefined``)."""
    default = field.default
    return None if type(default).__name__ == "PydanticUndefinedType" else default


def _pairs(pairs: Any) -> tuple[list[Any], list[type]]:
    values: list[Any] = []
    factories: list[type] = []
    for default, factory in pairs:
        if default is not None:
            values.append(default)
        if isinstance(factory, type):  # a class as factory: its instances, walked as a type
            factories.append(factory)
    return values, factories
