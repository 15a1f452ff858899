"""The slow paths: walk a value in Python, tracking where we are.

Taken only when the fast path in msgpack.py fails. On dumps the walk either
succeeds (dicts with non-str keys and strings with lone surrogates, which
ormsgpack rejects natively, become extensions) or raises a
:class:`SerializationError` whose ``path`` reads like ``messages[3].metadata.when``.
On loads it revives extensions one by one so an untrusted type is reported
with its path too.
"""

from __future__ import annotations

from typing import Any

import ormsgpack

from threadloom.checkpoint.serde.aliases import WIRE_NAMES, name_of_alias
from threadloom.checkpoint.serde.lgcompat import LANGGRAPH_CODES, LANGGRAPH_DELTA, decode_langgraph
from threadloom.checkpoint.serde.msgpack import EXT_KEYED, EXT_OBJECT, EXT_TUPLE, UNPACK_OPTION
from threadloom.checkpoint.serde.resolver import UnknownType, Unsupported
from threadloom.errors import CorruptBlobError, SerializationError

__all__ = ["pack_slow", "unpack_slow", "child_path"]

_SCALARS = (float, bool, type(None), bytes, bytearray, memoryview)
_NATIVE_KEYS = (int, float, bool, type(None), bytes)
_INT_RANGE = range(-(2**63), 2**64)


def child_path(path: str, key: Any) -> str:
    """``path.key`` for identifier keys, ``path[key!r]`` otherwise, ``path[i]`` for indexes."""
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _where(path: str) -> str:
    return path or "<root>"


def _type_name(obj: Any) -> str:
    cls = type(obj)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


# -- dumps -------------------------------------------------------------------------


def pack_slow(obj: Any, packer: Any) -> bytes:
    """Pack ``obj`` by walking it; raises SerializationError naming the failing path."""
    try:
        tree = _prepare(obj, "", packer)
        return ormsgpack.packb(tree, option=packer.slow_option)
    except SerializationError:
        raise
    except RecursionError:
        raise SerializationError("value is nested too deeply to serialize") from None
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"cannot serialize value: {exc}") from exc


def _ext_object(name: str, state: Any, path: str, packer: Any) -> ormsgpack.Ext:
    wire = WIRE_NAMES.get(name, name)
    body = ormsgpack.packb([wire, _prepare(state, path, packer)], option=packer.slow_option)
    return ormsgpack.Ext(EXT_OBJECT, body)


def _prepare(obj: Any, path: str, packer: Any) -> Any:
    cls = type(obj)
    if cls is str:
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return _ext_object("surrogate_str", obj.encode("utf-8", "surrogatepass"), path, packer)
    if cls is int:
        return obj if obj in _INT_RANGE else _ext_object("bigint", format(obj, "x"), path, packer)
    if cls in _SCALARS:
        return obj
    if cls is list:
        return [_prepare(v, f"{path}[{i}]", packer) for i, v in enumerate(obj)]
    if cls is dict:
        return _prepare_dict(obj, path, packer)
    if cls is tuple:
        items = [_prepare(v, f"{path}[{i}]", packer) for i, v in enumerate(obj)]
        return ormsgpack.Ext(EXT_TUPLE, ormsgpack.packb(items, option=packer.slow_option))
    try:
        name, state = packer.resolver.encode(obj)
    except Unsupported as exc:
        raise SerializationError(
            f"cannot serialize {_type_name(obj)} at {_where(path)}: {exc.reason}",
            path=path,
            type_name=_type_name(obj),
        ) from exc.__cause__
    if packer.canonical and name in ("set", "frozenset"):
        state = sorted(state, key=packer.pack)
    return _ext_object(name, state, path, packer)


def _plain_key(key: Any) -> bool:
    cls = type(key)
    if cls is str:
        try:
            key.encode("utf-8")
            return True
        except UnicodeEncodeError:
            return False
    return False


def _native_key(key: Any) -> bool:
    cls = type(key)
    return cls in _NATIVE_KEYS and (cls is not int or key in _INT_RANGE)


def _prepare_dict(obj: dict, path: str, packer: Any) -> Any:
    keys_ok = all(_plain_key(k) for k in obj)
    if not keys_ok and not packer.canonical:
        keys_ok = all(_plain_key(k) or _native_key(k) for k in obj)
    if keys_ok:
        return {k: _prepare(v, child_path(path, k), packer) for k, v in obj.items()}
    pairs = [
        [_prepare(k, f"{path}<key {k!r}>", packer), _prepare(v, child_path(path, k), packer)]
        for k, v in obj.items()
    ]
    if packer.canonical:
        pairs.sort(key=lambda kv: ormsgpack.packb(kv[0], option=packer.slow_option))
    return ormsgpack.Ext(EXT_KEYED, ormsgpack.packb(pairs, option=packer.slow_option))


