"""``LastValue`` (one write per step) and ``LastValueAfterFinish`` (visible at the end)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.channels.base import MISSING, BaseChannel, ValueChannel
from threadloom.errors import InvalidUpdateError

__all__ = ["LastValue", "LastValueAfterFinish"]

_new = object.__new__


class LastValue(ValueChannel):
    """Keeps the last value written; two writes in one step are an error."""

    __slots__ = ()
    empty_update_is_noop = True
    finish_is_noop = True

    def __init__(self, typ: Any = None, key: str = "") -> None:
        super().__init__(typ, key)
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LastValue) and type(other) is type(self)

    def from_checkpoint(self, checkpoint: Any) -> LastValue:
        if type(self) is LastValue:  # every run makes one per state key: no __init__ chain
            new = _new(LastValue)
            new.typ, new.key, new.value = self.typ, self.key, checkpoint
            return new
        new = type(self)(self.typ, self.key)
        if checkpoint is not MISSING:
            new.value = checkpoint
        return new

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        if len(values) != 1:
            raise InvalidUpdateError(
                f"At key {self.key!r}: can receive only one value per step; "
                "use a reducer channel to combine several"
            )
        self.value = values[-1]
        return True

    def checkpoint(self) -> Any:
        return self.value


class LastValueAfterFinish(BaseChannel):
    """Like LastValue, but readable only after the run's ``finish()``; consumed once read.

    Checkpoint: ``(value, finished)``.
    """

    __slots__ = ("value", "finished")
    empty_update_is_noop = True

    def __init__(self, typ: Any = None, key: str = "") -> None:
        super().__init__(typ, key)
        self.value: Any = MISSING
        self.finished = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LastValueAfterFinish)

    def from_checkpoint(self, checkpoint: Any) -> LastValueAfterFinish:
        new = type(self)(self.typ, self.key)
        if checkpoint is not MISSING:
            new.value, new.finished = checkpoint
        return new

    def checkpoint(self) -> Any:
        if self.value is MISSING:
            return MISSING
        return (self.value, self.finished)

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        self.finished = False
        self.value = values[-1]
        return True

    def consume(self) -> bool:
        if self.finished:
            self.finished = False
            self.value = MISSING
            return True
        return False

    def finish(self) -> bool:
        if not self.finished and self.value is not MISSING:
            self.finished = True
            return True
        return False

    def get(self) -> Any:
        if self.value is MISSING or not self.finished:
            raise self._empty()
        return self.value

    def is_available(self) -> bool:
        return self.value is not MISSING and self.finished
