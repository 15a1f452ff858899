"""The checkpoint model and the saver contract.

A *checkpoint* is the state of a thread between two supersteps: every channel's
value and version, and which versions each node has seen (that is what decides
which nodes run next). *Pending writes* are what tasks of the following step
wrote before the step finished; with them a crashed or interrupted step resumes
without re-running tasks that already succeeded.

The dict shapes match LangGraph's (``v=4``) so threads, tests and tools port.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import isfinite
from typing import Any, Literal, NamedTuple, TypedDict

from typing_extensions import NotRequired

from threadloom.checkpoint.ids import next_version, now_iso, uuid6, uuid6_str
from threadloom.constants import ERROR, INTERRUPT, RESUME, SCHEDULED
from threadloom.errors import ConfigError, EmptyChannelError

__all__ = [
    "LATEST_VERSION",
    "WRITES_IDX_MAP",
    "EXCLUDED_METADATA_KEYS",
    "ChannelVersions",
    "Checkpoint",
    "CheckpointMetadata",
    "CheckpointTuple",
    "PendingWrite",
    "RunnableConfig",
    "BaseCheckpointSaver",
    "DeltaChannelHistory",
    "PruneReport",
    "SerializerProtocol",
    "copy_checkpoint",
    "create_checkpoint",
    "empty_checkpoint",
    "get_checkpoint_id",
    "get_checkpoint_metadata",
    "get_serializable_checkpoint_metadata",
    "get_thread_id",
    "next_version",
    "uuid6",
    "writes_sort_key",
]

LATEST_VERSION = 4

RunnableConfig = dict[str, Any]
ChannelVersions = dict[str, "str | int | float"]
PendingWrite = tuple[str, str, Any]
"""``(task_id, channel, value)``"""

WRITES_IDX_MAP = {ERROR: -1, SCHEDULED: -2, INTERRUPT: -3, RESUME: -4}
"""Special writes get fixed negative indices so they never collide with a task's
ordinary writes (which use their list position) and can be overwritten."""

EXCLUDED_METADATA_KEYS = frozenset(
    {
        "thread_id",
        "checkpoint_id",
        "checkpoint_ns",
        "checkpoint_map",
        "langgraph_step",
        "langgraph_node",
        "langgraph_triggers",
        "langgraph_path",
        "langgraph_checkpoint_ns",
    }
)


class CheckpointMetadata(TypedDict, total=False):
    """Why a checkpoint exists; user keys from ``config["metadata"]`` ride along."""

    source: Literal["input", "loop", "update", "fork"]
    step: int
    parents: dict[str, str]
    run_id: str


class Checkpoint(TypedDict):
    """State of a thread between supersteps (format version 4)."""

    v: int
    id: str
    ts: str
    channel_values: dict[str, Any]
    channel_versions: ChannelVersions
    versions_seen: dict[str, ChannelVersions]
    updated_channels: list[str] | None


class CheckpointTuple(NamedTuple):
    """A checkpoint with the config that addresses it and what happened after it."""

    config: RunnableConfig
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    parent_config: RunnableConfig | None = None
    pending_writes: list[PendingWrite] | None = None


class PruneReport(NamedTuple):
    """What a prune removed (or, with ``dry_run=True``, would remove)."""

    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0
    bytes_freed: int = 0
    dry_run: bool = False


def writes_sort_key(task_path: str, task_id: str, idx: int) -> tuple[str, str, int]:
    """Order in which pending writes come back: the order a step applies them."""
    return (task_path, task_id, WRITES_IDX_MAP.get(idx, idx) if isinstance(idx, str) else idx)


def empty_checkpoint() -> Checkpoint:
    """The checkpoint of a thread that has never run (step -2)."""
    return Checkpoint(
        v=LATEST_VERSION,
        ts=now_iso(),
        id=uuid6_str(clock_seq=-2),
        channel_values={},
        channel_versions={},
        versions_seen={},
        updated_channels=None,
    )


def copy_checkpoint(checkpoint: Checkpoint) -> Checkpoint:
    """A copy whose dicts can be changed without touching the original."""
    return Checkpoint(
        v=checkpoint["v"],
        ts=checkpoint["ts"],
        id=checkpoint["id"],
        channel_values=dict(checkpoint["channel_values"]),
        channel_versions=dict(checkpoint["channel_versions"]),
        versions_seen={k: v.copy() for k, v in checkpoint["versions_seen"].items()},
        updated_channels=checkpoint.get("updated_channels"),
    )


def create_checkpoint(
    checkpoint: Checkpoint,
    channels: Mapping[str, Any] | None,
    step: int,
    *,
    id: str | None = None,
    updated_channels: list[str] | None = None,
    values: dict[str, Any] | None = None,
) -> Checkpoint:
    """A new checkpoint from ``checkpoint``'s versions and the channels' current values.

    ``channels=None`` keeps ``checkpoint``'s values (used when only ids move on).
    Only channels that have a version are stored; empty channels are skipped.
    ``values``: those values, already read by the caller (the runtime reads them
    through a per-run plan, ``pregel.checkpoint.checkpoint_values``); ``channels``
    is then not read.
    """
    if values is not None:
        pass
    elif channels is None:
        values = checkpoint["channel_values"]
    else:
        values = {}
        versions = checkpoint["channel_versions"]
        missing = _MISSING_SENTINELS.get("missing")
        for name, channel in channels.items():
            if name in versions:
                try:
                    value = channel.checkpoint()
                except EmptyChannelError:
                    continue
                if value is not missing:
                    values[name] = value
    # a literal: the same dict ``Checkpoint(...)`` builds (keys in the same order), without
    # the keyword call (every saved step makes one)
    return {  # type: ignore[return-value]
        "v": LATEST_VERSION,
        "ts": now_iso(),
        "id": id or uuid6_str(clock_seq=step),
        "channel_values": values,
        "channel_versions": checkpoint["channel_versions"],
        "versions_seen": checkpoint["versions_seen"],
        "updated_channels": updated_channels,
    }


# filled by threadloom.channels.base with its MISSING marker, so a channel's
# checkpoint() can say "nothing to store" without this module importing channels
_MISSING_SENTINELS: dict[str, object] = {}


def get_thread_id(config: RunnableConfig | None) -> str:
    """The ``thread_id`` of a config, or a :class:`ConfigError` saying it is missing."""
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ConfigError(
            'config["configurable"]["thread_id"] is required: '
            'pass config={"configurable": {"thread_id": "..."}}'
        )
    return str(thread_id)


def get_checkpoint_id(config: RunnableConfig) -> str | None:
    """The explicit ``checkpoint_id`` of a config, if any (``""`` is none: the
    latest, as LangGraph reads it)."""
    return (config.get("configurable") or {}).get("checkpoint_id") or None


def get_checkpoint_metadata(
    config: RunnableConfig, metadata: CheckpointMetadata
) -> CheckpointMetadata:
    """The metadata a saver stores: the loop's keys plus plain user keys from config.

    Unlike LangGraph, values from ``config["configurable"]`` are **not** copied
    (they routinely hold API keys and tokens); only ``config["metadata"]`` is
    merged, and only str/int/finite float/bool values. ``run_id`` from configurable is
    kept because retention by run needs it. See docs/compatibility.md.
    """
    result: dict[str, Any] = {
        k: v.replace("\u0000", "") if isinstance(v, str) else v for k, v in metadata.items()
    }
    configurable = config.get("configurable") or {}
    extra = dict(config.get("metadata") or {})
    if "run_id" in configurable and "run_id" not in extra:
        extra["run_id"] = configurable["run_id"]
    for key, value in extra.items():
        if key in result or key in EXCLUDED_METADATA_KEYS or key.startswith("__"):
            continue
        key = _text(key)
        if isinstance(value, str):
            result[key] = _text(value)
        elif isinstance(value, (bool, int)) or (isinstance(value, float) and isfinite(value)):
            result[key] = value  # (NaN and infinities are not JSON: left out, as other types)
    return result  # type: ignore[return-value]


def _text(value: str) -> str:
    """A metadata string as stored text: no NUL, and a lone surrogate (which no
    UTF-8 store can hold: the run failed saving it) as U+FFFD."""
    value = value.replace("\u0000", "")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def get_serializable_checkpoint_metadata(
    config: RunnableConfig, metadata: CheckpointMetadata
) -> CheckpointMetadata:
    """:func:`get_checkpoint_metadata` without the legacy ``writes`` key, which can
    hold values a JSON column cannot (for savers that store metadata as JSON)."""
    result = get_checkpoint_metadata(config, metadata)
    result.pop("writes", None)  # type: ignore[misc]
    return result


class DeltaChannelHistory(TypedDict):
    """What one channel contributed along a checkpoint's ancestors, for rebuilding
    a ``DeltaChannel`` whose value a checkpoint does not hold
    (``BaseCheckpointSaver.get_delta_channel_history``).

    ``writes``: the channel's writes from the checkpoint after ``seed``'s up to the
    target's parent, oldest first, each step's in :func:`writes_sort_key` order
    (the order the run applied them). ``seed``: the value stored at the nearest
    ancestor holding one; absent when there is none (start empty).
    """

    writes: list[PendingWrite]
    seed: NotRequired[Any]


from threadloom.checkpoint.saver import BaseCheckpointSaver  # noqa: E402  (re-export)
from threadloom.checkpoint.serde.base import SerializerProtocol  # noqa: E402  (re-export)
