"""The type registry: stable name <-> class, the only way a stored object is revived.

Loading never imports a module or looks a class up by a name found in the data:
a stored name is only ever a key into this registry (or into a serializer's own
allowlist). Registering a class is an explicit act of trust by the program.

Optional integrations (numpy, langchain-core) register themselves the first time
one of their classes, or one of their stored names, is seen, so importing
threadloom never imports them.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["TypeEntry", "Registry", "REGISTRY", "register", "entry_for", "next_stamp"]

T = TypeVar("T", bound=type)

_STAMPS = itertools.count(1)


def next_stamp() -> int:
    """A number larger than every one handed out before: when a class was last trusted.

    Registering and allowlisting draw from the same counter, so under one stored
    name the class most recently registered *or* allowlisted wins.
    """
    return next(_STAMPS)


@dataclass(frozen=True, slots=True)
class TypeEntry:
    """How one class is stored: ``encode(obj) -> state`` and ``decode(state) -> obj``.

    ``state`` is any serializable value (it may hold further registered objects).
    """

    name: str
    cls: type
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


def default_name(cls: type) -> str:
    """``module.QualName``: the name a class is stored under unless told otherwise."""
    return f"{cls.__module__}.{cls.__qualname__}"


class Registry:
    """Two maps kept in step: class -> entry and name -> entry."""

    def __init__(self) -> None:
        self._by_type: dict[type, TypeEntry] = {}
        self._by_name: dict[str, TypeEntry] = {}
        self._stamps: dict[str, int] = {}  # name -> when its class was last registered
        self._lazy: dict[str, Callable[[Registry], None]] = {}
        self._lock = threading.Lock()
        self._lazy_lock = threading.RLock()
        self._watchers: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, entry: TypeEntry) -> TypeEntry:
        """Register ``entry``; re-registering the same class under the same name keeps it.

        A *redefinition* (another class object with the same module and qualified
        name, e.g. a notebook cell run again) replaces the old one: stored values
        then revive as the class the program uses now. Any other class under a
        taken name is refused. Every add makes its class the latest trusted under
        its name, also over a class a serializer allowlisted earlier.
        """
        with self._lock:
            known = self._by_name.get(entry.name)
            if known is not None and known.cls is not entry.cls:
                if not _redefines(known.cls, entry.cls):
                    raise ValueError(
                        f"serializer name {entry.name!r} is already taken by "
                        f"{default_name(known.cls)}"
                    )
                self._by_type[entry.cls] = entry
                self._by_name[entry.name] = entry
            else:
                self._by_type.setdefault(entry.cls, entry)
                self._by_name.setdefault(entry.name, entry)
            self._stamps[entry.name] = next_stamp()
            for watcher in list(self._watchers):
                watcher.forget_decoders()  # they may hold another class's decode
            return self._by_type[entry.cls]

    def stamp(self, name: str) -> int:
        """When the class registered under ``name`` was last registered (0: never)."""
        return self._stamps.get(name, 0)

    def watch(self, watcher: Any) -> None:
        """Call ``watcher.forget_decoders()`` whenever a class is redefined (held weakly)."""
        with self._lock:
            self._watchers.add(watcher)

    def add_lazy(self, prefix: str, loader: Callable[[Registry], None]) -> None:
        """Run ``loader`` the first time a class or name under ``prefix`` is looked up."""
        self._lazy[prefix] = loader

    def _load_lazy(self, dotted: str) -> bool:
        prefix = dotted.split(".", 1)[0]
        if prefix not in self._lazy:
            return False
        with self._lazy_lock:  # other threads wait until the codecs are in
            loader = self._lazy.get(prefix)
            if loader is not None:
                loader(self)
                self._lazy.pop(prefix, None)
        return True

    def by_type(self, cls: type) -> TypeEntry | None:
        entry = self._by_type.get(cls)
        if entry is None and self._lazy and self._load_lazy(cls.__module__):
            entry = self._by_type.get(cls)
        return entry

    def by_name(self, name: str) -> TypeEntry | None:
        entry = self._by_name.get(name)
        if entry is None and self._lazy and self._load_lazy(name):
            entry = self._by_name.get(name)
        return entry

    def entries(self) -> list[TypeEntry]:
        """A snapshot of every registered entry."""
        return list(self._by_name.values())

    def __contains__(self, cls: object) -> bool:
        return isinstance(cls, type) and self.by_type(cls) is not None


def _redefines(old: type, new: type) -> bool:
    return default_name(old) == default_name(new)


REGISTRY = Registry()
"""The process-wide registry every serializer consults (before its own allowlist)."""


def entry_for(
    cls: type,
    name: str | None = None,
    encode: Callable[[Any], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
) -> TypeEntry:
    """Build the entry for ``cls``: explicit codec, or one derived from its kind.

    Derived kinds: Enum, pydantic v2 model, dataclass, NamedTuple, exception.

    Raises:
        TypeError: ``cls`` is none of those and no ``encode``/``decode`` were given.
    """
    from threadloom.checkpoint.serde import structs

    name = name or default_name(cls)
    if encode is not None or decode is not None:
        if encode is None or decode is None:
            raise TypeError(f"register({cls.__qualname__}): pass both encode= and decode=")
        return TypeEntry(name, cls, encode, decode)
    codec = structs.codec_for(cls)
    if codec is None:
        raise TypeError(
            f"cannot derive a serializer for {default_name(cls)}: it is not an Enum, dataclass, "
            "NamedTuple, pydantic model or exception; pass encode= and decode="
        )
    return TypeEntry(name, cls, codec[0], codec[1])


def register(
    cls: T | None = None,
    *,
    name: str | None = None,
    encode: Callable[[Any], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
) -> Any:
    """Trust ``cls``: every serializer in the process may store and revive it.

    Usable as ``register(MyModel)`` or as a decorator (``@register`` or
    ``@register(name="billing.Invoice")``). Give ``name`` to keep stored data
    readable after moving or renaming the class.

    Raises:
        TypeError: no codec can be derived for ``cls`` and none was given.
        ValueError: ``name`` already belongs to another class.
    """

    def apply(klass: T) -> T:
        REGISTRY.add(entry_for(klass, name, encode, decode))
        return klass

    return apply if cls is None else apply(cls)


def _register_builtins() -> None:
    from threadloom.checkpoint.serde.stdlib import register_builtins

    register_builtins(REGISTRY)


_register_builtins()
