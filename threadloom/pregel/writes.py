"""[3] Applying a step's writes to channels and versions (pure, no I/O).

``apply_writes`` is the one place channel versions move: every channel changed
in a step gets the same new version (``get_next_version`` of the current
maximum), tasks' triggers are marked seen and consumed, and channels nobody
wrote get an empty update (so ephemeral ones clear). Tasks are applied in
task-path order, so the result does not depend on which task finished first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from threadloom.channels.base import MISSING, BaseChannel, ValueChannel
from threadloom.constants import (
    ERROR,
    ERROR_SOURCE_NODE,
    INTERRUPT,
    NO_WRITES,
    NULL_TASK_ID,
    PUSH,
    RESERVED,
    RESUME,
    RETURN,
)
from threadloom.pregel.ids import task_path_str
from threadloom.pregel.interrupts import as_interrupts
from threadloom.types import Interrupt

__all__ = [
    "CONTROL_WRITES",
    "TaskStatus",
    "apply_writes",
    "end_of_step_channels",
    "increment",
    "read_task_statuses",
]

logger = logging.getLogger("threadloom.pregel")

CONTROL_WRITES = frozenset((ERROR, ERROR_SOURCE_NODE, INTERRUPT, RESUME))
"""Writes that say what happened to a task rather than what it produced."""
_NOT_APPLIED = frozenset((NO_WRITES, PUSH, RESUME, INTERRUPT, RETURN, ERROR, ERROR_SOURCE_NODE))


_NO_CONSUME = BaseChannel.consume


def increment(current: int | None, channel: Any = None) -> int:
    """Version function used when there is no checkpointer: plain integers."""
    return current + 1 if current is not None else 1


class EndChannels(NamedTuple):
    """The channels the end of a step must visit: the others' ``update([])`` /
    ``finish()`` never change anything (``empty_update_is_noop``, ``finish_is_noop``).
    ``clearable`` entries say whether the channel is available iff its ``value`` is
    not MISSING (``ValueChannel``'s rule: read inline, no call per channel per step)."""

    clearable: list[tuple[str, BaseChannel, bool]]
    finishable: list[tuple[str, BaseChannel]]


def end_of_step_channels(channels: Mapping[str, BaseChannel]) -> EndChannels:
    """Which of ``channels`` the end of a step visits, in ``channels`` order."""
    items = list(channels.items())
    return EndChannels(
        [
            (k, c, type(c).is_available is ValueChannel.is_available)
            for k, c in items
            if not c.empty_update_is_noop
        ],
        [(k, c) for k, c in items if not c.finish_is_noop],
    )


def apply_writes(
    checkpoint: dict[str, Any],
    channels: Mapping[str, BaseChannel],
    tasks: Iterable[Any],
    get_next_version: Callable[[Any, Any], Any] | None,
    trigger_to_nodes: Mapping[str, Sequence[str]],
    end_channels: EndChannels | None = None,
) -> set[str]:
    """Apply ``tasks``' writes (in task-path order) to ``channels``, bumping versions.

    Args:
        checkpoint: mutated in place (``channel_versions``; ``versions_seen`` gets new
            per-node dicts, the old ones are left as they were, so a snapshot taken
            with a shallow copy of ``versions_seen`` stays intact).
        channels: mutated in place.
        tasks: objects with ``path``, ``name``, ``writes``, ``triggers``.
        get_next_version: ``None`` applies values without moving versions.
        trigger_to_nodes: channel -> nodes it triggers; decides when to ``finish()``.
        end_channels: ``end_of_step_channels(channels)``, when the caller keeps it
            (a run applies writes every step to the same channels).

    Returns:
        The channels updated in this step (available ones only).

    Raises:
        InvalidUpdateError: a channel rejected its writes (two values for a LastValue).
    """
    tasks = list(tasks)
    if len(tasks) > 1:
        tasks.sort(key=lambda t: task_path_str(t.path))  # full path, as LangGraph 1.2.22
    bump_step = False
    versions = checkpoint["channel_versions"]
    seen_all = checkpoint["versions_seen"]
    consumed: set[str] = set()
    for task in tasks:
        # replaced, never changed in place: a saved snapshot may share the old dict
        seen = seen_all.get(task.name)
        seen = {} if seen is None else seen.copy()
        for chan in task.triggers:
            bump_step = True
            if chan in versions:
                seen[chan] = versions[chan]
            if chan not in RESERVED and chan in channels:
                consumed.add(chan)
        seen_all[task.name] = seen
    next_version = (
        None
        if get_next_version is None
        else get_next_version(max(versions.values()) if versions else None, None)
    )
    for chan in consumed:
        channel = channels[chan]
        if type(channel).consume is _NO_CONSUME:  # nothing to consume (most triggers)
            continue
        if channel.consume() and next_version is not None:
            versions[chan] = next_version
    updated: set[str] = set()
    for chan, values in _group_writes(tasks, channels).items():
        channel = channels[chan]
        if channel.update(values) and next_version is not None:
            versions[chan] = next_version
            if channel.is_available():
                updated.add(chan)
    if bump_step:
        if end_channels is None:
            end_channels = end_of_step_channels(channels)
        _end_of_step(end_channels, versions, next_version, updated, trigger_to_nodes)
    return updated


def _group_writes(tasks: list[Any], channels: Mapping[str, BaseChannel]) -> dict[str, list[Any]]:
    """Values per channel, in task order; control writes skipped, unknown channels logged."""
    by_channel: dict[str, list[Any]] = {}
    for task in tasks:
        for chan, value in task.writes:
            if chan in _NOT_APPLIED:
                continue
            if chan in channels:
                by_channel.setdefault(chan, []).append(value)
            else:
                logger.warning(
                    "Task %s with path %s wrote to unknown channel %s, ignoring it.",
                    task.name,
                    task.path,
                    chan,
                )
    return by_channel


def _end_of_step(
    channels: EndChannels,
    versions: dict[str, Any],
    next_version: Any,
    updated: set[str],
    trigger_to_nodes: Mapping[str, Sequence[str]],
) -> None:
    """Tell unwritten channels a step passed (``update([])``), and ``finish()`` them
    all when nothing updated can trigger another node."""
    for chan, channel, plain in channels.clearable:
        if (channel.value is MISSING) if plain else not channel.is_available():
            continue
        if chan in updated:
            continue
        if channel.update(()) and next_version is not None:
            versions[chan] = next_version
            if channel.is_available():
                updated.add(chan)
    if updated.isdisjoint(trigger_to_nodes):
        for chan, channel in channels.finishable:
            if channel.finish() and next_version is not None:
                versions[chan] = next_version
                if channel.is_available():
                    updated.add(chan)


class TaskStatus(NamedTuple):
    """What the pending writes say about one task."""

    output: tuple[tuple[str, Any], ...] = ()
    interrupts: tuple[Interrupt, ...] = ()
    error: BaseException | None = None

    @property
    def finished(self) -> bool:
        """A task finished iff it recorded an output write (``__no_writes__`` counts)."""
        return bool(self.output)

    @property
    def pending_interrupts(self) -> tuple[Interrupt, ...]:
        """Interrupts still waiting for an answer (none once the task finished)."""
        return () if self.output else self.interrupts


def read_task_statuses(pending_writes: Iterable[Sequence[Any]]) -> dict[str, TaskStatus]:
    """Status of every task with recorded writes (NULL_TASK_ID writes are input, skipped)."""
    output: dict[str, list[tuple[str, Any]]] = {}
    interrupts: dict[str, list[Any]] = {}
    errors: dict[str, BaseException] = {}
    for tid, chan, value in pending_writes:
        if tid == NULL_TASK_ID:
            continue
        output.setdefault(tid, [])
        if chan == INTERRUPT:
            interrupts.setdefault(tid, []).extend(as_interrupts(value))
        elif chan == ERROR:
            errors.setdefault(tid, value)
        elif chan not in CONTROL_WRITES:
            output[tid].append((chan, value))
    return {
        tid: TaskStatus(tuple(out), tuple(interrupts.get(tid, ())), errors.get(tid))
        for tid, out in output.items()
    }
