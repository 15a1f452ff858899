"""``Topic``: a list of every value written in a step (or, accumulating, ever)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from threadloom.channels.base import MISSING, BaseChannel

__all__ = ["Topic"]


def _flatten(values: Sequence[Any]) -> Iterator[Any]:
    for value in values:
        if isinstance(value, list):
            yield from value
        else:
            yield value


class Topic(BaseChannel):
    """Pub/sub: lists written are flattened. Cleared each step unless ``accumulate``.

    Checkpointed even when empty (``[]``); the checkpoint is a copy, never the
    live list.
    """

    __slots__ = ("values", "accumulate")
    finish_is_noop = True

    def __init__(self, typ: Any = None, accumulate: bool = False, key: str = "") -> None:
        super().__init__(typ, key)
        self.accumulate = accumulate
        self.values: list[Any] = []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topic) and other.accumulate == self.accumulate

    def from_checkpoint(self, checkpoint: Any) -> Topic:
        new = type(self)(self.typ, self.accumulate, self.key)
        if checkpoint is not MISSING and checkpoint is not None:
            new.values = list(checkpoint)
        return new

    def update(self, values: Sequence[Any]) -> bool:
        updated = False
        if not self.accumulate:
            updated = bool(self.values)
            self.values = []
        flat = tuple(_flatten(values))
        if flat:
            updated = True
            self.values.extend(flat)
        return updated

    def get(self) -> list[Any]:
        if not self.values:
            raise self._empty()
        return list(self.values)

    def is_available(self) -> bool:
        return bool(self.values)

    def checkpoint(self) -> list[Any]:
        return list(self.values)
