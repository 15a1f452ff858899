"""``EncryptedSerializer``: encrypt what another serializer produces.

Unlike LangGraph's (LG#8938), rows whose tag lacks the cipher suffix are
refused, not read as plaintext, unless ``accept_plaintext=True``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from threadloom.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from threadloom.checkpoint.serde.codec import Envelope

__all__ = ["EncryptedSerializer"]


def _is_cipher(obj: Any) -> bool:
    return hasattr(obj, "encrypt") and hasattr(obj, "decrypt")


class EncryptedSerializer:
    """Wraps ``inner`` (default: a new strict :class:`MsgpackSerializer`) with ``cipher``.

    Accepts ``EncryptedSerializer(inner, cipher)`` and LangGraph's argument order
    ``EncryptedSerializer(cipher, serde)``.
    """

    def __init__(
        self,
        inner: SerializerProtocol | CipherProtocol | None = None,
        cipher: CipherProtocol | SerializerProtocol | None = None,
        *,
        serde: SerializerProtocol | None = None,
        accept_plaintext: bool = False,
    ) -> None:
        if inner is not None and _is_cipher(inner) and not _is_cipher(cipher):
            inner, cipher = cipher, inner  # LangGraph order: (cipher, serde)
        inner = inner or serde
        if cipher is None:
            raise TypeError("EncryptedSerializer needs a cipher")
        if inner is None:
            from threadloom.checkpoint.serde.serializer import MsgpackSerializer

            inner = MsgpackSerializer()
        self.serde: SerializerProtocol = inner  # type: ignore[assignment]
        self._envelope = Envelope(cipher, accept_plaintext=accept_plaintext)  # type: ignore[arg-type]
        self.cipher: CipherProtocol = self._envelope.cipher
        self.accept_plaintext = accept_plaintext

    @classmethod
    def from_aes_gcm(
        cls, key: bytes | dict[str, bytes], *, inner: SerializerProtocol | None = None, **kw: Any
    ) -> EncryptedSerializer:
        """AES-GCM via the optional ``cryptography`` package (see :class:`AesGcmCipher`)."""
        from threadloom.checkpoint.serde.cipher import AesGcmCipher

        return cls(inner, AesGcmCipher(key), **kw)

    @classmethod
    def from_pycryptodome_aes(
        cls, serde: SerializerProtocol | None = None, **kwargs: Any
    ) -> EncryptedSerializer:
        """LangGraph's constructor: AES (EAX unless ``mode=``) via ``pycryptodome``,
        the key from ``key=`` or the ``LANGGRAPH_AES_KEY`` environment variable.
        Reads the rows LangGraph sealed with the same key (:class:`AesEaxCipher`).

        Raises:
            ValueError: no key given and ``LANGGRAPH_AES_KEY`` unset, or a key that
                is not 16, 24 or 32 bytes (LangGraph checks only the variable's).
        """
        from threadloom.checkpoint.serde.cipher import AesEaxCipher

        accept_plaintext = kwargs.pop("accept_plaintext", False)
        key = kwargs.pop("key", None)
        if key is None:
            env = os.environ.get("LANGGRAPH_AES_KEY")
            if env is None:
                raise ValueError("LANGGRAPH_AES_KEY environment variable is not set.")
            key = env.encode()
        return cls(serde, AesEaxCipher(key, **kwargs), accept_plaintext=accept_plaintext)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        tag, payload = self.serde.dumps_typed(obj)
        return self._envelope.seal(tag, payload)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Decrypt and revive; refuses plaintext rows unless ``accept_plaintext``."""
        return self.serde.loads_typed(self._envelope.open(*data))

    def with_allowlist(self, types: Iterable[type], **options: Any) -> EncryptedSerializer:
        """The inner serializer's ``with_allowlist`` (``options`` passed on), encrypted alike."""
        with_allowlist = getattr(self.serde, "with_allowlist", None)
        if with_allowlist is None:
            return self
        inner = with_allowlist(types, **options)
        if inner is self.serde:
            return self
        return type(self)(inner, self.cipher, accept_plaintext=self.accept_plaintext)

    with_msgpack_allowlist = with_allowlist
