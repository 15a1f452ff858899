"""Rebuilding a ``DeltaChannel`` value a loaded checkpoint does not hold.

threadloom's own checkpoints always hold a ``DeltaChannel``'s value. A thread
LangGraph wrote (brought over by ``import_langgraph``) stores it only at
snapshots; a checkpoint between two holds nothing for the channel, though the
channel has a version. Before such a checkpoint's channels are built, the
drivers call :func:`fill_delta` / :func:`afill_delta` with the tuple they read:
the value is rebuilt from ``saver.get_delta_channel_history`` (the nearest
stored value plus the writes after it) and put into a copy of the checkpoint,
so the rest of the runtime sees an ordinary checkpoint. A graph without such a
channel, or a checkpoint holding every value, costs one scan of the specs.

A reducer key (``BinaryOperatorAggregate``) with a version and nothing stored
is rebuilt the same way, one write at a time: it was a ``DeltaChannel`` in
LangGraph before its annotation changed (LangGraph's rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadloom.channels.base import MISSING, BaseChannel
from threadloom.channels.binop import BinaryOperatorAggregate
from threadloom.channels.delta import DeltaChannel
from threadloom.checkpoint.base import CheckpointTuple

__all__ = [
    "FilledTuple",
    "SharedReads",
    "afill_delta",
    "fill_delta",
    "filled_versions",
    "store_filled",
    "to_rebuild",
]


class FilledTuple(CheckpointTuple):
    """A read tuple whose checkpoint holds rebuilt values; ``delta_filled`` names
    them. The next checkpoint saved from it stores them (:func:`store_filled`):
    threadloom's own checkpoints always hold a DeltaChannel's value, so retention
    and later reads never depend on LangGraph's ancestors again."""

    delta_filled: frozenset[str]


def filled_versions(saved: Any, versions: Mapping[str, Any]) -> dict[str, Any]:
    """The versions of the channels rebuilt into ``saved``: what a save that
    otherwise stores nothing new (``update_state`` copying a checkpoint) names
    so the rebuilt values are stored."""
    return {name: versions[name] for name in getattr(saved, "delta_filled", ()) if name in versions}


def store_filled(saved: Any, previous_versions: dict[str, Any]) -> dict[str, Any]:
    """``previous_versions`` (what the next save diffs against) without the
    channels rebuilt into ``saved``: their unchanged version then counts as new,
    so the save stores the rebuilt value under it."""
    filled = getattr(saved, "delta_filled", None)
    if filled:
        for name in filled:
            previous_versions.pop(name, None)
    return previous_versions


_KINDS = (DeltaChannel, BinaryOperatorAggregate)


def to_rebuild(specs: Mapping[str, Any], checkpoint: Mapping[str, Any]) -> list[str]:
    """The reducer channels ``checkpoint`` gives a version but no value."""
    versions = checkpoint.get("channel_versions") or {}
    values = checkpoint.get("channel_values") or {}
    return [
        name
        for name, spec in specs.items()
        if isinstance(spec, _KINDS) and name in versions and name not in values
    ]


def _rebuilt(spec: BaseChannel, name: str, history: Mapping[str, Any]) -> Any:
    channel = spec.from_checkpoint(history.get("seed", MISSING))
    channel.key = name
    if isinstance(channel, DeltaChannel):
        channel.replay_writes(history["writes"])
    else:  # several steps' writes: one update each (an Overwrite per step is fine)
        for write in history["writes"]:
            channel.update([write[2]])
    return channel.checkpoint()


def _filled(specs: Mapping[str, Any], tup: Any, histories: Mapping[str, Any]) -> Any:
    checkpoint = dict(tup.checkpoint)
    values = dict(checkpoint["channel_values"])
    for name, history in histories.items():
        value = _rebuilt(specs[name], name, history)
        if value is not MISSING:
            values[name] = value
    checkpoint["channel_values"] = values
    filled = FilledTuple(*tup._replace(checkpoint=checkpoint))
    filled.delta_filled = frozenset(histories)
    return filled


