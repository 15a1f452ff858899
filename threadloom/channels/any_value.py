"""``AnyValue``: the last value written, where concurrent writers agree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.channels.base import MISSING, ValueChannel

__all__ = ["AnyValue"]


class AnyValue(ValueChannel):
    """Keeps the last value of a step's writes, trusting that parallel writers
    wrote equal values (so, unlike ``LastValue``, several writes are not an
    error); a step that writes nothing clears it, as LangGraph's does."""

    __slots__ = ()
    finish_is_noop = True

    def __init__(self, typ: Any = None, key: str = "") -> None:
        super().__init__(typ, key)
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyValue)

    def from_checkpoint(self, checkpoint: Any) -> AnyValue:
        new = type(self)(self.typ, self.key)
        if checkpoint is not MISSING:
            new.value = checkpoint
        return new

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            if self.value is MISSING:
                return False
            self.value = MISSING
            return True
        self.value = values[-1]
        return True

    def checkpoint(self) -> Any:
        return self.value
