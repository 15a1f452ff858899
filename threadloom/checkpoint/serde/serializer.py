"""``MsgpackSerializer``: the default serializer, strict and safe by default.

Tags: ``"null"`` (None), ``"bytes"`` (raw bytes), ``"msgpack"``, ``"msgpack+zstd"``
(packed size over the threshold), each with a cipher suffix when encrypting.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from threadloom.checkpoint.serde import codec, inflation
from threadloom.checkpoint.serde.base import CipherProtocol
from threadloom.checkpoint.serde.msgpack import Packer, Unpacker
from threadloom.checkpoint.serde.registry import REGISTRY, Registry
from threadloom.checkpoint.serde.resolver import Resolver
from threadloom.errors import SerializationError

__all__ = ["MsgpackSerializer", "default_serializer", "DEFAULT_COMPRESS_THRESHOLD"]

DEFAULT_COMPRESS_THRESHOLD = 1024

_BASE_TAGS = ("msgpack", "null", "bytes")


class MsgpackSerializer:
    """Values <-> ``(tag, bytes)`` with msgpack, no pickle, no import-by-name.

    Only registered classes (see :func:`register`) and the classes in ``allowed``
    are stored and revived; anything else raises :class:`SerializationError`
    naming where it sits (``messages[3].metadata.when``) and its type.

    Args:
        allowed: extra classes this serializer trusts (state-schema types).
        on_unknown: ``"error"`` (default) or ``"raw"``: return an untrusted
            object's stored fields as an :class:`UnknownObject` dict (for
            inspection tools, never for running graphs).
        compress_threshold: zstd-compress packed values larger than this many
            bytes; ``None`` disables compression.
        compression_level: zstd level.
        cipher: encrypt every value (see :class:`CipherProtocol`); rows without
            the cipher's tag suffix are then refused...
        accept_plaintext: ...unless this is True (reading rows written before
            encryption was turned on).
        max_decompressed: refuse to inflate a stored value beyond this size.
        max_decoded_items: refuse a compressed value that decodes to more
            msgpack items than this (a decompression bomb: see
            :mod:`~threadloom.checkpoint.serde.inflation`); a value packing to
            more bytes than this is written uncompressed.
    """

    def __init__(
        self,
        *,
        allowed: Iterable[type] = (),
        on_unknown: str = "error",
        compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
        compression_level: int = 1,
        cipher: CipherProtocol | None = None,
        accept_plaintext: bool = False,
        max_decompressed: int = codec.DEFAULT_MAX_DECOMPRESSED,
        max_decoded_items: int = inflation.DEFAULT_MAX_DECODED_ITEMS,
        registry: Registry = REGISTRY,
    ) -> None:
        self._resolver = Resolver(allowed, registry=registry, on_unknown=on_unknown)
        self._packer = Packer(self._resolver)
        self._unpacker = Unpacker(self._resolver)
        self._envelope = (
            codec.Envelope(cipher, accept_plaintext=accept_plaintext) if cipher else None
        )
        self._options: dict[str, Any] = {
            "on_unknown": on_unknown,
            "compress_threshold": compress_threshold,
            "compression_level": compression_level,
            "cipher": cipher,
            "accept_plaintext": accept_plaintext,
            "max_decompressed": max_decompressed,
            "max_decoded_items": max_decoded_items,
            "registry": registry,
        }
        self.compress_threshold = compress_threshold
        self.compression_level = compression_level
        self.max_decompressed = max_decompressed
        self.max_decoded_items = max_decoded_items

    @property
    def allowed(self) -> tuple[type, ...]:
        """The classes trusted on top of the registry."""
        return self._resolver.allowed

    @property
    def cipher(self) -> CipherProtocol | None:
        return self._options["cipher"]

    def with_allowlist(
        self, types: Iterable[type], *, refresh: bool = True, weak: bool = False
    ) -> MsgpackSerializer:
        """A copy that also trusts ``types`` (the graph layer calls it at compile time).

        When a class of ``types`` has the name of another trusted class (the same
        class defined again, e.g. a notebook cell run twice), the copy revives
        that name as the class of ``types``: the most recently registered or
        allowlisted one wins. ``refresh=False`` adds only classes not trusted
        yet; the others keep their place. ``weak=True`` (compile time) holds the
        classes only while something else references them (see Resolver);
        by default the copy holds them.
        """
        wanted = list(dict.fromkeys(types))
        if self._resolver.trusts_all(wanted, refresh, weak):
            return self
        clone = copy.copy(self)
        clone._resolver = self._resolver.widened(wanted, refresh, weak)
        clone._packer = Packer(clone._resolver)
        clone._unpacker = Unpacker(clone._resolver)
        return clone

    with_msgpack_allowlist = with_allowlist  # LangGraph's spelling

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialize ``obj``.

        Raises:
            SerializationError: a value inside ``obj`` is not supported or not
                trusted; ``path`` and ``type_name`` say which.
        """
        if obj is None:
            tag, payload = "null", b""
        elif type(obj) is bytes or type(obj) is bytearray:
            tag, payload = "bytes", bytes(obj)
        else:
            tag, payload = "msgpack", self._packer.pack(obj)
            threshold = self.compress_threshold
            # a value larger than max_decoded_items bytes (so possibly holding more
            # items than a reader accepts compressed) is stored as it is, without
            # counting its items (serde/inflation.py): its size bounds its decoding
            if (
                threshold is not None
                and len(payload) > threshold
                and inflation.compressible(payload, self.max_decoded_items)
            ):
                packed = codec.compress(payload, self.compression_level)
                if len(packed) < len(payload):
                    tag, payload = "msgpack+zstd", packed
        if self._envelope is not None:
            return self._envelope.seal(tag, payload)
        return tag, payload

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Revive a value written by :meth:`dumps_typed`.

        Raises:
            SerializationError: an untrusted type (with its path), an unknown
                tag, or a plaintext row where encryption is required.
            CorruptBlobError: bytes that do not decode.
        """
        tag, payload = data
        if self._envelope is not None:
            tag, payload = self._envelope.open(tag, payload)
        elif tag == "msgpack":  # the common case: nothing sealed, nothing to check
            return self._unpacker.unpack(payload)
        else:
            codec.reject_encrypted(tag)
        if tag == "msgpack":
            return self._unpacker.unpack(payload)
        if tag == "msgpack+zstd":
            inflated = codec.decompress(payload, self.max_decompressed)
            inflation.check_items(inflated, len(payload), self.max_decoded_items)
            return self._unpacker.unpack(inflated)
        if tag == "null":
            return None
        if tag == "bytes":
            return bytes(payload)
        if tag == "bytearray":  # LangGraph's tag for a top-level bytearray value
            return bytearray(payload)
        raise SerializationError(
            f"unknown serialization tag {tag!r} (expected one of {', '.join(_BASE_TAGS)}"
            " with optional +zstd); 'pickle' and 'json' rows are never read",
            type_name=tag,
        )

    def __repr__(self) -> str:
        extras = f", allowed={len(self.allowed)} types" if self.allowed else ""
        return f"{type(self).__name__}(on_unknown={self._options['on_unknown']!r}{extras})"


_default: MsgpackSerializer | None = None


def default_serializer() -> MsgpackSerializer:
    """The shared default serializer (strict, registry only, zstd over 1 KiB)."""
    global _default
    if _default is None:
        _default = MsgpackSerializer()
    return _default
