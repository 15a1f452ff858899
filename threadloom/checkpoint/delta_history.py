"""The ancestor walk behind ``BaseCheckpointSaver.get_delta_channel_history``.

LangGraph 1.2's ``DeltaChannel`` stores its value only every N updates; a
checkpoint in between holds nothing for it, and the value is rebuilt from the
nearest ancestor that holds one (the *seed*) plus the channel's writes stored on
the checkpoints after it. threadloom's own checkpoints always hold the value, so
the walk matters for threads ``import_langgraph`` brought over.

:func:`walk` is written once for both the sync and the async saver method: it
yields the config of each checkpoint it needs and is sent back the tuple read
(:func:`run_walk` / :func:`arun_walk` drive it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any

from threadloom.errors import StorageError

__all__ = ["arun_walk", "run_walk", "walk"]


def _ids(config: Any) -> tuple[str, str, str]:
    conf = (config or {}).get("configurable", {})
    return (
        str(conf.get("thread_id", "")),
        str(conf.get("checkpoint_ns", "")),
        str(conf.get("checkpoint_id", "")),
    )


def _lost(config: Any, missing: Any, channels: set[str]) -> StorageError:
    thread, ns, target = _ids(config)
    where = f" (namespace {ns!r})" if ns else ""
    gone = _ids(missing)[2]
    return StorageError(
        f"cannot rebuild delta channel(s) {sorted(channels)} of thread {thread!r}{where} "
        f"at checkpoint {target!r}: its ancestor checkpoint {gone!r} is not stored "
        "(pruned or not imported), and the channel's value between snapshots is rebuilt "
        "from the writes stored on those ancestors"
    )


def walk(config: Any, channels: Sequence[str]) -> Generator[Any, Any, dict[str, dict[str, Any]]]:
    """Per channel: the seed (value at the nearest ancestor holding one, absent
    when the walk reaches the root) and the writes after it, oldest first. The
    target's own pending writes are not included (they belong to the next step).

    Raises:
        StorageError: the target, or an ancestor its parent links name, is not
            stored: the value cannot be rebuilt, and an empty one would be wrong.
    """
    if not channels:
        return {}
    collected: dict[str, list[Any]] = {c: [] for c in channels}
    seeds: dict[str, Any] = {}
    remaining = set(channels)
    target = yield config
    if target is None:
        raise _lost(config, config, remaining)
    cursor = target.parent_config
    while cursor is not None and remaining:
        tup = yield cursor
        if tup is None:
            raise _lost(target.config, cursor, remaining)
        for write in reversed(tup.pending_writes or ()):
            if write[1] in remaining:
                collected[write[1]].append(write)
        values = tup.checkpoint["channel_values"]
        for channel in [c for c in remaining if c in values]:
            seeds[channel] = values[channel]
            remaining.discard(channel)
        cursor = tup.parent_config
    out: dict[str, dict[str, Any]] = {}
    for channel in channels:
        entry: dict[str, Any] = {"writes": collected[channel][::-1]}
        if channel in seeds:
            entry["seed"] = seeds[channel]
        out[channel] = entry
    return out


def run_walk(
    config: Any, channels: Sequence[str], read: Callable[[Any], Any]
) -> dict[str, dict[str, Any]]:
    """:func:`walk`, each checkpoint it needs read with ``read(config)``
    (a saver's ``get_tuple``, or a history listing's shared reads)."""
    gen = walk(config, channels)
    try:
        request = next(gen)
        while True:
            request = gen.send(read(request))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def arun_walk(
    config: Any, channels: Sequence[str], read: Callable[[Any], Awaitable[Any]]
) -> dict[str, dict[str, Any]]:
    """Async twin of :func:`run_walk`."""
    gen = walk(config, channels)
    try:
        request = next(gen)
        while True:
            request = gen.send(await read(request))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
