"""LangGraph's ``JsonPlusSerializer`` name, for ported code: a strict MsgpackSerializer.

There is no pickle fallback and no JSON reviver; names are never resolved, so
``allowed_msgpack_modules`` only accepts classes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from threadloom.checkpoint.serde.serializer import MsgpackSerializer

__all__ = ["JsonPlusSerializer"]


class JsonPlusSerializer(MsgpackSerializer):
    """Drop-in for ``langgraph.checkpoint.serde.jsonplus.JsonPlusSerializer``.

    Raises:
        ValueError: ``pickle_fallback=True`` or a permissive module allowlist.
        TypeError: an allowlist entry is a ``(module, name)`` tuple, not a class.
    """

    def __init__(
        self,
        *,
        pickle_fallback: bool = False,
        allowed_json_modules: Any = None,
        allowed_msgpack_modules: Iterable[Any] | bool | None = None,
        **kwargs: Any,
    ) -> None:
        if pickle_fallback:
            raise ValueError(
                "threadloom never uses pickle: pickle_fallback=True is not supported; "
                "register the type instead (threadloom.checkpoint.serde.register)"
            )
        if allowed_json_modules not in (None, False, ()):
            raise ValueError(
                "threadloom has no JSON reviver: allowed_json_modules is not supported"
            )
        if allowed_msgpack_modules is True:
            raise ValueError(
                "allowed_msgpack_modules=True (trust any importable class) is not supported: "
                "list the classes to trust"
            )
        allowed = list(kwargs.pop("allowed", ()))
        for item in allowed_msgpack_modules or ():
            if not isinstance(item, type):
                raise TypeError(
                    f"allowed_msgpack_modules entry {item!r}: pass the class itself, "
                    "threadloom never resolves names"
                )
            allowed.append(item)
        super().__init__(allowed=allowed, **kwargs)
