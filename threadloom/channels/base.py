"""``BaseChannel``: the contract every channel kind implements.

A channel holds one piece of graph state between supersteps. At the end of a
step the runtime calls ``update(values)`` with everything tasks wrote to it (in
task-path order); ``consume()`` when a task subscribed to it ran; ``finish()``
when the run is about to end. ``checkpoint()`` returns what is stored, or
:data:`MISSING` when there is nothing to store.

``checkpoint()`` must return a value that later steps cannot mutate: saves run in
the background while the next step already updates the channel (LangGraph's
Topic handed out its live list, LG#8748).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.checkpoint import base as _cp_base
from threadloom.errors import EmptyChannelError, InvalidUpdateError

__all__ = ["MISSING", "BaseChannel"]


class _Missing:
    """Marker for "no value": distinct from ``None``, which is a valid value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_cp_base._MISSING_SENTINELS["missing"] = MISSING


class BaseChannel:
    """One named piece of state with its own update rule.

    Subclasses implement ``get``, ``update`` and ``from_checkpoint``; the
    defaults of the other methods suit most kinds.
    """

    __slots__ = ("typ", "key")

    # hints for apply_writes: kinds whose update([]) / finish() never change anything
    # can be skipped at the end of a step (subclasses default to "may change")
    empty_update_is_noop: bool = False
    finish_is_noop: bool = False

    def __init__(self, typ: Any = None, key: str = "") -> None:
        self.typ = typ
        self.key = key

    def get(self) -> Any:
        """The current value; raises :class:`EmptyChannelError` if there is none."""
        raise NotImplementedError

    def update(self, values: Sequence[Any]) -> bool:
        """Apply one step's writes; return True if the channel changed.

        Called for every channel at the end of a step, with an empty sequence
        when nothing was written (ephemeral channels clear themselves then).
        """
        raise NotImplementedError

    def from_checkpoint(self, checkpoint: Any) -> BaseChannel:
        """A fresh channel of the same kind, holding ``checkpoint`` (or empty if MISSING)."""
        raise NotImplementedError

    def checkpoint(self) -> Any:
        """The value to store, or MISSING; never a live mutable object."""
        try:
            return self.get()
        except EmptyChannelError:
            return MISSING

    def copy(self) -> BaseChannel:
        """An independent copy (used to branch state without touching the original)."""
        return self.from_checkpoint(self.checkpoint())

    def is_available(self) -> bool:
        """True when ``get()`` would return a value."""
        try:
            self.get()
        except EmptyChannelError:
            return False
        return True

    def consume(self) -> bool:
        """A task subscribed to this channel ran; return True if that changed it."""
        return False

    def finish(self) -> bool:
        """The run is about to end; return True if that changed the channel."""
        return False

    @property
    def ValueType(self) -> Any:
        return self.typ

    @property
    def UpdateType(self) -> Any:
        return self.typ

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.typ!r})"

    def _empty(self) -> EmptyChannelError:
        return EmptyChannelError(
            f"channel {self.key!r} is empty" if self.key else "channel is empty"
        )


class ValueChannel(BaseChannel):
    """A channel that keeps one ``value`` (``MISSING`` when empty): reading it is the same
    for ``LastValue``, ``EphemeralValue``, ``UntrackedValue`` and reducers."""

    __slots__ = ("value",)

    def get(self) -> Any:
        if self.value is MISSING:
            raise self._empty()
        return self.value

    def is_available(self) -> bool:
        return self.value is not MISSING

    def _set_last(self, values: Sequence[Any], guard: bool) -> None:
        """Keep the last of ``values``; with ``guard``, more than one is an error.

        Raises:
            InvalidUpdateError: ``guard`` and several values in one step.
        """
        if len(values) != 1 and guard:
            raise InvalidUpdateError(
                f"At key {self.key!r}: {type(self).__name__}(guard=True) can receive only "
                "one value per step"
            )
        self.value = values[-1]
