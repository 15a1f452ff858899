"""Stable content keys: the same value gives the same key in every process.

Used by ``CachePolicy``'s default key function. Keys are one-way, so any
dataclass, pydantic model, Enum or NamedTuple may be hashed even if it is not
registered; dict keys and sets are sorted so order never changes the key.
"""

from __future__ import annotations

from typing import Any

from xxhash import xxh3_128_hexdigest

from threadloom.checkpoint.serde.msgpack import Packer
from threadloom.checkpoint.serde.resolver import Resolver

__all__ = ["stable_key"]

_packer: Packer | None = None


def stable_key(obj: Any) -> str:
    """xxh3-128 hex digest of ``obj``'s canonical serialized form.

    Raises:
        SerializationError: ``obj`` holds a value that cannot be serialized.
    """
    global _packer
    if _packer is None:
        _packer = Packer(Resolver(permissive=True), canonical=True)
    return xxh3_128_hexdigest(_packer.pack(obj))
