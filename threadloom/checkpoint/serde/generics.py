"""Type references for parametrized pydantic models (``Page[Item]`` stays ``Page[Item]``).

A type argument is stored as a small reference: a name from a fixed table of
builtins (``"int"``, ``"Any"``), a registered/allowlisted class name, or a nested
``["~", origin, [args]]`` / ``["lit", [values]]``. Resolving one never imports:
names go through the same lookup as any stored type.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["type_ref", "resolve_ref", "generic_origin"]

_BUILTIN_TYPES: dict[str, Any] = {
    cls.__name__: cls
    for cls in (int, float, complex, str, bytes, bool, list, dict, tuple, set, frozenset, object)
}
_BUILTIN_TYPES["NoneType"] = type(None)
_BUILTIN_TYPES["Any"] = typing.Any
_BUILTIN_NAMES = {id(v): k for k, v in _BUILTIN_TYPES.items()}
_UNION = "Union"


def generic_origin(cls: type) -> tuple[type, tuple[Any, ...]] | None:
    """``(origin, args)`` when ``cls`` is a parametrized pydantic model, else None."""
    meta = getattr(cls, "__pydantic_generic_metadata__", None)
    if not meta or meta.get("origin") is None or not meta.get("args"):
        return None
    return meta["origin"], tuple(meta["args"])


def type_ref(tp: Any, name_of: Callable[[type], str | None]) -> Any:
    """A storable reference to ``tp``; ``name_of`` names registered classes.

    Raises:
        TypeError: ``tp`` (or one of its arguments) has no storable reference.
    """
    if tp is None:
        return "NoneType"
    builtin = _BUILTIN_NAMES.get(id(tp))
    if builtin is not None:
        return builtin
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return ["lit", list(typing.get_args(tp))]
    if origin is not None:
        head = _UNION if origin in (typing.Union, types.UnionType) else type_ref(origin, name_of)
        return ["~", head, [type_ref(a, name_of) for a in typing.get_args(tp)]]
    if isinstance(tp, type):
        pair = generic_origin(tp)
        if pair is not None:
            return ["~", type_ref(pair[0], name_of), [type_ref(a, name_of) for a in pair[1]]]
        name = name_of(tp)
        if name is not None:
            return name
    raise TypeError(f"type argument {tp!r} cannot be stored (register the class)")


def resolve_ref(ref: Any, class_of: Callable[[str], type | None]) -> Any:
    """The type a :func:`type_ref` reference stands for; ``class_of`` resolves names.

    Raises:
        LookupError: a name is neither a builtin nor registered.
    """
    if isinstance(ref, str):
        if ref in _BUILTIN_TYPES:
            return _BUILTIN_TYPES[ref]
        cls = class_of(ref)
        if cls is None:
            raise LookupError(ref)
        return cls
    if isinstance(ref, list) and len(ref) == 2 and ref[0] == "lit":
        return typing.Literal[tuple(ref[1])]
    if isinstance(ref, list) and len(ref) == 3 and ref[0] == "~":
        args = tuple(resolve_ref(a, class_of) for a in ref[2])
        if ref[1] == _UNION:
            return typing.Union[args]
        origin = resolve_ref(ref[1], class_of)
        return origin[args if len(args) > 1 else args[0]]
    raise LookupError(f"malformed type reference {ref!r}")
