"""The task records a step is made of, and the per-task scratchpad.

``PregelExecutableTask`` is what the runner executes; ``PregelTask`` (from
:mod:`threadloom.types`) is the read-only view ``get_state`` shows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from threadloom.types import CachePolicy, RetryPolicy, TimeoutPolicy

if TYPE_CHECKING:
    from threadloom.pregel.node import PregelNode

__all__ = ["CacheKey", "PregelExecutableTask", "PregelTaskWrites", "Scratchpad"]


class PregelTaskWrites(NamedTuple):
    """Anything with ``path``, ``name``, ``writes`` and ``triggers`` can be applied."""

    path: tuple[Any, ...]
    name: str
    writes: Sequence[tuple[str, Any]]
    triggers: Sequence[str]


class CacheKey(NamedTuple):
    """Where a node's cached writes live: namespace tuple, key, ttl in seconds."""

    ns: tuple[str, ...]
    key: str
    ttl: int | None


class Scratchpad:
    """Per-task counters and resume values used by ``interrupt()`` and subgraphs.

    ``resume`` holds the answers already given to this task's interrupts, in
    order; ``null_resume`` is the one answer given without an interrupt id
    (``Command(resume=v)``), consumed by the first interrupt that needs it.
    """

    __slots__ = (
        "step",
        "stop",
        "resume",
        "_null_resume",
        "_pending_writes",
        "parent",
        "_interrupts",
        "_subgraphs",
        "_calls",
    )

    def __init__(
        self,
        step: int,
        stop: int,
        resume: list[Any],
        null_resume: tuple[str, str, Any] | None,
        pending_writes: list[Any],
        parent: Scratchpad | None,
    ) -> None:
        self.step = step
        self.stop = stop
        self.resume = resume
        self._null_resume = null_resume
        self._pending_writes = pending_writes
        self.parent = parent
        self._interrupts: Iterator[int] | None = None  # counters made on first use
        self._subgraphs: Iterator[int] | None = None
        self._calls: Iterator[int] | None = None

    def interrupt_counter(self) -> int:
        if self._interrupts is None:
            self._interrupts = itertools.count()
        return next(self._interrupts)

    def restart(self) -> None:
        """A retry re-runs the node from its first line: its ``interrupt()`` calls
        count from the first again, so they take the answers the task already
        has instead of asking again under ids no later resume can match."""
        self._interrupts = None

    def subgraph_counter(self) -> int:
        if self._subgraphs is None:
            self._subgraphs = itertools.count()
        return next(self._subgraphs)

    def call_counter(self) -> int:
        if self._calls is None:
            self._calls = itertools.count()
        return next(self._calls)

    def get_null_resume(self, consume: bool = False) -> Any:
        """The answer given without an interrupt id, if any (None if there is none)."""
        write = self._null_resume
        if write is None:
            return self.parent.get_null_resume(consume) if self.parent is not None else None
        if consume:
            try:  # another task may have taken it already (as in LangGraph)
                self._pending_writes.remove(write)
            except ValueError:
                return None
        return write[2]


@dataclass(eq=False, slots=True)
class PregelExecutableTask:
    """One unit of work of a step: a node, its input and where its writes go."""

    name: str
    input: Any
    proc: PregelNode
    writes: list[tuple[str, Any]]
    triggers: Sequence[str]
    retry_policy: Sequence[RetryPolicy]
    cache_key: CacheKey | None
    id: str
    path: tuple[Any, ...]
    checkpoint_ns: str
    scratchpad: Scratchpad
    step: int
    timeout: TimeoutPolicy | None = None
    checkpoint_map: dict[str, str] = field(default_factory=dict)
    cache_policy: CachePolicy | None = None
    extra: dict[str, Any] | None = None

    @property
    def writers(self) -> Sequence[Callable[..., Any]]:
        return self.proc.writers

    @property
    def subgraphs(self) -> Sequence[Any]:
        return self.proc.subgraphs