# -- loads -------------------------------------------------------------------------


class _Deferred:
    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def _unpack_raw(data: bytes) -> Any:
    try:
        return ormsgpack.unpackb(data, ext_hook=_Deferred, option=UNPACK_OPTION)
    except (TypeError, ValueError) as exc:
        raise CorruptBlobError(f"stored bytes are not valid msgpack: {exc}") from None


def unpack_slow(data: bytes, unpacker: Any) -> Any:
    """Revive ``data`` extension by extension; errors name the path of the bad value."""
    try:
        return _revive(_unpack_raw(data), "", unpacker.resolver)
    except SerializationError:
        raise
    except RecursionError:
        raise CorruptBlobError("stored value is nested too deeply") from None
    except Exception as exc:  # malformed but parseable data: never leak a raw error
        raise CorruptBlobError(f"stored value is malformed: {type(exc).__name__}: {exc}") from None


def _revive(value: Any, path: str, resolver: Any) -> Any:
    cls = type(value)
    if cls is list:
        return [_revive(v, f"{path}[{i}]", resolver) for i, v in enumerate(value)]
    if cls is dict:
        return {
            _revive(k, f"{path}<key>", resolver): _revive(v, child_path(path, k), resolver)
            for k, v in value.items()
        }
    if cls is _Deferred:
        return _revive_ext(value, path, resolver)
    return value


def _revive_ext(ext: _Deferred, path: str, resolver: Any) -> Any:
    payload = _unpack_raw(ext.data)
    if ext.code == EXT_TUPLE and type(payload) is list:
        return tuple(_revive(payload, path, resolver))
    if ext.code == EXT_KEYED and type(payload) is list:
        return {
            _revive(k, f"{path}<key>", resolver): _revive(v, child_path(path, k), resolver)
            for k, v in payload
        }
    if ext.code == LANGGRAPH_DELTA:  # a DeltaChannel snapshot: the value itself
        return _revive(payload, path, resolver)
    if ext.code in LANGGRAPH_CODES and type(payload) is list:
        if len(payload) >= 3:  # [module, name, args, ...]: args sit at this path
            payload[2] = _revive(payload[2], path, resolver)
        return _revive_langgraph(ext.code, payload, path, resolver)
    if ext.code != EXT_OBJECT or type(payload) is not list or len(payload) != 2:
        raise CorruptBlobError(f"malformed extension (code {ext.code}) at {_where(path)}")
    wire, state = payload
    name = (name_of_alias(wire) or f"alias #{wire}") if type(wire) is int else wire
    if not isinstance(name, str):
        raise CorruptBlobError(f"malformed type name at {_where(path)}")
    state = _revive(state, path, resolver)
    return _decode_named(name, path, resolver.decode, wire, state)


def _revive_langgraph(code: int, payload: list, path: str, resolver: Any) -> Any:
    name = ".".join(str(p) for p in payload[:2]) if len(payload) >= 2 else f"<ext {code}>"
    return _decode_named(name, path, decode_langgraph, code, payload, resolver)


def _decode_named(name: str, path: str, decode: Any, *args: Any) -> Any:
    """Run ``decode(*args)``, turning its failures into errors naming ``path``."""
    try:
        return decode(*args)
    except UnknownType as exc:
        moved = getattr(exc, "moved_to", ())
        seen = f" (a trusted class of that name is stored as {', '.join(map(repr, moved))})"
        raise SerializationError(
            f"refusing to revive {exc.name!r} at {_where(path)}: not registered or allowlisted"
            f"{seen if moved else ''}. A class renamed or moved since this was stored reads"
            f" again once registered under the stored name: register(NewClass, name={exc.name!r});"
            " otherwise trust the class (register(cls), MsgpackSerializer(allowed=[...])),"
            " or read its fields as a dict with on_unknown='raw'",
            path=path,
            type_name=exc.name,
        ) from None
    except SerializationError as exc:
        raise SerializationError(
            f"cannot revive {name!r} at {_where(path)}: {exc}", path=path, type_name=name
        ) from None
    except Exception as exc:
        raise SerializationError(
            f"cannot revive {name!r} at {_where(path)}: {type(exc).__name__}: {exc}",
            path=path,
            type_name=name,
        ) from exc
