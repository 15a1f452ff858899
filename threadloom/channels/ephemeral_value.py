"""``EphemeralValue``: a value that lives for exactly one step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.channels.base import MISSING, ValueChannel

__all__ = ["EphemeralValue"]

_new = object.__new__


class EphemeralValue(ValueChannel):
    """Holds the value written in the previous step; an empty update clears it.

    Used for ``__start__`` and ``branch:to:<node>`` trigger channels.
    ``guard=True`` rejects two writes in one step.
    """

    __slots__ = ("guard",)
    finish_is_noop = True

    def __init__(self, typ: Any = None, guard: bool = True, key: str = "") -> None:
        super().__init__(typ, key)
        self.guard = guard
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EphemeralValue) and other.guard == self.guard

    def from_checkpoint(self, checkpoint: Any) -> EphemeralValue:
        if type(self) is EphemeralValue:  # every run makes one per node trigger: no __init__
            new = _new(EphemeralValue)
            new.typ, new.key, new.guard, new.value = self.typ, self.key, self.guard, checkpoint
            return new
        new = type(self)(self.typ, self.guard, self.key)
        if checkpoint is not MISSING:
            new.value = checkpoint
        return new

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            if self.value is not MISSING:
                self.value = MISSING
                return True
            return False
        self._set_last(values, self.guard)
        return True

    def checkpoint(self) -> Any:
        return self.value
