"""Byte-level codecs over a serialized payload: zstd compression and encryption.

Tags compose left to right: ``msgpack`` -> ``msgpack+zstd`` -> ``msgpack+zstd+aesgcm``.
The encryption suffix is always last. A serializer with a cipher refuses rows
without its suffix (forged plaintext) unless told to accept legacy plaintext,
and the inner tag is sealed inside the ciphertext so it cannot be swapped.
"""

from __future__ import annotations

import threading
from typing import Any

import zstandard

from threadloom.checkpoint.serde.base import CipherProtocol
from threadloom.checkpoint.serde.cipher import UnknownKeyError
from threadloom.errors import CorruptBlobError, SerializationError

__all__ = ["ZSTD", "compress", "decompress", "Envelope", "DEFAULT_MAX_DECOMPRESSED", "adapt_cipher"]

ZSTD = "zstd"
DEFAULT_MAX_DECOMPRESSED = 1 << 30
"""Refuse to inflate a stored value beyond 1 GiB (corrupt or hostile frame)."""

_local = threading.local()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    cache = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    comp = cache.get(level)
    if comp is None:
        comp = cache[level] = zstandard.ZstdCompressor(level=level)
    return comp


def compress(payload: bytes, level: int = 1) -> bytes:
    return _compressor(level).compress(payload)


def decompress(payload: bytes, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Inflate a zstd frame, refusing frames that claim (or reach) more than ``max_size``."""
    dec = getattr(_local, "decompressor", None)
    if dec is None:
        dec = _local.decompressor = zstandard.ZstdDecompressor()
    try:
        size = zstandard.frame_content_size(payload)
        if size > max_size:
            raise CorruptBlobError(f"compressed value claims {size} bytes (limit {max_size})")
        return dec.decompress(payload, max_output_size=max_size)
    except zstandard.ZstdError as exc:
        raise CorruptBlobError(f"stored value is not a valid zstd frame: {exc}") from None


class _LangGraphCipher:
    """Adapts LangGraph's cipher shape (``encrypt -> (name, ct)``, ``decrypt(name, ct)``)."""

    reads_langgraph_rows = True  # whoever has a LangGraph cipher has rows it sealed

    def __init__(self, cipher: Any) -> None:
        self._cipher = cipher
        self.name = cipher.encrypt(b"")[0]  # LangGraph ciphers only report their name here

    def encrypt(self, plaintext: bytes) -> bytes:
        return self._cipher.encrypt(plaintext)[1]

    def decrypt(self, ciphertext: bytes) -> bytes:
        return self._cipher.decrypt(self.name, ciphertext)


def adapt_cipher(cipher: Any) -> CipherProtocol:
    """``cipher`` itself, or an adapter when it has LangGraph's cipher shape (no ``name``)."""
    if isinstance(getattr(cipher, "name", None), str):
        return cipher
    return _LangGraphCipher(cipher)


class Envelope:
    """Seals payloads with ``cipher`` and opens them, enforcing the cipher suffix."""

    def __init__(self, cipher: CipherProtocol, *, accept_plaintext: bool = False) -> None:
        cipher = adapt_cipher(cipher)
        if not isinstance(getattr(cipher, "name", None), str) or not cipher.name.isalnum():
            raise ValueError("cipher.name must be a short alphanumeric string (the tag suffix)")
        self.cipher = cipher
        self.suffix = "+" + cipher.name
        # a cipher that also opens LangGraph's rows, sealed under another name
        legacy = getattr(cipher, "langgraph_name", None)
        self.langgraph_suffix = "+" + legacy if legacy else None
        self.accept_plaintext = accept_plaintext

    def seal(self, tag: str, payload: bytes) -> tuple[str, bytes]:
        inner = tag.encode()
        return tag + self.suffix, self.cipher.encrypt(bytes([len(inner)]) + inner + payload)

    def open(self, tag: str, payload: bytes) -> tuple[str, bytes]:
        """``(inner_tag, plaintext)``; plaintext rows only when ``accept_plaintext``.

        Raises:
            SerializationError: plaintext refused, or sealed with another cipher.
            CorruptBlobError: decryption failed (wrong key, tampered bytes or tag).
        """
        lg = self.langgraph_suffix
        if lg is not None and tag.endswith(lg):
            return self._open_langgraph(tag[: -len(lg)], tag, payload)
        if not tag.endswith(self.suffix):
            last = tag.rsplit("+", 1)[-1] if "+" in tag else ""
            if last and last != ZSTD:
                raise SerializationError(
                    f"value is encrypted with {last!r}, this serializer uses {self.cipher.name!r}",
                    type_name=tag,
                )
            if self.accept_plaintext:
                return tag, payload
            raise SerializationError(
                f"refusing unencrypted value (tag {tag!r}): this serializer requires "
                f"{self.cipher.name!r}; pass accept_plaintext=True to read legacy rows",
                type_name=tag,
            )
        inner_tag = tag[: -len(self.suffix)]
        try:
            plain = self.cipher.decrypt(payload)
        except Exception as exc:
            raise CorruptBlobError(f"cannot decrypt value (tag {tag!r}): {_why(exc)}") from None
        n = plain[0] if plain else -1
        if n < 0 or plain[1 : 1 + n] != inner_tag.encode():
            if getattr(self.cipher, "reads_langgraph_rows", False):
                return inner_tag, plain  # LangGraph seals the payload alone, without its tag
            raise CorruptBlobError(f"encrypted value does not match its tag {tag!r}")
        return inner_tag, plain[1 + n :]

    def _open_langgraph(self, inner_tag: str, tag: str, payload: bytes) -> tuple[str, bytes]:
        """A row LangGraph sealed: the payload alone, its tag not bound inside."""
        try:
            return inner_tag, self.cipher.decrypt(payload)
        except Exception as exc:
            raise CorruptBlobError(f"cannot decrypt value (tag {tag!r}): {_why(exc)}") from None


def reject_encrypted(tag: str) -> None:
    """For serializers without a cipher: a sealed row must not be parsed as plaintext."""
    last = tag.rsplit("+", 1)[-1] if "+" in tag else ""
    if last and last != ZSTD:
        raise SerializationError(
            f"value is encrypted ({last!r}) but this serializer has no cipher", type_name=tag
        )


def _why(exc: Exception) -> str:
    """What a failed decryption says: a key id the cipher does not hold is
    named (cipher.UnknownKeyError); anything else is a wrong key or tampering
    (the cipher's own text would only say the tag did not verify)."""
    if isinstance(exc, UnknownKeyError):
        return str(exc)
    return "wrong key or tampered data"
