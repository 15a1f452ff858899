"""Which classes one serializer may store and revive: registry + its allowlist.

Dumps asks ``encode(obj) -> (name, state)``; loads asks ``decode(name, state)``.
Both refuse anything not registered or allowlisted, except exceptions (stored
by type name, revived as :class:`RevivedError` when their class is unknown).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from threadloom.checkpoint.serde import structs
from threadloom.checkpoint.serde.aliases import name_of_alias
from threadloom.checkpoint.serde.exceptions import EXCEPTION, exception_state, revive_unknown
from threadloom.checkpoint.serde.generics import generic_origin, resolve_ref, type_ref
from threadloom.checkpoint.serde.registry import (
    REGISTRY,
    Registry,
    TypeEntry,
    default_name,
    entry_for,
)

__all__ = ["Resolver", "UnknownObject", "Unsupported", "UnknownType", "GENERIC"]

GENERIC = "pydantic.generic"

_NATIVE = frozenset(
    {dict, list, tuple, str, int, float, bool, bytes, bytearray, type(None), object}
)


class Unsupported(Exception):
    """Internal: ``cls`` cannot be stored; ``reason`` says why."""

    def __init__(self, cls: type, reason: str) -> None:
        super().__init__(reason)
        self.cls = cls
        self.reason = reason


class UnknownType(Exception):
    """Internal: a stored name that is neither registered nor allowlisted."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class UnknownObject(dict):
    """``on_unknown="raw"``: the stored fields of an object whose class is not trusted."""

    def __init__(self, type_name: str, fields: Any) -> None:
        super().__init__(fields if isinstance(fields, dict) else {"__state__": fields})
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"UnknownObject({self.type_name!r}, {dict.__repr__(self)})"


def _not_allowed(cls: type) -> str:
    if structs.is_structured(cls):
        return (
            f"{default_name(cls)} is not registered: call "
            "threadloom.checkpoint.serde.register(cls) or pass it in allowed=[...]"
        )
    return f"{default_name(cls)} has no serializer (register it with encode=/decode=)"


