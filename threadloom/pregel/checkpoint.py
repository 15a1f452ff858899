"""[4] Channels <-> checkpoints (pure).

``channels_from_checkpoint`` rebuilds live channels from a stored checkpoint;
``create_checkpoint`` (in :mod:`threadloom.checkpoint.base`) goes the other way.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any, NamedTuple

from threadloom.channels.base import MISSING, BaseChannel, ValueChannel
from threadloom.channels.ephemeral_value import EphemeralValue
from threadloom.channels.last_value import LastValue
from threadloom.channels.untracked_value import UntrackedValue
from threadloom.checkpoint.base import (
    Checkpoint,
    copy_checkpoint,
    create_checkpoint,
    empty_checkpoint,
)
from threadloom.constants import TASKS
from threadloom.errors import EmptyChannelError
from threadloom.pregel.writes import EndChannels

__all__ = [
    "RunChannels",
    "channels_from_checkpoint",
    "checkpoint_values",
    "copy_checkpoint",
    "create_checkpoint",
    "empty_checkpoint",
    "get_new_channel_versions",
    "migrate_checkpoint",
    "run_channels",
    "stored_channels",
]

_VALUE_CHECKPOINTS = (LastValue.checkpoint, EphemeralValue.checkpoint)


def channels_from_checkpoint(
    specs: Mapping[str, BaseChannel], checkpoint: Mapping[str, Any]
) -> dict[str, BaseChannel]:
    """Fresh channels for ``specs``, holding ``checkpoint``'s values (specs are never mutated)."""
    values = checkpoint["channel_values"]
    channels: dict[str, BaseChannel] = {}
    for name, spec in specs.items():
        channel = spec.from_checkpoint(values.get(name, MISSING))
        channel.key = name
        channels[name] = channel
    return channels


class RunChannels(NamedTuple):
    """A run's live channels and the per-step plans read from their kinds."""

    channels: dict[str, BaseChannel]
    end: EndChannels  # what the end of a step visits (writes.end_of_step_channels)
    stored: list[tuple[str, BaseChannel, bool]]  # stored_channels
    untracked: set[str]  # UntrackedValue channels: never in saved writes


_KIND_FLAGS: weakref.WeakKeyDictionary[type, tuple[bool, bool]] = weakref.WeakKeyDictionary()


def _kind_flags(cls: type) -> tuple[bool, bool]:
    """(available iff ``value`` set, ``checkpoint()`` is ``value``) of a channel
    class: facts about its methods, read once per class, not per run. The no-op
    flags (``empty_update_is_noop``, ``finish_is_noop``) are read per channel:
    a channel may set them on the instance."""
    flags = _KIND_FLAGS.get(cls)
    if flags is None:
        flags = _KIND_FLAGS[cls] = (
            cls.is_available is ValueChannel.is_available,  # type: ignore[attr-defined]
            cls.checkpoint in _VALUE_CHECKPOINTS,  # type: ignore[attr-defined]
        )
    return flags


def run_channels(specs: Mapping[str, BaseChannel], checkpoint: Mapping[str, Any]) -> RunChannels:
    """``channels_from_checkpoint`` plus ``end_of_step_channels``, ``stored_channels``
    and the untracked names, in one pass over the channels (a run starts with it)."""
    values = checkpoint["channel_values"]
    channels: dict[str, BaseChannel] = {}
    clearable: list[tuple[str, BaseChannel, bool]] = []
    finishable: list[tuple[str, BaseChannel]] = []
    stored: list[tuple[str, BaseChannel, bool]] = []
    untracked: set[str] = set()
    for name, spec in specs.items():
        channel = spec.from_checkpoint(values.get(name, MISSING))
        channel.key = name
        channels[name] = channel
        cls = type(channel)
        plain, value_checkpoint = _KIND_FLAGS.get(cls) or _kind_flags(cls)
        if not channel.empty_update_is_noop:
            clearable.append((name, channel, plain))
        if not channel.finish_is_noop:
            finishable.append((name, channel))
        stored.append((name, channel, value_checkpoint))
        if isinstance(spec, UntrackedValue):
            untracked.add(name)
    return RunChannels(channels, EndChannels(clearable, finishable), stored, untracked)


def stored_channels(channels: Mapping[str, BaseChannel]) -> list[tuple[str, BaseChannel, bool]]:
    """``channels`` in order, each with whether its ``checkpoint()`` is just its ``value``
    (``LastValue``, ``EphemeralValue``; not a subclass overriding it): a run reads
    those inline when it saves, instead of a call per channel per step."""
    return [(k, c, type(c).checkpoint in _VALUE_CHECKPOINTS) for k, c in channels.items()]


def checkpoint_values(
    stored: list[tuple[str, BaseChannel, bool]], versions: Mapping[str, Any]
) -> dict[str, Any]:
    """What ``create_checkpoint`` stores for these channels: the value of each channel
    that has a version and is not empty, in channel order."""
    values: dict[str, Any] = {}
    for name, channel, plain in stored:
        if name in versions:
            if plain:
                value = channel.value  # type: ignore[attr-defined]
            else:
                try:
                    value = channel.checkpoint()
                except EmptyChannelError:
                    continue
            if value is not MISSING:
                values[name] = value
    return values


def get_new_channel_versions(
    previous: Mapping[str, Any], current: Mapping[str, Any]
) -> dict[str, Any]:
    """The versions in ``current`` that differ from ``previous``: what a put must store."""
    if not previous:
        return dict(current)
    null = type(next(iter(current.values()), ""))() if current else ""
    return {k: v for k, v in current.items() if v > previous.get(k, null)}


def migrate_checkpoint(checkpoint: Checkpoint) -> None:
    """Upgrade a v<4 checkpoint in place: ``pending_sends`` move into ``__pregel_tasks``."""
    if checkpoint["v"] >= 4:
        return
    sends = checkpoint.pop("pending_sends", None)  # type: ignore[misc]
    if sends:
        checkpoint["channel_values"][TASKS] = list(sends)
        versions = checkpoint["channel_versions"]
        versions[TASKS] = max(versions.values()) if versions else 1
