"""Which classes one serializer may store and revive: registry + its allowlist.

Dumps asks ``encode(obj) -> (name, state)``; loads asks ``decode(name, state)``.
Both refuse anything not registered or allowlisted, except exceptions (stored
by type name, revived as :class:`RevivedError` when their class is unknown).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

from threadloom.checkpoint.serde import structs
from threadloom.checkpoint.serde.aliases import name_of_alias
from threadloom.checkpoint.serde.exceptions import (
    EXCEPTION,
    exception_state,
    named_state,
    revive_exception,
    revive_unknown,
)
from threadloom.checkpoint.serde.generics import generic_origin, resolve_ref, type_ref
from threadloom.checkpoint.serde.registry import (
    REGISTRY,
    Registry,
    TypeEntry,
    default_name,
    entry_for,
    next_stamp,
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
    """Internal: a stored name that is neither registered nor allowlisted.
    ``moved_to`` names trusted classes of the same class name elsewhere: after a
    deploy that moved a class, that is the registration the user is missing."""

    def __init__(self, name: str, moved_to: tuple[str, ...] = ()) -> None:
        super().__init__(name)
        self.name = name
        self.moved_to = moved_to


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
    """Registry lookups plus one serializer's allowlist, cached per class.

    Classes the graph layer allowlists at compile time are held weakly: a class
    nobody else references any more (a graph built per request by a factory
    function) drops out instead of piling up; whoever still holds an instance or
    a live graph holds its class. Classes the user names (``allowed=``, a direct
    ``with_allowlist``) are held for the serializer's lifetime: a reader whose
    class is built from config and has no instance yet must still revive it.
    """

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
        # allowlisted class (weakly) -> when it was trusted; plain dicts so a
        # copy (with_allowlist) is one C-level copy, dead keys pruned now and then
        self._trusted: dict[weakref.ref[type], int] = {}
        # stored name -> (when, class) of the latest allowlisted class under it
        self._latest: dict[str, tuple[int, weakref.ref[type]]] = {}
        self._prune_at = 64
        self._pinned: tuple[type, ...] = ()  # held strongly (the user named them)
        self._setup()
        self._trust(allowed, weak=False)

    def _setup(self) -> None:
        self.cache: dict[type, TypeEntry] = {}  # resolved entries, read by the packer
        self._entries: dict[type, TypeEntry] = {}  # allowlisted class -> derived entry
        # stored name (or alias number) -> decode; the registry clears it when a
        # registration changes which class a name revives as (see Registry.add)
        self._decoders: dict[str | int, Callable[[Any], Any]] = {}
        self.registry.watch(self)

    def widened(self, types: Iterable[type], refresh: bool = True, weak: bool = False) -> Resolver:
        """A copy that also trusts ``types``, the last one under a name winning.

        ``refresh=False`` leaves classes already trusted where they are: only the
        new ones are added (a nested subgraph's run must not take a name back
        from the class its parent's compile made the latest). ``weak``: held only
        while something else references them (the graph layer's compile-time
        classes); otherwise held as long as the copy.

        Python work is per new class; the maps are copied whole in C, and dead
        classes are pruned once the maps have doubled since the last prune.
        """
        clone = Resolver.__new__(Resolver)
        clone.registry, clone.on_unknown = self.registry, self.on_unknown
        clone.permissive = self.permissive
        clone._trusted, clone._latest = dict(self._trusted), dict(self._latest)
        clone._prune_at = self._prune_at
        clone._pinned = self._pinned
        clone._setup()
        clone._trust(types, refresh, weak)
        return clone

    def _trust(self, types: Iterable[type], refresh: bool = True, weak: bool = False) -> None:
        for cls in dict.fromkeys(types):
            cls = _stored_class(cls)
            if cls is None:
                continue
            if not weak and cls not in self._pinned:
                self._pinned = (*self._pinned, cls)
            registered = self.registry.by_type(cls)
            if registered is not None and registered.name != default_name(cls):
                continue  # stored under the name it was registered with
            ref = weakref.ref(cls)
            known = registered is not None or ref in self._trusted
            if known and not refresh:
                continue
            if not known:
                entry_for(cls)  # refuse a class no codec can be derived for, now
            stamp = next_stamp()
            self._trusted[ref] = stamp
            self._latest[default_name(cls)] = (stamp, ref)
        if len(self._trusted) >= self._prune_at:
            self._prune()

    def _prune(self) -> None:
        """Forget dead classes; each name keeps its latest live class (an older one
        still referenced somewhere serves the name when the newest has died)."""
        trusted: dict[weakref.ref[type], int] = {}
        latest: dict[str, tuple[int, weakref.ref[type]]] = {}
        for ref, stamp in self._trusted.items():
            cls = ref()
            if cls is None:
                continue
            trusted[ref] = stamp
            name = default_name(cls)
            if name not in latest or stamp > latest[name][0]:
                latest[name] = (stamp, ref)
        self._trusted, self._latest = trusted, latest
        self._prune_at = max(64, 2 * len(trusted))

    @property
    def allowed(self) -> tuple[type, ...]:
        """The live allowlisted classes, oldest trust first."""
        pairs = sorted((s, r()) for r, s in list(self._trusted.items()) if r() is not None)
        return tuple(cls for _, cls in pairs)  # type: ignore[misc]

    def _allowlisted(self, cls: type) -> bool:
        try:
            return weakref.ref(cls) in self._trusted
        except TypeError:  # not weakly referenceable: never allowlisted
            return False

    def _allowed_entry(self, cls: type) -> TypeEntry | None:
        return self._entry_of(cls) if self._allowlisted(cls) else None

    def _entry_of(self, cls: type) -> TypeEntry:
        entry = self._entries.get(cls)
        if entry is None:
            entry = self._entries[cls] = entry_for(cls)
        return entry

    def _latest_allowed(self, name: str) -> tuple[int, type] | None:
        """The latest live allowlisted class stored under ``name``, with its stamp."""
        pair = self._latest.get(name)
        if pair is None:
            return None
        cls = pair[1]()
        if cls is not None:
            return pair[0], cls
        best: tuple[int, weakref.ref[type]] | None = None  # it died: an older one may live
        for ref, stamp in list(self._trusted.items()):
            alive = ref()
            if alive is not None and default_name(alive) == name:
                if best is None or stamp > best[0]:
                    best = (stamp, ref)
        if best is None:
            self._latest.pop(name, None)
            return None
        self._latest[name] = best
        return best[0], best[1]()  # type: ignore[return-value]

    def winner(self, name: str) -> type | None:
        """The class ``name`` revives as: the latest registered or allowlisted under it."""
        entry = self.entry_named(name)
        return entry.cls if entry is not None else None

    def trusts_all(self, types: Iterable[type], refresh: bool = True, weak: bool = False) -> bool:
        """Whether every class of ``types`` is trusted (held strongly unless
        ``weak``) and (``refresh``), per stored name, the last one of ``types``
        under it is the class that name revives as."""
        last: dict[str, type] = {}
        for tp in types:
            cls = _stored_class(tp)
            if cls is None:
                continue
            if not weak and cls not in self._pinned:
                return False
            entry = self.registry.by_type(cls)
            if entry is not None and entry.name != default_name(cls):
                continue  # stored under the name it was registered with
            if entry is None and not self._allowlisted(cls):
                return False
            last[default_name(cls)] = cls
        return not refresh or all(self.winner(name) is cls for name, cls in last.items())

    def forget_decoders(self) -> None:
        """Drop the per-name decode cache (a registration changed a name's class)."""
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
        entry = self.registry.by_type(cls) or self._allowed_entry(cls)
        if entry is not None and issubclass(cls, BaseException):
            entry = TypeEntry(EXCEPTION, cls, named_state(entry.name), entry.decode)
        elif entry is None:
            entry = self._fallback(cls)
        self.cache[cls] = entry
        return entry

    def _fallback(self, cls: type) -> TypeEntry:
        if issubclass(cls, BaseException):
            return TypeEntry(EXCEPTION, cls, exception_state, revive_unknown)
        pair = generic_origin(cls)
        if pair is not None:
            origin_entry = self.registry.by_type(pair[0]) or self._allowed_entry(pair[0])
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

    def name_of(self, cls: type) -> str | None:
        entry = self.registry.by_type(cls)
        if entry is not None:
            return entry.name
        return default_name(cls) if self._allowlisted(cls) else None

    # -- loads ----------------------------------------------------------------

    def entry_named(self, name: str) -> TypeEntry | None:
        """The entry ``name`` revives through: the class most recently registered or
        allowlisted under it (a notebook cell re-run redefines classes). A name
        registered for a class of another module or qualified name (``name=``)
        stays the registry's: only a redefinition of that class takes it over."""
        registered = self.registry.by_name(name)
        own = self._latest_allowed(name) if self._latest else None
        if own is None:
            return registered
        if registered is not None and (
            registered.cls is own[1]
            or default_name(registered.cls) != name
            or self.registry.stamp(name) > own[0]
        ):
            return registered
        return self._entry_of(own[1])

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
        for cls in reversed(self.allowed):
            if cls.__module__ == module and cls.__name__ == name:
                return self._entry_of(cls)
        for candidate in self.registry.entries():
            cls = candidate.cls
            if cls.__module__ == module and cls.__name__ == name:
                return candidate
        return None

    def same_class_name(self, name: str) -> tuple[str, ...]:
        """Stored names of trusted classes whose class name is the last part of
        ``name`` (``shop.Order`` for a stored ``app.Order``): likely the same class,
        moved. Only on the error path; nothing is imported."""
        short = name.rpartition(".")[2]
        found = {default_name(cls) for cls in self.allowed if cls.__qualname__ == short}
        found.update(e.name for e in self.registry.entries() if e.cls.__qualname__ == short)
        found.discard(name)
        return tuple(sorted(found))

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
            return revive_exception(state, self.entry_named, self.registry.entries)
        if name == GENERIC:
            return self._decode_generic(state)
        entry = self.entry_named(name)
        if entry is None:
            if self.on_unknown == "raw":
                return UnknownObject(name, state)
            raise UnknownType(name, self.same_class_name(name))
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


def _stored_class(tp: Any) -> type | None:
    """The class trusting ``tp`` means (a generic model's origin); None for natives."""
    if not isinstance(tp, type):
        raise TypeError(f"allowed= takes classes, got {tp!r} (names are never resolved)")
    pair = generic_origin(tp)
    if pair is not None:  # Page[Item]: stored as origin + type args
        tp = pair[0]
    return None if tp in _NATIVE else tp
