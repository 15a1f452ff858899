"""LangGraph's ``serde.types``: the channel-name constants and the protocols a
``Send`` and a channel satisfy, re-exported for ported code (type hints and
``isinstance`` checks in custom savers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from threadloom.constants import ERROR, INTERRUPT, RESUME, SCHEDULED, TASKS

__all__ = [
    "ERROR",
    "INTERRUPT",
    "RESUME",
    "SCHEDULED",
    "TASKS",
    "ChannelProtocol",
    "SendProtocol",
]


@runtime_checkable
class SendProtocol(Protocol):
    """What a ``Send`` is to code that must not import the runtime (a saver)."""

    node: str
    arg: Any

    def __hash__(self) -> int: ...

    def __eq__(self, value: object) -> bool: ...


class ChannelProtocol(Protocol):
    """What a channel offers (``threadloom.channels.BaseChannel`` implements it)."""

    def checkpoint(self) -> Any: ...

    def from_checkpoint(self, checkpoint: Any) -> Any: ...

    def update(self, values: Sequence[Any]) -> bool: ...

    def get(self) -> Any: ...

    def consume(self) -> bool: ...
