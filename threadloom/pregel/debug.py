"""Payloads of the ``tasks``, ``checkpoints`` and ``debug`` stream modes, and
``tasks_w_writes`` (tasks as :class:`PregelTask` views with their results),
shared with ``history.py``. Shapes match LangGraph's exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from threadloom.channels.base import MISSING, BaseChannel
from threadloom.checkpoint.base import EXCLUDED_METADATA_KEYS
from threadloom.constants import (
    CONFIG_KEY_CHECKPOINT_NS,
    ERROR,
    INTERRUPT,
    NS_END,
    NS_SEP,
    RETURN,
    TAG_HIDDEN,
)
from threadloom.pregel.io import read_channels
from threadloom.pregel.writes import TaskStatus, read_task_statuses
from threadloom.types import PregelTask

__all__ = [
    "map_debug_checkpoint",
    "map_debug_task_results",
    "map_debug_tasks",
    "map_task_result_writes",
    "patch_checkpoint_map",
    "tasks_w_writes",
]

_NOT_STARTED = TaskStatus()


def _interrupt_dict(i: Any) -> dict[str, Any]:
    # dataclasses.asdict(Interrupt) in LangGraph 1.2: value, id, response_schema
    return {"value": i.value, "id": i.id, "response_schema": getattr(i, "response_schema", None)}


def map_debug_tasks(
    tasks: Iterable[Any], config: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """``tasks`` events for tasks about to run (hidden ones, like a graph's input node,
    are not reported: LangGraph skips tasks tagged ``langsmith:hidden``).

    ``metadata`` is what the task's config carries for the user: the run's
    ``config["metadata"]`` and the node's own, without the run's bookkeeping keys,
    plus the run's and the node's tags (LangGraph's ``seq:step:*`` tags left out)."""
    config = config or {}
    run_md = {
        k: v for k, v in (config.get("metadata") or {}).items() if k not in EXCLUDED_METADATA_KEYS
    }
    run_tags = [t for t in config.get("tags") or () if not t.startswith("seq:step")]
    for task in tasks:
        proc = task.proc
        if TAG_HIDDEN in proc.tags or TAG_HIDDEN in run_tags:
            continue
        payload = {"id": task.id, "name": task.name, "input": task.input, "triggers": task.triggers}
        md = {**run_md, **proc.metadata} if run_md else dict(proc.metadata)
        tags = [*run_tags, *proc.tags] if run_tags else list(proc.tags)
        if tags:
            md["tags"] = tags
        if md:
            payload["metadata"] = md
        yield payload


def map_task_result_writes(writes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """Fold writes into ``{channel: value}``; repeated channels -> ``{"$writes": [...]}``."""
    result: dict[str, Any] = {}
    for channel, value in writes:
        existing = result.get(channel)
        if existing is not None:
            multi = isinstance(existing, dict) and isinstance(existing.get("$writes"), list)
            ws = existing["$writes"] if multi else [existing]
            ws.append(value)
            result[channel] = {"$writes": ws}
        else:
            result[channel] = value
    return result


def map_debug_task_results(
    task: Any, writes: Sequence[tuple[str, Any]], stream_keys: str | Sequence[str]
) -> Iterator[dict[str, Any]]:
    """``tasks`` events for finished tasks."""
    keys = [stream_keys] if isinstance(stream_keys, str) else stream_keys
    yield {
        "id": task.id,
        "name": task.name,
        "error": next((w[1] for w in writes if w[0] == ERROR), None),
        "result": map_task_result_writes([w for w in writes if w[0] in keys or w[0] == RETURN]),
        "interrupts": [
            _interrupt_dict(v)
            for w in writes
            if w[0] == INTERRUPT
            for v in (w[1] if isinstance(w[1], Sequence) else [w[1]])
        ],
    }


def patch_checkpoint_map(
    config: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None
) -> Any:
    """Add ``checkpoint_map`` = ``metadata.parents`` + this checkpoint (nested graphs only)."""
    if config is None:
        return None
    parents = (metadata or {}).get("parents")
    if not parents:
        return config
    conf = config["configurable"]
    cmap = {**parents, conf["checkpoint_ns"]: conf["checkpoint_id"]}
    return {**config, "configurable": {**conf, "checkpoint_map": cmap}}


def _rm_pregel_keys(config: Mapping[str, Any] | None) -> Any:
    if config is None:
        return None
    return {
        "configurable": {
            k: v for k, v in config.get("configurable", {}).items() if not k.startswith("__pregel_")
        }
    }


def map_debug_checkpoint(
    config: Mapping[str, Any],
    channels: Mapping[str, BaseChannel],
    stream_channels: str | Sequence[str],
    metadata: Mapping[str, Any],
    tasks: Sequence[Any],
    pending_writes: list[Any],
    parent_config: Mapping[str, Any] | None,
    output_keys: str | Sequence[str],
) -> Iterator[dict[str, Any]]:
    """``checkpoints`` events: the checkpoint a step starts from, with its next tasks."""
    parent_ns = config["configurable"].get(CONFIG_KEY_CHECKPOINT_NS, "")
    states: dict[str, Any] = {}
    for task in tasks:
        if not task.proc.subgraphs:
            continue
        task_ns = f"{task.name}{NS_END}{task.id}"
        if parent_ns:
            task_ns = f"{parent_ns}{NS_SEP}{task_ns}"
        states[task.id] = {
            "configurable": {
                "thread_id": config["configurable"]["thread_id"],
                CONFIG_KEY_CHECKPOINT_NS: task_ns,
            }
        }
    yield {
        "config": _rm_pregel_keys(patch_checkpoint_map(config, metadata)),
        "parent_config": _rm_pregel_keys(patch_checkpoint_map(parent_config, metadata)),
        "values": read_channels(channels, stream_channels),
        "metadata": metadata,
        "next": [t.name for t in tasks],
        "tasks": [
            {"id": t.id, "name": t.name, "error": t.error, "state": t.state}
            if t.error
            else {
                "id": t.id,
                "name": t.name,
                "result": t.result,
                "interrupts": tuple(_interrupt_dict(i) for i in t.interrupts),
                "state": t.state,
            }
            if t.result
            else {
                "id": t.id,
                "name": t.name,
                "interrupts": tuple(_interrupt_dict(i) for i in t.interrupts),
                "state": t.state,
            }
            for t in tasks_w_writes(tasks, pending_writes, states, output_keys)
        ],
    }


def tasks_w_writes(
    tasks: Iterable[Any],
    pending_writes: list[Any] | None,
    states: Mapping[str, Any] | None,
    output_keys: str | Sequence[str],
    *,
    live: bool = False,
) -> tuple[PregelTask, ...]:
    """Tasks as :class:`PregelTask` with error, interrupts, state and result from the writes.

    ``live=True`` reports only interrupts still waiting for an answer.
    """
    statuses = read_task_statuses(pending_writes or [])
    out: list[PregelTask] = []
    for task in tasks:
        status = statuses.get(task.id, _NOT_STARTED)
        rtn = next((v for c, v in status.output if c == RETURN), MISSING)
        task_writes = [(c, v) for c, v in status.output if c != RETURN]
        if rtn is not MISSING:
            result = rtn
        elif isinstance(output_keys, str):
            mapped = map_task_result_writes([(c, v) for c, v in task_writes if c == output_keys])
            result = mapped.get(str(output_keys)) if mapped else None
        else:
            filtered = [(c, v) for c, v in task_writes if c in output_keys]
            result = map_task_result_writes(filtered) if filtered else {}
        out.append(
            PregelTask(
                task.id,
                task.name,
                task.path,
                status.error,
                status.pending_interrupts if live else status.interrupts,
                states.get(task.id) if states else None,
                result if status.finished else None,
            )
        )
    return tuple(out)
