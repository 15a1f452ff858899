"""AES-GCM cipher with key ids for rotation (needs the optional ``cryptography`` package).

Ciphertext layout: ``len(key_id) | key_id | nonce(12) | ciphertext+tag(16)``. New
values are sealed with the primary key; older keys stay listed to read old rows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["AesGcmCipher"]

_NONCE = 12


class AesGcmCipher:
    """Authenticated encryption for stored values; tag suffix ``+aesgcm``.

    Args:
        keys: one 16/24/32-byte key, or ``{key_id: key}`` to rotate keys.
        primary: the key id new values are sealed with (default: the last one).

    Raises:
        ImportError: ``cryptography`` is not installed.
        ValueError: a key has the wrong length or ``primary`` is unknown.
    """

    name = "aesgcm"

    def __init__(self, keys: bytes | Mapping[str, bytes], *, primary: str | None = None) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:
            raise ImportError(
                "AesGcmCipher needs the 'cryptography' package: pip install cryptography"
            ) from None
        key_map = {"0": keys} if isinstance(keys, (bytes, bytearray)) else dict(keys)
        if not key_map:
            raise ValueError("AesGcmCipher needs at least one key")
        for kid, key in key_map.items():
            if len(key) not in (16, 24, 32) or not 0 < len(kid.encode()) < 256:
                raise ValueError(f"key {kid!r}: AES keys are 16, 24 or 32 bytes")
        self._aead: dict[bytes, Any] = {k.encode(): AESGCM(bytes(v)) for k, v in key_map.items()}
        primary = primary if primary is not None else list(key_map)[-1]
        if primary not in key_map:
            raise ValueError(f"primary key id {primary!r} is not among the keys")
        self._primary = primary.encode()

    def encrypt(self, plaintext: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        kid = self._primary
        sealed = self._aead[kid].encrypt(nonce, plaintext, None)
        return bytes([len(kid)]) + kid + nonce + sealed

    def decrypt(self, ciphertext: bytes) -> bytes:
        n = ciphertext[0]
        kid = ciphertext[1 : 1 + n]
        aead = self._aead.get(kid)
        if aead is None:
            raise ValueError(
                f"value was sealed with unknown key id {kid.decode(errors='replace')!r}"
            )
        nonce = ciphertext[1 + n : 1 + n + _NONCE]
        return aead.decrypt(nonce, ciphertext[1 + n + _NONCE :], None)
