"""``DeltaChannel``: a reducer channel fed a whole step's writes in one call (LangGraph 1.2, beta).

LangGraph's ``DeltaChannel`` keeps checkpoints small by storing only a snapshot
every ``snapshot_frequency`` updates and rebuilding the value in between from the
ancestors' writes. threadloom's storage already stores a growing list as shared
segments plus what each step appended (docs/storage.md), so here the checkpoint
holds the full value, like any reducer channel; the stored bytes still grow
linearly. What a user sees is LangGraph's: the batch reducer
``reducer(state, [w1, w2, ...])``, one ``Overwrite`` per step, the value type
taken from the annotation.

A checkpoint *without* the value (one LangGraph wrote between snapshots, brought
over by ``import_langgraph``) is rebuilt with :meth:`DeltaChannel.replay_writes`
from ``BaseCheckpointSaver.get_delta_channel_history`` (see
:mod:`threadloom.channels.delta_fill`).
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Sequence
from typing import Any

from threadloom.channels.base import MISSING, ValueChannel
from threadloom.channels.binop import _concrete, get_overwrite
from threadloom.errors import InvalidUpdateError

__all__ = ["DeltaChannel"]

_COPIED = (list, dict, set)


def _same_reducer(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    """LangGraph's rule: every lambda is named ``<lambda>``, so a pair with one
    counts as equal; other reducers must be the same object."""
    if getattr(a, "__name__", None) == "<lambda>" or getattr(b, "__name__", None) == "<lambda>":
        return True
    return a is b


def _fresh(typ: Any) -> Any:
    """The empty value of ``typ`` (``list()``...): what a channel with nothing stored holds."""
    return typ()


class DeltaChannel(ValueChannel):
    """Folds each step's writes into the value with one ``reducer(state, writes)`` call.

    ``reducer`` must be deterministic and give the same result whether two
    batches are applied one after the other or concatenated: a value rebuilt
    from stored writes (an imported LangGraph thread) is folded in larger
    batches than the run used. ``typ`` is taken from the annotation of
    ``Annotated[T, DeltaChannel(...)]`` (``Sequence`` -> ``list``, ``Mapping`` ->
    ``dict``, ``Set`` -> ``set``); ``snapshot_frequency`` is kept for LangGraph's
    API (threadloom's checkpoints always hold the value) and must be positive.

    Raises:
        ValueError: ``snapshot_frequency`` is not positive.
    """

    __slots__ = ("reducer", "snapshot_frequency")
    empty_update_is_noop = True
    finish_is_noop = True

    def __init__(
        self,
        reducer: Callable[[Any, Sequence[Any]], Any],
        typ: Any = None,
        *,
        snapshot_frequency: int = 100,
    ) -> None:
        if snapshot_frequency <= 0:
            raise ValueError(f"snapshot_frequency must be a positive int, got {snapshot_frequency}")
        super().__init__(_concrete(list if typ is None else typ))
        self.reducer = reducer
        self.snapshot_frequency = snapshot_frequency
        self.value: Any = MISSING

    def for_type(self, typ: Any) -> DeltaChannel:
        """The channel a state key declared as ``Annotated[typ, self]`` gets: its own
        instance (one declaration may serve several graphs) with ``typ`` as value type."""
        return type(self)(self.reducer, typ, snapshot_frequency=self.snapshot_frequency)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DeltaChannel)
            and self.snapshot_frequency == other.snapshot_frequency
            and _same_reducer(self.reducer, other.reducer)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        name = getattr(self.reducer, "__name__", repr(self.reducer))
        return f"DeltaChannel({name}, {self.typ!r}, snapshot_frequency={self.snapshot_frequency})"

    def _like(self) -> DeltaChannel:
        new = type(self)(self.reducer, self.typ, snapshot_frequency=self.snapshot_frequency)
        new.key = self.key
        return new

    def copy(self) -> DeltaChannel:
        new = self._like()
        new.value = self.value if self.value is MISSING else _copy.copy(self.value)
        return new

    def from_checkpoint(self, checkpoint: Any) -> DeltaChannel:
        """Nothing stored starts at ``typ()``; a stored value (threadloom's, a
        LangGraph snapshot, a value from a former plain reducer key) is used as is."""
        new = self._like()
        if checkpoint is MISSING:
            new.value = _fresh(self.typ)
        else:
            new.value = _copy.copy(checkpoint) if type(checkpoint) in _COPIED else checkpoint
        return new

    def update(self, values: Sequence[Any]) -> bool:
        """One step's writes. An ``Overwrite`` replaces the value and the step's
        other writes are dropped (LangGraph's rule); two in one step are an error.

        Raises:
            InvalidUpdateError: more than one ``Overwrite`` in the step.
        """
        if not values:
            return False
        replaced: tuple[bool, Any] | None = None
        for value in values:
            found = get_overwrite(value)
            if found[0]:
                if replaced is not None:
                    raise InvalidUpdateError(
                        f"At key {self.key!r}: can receive only one Overwrite value per step"
                    )
                replaced = found
        if replaced is not None:
            self.value = self._overwritten(replaced[1])
            return True
        base = _fresh(self.typ) if self.value is MISSING else self.value
        self.value = self.reducer(base, list(values))
        return True

    def replay_writes(self, writes: Sequence[Any]) -> None:
        """Fold stored writes (``(task_id, channel, value)``, oldest first) into
        the value in one reducer call: the last ``Overwrite`` among them is the
        new base and only the writes after it are folded."""
        values = [w[2] for w in writes]
        base, start = self.value, 0
        for i, value in enumerate(values):
            found = get_overwrite(value)
            if found[0]:
                base, start = self._overwritten(found[1]), i + 1
        rest = values[start:]
        if base is MISSING:
            base = _fresh(self.typ)
        self.value = self.reducer(base, rest) if rest else base

    def _overwritten(self, value: Any) -> Any:
        return _fresh(self.typ) if value is None else _copy.copy(value)

    def checkpoint(self) -> Any:
        value = self.value
        # a reducer may extend the list it was given: hand the saver a snapshot
        return _copy.copy(value) if type(value) in _COPIED else value

    @property
    def ValueType(self) -> Any:
        return self.typ

    @property
    def UpdateType(self) -> Any:
        return self.typ
