"""The serializer protocol: values <-> ``(type_tag, bytes)``.

The tag travels with the bytes in every backend, so a reader always knows how
to decode (``"msgpack"``, ``"msgpack+zstd"``, ``"null"``, ``"bytes"``, and an
encryption suffix such as ``"+aesgcm"``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = [
    "CipherProtocol",
    "SerializerCompat",
    "SerializerProtocol",
    "UntypedSerializerProtocol",
    "maybe_add_typed_methods",
]


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


@runtime_checkable
class UntypedSerializerProtocol(Protocol):
    """The serializer shape before typed tags (``dumps``/``loads``), which older
    LangGraph code still passes as ``serde=``."""

    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class SerializerCompat:
    """An untyped serializer seen through the typed protocol (its tag is the
    value's class name, as LangGraph's adapter writes it)."""

    def __init__(self, serde: UntypedSerializerProtocol) -> None:
        self.serde = serde

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return type(obj).__name__, self.serde.dumps(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.serde.loads(data[1])


def maybe_add_typed_methods(
    serde: SerializerProtocol | UntypedSerializerProtocol,
) -> SerializerProtocol:
    """``serde`` itself, or :class:`SerializerCompat` around an untyped one."""
    if isinstance(serde, SerializerProtocol):
        return serde
    return SerializerCompat(serde)  # type: ignore[arg-type]
