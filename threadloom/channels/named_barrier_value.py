"""``NamedBarrierValue``: available once every named writer has written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.channels.base import MISSING, BaseChannel
from threadloom.errors import InvalidUpdateError

__all__ = ["NamedBarrierValue", "NamedBarrierValueAfterFinish"]


class NamedBarrierValue(BaseChannel):
    """Collects names; available (value ``None``) when all of ``names`` were seen.

    Used for joins (``join:a+b:c``). Consuming resets it. Checkpoint: the seen set.
    """

    __slots__ = ("names", "seen")
    empty_update_is_noop = True
    finish_is_noop = True

    def __init__(self, typ: Any, names: set[Any], key: str = "") -> None:
        super().__init__(typ, key)
        self.names = set(names)
        self.seen: set[Any] = set()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.names == self.names  # type: ignore[attr-defined]

    def from_checkpoint(self, checkpoint: Any) -> NamedBarrierValue:
        new = type(self)(self.typ, self.names, self.key)
        if checkpoint is not MISSING and checkpoint is not None:
            new.seen = set(checkpoint)
        return new

    def checkpoint(self) -> Any:
        return set(self.seen)

    def _add(self, values: Sequence[Any]) -> bool:
        updated = False
        for value in values:
            if value not in self.names:
                raise InvalidUpdateError(
                    f"At key {self.key!r}: value {value!r} not in {self.names}"
                )
            if value not in self.seen:
                self.seen.add(value)
                updated = True
        return updated

    def update(self, values: Sequence[Any]) -> bool:
        return self._add(values)

    def get(self) -> None:
        if self.seen != self.names:
            raise self._empty()
        return None

    def is_available(self) -> bool:
        return self.seen == self.names

    def consume(self) -> bool:
        if self.seen == self.names:
            self.seen = set()
            return True
        return False


class NamedBarrierValueAfterFinish(NamedBarrierValue):
    """Like NamedBarrierValue, but available only after ``finish()``.

    Checkpoint: ``(seen, finished)``.
    """

    __slots__ = ("finished",)
    finish_is_noop = False

    def __init__(self, typ: Any, names: set[Any], key: str = "") -> None:
        super().__init__(typ, names, key)
        self.finished = False

    def from_checkpoint(self, checkpoint: Any) -> NamedBarrierValueAfterFinish:
        new = type(self)(self.typ, self.names, self.key)
        if checkpoint is not MISSING and checkpoint is not None:
            seen, new.finished = checkpoint
            new.seen = set(seen)
        return new

    def checkpoint(self) -> Any:
        return (set(self.seen), self.finished)

    def get(self) -> None:
        if not self.finished or self.seen != self.names:
            raise self._empty()
        return None

    def is_available(self) -> bool:
        return self.finished and self.seen == self.names

    def consume(self) -> bool:
        if self.finished and self.seen == self.names:
            self.finished = False
            self.seen = set()
            return True
        return False

    def finish(self) -> bool:
        if not self.finished and self.seen == self.names:
            self.finished = True
            return True
        return False