class SharedReads:
    """The ancestor reads of one history listing's rebuilds. Listed newest
    first, each checkpoint of an imported thread walks back to the nearest
    snapshot through the ancestors the one listed before it walked: read once,
    they are shared, so a listing reads each checkpoint about once instead of
    once per later checkpoint up to the next snapshot (LangGraph's default is
    every 100 updates). Kept first in, first out: the listing moves back in
    time, so the newest reads are the ones done with."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self.tuples: dict[tuple[Any, Any, Any], Any] = {}

    @staticmethod
    def _key(config: Any) -> tuple[Any, Any, Any]:
        conf = config.get("configurable", {})
        return (conf.get("thread_id"), conf.get("checkpoint_ns", ""), conf.get("checkpoint_id"))

    def _keep(self, key: tuple[Any, Any, Any], tup: Any) -> Any:
        if tup is not None and key[2] is not None:
            if len(self.tuples) >= self.size:
                del self.tuples[next(iter(self.tuples))]
            self.tuples[key] = tup
        return tup

    def read(self, saver: Any, config: Any) -> Any:
        key = self._key(config)
        hit = self.tuples.get(key)
        return hit if hit is not None else self._keep(key, saver.get_tuple(config))

    async def aread(self, saver: Any, config: Any) -> Any:
        key = self._key(config)
        hit = self.tuples.get(key)
        return hit if hit is not None else self._keep(key, await saver.aget_tuple(config))


def _generic(saver: Any, method: str) -> bool:
    """Whether ``saver`` rebuilds with the base class's ancestor walk (then a
    listing may drive that walk over :class:`SharedReads`)."""
    from threadloom.checkpoint.saver import BaseCheckpointSaver

    return getattr(type(saver), method, None) is getattr(BaseCheckpointSaver, method)


def fill_delta(
    specs: Mapping[str, Any], saver: Any, tup: Any, shared: SharedReads | None = None
) -> Any:
    """``tup`` with the values of its ``DeltaChannel``s rebuilt where it lacks them
    (``tup`` itself when nothing is missing). ``shared``: a history listing's
    reads (:class:`SharedReads`).

    Raises:
        StorageError: an ancestor the value depends on is not stored.
    """
    if tup is None or saver is None:
        return tup
    names = to_rebuild(specs, tup.checkpoint)
    if not names:
        return tup
    read = getattr(saver, "get_delta_channel_history", None)
    if shared is not None and (read is None or _generic(saver, "get_delta_channel_history")):
        from threadloom.checkpoint.delta_history import run_walk

        histories = run_walk(tup.config, names, lambda config: shared.read(saver, config))
    elif read is None:  # a proxy with only get_tuple & co: the generic walk over it
        from threadloom.checkpoint.saver import BaseCheckpointSaver

        histories = BaseCheckpointSaver.get_delta_channel_history(
            saver, config=tup.config, channels=names
        )
    else:
        histories = read(config=tup.config, channels=names)
    return _filled(specs, tup, histories)


async def afill_delta(
    specs: Mapping[str, Any], saver: Any, tup: Any, shared: SharedReads | None = None
) -> Any:
    """Async twin of :func:`fill_delta`."""
    if tup is None or saver is None:
        return tup
    names = to_rebuild(specs, tup.checkpoint)
    if not names:
        return tup
    read = getattr(saver, "aget_delta_channel_history", None)
    if shared is not None and (read is None or _generic(saver, "aget_delta_channel_history")):
        from threadloom.checkpoint.delta_history import arun_walk

        histories = await arun_walk(tup.config, names, lambda config: shared.aread(saver, config))
    elif read is None:
        from threadloom.checkpoint.saver import BaseCheckpointSaver

        histories = await BaseCheckpointSaver.aget_delta_channel_history(
            saver, config=tup.config, channels=names
        )
    else:
        histories = await read(config=tup.config, channels=names)
    return _filled(specs, tup, histories)
