"""Pre-registered codecs for standard-library value types and threadloom's own types.

Names are short and fixed (``"datetime"``, ``"uuid"``): they are part of the
stored format, so never rename one. States are compact (datetimes as integer
fields, UUIDs as 16 bytes).
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import fractions
import ipaddress
import pathlib
import re
import uuid
import zoneinfo
from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.serde.registry import Registry, TypeEntry, entry_for

__all__ = ["register_builtins", "BUILTIN_FACTORIES", "zone"]

_ZONE_KEY = re.compile(r"^[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*$")

# defaultdict factories that can be stored: fixed, by name, never looked up elsewhere
BUILTIN_FACTORIES: dict[str, Callable[[], Any]] = {
    f.__name__: f for f in (list, dict, set, frozenset, int, float, str, bytes, bool, tuple)
}


def zone(key: str) -> zoneinfo.ZoneInfo:
    if not isinstance(key, str) or ".." in key or not _ZONE_KEY.match(key):
        raise ValueError(f"invalid time zone key {key!r}")
    return zoneinfo.ZoneInfo(key)


def _interrupt_fields(v: Any) -> dict[str, Any]:
    """An Interrupt's stored fields; ``response_schema`` only when set, so the
    bytes of an interrupt without one stay as older versions wrote them."""
    fields = {"value": v.value, "id": v.id}
    if v.response_schema is not None:
        fields["response_schema"] = v.response_schema
    return fields


def _datetime_state(v: dt.datetime) -> list[Any]:
    return [v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.tzinfo, v.fold]


def _datetime(s: list[Any]) -> dt.datetime:
    return dt.datetime(*s[:7], tzinfo=s[7], fold=s[8])


def _time_state(v: dt.time) -> list[Any]:
    return [v.hour, v.minute, v.second, v.microsecond, v.tzinfo, v.fold]


def _time(s: list[Any]) -> dt.time:
    return dt.time(*s[:4], tzinfo=s[4], fold=s[5])


def _tzinfo_check(v: Any) -> Any:
    tz = v.tzinfo
    if tz is not None and type(tz) not in (dt.timezone, zoneinfo.ZoneInfo):
        raise TypeError(f"unsupported tzinfo {type(tz).__qualname__} (use timezone or ZoneInfo)")
    return v


def _timezone_state(v: dt.timezone) -> list[Any]:
    return list(v.__getinitargs__())  # [offset] or [offset, name]


def _path_codec(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    return str, cls


def _windows_path(s: str) -> pathlib.PurePath:
    try:
        return pathlib.WindowsPath(s)
    except NotImplementedError:  # cannot instantiate WindowsPath here: keep the value
        return pathlib.PureWindowsPath(s)


def _defaultdict_state(v: collections.defaultdict) -> list[Any]:
    factory = v.default_factory
    if factory is None:
        ref = None
    elif BUILTIN_FACTORIES.get(getattr(factory, "__name__", "")) is factory:
        ref = factory.__name__
    else:
        raise TypeError(
            f"defaultdict factory {factory!r} cannot be stored (only builtin types: "
            f"{', '.join(BUILTIN_FACTORIES)})"
        )
    return [ref, dict(v)]


def _defaultdict(s: list[Any]) -> collections.defaultdict:
    ref, items = s
    if ref is not None and ref not in BUILTIN_FACTORIES:
        raise ValueError(f"unknown defaultdict factory {ref!r}")
    return collections.defaultdict(BUILTIN_FACTORIES[ref] if ref else None, items)


def _bigint_state(v: int) -> str:
    return format(v, "x")


def _surrogate_state(v: str) -> bytes:
    return v.encode("utf-8", "surrogatepass")


def _entries() -> list[tuple[str, type, Callable[[Any], Any], Callable[[Any], Any]]]:
    ip = ipaddress
    return [
        ("datetime", dt.datetime, lambda v: _datetime_state(_tzinfo_check(v)), _datetime),
        ("date", dt.date, lambda v: [v.year, v.month, v.day], lambda s: dt.date(*s)),
        ("time", dt.time, lambda v: _time_state(_tzinfo_check(v)), _time),
        (
            "timedelta",
            dt.timedelta,
            lambda v: [v.days, v.seconds, v.microseconds],
            lambda s: dt.timedelta(*s),
        ),
        ("timezone", dt.timezone, _timezone_state, lambda s: dt.timezone(*s)),
        ("zoneinfo", zoneinfo.ZoneInfo, lambda v: v.key, zone),
        ("uuid", uuid.UUID, lambda v: v.bytes, lambda s: uuid.UUID(bytes=s)),
        ("decimal", decimal.Decimal, str, decimal.Decimal),
        (
            "fraction",
            fractions.Fraction,
            lambda v: [v.numerator, v.denominator],
            lambda s: fractions.Fraction(*s),
        ),
        ("complex", complex, lambda v: [v.real, v.imag], lambda s: complex(*s)),
        ("range", range, lambda v: [v.start, v.stop, v.step], lambda s: range(*s)),
        ("set", set, list, set),
        ("frozenset", frozenset, list, frozenset),
        (
            "deque",
            collections.deque,
            lambda v: [list(v), v.maxlen],
            lambda s: collections.deque(*s),
        ),
        ("defaultdict", collections.defaultdict, _defaultdict_state, _defaultdict),
        ("counter", collections.Counter, dict, collections.Counter),
        (
            "ordereddict",
            collections.OrderedDict,
            lambda v: list(v.items()),
            collections.OrderedDict,
        ),
        ("bigint", int, _bigint_state, lambda s: int(s, 16)),
        ("surrogate_str", str, _surrogate_state, lambda s: s.decode("utf-8", "surrogatepass")),
        ("path.posix", pathlib.PosixPath, str, pathlib.PosixPath),
        ("path.windows", pathlib.WindowsPath, str, _windows_path),
        ("path.pure", pathlib.PurePath, str, pathlib.PurePath),
        ("path.pureposix", pathlib.PurePosixPath, str, pathlib.PurePosixPath),
        ("path.purewindows", pathlib.PureWindowsPath, str, pathlib.PureWindowsPath),
        ("re.pattern", re.Pattern, lambda v: [v.pattern, v.flags], lambda s: re.compile(*s)),
        ("ip.v4", ip.IPv4Address, str, ip.IPv4Address),
        ("ip.v6", ip.IPv6Address, str, ip.IPv6Address),
        ("ip.v4net", ip.IPv4Network, str, ip.IPv4Network),
        ("ip.v6net", ip.IPv6Network, str, ip.IPv6Network),
        ("ip.v4if", ip.IPv4Interface, str, ip.IPv4Interface),
        ("ip.v6if", ip.IPv6Interface, str, ip.IPv6Interface),
    ]


def _send_fields(send: Any) -> dict[str, Any]:
    """A Send's fields; ``timeout`` only when set, so a Send without one is
    stored as before (and older readers ignore the field)."""
    fields = {"node": send.node, "arg": send.arg}
    if send.timeout is not None:
        t = send.timeout
        fields["timeout"] = [t.run_timeout, t.idle_timeout, t.refresh_on]
    return fields


def _timeout(stored: Any) -> Any:
    if stored is None:
        return None
    from threadloom.policies import TimeoutPolicy

    run, idle, refresh_on = stored
    return TimeoutPolicy(run_timeout=run, idle_timeout=idle, refresh_on=refresh_on)


def _threadloom_types(registry: Registry) -> None:
    from threadloom import errors, types
    from threadloom.checkpoint.serde.exceptions import BUILTIN_EXCEPTIONS

    registry.add(
        TypeEntry(
            "threadloom.Send",
            types.Send,
            _send_fields,
            lambda s: types.Send(s["node"], s["arg"], timeout=_timeout(s.get("timeout"))),
        )
    )
    registry.add(
        TypeEntry(
            "threadloom.Interrupt",
            types.Interrupt,
            _interrupt_fields,
            lambda s: types.Interrupt(
                value=s["value"], id=s["id"], response_schema=s.get("response_schema")
            ),
        )
    )
    registry.add(
        TypeEntry(
            "threadloom.Overwrite",
            types.Overwrite,
            lambda v: {"value": v.value},
            lambda s: types.Overwrite(s["value"]),
        )
    )
    _remove_message(registry)
    for cls in (types.Command, types.StateSnapshot, types.PregelTask, types.StateUpdate):
        registry.add(entry_for(cls, f"threadloom.{cls.__name__}"))
    for name in errors.__all__:
        if isinstance(getattr(errors, name), type):  # the error classes, not helpers
            registry.add(entry_for(getattr(errors, name)))
    from threadloom.checkpoint.serde.exceptions import RevivedError

    registry.add(entry_for(RevivedError))
    for exc in BUILTIN_EXCEPTIONS:
        registry.add(entry_for(exc, exc.__qualname__))


def _remove_message(registry: Registry) -> None:
    """``RemoveMessage`` is a dict subclass: stored as its items, revived as the marker.

    It has to stay a ``RemoveMessage`` (not a plain dict) through pending writes and
    ``update_state``, so ``add_messages`` and user code see the same object either way.
    """
    from threadloom.graph.message import RemoveMessage

    def revive(state: dict[str, Any]) -> RemoveMessage:
        marker = RemoveMessage(state["id"])
        marker.update(state)
        return marker

    registry.add(TypeEntry("threadloom.RemoveMessage", RemoveMessage, dict, revive))


def register_builtins(registry: Registry) -> None:
    """Fill ``registry`` with the stdlib and threadloom types (run once at import)."""
    for name, cls, encode, decode in _entries():
        registry.add(TypeEntry(name, cls, encode, decode))
    _threadloom_types(registry)
    from threadloom.checkpoint.serde import optional

    optional.register_lazy(registry)
