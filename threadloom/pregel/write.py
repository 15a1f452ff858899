"""Node writers: turn a node's output into ``(channel, value)`` writes.

``ChannelWrite([ChannelWriteEntry("a"), ChannelWriteEntry("b", mapper=f)])`` writes
the output to ``a`` and ``f(output)`` to ``b``; ``ChannelWriteTupleEntry(fn)``
lets ``fn(output)`` return the ``(channel, value)`` pairs itself; a ``Send`` in
the list schedules a PUSH task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from threadloom.constants import TASKS
from threadloom.errors import InvalidUpdateError
from threadloom.types import Send

__all__ = [
    "PASSTHROUGH",
    "SKIP_WRITE",
    "ChannelWrite",
    "ChannelWriteEntry",
    "ChannelWriteTupleEntry",
    "assemble_writes",
]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


PASSTHROUGH: Any = _Marker("PASSTHROUGH")
"""Entry value meaning "the node's output"."""
SKIP_WRITE: Any = _Marker("SKIP_WRITE")
"""A mapper returning this skips the write."""


@dataclass(slots=True)
class ChannelWriteEntry:
    """Write ``mapper(value)`` (value defaults to the node output) to ``channel``."""

    channel: str
    value: Any = PASSTHROUGH
    skip_none: bool = False
    mapper: Callable[[Any], Any] | None = None


@dataclass(slots=True)
class ChannelWriteTupleEntry:
    """``mapper(value)`` returns the ``(channel, value)`` pairs to write."""

    mapper: Callable[[Any], Sequence[tuple[str, Any]] | None]
    value: Any = PASSTHROUGH
    static: Sequence[tuple[str, Any, str | None]] | None = None


WriteEntry = ChannelWriteEntry | ChannelWriteTupleEntry | Send


def assemble_writes(entries: Sequence[WriteEntry], output: Any) -> list[tuple[str, Any]]:
    """The writes ``entries`` make for a node that returned ``output``."""
    writes: list[tuple[str, Any]] = []
    for w in entries:
        if isinstance(w, ChannelWriteEntry):
            value = output if w.value is PASSTHROUGH else w.value
            if w.mapper is not None:
                value = w.mapper(value)
            if value is SKIP_WRITE or (w.skip_none and value is None):
                continue
            writes.append((w.channel, value))
        elif isinstance(w, ChannelWriteTupleEntry):
            value = output if w.value is PASSTHROUGH else w.value
            if pairs := w.mapper(value):
                writes.extend(pairs)
        elif isinstance(w, Send):
            writes.append((TASKS, w))
        else:
            raise InvalidUpdateError(f"Invalid write entry: {w!r}")
    return writes


class ChannelWrite:
    """A writer step: records its entries' writes for the running task, returns the input."""

    __slots__ = ("writes", "tags")

    def __init__(self, writes: Sequence[WriteEntry], *, tags: Sequence[str] | None = None) -> None:
        for w in writes:
            if isinstance(w, ChannelWriteEntry) and w.channel == TASKS:
                raise InvalidUpdateError("Cannot write to the reserved channel __pregel_tasks")
        self.writes = list(writes)
        self.tags = list(tags or ())

    def __call__(self, value: Any) -> Any:
        self.do_write(None, [self._bind(w, value) for w in self.writes])
        return value

    @staticmethod
    def _bind(w: WriteEntry, value: Any) -> WriteEntry:
        if isinstance(w, ChannelWriteEntry) and w.value is PASSTHROUGH:
            return ChannelWriteEntry(w.channel, value, w.skip_none, w.mapper)
        if isinstance(w, ChannelWriteTupleEntry) and w.value is PASSTHROUGH:
            return ChannelWriteTupleEntry(w.mapper, value)
        return w

    @staticmethod
    def do_write(config: Any, writes: Sequence[WriteEntry], allow_passthrough: bool = True) -> None:
        """Record ``writes`` for the task running in this context."""
        from threadloom.pregel.context import current_task_or_raise

        for w in writes:
            if not allow_passthrough and getattr(w, "value", None) is PASSTHROUGH:
                raise InvalidUpdateError("PASSTHROUGH value must be replaced")
        current_task_or_raise().send(assemble_writes(writes, None))

    @staticmethod
    def is_writer(obj: Any) -> bool:
        return (
            isinstance(obj, ChannelWrite) or getattr(obj, "_is_channel_writer", False) is not False
        )

    def __repr__(self) -> str:
        names = ",".join(
            w.channel
            if isinstance(w, ChannelWriteEntry)
            else "..."
            if isinstance(w, ChannelWriteTupleEntry)
            else w.node
            for w in self.writes
        )
        return f"ChannelWrite<{names}>"
