"""Mapping between user values and channel writes: input, Command, output.

Pure helpers shared by the loop, the stream modes and ``history.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from threadloom.channels.base import MISSING, BaseChannel
from threadloom.constants import ERROR, INTERRUPT, NULL_TASK_ID, RESUME, RETURN, START, TASKS
from threadloom.errors import EmptyChannelError, InvalidUpdateError
from threadloom.types import Command, Send

__all__ = [
    "command_writes",
    "map_command",
    "map_input",
    "map_output_updates",
    "map_output_values",
    "read_channel",
    "read_channels",
]

logger = logging.getLogger("threadloom.pregel")


def read_channel(channels: Mapping[str, BaseChannel], chan: str, *, catch: bool = True) -> Any:
    """The channel's value, or None (``catch``) when it is empty."""
    try:
        return channels[chan].get()
    except EmptyChannelError:
        if catch:
            return None
        raise


def read_channels(
    channels: Mapping[str, BaseChannel], select: Sequence[str] | str, *, skip_empty: bool = True
) -> Any:
    """One channel's value (``select`` a str) or a dict of the non-empty ones."""
    if isinstance(select, str):
        return read_channel(channels, select)
    values: dict[str, Any] = {}
    for k in select:
        try:
            values[k] = read_channel(channels, k, catch=not skip_empty)
        except EmptyChannelError:
            pass
    return values


def command_writes(cmd: Command) -> list[tuple[str, Any]]:
    """The writes a Command returned by a node stands for (goto first, then update)."""
    writes: list[tuple[str, Any]] = []
    if cmd.goto:
        gotos = cmd.goto if isinstance(cmd.goto, (list, tuple)) else [cmd.goto]
        for g in gotos:
            if isinstance(g, Send):
                writes.append((TASKS, g))
            elif isinstance(g, str):
                writes.append((f"branch:to:{g}", START))
            else:
                raise TypeError(f"In Command.goto, expected Send/str, got {type(g).__name__}")
    if cmd.update:
        writes.extend(cmd._update_as_tuples())
    return writes


def map_command(cmd: Command) -> Iterator[tuple[str, str, Any]]:
    """A Command given as input -> ``(NULL_TASK_ID, channel, value)`` writes.

    Raises:
        InvalidUpdateError: ``graph=Command.PARENT`` at the root.
    """
    if cmd.graph == Command.PARENT:
        raise InvalidUpdateError("There is no parent graph")
    if cmd.goto:
        gotos = cmd.goto if isinstance(cmd.goto, (list, tuple)) else [cmd.goto]
        for g in gotos:
            if isinstance(g, Send):
                yield (NULL_TASK_ID, TASKS, g)
            elif isinstance(g, str):
                yield (NULL_TASK_ID, f"branch:to:{g}", START)
            else:
                raise TypeError(f"In Command.goto, expected Send/str, got {type(g).__name__}")
    if cmd.resume is not None:
        yield (NULL_TASK_ID, RESUME, cmd.resume)
    if cmd.update:
        for k, v in cmd._update_as_tuples():
            yield (NULL_TASK_ID, k, v)


def map_input(input_channels: str | Sequence[str], chunk: Any) -> Iterator[tuple[str, Any]]:
    """Input -> writes to input channels (unknown keys are logged and dropped).

    Raises:
        TypeError: several input channels but the input is not a dict.
    """
    if chunk is None:
        return
    if isinstance(input_channels, str):
        yield (input_channels, chunk)
        return
    if not isinstance(chunk, dict):
        raise TypeError(f"Expected chunk to be a dict, got {type(chunk).__name__}")
    for k in chunk:
        if k in input_channels:
            yield (k, chunk[k])
        else:
            logger.warning("Input channel %s not found in %s", k, input_channels)


def map_output_values(
    output_channels: str | Sequence[str], writes: Any, channels: Mapping[str, BaseChannel]
) -> Iterator[Any]:
    """The ``values`` event after a step (``writes=True``: unconditionally)."""
    if isinstance(output_channels, str):
        if writes is True or any(c == output_channels for c, _ in writes):
            yield read_channel(channels, output_channels)
    elif writes is True or any(c in output_channels for c, _ in writes):
        yield read_channels(channels, output_channels)


def map_output_updates(
    output_channels: str | Sequence[str],
    tasks: list[tuple[Any, Sequence[tuple[str, Any]]]],
    cached: bool = False,
) -> Iterator[dict[str, Any]]:
    """The ``updates`` event for finished tasks: ``{node: what it wrote to output channels}``."""
    out = [
        (t, ww)
        for t, ww in tasks
        if ww
        and ww[0][0] != ERROR
        and ww[0][0] != INTERRUPT
        and "langsmith:hidden" not in t.proc.tags
    ]
    if not out:
        return
    keys = None if isinstance(output_channels, str) else frozenset(output_channels)
    updated: list[tuple[str, Any]] = []
    for task, writes in out:
        rtn = next((v for c, v in writes if c == RETURN), MISSING)
        if rtn is not MISSING:
            updated.append((task.name, rtn))
        elif keys is None:
            updated.extend((task.name, v) for c, v in writes if c == output_channels)
        else:
            selected = [(c, v) for c, v in writes if c in keys]
            if not selected:
                continue
            if len({c for c, _ in selected}) == len(selected):
                updated.append((task.name, dict(selected)))
            else:  # a channel written twice: one dict per write
                updated.extend((task.name, {c: v}) for c, v in selected)
    grouped: dict[str, Any] = {t.name: [] for t, _ in out}
    for node, value in updated:
        grouped[node].append(value)
    for node, value in grouped.items():
        if len(value) == 0:
            grouped[node] = None
        elif len(value) == 1:
            grouped[node] = value[0]
    if cached:
        grouped["__metadata__"] = {"cached": cached}
    yield grouped
