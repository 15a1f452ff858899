"""AES-GCM cipher with key ids for rotation (needs the optional ``cryptography`` package).

Ciphertext layout: ``len(key_id) | key_id | nonce(12) | ciphertext+tag(16)``. New
values are sealed with the primary key; older keys stay listed to read old rows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


class UnknownKeyError(ValueError):
    """A value sealed with a key id the cipher does not hold (said as is, not
    as "wrong key or tampered data": the fix is to list the old key)."""


__all__ = ["AesEaxCipher", "AesGcmCipher"]

_NONCE = 12


class AesGcmCipher:
    """Authenticated encryption for stored values; tag suffix ``+aesgcm``.

    Args:
        keys: one 16/24/32-byte key (stored under key id ``"0"``: rotating away
            from it means listing it as ``{"0": old_key, "k2": new_key}``), or
            ``{key_id: key}`` to rotate keys.
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
            raise UnknownKeyError(self._unknown_key(kid.decode(errors="replace")))
        nonce = ciphertext[1 + n : 1 + n + _NONCE]
        return aead.decrypt(nonce, ciphertext[1 + n + _NONCE :], None)

    def _unknown_key(self, kid: str) -> str:
        """Say which key id the row needs and how to list it: a single key is id
        ``"0"``, which a user rotating away from ``AesGcmCipher(key)`` cannot guess."""
        held = sorted(k.decode(errors="replace") for k in self._aead)
        new = self._primary.decode(errors="replace")
        if new == kid:
            new = "new"
        how = (
            "rows written with AesGcmCipher(key) (a single key) carry key id '0': "
            if kid == "0"
            else "after a key rotation, keep the old key listed under its id: "
        )
        return (
            f"value was sealed with key id {kid!r}, which this cipher does not hold "
            f"(it holds {held}); {how}pass AesGcmCipher({{{kid!r}: old_key, {new!r}: "
            f"new_key}}, primary={new!r})"
        )


class AesEaxCipher:
    """LangGraph's ``from_pycryptodome_aes`` cipher (needs ``pycryptodome``):
    ciphertext ``nonce(16) | tag(16) | ciphertext``, AES-EAX unless ``mode`` says
    otherwise (the rest of ``options`` goes to ``AES.new``).

    threadloom binds the inner type tag into what it seals, as with AES-GCM, and
    names its rows ``+aeseax``; LangGraph's own rows (``+aes``, the payload
    alone) are read too, so a LangGraph thread encrypted this way opens with the
    same key. (Under LangGraph's ``+aes`` name, LangGraph would decrypt ours and
    misread the bound tag as data, silently; under ``+aeseax`` it refuses them.)

    Raises:
        ImportError: ``pycryptodome`` is not installed.
        ValueError: the key is not 16, 24 or 32 bytes.
    """

    name = "aeseax"
    langgraph_name = "aes"

    def __init__(self, key: bytes, **options: Any) -> None:
        try:
            from Crypto.Cipher import AES
        except ImportError:
            raise ImportError(
                "AesEaxCipher needs the 'pycryptodome' package: pip install pycryptodome"
            ) from None
        if len(key) not in (16, 24, 32):
            raise ValueError(f"AES keys are 16, 24 or 32 bytes, got {len(key)}")
        if options.get("mode") is None:
            options["mode"] = AES.MODE_EAX
        self._new = lambda **extra: AES.new(bytes(key), **options, **extra)

    def encrypt(self, plaintext: bytes) -> bytes:
        cipher = self._new()
        sealed, tag = cipher.encrypt_and_digest(plaintext)
        return cipher.nonce + tag + sealed

    def decrypt(self, ciphertext: bytes) -> bytes:
        cipher = self._new(nonce=ciphertext[:16])
        return cipher.decrypt_and_verify(ciphertext[32:], ciphertext[16:32])