class Resolver:
    """Registry lookups plus one serializer's allowlist, cached per class."""

    def __init__(
        self,
        allowed: Iterable[type] = (),
        *,
        registry: Registry = REGISTRY,
        on_unknown: str = "error",
        permissive: bool = False,
    ) -> None:
        if on_unknown not in ("error", "raw"):
            raise ValueError(f"on_unknown must be 'error' or 'raw', got {on_unknown!r}")
        self.registry = registry
        self.on_unknown = on_unknown
        self.permissive = permissive
        self.allowed: tuple[type, ...] = tuple(dict.fromkeys(allowed))
        self._by_type: dict[type, TypeEntry] = {}
        self._by_name: dict[str, TypeEntry] = {}
        for cls in self.allowed:
            if not isinstance(cls, type):
                raise TypeError(f"allowed= takes classes, got {cls!r} (names are never resolved)")
            pair = generic_origin(cls)
            if pair is not None:  # Page[Item]: stored as origin + type args
                cls = pair[0]
            if cls in _NATIVE:
                continue
            if registry.by_type(cls) is None and cls not in self._by_type:
                entry = entry_for(cls)
                self._by_type[cls] = entry
                # the latest class under a name wins: a notebook cell run again
                # redefines the state classes, and stored values revive as the new ones
                self._by_name.pop(entry.name, None)
                self._by_name[entry.name] = entry
        self.cache: dict[type, TypeEntry] = {}  # resolved entries, read by the packer
        # stored name (or alias number) -> decode; the registry clears it when a
        # redefined class replaces a registered one (see Registry.add)
        self._decoders: dict[str | int, Callable[[Any], Any]] = {}
        registry.watch(self)

    def forget_decoders(self) -> None:
        """Drop the per-name decode cache (a registered class was redefined)."""
        self._decoders.clear()

    # -- dumps ----------------------------------------------------------------

    def entry(self, cls: type) -> TypeEntry:
        """The entry storing instances of ``cls``; raises :class:`Unsupported`."""
        return self.cache.get(cls) or self._resolve(cls)

    def encode(self, obj: Any) -> tuple[str, Any]:
        """``(name, state)`` for a non-native value; raises :class:`Unsupported`."""
        cls = type(obj)
        entry = self.cache.get(cls) or self._resolve(cls)
        try:
            return entry.name, entry.encode(obj)
        except Unsupported:
            raise
        except Exception as exc:
            raise Unsupported(cls, f"cannot store {default_name(cls)}: {exc}") from exc

    def _resolve(self, cls: type) -> TypeEntry:
        entry = self.registry.by_type(cls) or self._by_type.get(cls)
        if entry is not None and issubclass(cls, BaseException):
            entry = TypeEntry(EXCEPTION, cls, exception_state, entry.decode)
        elif entry is None:
            entry = self._fallback(cls)
        self.cache[cls] = entry
        return entry

    def _fallback(self, cls: type) -> TypeEntry:
        if issubclass(cls, BaseException):
            return TypeEntry(EXCEPTION, cls, exception_state, revive_unknown)
        pair = generic_origin(cls)
        if pair is not None:
            origin_entry = self.registry.by_type(pair[0]) or self._by_type.get(pair[0])
            if origin_entry is not None:
                return self._generic_entry(cls, origin_entry, pair[1])
        if self.permissive and structs.is_structured(cls):
            return entry_for(cls)
        raise Unsupported(cls, _not_allowed(cls))

    def _generic_entry(self, cls: type, origin: TypeEntry, args: tuple[Any, ...]) -> TypeEntry:
        try:
            refs = [type_ref(a, self.name_of) for a in args]
        except TypeError as exc:
            raise Unsupported(cls, f"cannot store {cls.__qualname__}: {exc}") from exc

        def encode(obj: Any) -> list[Any]:
            return [origin.name, refs, origin.encode(obj)]

        return TypeEntry(GENERIC, cls, encode, origin.decode)

    def trusts_latest(self, cls: type) -> bool:
        """Whether ``cls`` is trusted and is the class its stored name revives as."""
        if not isinstance(cls, type):
            return False  # the copy's constructor then says what is wrong with it
        pair = generic_origin(cls)
        if pair is not None:
            cls = pair[0]
        if cls in _NATIVE:
            return True
        entry = self.registry.by_type(cls)
        if entry is None:
            entry = self._by_type.get(cls)
            if entry is None:
                return False
        current = self.entry_named(entry.name)
        return current is not None and current.cls is cls

    def name_of(self, cls: type) -> str | None:
        entry = self.registry.by_type(cls) or self._by_type.get(cls)
        return entry.name if entry is not None else None

    # -- loads ----------------------------------------------------------------

    def entry_named(self, name: str) -> TypeEntry | None:
        return self.registry.by_name(name) or self._by_name.get(name)

    def class_named(self, name: str) -> type | None:
        entry = self.entry_named(name)
        return entry.cls if entry is not None else None

    def entry_by_class_name(self, module: str, name: str) -> TypeEntry | None:
        """A trusted class whose ``__module__`` and ``__name__`` match (LangGraph rows
        store ``__name__``, which differs from the qualified name of nested classes)."""
        entry = self.entry_named(f"{module}.{name}")
        if entry is not None:
            return entry
        self.registry.by_name(module)  # let lazy integrations register first
        for candidate in (*self._by_name.values(), *self.registry.entries()):
            cls = candidate.cls
            if cls.__module__ == module and cls.__name__ == name:
                return candidate
        return None

    def decode(self, name: str | int, state: Any) -> Any:
        """Revive a stored ``(name, state)``; raises :class:`UnknownType` when untrusted.

        An integer name is an alias (aliases.py) for a registry name: it is read
        exactly as that name, through the same registry and allowlist.
        """
        decode = self._decoders.get(name)
        if decode is not None:
            return decode(state)
        stored = name
        if type(name) is int:
            alias = name_of_alias(name)
            if alias is None:
                raise UnknownType(f"alias #{name}")
            name = alias
        if name == EXCEPTION:
            entry = self.entry_named(str(state.get("type", "")))
            if entry is not None and issubclass(entry.cls, BaseException):
                return entry.decode(state)
            return revive_unknown(state)
        if name == GENERIC:
            return self._decode_generic(state)
        entry = self.entry_named(name)
        if entry is None:
            if self.on_unknown == "raw":
                return UnknownObject(name, state)
            raise UnknownType(name)
        self._decoders[stored] = entry.decode
        return entry.decode(state)

    def _decode_generic(self, state: list[Any]) -> Any:
        origin_name, refs, fields = state
        origin = self.entry_named(origin_name)
        if origin is None:
            if self.on_unknown == "raw":
                return UnknownObject(origin_name, fields)
            raise UnknownType(origin_name)
        try:
            args = tuple(resolve_ref(r, self.class_named) for r in refs)
        except LookupError as exc:
            if self.on_unknown == "raw":
                return UnknownObject(origin_name, fields)
            raise UnknownType(str(exc.args[0])) from None
        cls = origin.cls[args if len(args) > 1 else args[0]]
        return structs.construct_model(cls, fields)
