"""``BaseCache``: where nodes' cached writes live (LangGraph's ``langgraph.cache.base``).

Keys are ``(namespace, key)`` pairs: the namespace names the node
(``("__pregel_ns_writes", node, node)``), the key is a hash of its input.
Values are serialized with the checkpoint serializer (never pickle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BaseCache", "FullKey", "Namespace"]

Namespace = tuple[str, ...]
FullKey = tuple[Namespace, str]


class BaseCache:
    """Get/set/clear cached values with an optional time-to-live (seconds)."""

    def __init__(self, *, serde: Any = None) -> None:
        if serde is None:
            from threadloom.checkpoint.serde import default_serializer

            serde = default_serializer()
        self.serde = serde

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        """The cached values of those ``keys`` that are present and not expired."""
        raise NotImplementedError

    def set(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        """Store ``{key: (value, ttl_seconds_or_None)}``."""
        raise NotImplementedError

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Drop the given namespaces (all of them when None)."""
        raise NotImplementedError

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        return self.get(keys)

    async def aset(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        self.set(pairs)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        self.clear(namespaces)
