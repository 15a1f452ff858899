"""``BinaryOperatorAggregate``: folds every write into the value with a reducer."""

from __future__ import annotations

import collections.abc
import copy
from collections.abc import Callable, Sequence
from typing import Any, get_args, get_origin

from threadloom.channels.base import MISSING, ValueChannel
from threadloom.constants import OVERWRITE
from threadloom.errors import InvalidUpdateError
from threadloom.types import Overwrite

__all__ = ["BinaryOperatorAggregate", "get_overwrite"]


def get_overwrite(value: Any) -> tuple[bool, Any]:
    """``(True, v)`` when ``value`` asks to replace instead of reduce.

    Accepts ``Overwrite(v)``, ``{"__overwrite__": v}`` and the JSON-erased
    ``{"type": "__overwrite__", "value": v}``.
    """
    if isinstance(value, Overwrite):
        return True, value.value
    if isinstance(value, dict):
        if len(value) == 1 and OVERWRITE in value:
            return True, value[OVERWRITE]
        if value.get("type") == OVERWRITE and "value" in value:
            return True, value["value"]
    return False, None


def _concrete(typ: Any) -> Any:
    """A constructible class for ``typ`` (``Annotated`` and ABCs unwrapped; unions are not,
    as in LangGraph: ``Optional[int]`` starts empty)."""
    origin = get_origin(typ)
    if origin is not None and hasattr(typ, "__metadata__"):  # Annotated
        typ = get_args(typ)[0]
        origin = get_origin(typ)
    typ = origin or typ
    if typ in (collections.abc.Sequence, collections.abc.MutableSequence):
        return list
    if typ in (collections.abc.Set, collections.abc.MutableSet):
        return set
    if typ in (collections.abc.Mapping, collections.abc.MutableMapping):
        return dict
    return typ


_COPIED = (list, dict, set)


class BinaryOperatorAggregate(ValueChannel):
    """Starts at ``typ()`` (if constructible) and folds writes with ``operator``.

    One ``Overwrite`` per step replaces the value; writes after it in that step
    are ignored, a second one is an error.
    """

    __slots__ = ("operator",)
    empty_update_is_noop = True
    finish_is_noop = True

    def __init__(self, typ: Any, operator: Callable[[Any, Any], Any], key: str = "") -> None:
        super().__init__(typ, key)
        self.operator = operator
        try:
            self.value: Any = _concrete(typ)()
        except Exception:
            self.value = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BinaryOperatorAggregate) and (
            self.operator is other.operator
            or getattr(self.operator, "__name__", 1) == getattr(other.operator, "__name__", 2)
        )

    def from_checkpoint(self, checkpoint: Any) -> BinaryOperatorAggregate:
        new = type(self).__new__(type(self))
        new.typ, new.key, new.operator = self.typ, self.key, self.operator
        if checkpoint is MISSING:
            try:
                new.value = _concrete(self.typ)()
            except Exception:
                new.value = MISSING
        else:
            new.value = copy.copy(checkpoint) if type(checkpoint) in _COPIED else checkpoint
        return new

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        if self.value is MISSING:
            self.value = values[0]
            values = values[1:]
        seen_overwrite = False
        for value in values:
            is_overwrite, new_value = get_overwrite(value)
            if is_overwrite:
                if seen_overwrite:
                    raise InvalidUpdateError(
                        f"At key {self.key!r}: can receive only one Overwrite value per step"
                    )
                self.value = new_value
                seen_overwrite = True
            elif not seen_overwrite:
                self.value = self.operator(self.value, value)
        return True

    def checkpoint(self) -> Any:
        value = self.value
        # reducers may mutate in place; hand the saver a snapshot
        return copy.copy(value) if type(value) in _COPIED else value
