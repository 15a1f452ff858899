"""``UntrackedValue``: state that is never persisted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.channels.base import MISSING, ValueChannel

__all__ = ["UntrackedValue"]


class UntrackedValue(ValueChannel):
    """Keeps the last value in memory; ``checkpoint()`` is always MISSING.

    Writes to it are also left out of saved pending writes (also inside Send
    arguments), so a resumed run starts it empty.
    """

    __slots__ = ("guard",)
    empty_update_is_noop = True
    finish_is_noop = True

    def __init__(self, typ: Any = None, guard: bool = True, key: str = "") -> None:
        super().__init__(typ, key)
        self.guard = guard
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UntrackedValue) and other.guard == self.guard

    def from_checkpoint(self, checkpoint: Any) -> UntrackedValue:
        return type(self)(self.typ, self.guard, self.key)

    def copy(self) -> UntrackedValue:
        new = type(self)(self.typ, self.guard, self.key)
        new.value = self.value
        return new

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        self._set_last(values, self.guard)
        return True

    def checkpoint(self) -> Any:
        return MISSING
