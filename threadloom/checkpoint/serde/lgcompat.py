"""Read values LangGraph's JsonPlusSerializer wrote (msgpack extension codes 0-7).

LangGraph stores objects as ``(module, name, args)`` and rebuilds them by
importing ``module`` and calling ``name``. Here the pair is only a lookup key:
stdlib and ``langgraph.types`` pairs map to fixed constructors below, anything
else must be a registered or allowlisted class named ``module.name``. Nothing
is imported, so a row naming ``("os", "system")`` is just an unknown type.

Code 7 wraps a ``DeltaChannel`` snapshot (LangGraph 1.2's ``_DeltaSnapshot``):
it reads as the plain value inside, which threadloom's ``DeltaChannel`` (and any
reducer channel) takes as its stored value.
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import enum
import ipaddress
import pathlib
import re
import uuid
from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.serde import structs
from threadloom.checkpoint.serde.resolver import UnknownObject, UnknownType

__all__ = ["decode_langgraph", "LANGGRAPH_CODES", "LANGGRAPH_DELTA"]

LANGGRAPH_CODES = frozenset(range(0, 8))
_SINGLE, _POS, _KW, _METHOD, _PYDANTIC_V1, _PYDANTIC_V2, _NUMPY, _DELTA = range(8)
LANGGRAPH_DELTA = _DELTA


def _stdlib() -> dict[tuple[str, str], Callable[[Any], Any]]:
    from threadloom.checkpoint.serde.stdlib import zone

    table: dict[tuple[str, str], Callable[[Any], Any]] = {
        ("datetime", "datetime"): dt.datetime.fromisoformat,
        ("datetime", "date"): lambda a: dt.date(*a),
        ("datetime", "time"): lambda a: dt.time(**a),
        ("datetime", "timedelta"): lambda a: dt.timedelta(*a),
        ("datetime", "timezone"): lambda a: dt.timezone(*a),
        ("zoneinfo", "ZoneInfo"): zone,
        ("uuid", "UUID"): lambda a: uuid.UUID(hex=a),
        ("decimal", "Decimal"): decimal.Decimal,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("collections", "deque"): collections.deque,
        ("re", "compile"): lambda a: re.compile(*a),
    }
    for cls in (
        ipaddress.IPv4Address,
        ipaddress.IPv6Address,
        ipaddress.IPv4Network,
        ipaddress.IPv6Network,
        ipaddress.IPv4Interface,
        ipaddress.IPv6Interface,
    ):
        table[("ipaddress", cls.__name__)] = cls
    for cls in (
        pathlib.PosixPath,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
        pathlib.PurePath,
    ):
        table[("pathlib", cls.__name__)] = lambda a, c=cls: c(*a)
    return table


def _langgraph_types() -> dict[tuple[str, str], Callable[[Any], Any]]:
    from threadloom import types
    from threadloom.checkpoint.serde.registry import REGISTRY

    def via(name: str) -> Callable[[Any], Any]:
        entry = REGISTRY.by_name(name)
        assert entry is not None
        return entry.decode

    return {
        ("langgraph.types", "Send"): lambda a: types.Send(
            a[0], a[1], timeout=a[2] if len(a) > 2 else None
        ),
        ("langgraph.types", "TimeoutPolicy"): lambda kw: types.TimeoutPolicy(
            run_timeout=kw.get("run_timeout"),
            idle_timeout=kw.get("idle_timeout"),
            refresh_on=kw.get("refresh_on", "auto"),
        ),
        ("langgraph.types", "Interrupt"): lambda kw: types.Interrupt(
            kw.get("value"),
            **({"id": kw["id"]} if "id" in kw else {}),
            response_schema=kw.get("response_schema"),
        ),
        ("langgraph.types", "Overwrite"): lambda kw: types.Overwrite(kw.get("value")),
        ("langgraph.types", "Command"): via("threadloom.Command"),
        ("langgraph.types", "PregelTask"): via("threadloom.PregelTask"),
        ("langgraph.types", "StateSnapshot"): via("threadloom.StateSnapshot"),
    }


_TABLE: dict[tuple[str, str], Callable[[Any], Any]] | None = None


def _table() -> dict[tuple[str, str], Callable[[Any], Any]]:
    global _TABLE
    if _TABLE is None:
        _TABLE = {**_stdlib(), **_langgraph_types()}
    return _TABLE


def decode_langgraph(code: int, payload: Any, resolver: Any) -> Any:
    """Revive one LangGraph extension whose payload is already unpacked.

    Raises:
        UnknownType: the named class is neither known here nor trusted.
        ValueError: a malformed payload.
    """
    if code == _NUMPY:
        from threadloom.checkpoint.serde.optional import decode_langgraph_array

        return decode_langgraph_array(payload)
    if code == _DELTA:  # a DeltaChannel snapshot: the channel's whole value
        return payload
    module, name, arg = payload[0], payload[1], payload[2]
    if code == _METHOD and (module, name, payload[3]) != ("datetime", "datetime", "fromisoformat"):
        raise UnknownType(f"{module}.{name}.{payload[3]}")
    known = _table().get((module, name))
    if known is not None:
        return known(arg)
    entry = resolver.entry_by_class_name(module, name)
    if entry is None:
        if resolver.on_unknown == "raw":
            return UnknownObject(f"{module}.{name}", arg)
        raise UnknownType(f"{module}.{name}")
    cls = entry.cls
    if code == _PYDANTIC_V2 and structs.is_pydantic_model(cls):
        try:  # LangGraph stored model_dump(): nested models are dicts, so validate
            return cls.model_validate(arg)
        except Exception:
            return structs.construct_model(cls, arg)
    if code == _PYDANTIC_V1 and structs.is_pydantic_v1_model(cls):
        try:  # LangGraph stored .dict(): nested models are dicts, so validate
            return cls.parse_obj(arg)  # type: ignore[attr-defined]
        except Exception:
            return cls.construct(**arg)  # type: ignore[attr-defined]
    if code == _SINGLE and issubclass(cls, enum.Enum):
        return cls(arg)
    if code == _KW and isinstance(arg, dict):
        return entry.decode(arg)  # dataclass / NamedTuple: fields by name
    raise ValueError(f"cannot read LangGraph extension {code} for {module}.{name}")
