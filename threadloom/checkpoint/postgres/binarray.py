"""Big ``bytea[]`` parameters encoded in Postgres's binary array format.

A put sends its blobs as arrays (``unnest(%s::bytea[], ...)``). As a text
literal every element travels as hex, twice its size, that the client builds
and the server parses again. A bytea array of at least :data:`BINARY_MIN`
bytes becomes instead the bytes of ``array_recv``'s format in one join
(header, then each element's length and bytes), sent as a binary parameter
of type ``bytea[]``, so the cast in the statement is a no-op.

An encoded array is a :class:`ByteaArray`, a ``bytes`` whose psycopg dumper
(binary, with the array type's OID) hands the bytes over unchanged. The dumper
is registered on a connection's adapters the first time the connection sends
a batch (:func:`use_binary_arrays`): registering it on ``psycopg.adapters``
would not reach connections opened before.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

__all__ = [
    "BINARY_MIN",
    "ENCODERS",
    "ByteaArray",
    "binds_on_client",
    "encode_bytea",
    "use_binary_arrays",
]

_HEAD = struct.Struct("!iiIii")  # ndim=1, has-null flag, element OID, length, lower bound
_NULL = b"\xff\xff\xff\xff"


class ByteaArray(bytes):
    """A ``bytea[]`` already encoded in the binary format."""

    __slots__ = ()


class _ByteaArrayDumper(Dumper):
    """Hands the encoded array over as a binary ``bytea[]`` (OID 1001)."""

    format = Format.BINARY
    oid = 1001

    def dump(self, obj: Any) -> Any:
        return obj


BINARY_MIN = 2048
"""Bytes of elements below which a bytea array still goes as a literal: for
small arrays psycopg's C text dumper beats the Python dumper of the encoded
form (A/B on a bench put: client +34 us, server -32 us per put with ~150-byte
blobs; server 1,429 -> 931 us per put with 4 KB ones)."""


def encode_bytea(values: list[Any]) -> ByteaArray | None:
    """``values`` (bytes or None) as a binary ``bytea[]``, or None when an
    element is of another type or the array is small (:data:`BINARY_MIN`)."""
    size = 0
    for value in values:
        if type(value) is bytes:
            size += len(value)
        elif value is not None:
            return None
    if size < BINARY_MIN:
        return None
    parts = [_HEAD.pack(1, None in values, 17, len(values), 1)]
    for value in values:
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(len(value).to_bytes(4, "big"))
            parts.append(value)
    return ByteaArray(b"".join(parts))


ENCODERS: dict[str, Callable[[list[Any]], Any]] = {"bytea": encode_bytea}
"""Encoder per element type name of the cast (None: send a literal)."""

_ready: weakref.WeakSet[Any] = weakref.WeakSet()


def binds_on_client(conn: Any) -> bool:
    """Whether ``conn``'s cursors merge parameters into the query text
    (``cursor_factory=psycopg.ClientCursor``, common behind PgBouncer): such a
    connection needs text dumpers, and never prepares statements."""
    factory = getattr(conn, "cursor_factory", None)
    return isinstance(factory, type) and issubclass(
        factory, (psycopg.ClientCursor, psycopg.AsyncClientCursor)
    )


def use_binary_arrays(conn: Any) -> bool:
    """Make ``conn``'s adapters dump the encoded arrays (once per adapters map);
    False when they cannot (the caller then sends literals): no adapters, or
    client-side binding, which would dump the binary array as a ``bytea``
    literal that Postgres refuses to cast to ``bytea[]``."""
    adapters = getattr(conn, "adapters", None)
    if adapters is None or binds_on_client(conn):
        return False
    if adapters in _ready:
        return True
    try:
        adapters.register_dumper(ByteaArray, _ByteaArrayDumper)
        _ready.add(adapters)
    except Exception:
        return False
    return True
