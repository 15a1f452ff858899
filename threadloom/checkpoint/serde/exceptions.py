"""Exceptions as stored values (task errors, the ``__error__`` channel).

An exception is stored as its type name, message, plain args and plain
attributes. The type name of a registered class is its registry name (the
``name=`` given to ``register``, so the class can move); any other class is
stored under ``module.QualName``. It revives as the same class only when that
class is registered or allowlisted (builtin exceptions and threadloom's own
are); any other comes back as a :class:`RevivedError` carrying the stored type
name and message. The stored type name is never imported.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from typing import Any

from threadloom.errors import ThreadloomError

__all__ = [
    "RevivedError",
    "exception_codec",
    "exception_state",
    "named_state",
    "revive_exception",
    "revive_unknown",
    "EXCEPTION",
]

EXCEPTION = "exception"
"""Registry name under which exceptions of unregistered classes are stored."""

_PLAIN = (str, int, float, bool, type(None), bytes)


class RevivedError(ThreadloomError):
    """A stored exception whose class is not registered, revived without importing it.

    ``type_name`` is the original ``module.QualName``, ``message`` its ``str()``.
    """

    def __init__(self, type_name: str, message: str, args: tuple[Any, ...] = ()) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name = type_name
        self.message = message
        self.original_args = args


def _type_name(cls: type) -> str:
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def exception_state(exc: BaseException, type_name: str | None = None) -> dict[str, Any]:
    """Type name (``type_name``, else ``module.QualName``), message, args if plain
    (else the message alone), plain attributes."""
    if isinstance(exc, RevivedError):
        return {"type": exc.type_name, "message": exc.message, "args": list(exc.original_args)}
    args = exc.args
    if not all(isinstance(a, _PLAIN) for a in args):
        args = (str(exc),)
    state: dict[str, Any] = {
        "type": type_name or _type_name(type(exc)),
        "message": str(exc),
        "args": list(args),
    }
    attrs = {
        k: v
        for k, v in getattr(exc, "__dict__", {}).items()
        if isinstance(k, str) and not k.startswith("__") and isinstance(v, _PLAIN)
    }
    if attrs:
        state["attrs"] = attrs
    return state


def named_state(name: str) -> Callable[[BaseException], dict[str, Any]]:
    """Encoder storing a trusted exception under ``name``, the key its reader looks up
    (a ``register(cls, name=...)`` name must be stored, not the module path, or the
    class never revives and cannot move)."""

    def encode(exc: BaseException) -> dict[str, Any]:
        return exception_state(exc, name)

    return encode


def exception_codec(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """Codec for a registered exception class: revived without calling ``__init__``."""

    def decode(state: dict[str, Any]) -> BaseException:
        args = tuple(state.get("args", ()))
        exc = cls.__new__(cls, *args)
        exc.args = args
        for key, value in state.get("attrs", {}).items():
            try:
                setattr(exc, key, value)
            except (AttributeError, TypeError):  # read-only attribute: keep the rest
                continue
        return exc

    return exception_state, decode


def revive_unknown(state: dict[str, Any]) -> RevivedError:
    return RevivedError(
        str(state.get("type", "?")), str(state.get("message", "")), tuple(state.get("args", ()))
    )


def revive_exception(
    state: dict[str, Any],
    entry_named: Callable[[str], Any],
    registered: Callable[[], Iterable[Any]],
) -> BaseException:
    """The trusted class stored under ``state["type"]``, else a :class:`RevivedError`.

    ``entry_named`` is the reader's lookup (registry, then allowlist). Rows written
    before a ``register(cls, name=...)`` name was stored carry ``module.QualName``:
    a registered exception class at that module path still revives them (a match
    among registered classes, ``registered()``; nothing is imported).
    """
    type_name = str(state.get("type", ""))
    entry = entry_named(type_name)
    if entry is None or not issubclass(entry.cls, BaseException):
        entry = next(
            (
                e
                for e in registered()
                if issubclass(e.cls, BaseException) and _type_name(e.cls) == type_name
            ),
            None,
        )
    return entry.decode(state) if entry is not None else revive_unknown(state)


BUILTIN_EXCEPTIONS: tuple[type[BaseException], ...] = tuple(
    obj
    for name, obj in vars(builtins).items()
    if isinstance(obj, type)
    and issubclass(obj, Exception)
    and not issubclass(obj, Warning)
    and not name.startswith("_")
    and name not in {"BaseExceptionGroup", "ExceptionGroup"}
)
