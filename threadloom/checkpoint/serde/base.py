"""The serializer protocol: values <-> ``(type_tag, bytes)``.

The tag travels with the bytes in every backend, so a reader always knows how
to decode (``"msgpack"``, ``"msgpack+zstd"``, ``"null"``, ``"bytes"``, and an
encryption suffix such as ``"+aesgcm"``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["SerializerProtocol", "CipherProtocol"]


@runtime_checkable
class SerializerProtocol(Protocol):
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


@runtime_checkable
class CipherProtocol(Protocol):
    """Encrypts serialized payloads; ``name`` becomes the tag suffix."""

    name: str

    def encrypt(self, plaintext: bytes) -> bytes: ...

    def decrypt(self, ciphertext: bytes) -> bytes: ...
