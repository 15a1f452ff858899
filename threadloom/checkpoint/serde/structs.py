"""Codecs derived from a class's kind: Enum, dataclass, NamedTuple, pydantic model (v2,
and v1 via ``pydantic.v1``).

States are dicts of field name -> value, so error paths read ``.field`` and
stored data survives field reordering. Reviving never runs ``__init__`` or
validators on stored data: fields are restored as they were (like pickle, but
only for registered classes). Fields added to a class since the value was stored
take their defaults; fields that no longer exist are dropped.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.serde.models import UNSET_KEY, construct_model, encode_model
from threadloom.errors import SerializationError

__all__ = [
    "codec_for",
    "construct_model",
    "is_pydantic_model",
    "is_pydantic_v1_model",
    "is_namedtuple",
    "is_structured",
]

Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]


def is_pydantic_model(cls: type) -> bool:
    """A pydantic v2 model class (checked without importing pydantic)."""
    return (
        isinstance(cls, type)
        and hasattr(cls, "__pydantic_fields__")
        and hasattr(cls, "model_construct")
    )


def is_pydantic_v1_model(cls: type) -> bool:
    """A ``pydantic.v1`` (or pydantic 1.x) model class, without importing pydantic:
    LangChain-era code still declares state with them."""
    return (
        isinstance(cls, type)
        and "__pydantic_fields__" not in dir(cls)
        and isinstance(cls.__dict__.get("__fields__"), dict)
        and hasattr(cls, "construct")
        and hasattr(cls, "__fields_set__")
    )


def is_namedtuple(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def is_structured(cls: type) -> bool:
    """A kind :func:`codec_for` can handle."""
    return (
        (isinstance(cls, type) and issubclass(cls, (enum.Enum, BaseException)))
        or is_pydantic_model(cls)
        or is_pydantic_v1_model(cls)
        or is_namedtuple(cls)
        or (isinstance(cls, type) and dataclasses.is_dataclass(cls))
    )


def codec_for(cls: type) -> Codec | None:
    """``(encode, decode)`` for ``cls`` by kind, or None when it has no known kind."""
    if not isinstance(cls, type):
        return None
    if issubclass(cls, enum.Enum):
        return _enum_value, cls
    if issubclass(cls, BaseException):
        from threadloom.checkpoint.serde.exceptions import exception_codec

        return exception_codec(cls)
    if is_pydantic_model(cls):
        return _pydantic_codec(cls)
    if is_pydantic_v1_model(cls):
        return _pydantic_v1_codec(cls)
    if is_namedtuple(cls):
        return _namedtuple_codec(cls)
    if dataclasses.is_dataclass(cls):
        return _dataclass_codec(cls)
    return None


def _enum_value(obj: enum.Enum) -> Any:
    return obj.value


def _missing_field(cls: type, name: str) -> SerializationError:
    return SerializationError(
        f"stored {cls.__qualname__} lacks required field {name!r} (added to the class since?)",
        type_name=cls.__qualname__,
    )


def _dataclass_codec(cls: type) -> Codec:
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)

    def encode(obj: Any) -> dict[str, Any]:
        return {name: getattr(obj, name) for name in names}

    def decode(state: dict[str, Any]) -> Any:
        obj = object.__new__(cls)
        for f in fields:
            if f.name in state:
                value = state[f.name]
            elif f.default is not dataclasses.MISSING:
                value = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                raise _missing_field(cls, f.name)
            object.__setattr__(obj, f.name, value)
        return obj

    return encode, decode


def _namedtuple_codec(cls: type) -> Codec:
    names: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    defaults: dict[str, Any] = getattr(cls, "_field_defaults", {})

    def encode(obj: tuple) -> dict[str, Any]:
        return dict(zip(names, obj))

    def decode(state: dict[str, Any]) -> Any:
        values = []
        for name in names:
            if name in state:
                values.append(state[name])
            elif name in defaults:
                values.append(defaults[name])
            else:
                raise _missing_field(cls, name)
        return tuple.__new__(cls, values)

    return encode, decode


def _pydantic_codec(cls: type) -> Codec:
    def decode(state: dict[str, Any], klass: type = cls) -> Any:
        return construct_model(klass, state)

    return encode_model, decode


def _pydantic_v1_codec(cls: type) -> Codec:
    """The fields by name; revived with ``construct`` (no validators, defaults for
    fields added since), like the other kinds. Which fields were set is kept, and a
    ``Config.extra = "allow"`` model's extra fields are stored with them (as LangGraph)."""
    names = tuple(cls.__fields__)  # type: ignore[attr-defined]
    allows_extra = getattr(getattr(cls, "__config__", None), "extra", None) == "allow"

    def encode(obj: Any) -> dict[str, Any]:
        state = {name: getattr(obj, name) for name in names}
        if allows_extra and len(obj.__dict__) > len(state):
            extra = {k: v for k, v in obj.__dict__.items() if k not in state}
            if UNSET_KEY in extra:  # would be read back as the marker: refuse, never corrupt
                raise ValueError(f"extra field {UNSET_KEY!r} is reserved by the serializer")
            state.update(extra)
        unset = [name for name in state if name not in obj.__fields_set__]
        if unset:
            state[UNSET_KEY] = unset
        return state

    def decode(state: dict[str, Any]) -> Any:
        unset = set(state.get(UNSET_KEY, ()))
        if allows_extra:  # stored keys that are not fields are extras
            fields = {k: v for k, v in state.items() if k != UNSET_KEY}
        else:
            fields = {k: v for k, v in state.items() if k in cls.__fields__}  # type: ignore[attr-defined]
        return cls.construct(  # type: ignore[attr-defined]
            _fields_set={k for k in fields if k not in unset}, **fields
        )

    return encode, decode
