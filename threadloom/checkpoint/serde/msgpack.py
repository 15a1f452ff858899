"""msgpack packing with extension types: the fast path of every dumps/loads.

Plain dicts, lists, str, int, float, bool, None and bytes are handled natively by
ormsgpack with no Python-level walk. Everything else reaches ``default`` and is
stored as one of three extensions:

- ``EXT_TUPLE``: a tuple (msgpack has only arrays), payload = packed items;
- ``EXT_OBJECT``: ``[name, state]`` for a registered type (see resolver.py); ``name``
  is a small integer for the well-known classes of aliases.py;
- ``EXT_KEYED``: a dict whose keys are not all plain strings, as ``[[k, v], ...]``
  (only the slow path in paths.py writes it).

Codes 0-7 are LangGraph's; they are read (never written) by lgcompat.py.

ormsgpack reports no path on failure and swallows our exceptions, so whenever
the fast path fails the value is walked again by paths.py, which either packs it
(non-str keys, surrogates) or raises an error naming the exact path.
"""

from __future__ import annotations

from typing import Any

import ormsgpack

from threadloom.checkpoint.serde.aliases import WIRE_NAMES
from threadloom.checkpoint.serde.lgcompat import LANGGRAPH_CODES, decode_langgraph
from threadloom.checkpoint.serde.resolver import Resolver

__all__ = ["EXT_TUPLE", "EXT_OBJECT", "EXT_KEYED", "Packer", "Unpacker", "UNPACK_OPTION"]

EXT_TUPLE = 32
EXT_OBJECT = 33
EXT_KEYED = 34

PACK_OPTION = (
    ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_UUID
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_BIG_INT
)
UNPACK_OPTION = ormsgpack.OPT_NON_STR_KEYS

_UNORDERED = frozenset({"set", "frozenset"})

_packb = ormsgpack.packb
_unpackb = ormsgpack.unpackb
_Ext = ormsgpack.Ext
_WIRE = WIRE_NAMES


class Packer:
    """Packs values for one resolver; ``canonical`` sorts keys and sets (for hashing)."""

    def __init__(self, resolver: Resolver, *, canonical: bool = False) -> None:
        self.resolver = resolver
        self._cache = resolver.cache
        self.canonical = canonical
        self.option = PACK_OPTION | (ormsgpack.OPT_SORT_KEYS if canonical else 0)
        # canonical packing sends every non-str-keyed dict to EXT_KEYED (sorted pairs)
        self.slow_option = self.option | (0 if canonical else ormsgpack.OPT_NON_STR_KEYS)

    def default(self, obj: Any) -> ormsgpack.Ext:
        # errors raised here are swallowed by ormsgpack; pack() then re-walks for the path
        cls = type(obj)
        if cls is tuple:
            return _Ext(EXT_TUPLE, _packb(list(obj), default=self.default, option=self.option))
        entry = self._cache.get(cls) or self.resolver.entry(cls)
        state = entry.encode(obj)
        name = entry.name
        if self.canonical and name in _UNORDERED:
            state = sorted(state, key=self.pack)
        wire = _WIRE.get(name, name)
        return _Ext(EXT_OBJECT, _packb([wire, state], default=self.default, option=self.option))

    def pack(self, obj: Any) -> bytes:
        """msgpack bytes for ``obj``.

        Raises:
            SerializationError: a value inside ``obj`` cannot be stored; names its path.
        """
        try:
            return _packb(obj, default=self.default, option=self.option)
        except (TypeError, ValueError, RecursionError):
            from threadloom.checkpoint.serde.paths import pack_slow

            return pack_slow(obj, self)


class Unpacker:
    """Revives values packed by :class:`Packer`, trusting only its resolver's types."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver

    def ext_hook(self, code: int, data: bytes) -> Any:
        if code == EXT_TUPLE:
            return tuple(_unpackb(data, ext_hook=self.ext_hook, option=UNPACK_OPTION))
        if code == EXT_OBJECT:
            name, state = _unpackb(data, ext_hook=self.ext_hook, option=UNPACK_OPTION)
            return self.resolver.decode(name, state)
        if code == EXT_KEYED:
            return dict(_unpackb(data, ext_hook=self.ext_hook, option=UNPACK_OPTION))
        if code in LANGGRAPH_CODES:
            payload = _unpackb(data, ext_hook=self.ext_hook, option=UNPACK_OPTION)
            return decode_langgraph(code, payload, self.resolver)
        raise ValueError(f"unknown msgpack extension code {code}")

    def unpack(self, data: bytes) -> Any:
        """The value in ``data``.

        Raises:
            SerializationError: a stored type is not trusted (names its path), or
                a stored value cannot be revived.
            CorruptBlobError: ``data`` is not valid threadloom msgpack.
        """
        try:
            return _unpackb(data, ext_hook=self.ext_hook, option=UNPACK_OPTION)
        except (TypeError, ValueError, RecursionError):
            from threadloom.checkpoint.serde.paths import unpack_slow

            return unpack_slow(data, self)
