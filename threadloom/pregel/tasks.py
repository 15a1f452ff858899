"""[2] Planning a step: which tasks run next (pure, no I/O).

``prepare_next_tasks`` looks at a checkpoint and its channels and returns the
tasks of the next step: first one PUSH task per ``Send`` in ``__pregel_tasks``,
then one PULL task per node with a trigger channel whose version is newer than
the one the node last saw. ``history.py`` uses it (``for_execution=False``) to
show ``next``/``tasks`` in state snapshots.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xxhash import xxh3_128_hexdigest

from threadloom.channels.base import MISSING, BaseChannel
from threadloom.constants import (
    INTERRUPT,
    NS_END,
    NS_SEP,
    NULL_TASK_ID,
    PULL,
    PUSH,
    RESUME,
    TAG_HIDDEN,
    TASKS,
)
from threadloom.pregel.ids import checkpoint_id_bytes, interrupt_id, task_id, task_id_v1
from threadloom.pregel.task import CacheKey, PregelExecutableTask, Scratchpad
from threadloom.types import CachePolicy, PregelTask, RetryPolicy, Send

__all__ = [
    "checkpoint_null_version",
    "make_scratchpad",
    "plan_tasks",
    "prepare_next_tasks",
    "prepare_push_task",
    "prepare_pull_task",
    "renew_plan",
    "run_plan",
    "should_interrupt",
]

logger = logging.getLogger("threadloom.pregel")
PUSH_TRIGGER = (PUSH,)
CACHE_NS_WRITES = "__pregel_ns_writes"


def checkpoint_null_version(checkpoint: Mapping[str, Any]) -> Any:
    """The "never seen" version: ``type(any version)()`` (``""`` or ``0``), None if empty."""
    for version in checkpoint["channel_versions"].values():
        return type(version)()
    return None


def make_scratchpad(
    pending_writes: list[Any],
    tid: str,
    task_ns: str,
    resume_map: Mapping[str, Any] | None,
    step: int,
    stop: int,
    parent: Scratchpad | None = None,
) -> Scratchpad:
    """Collect this task's resume answers from the pending writes (and a resume map)."""
    null_resume = None
    resume: list[Any] = []
    if pending_writes:
        for w in pending_writes:
            if w[0] == NULL_TASK_ID and w[1] == RESUME:
                null_resume = w
                break
        for w in pending_writes:
            if w[0] == tid and w[1] == RESUME:
                resume = list(w[2]) if isinstance(w[2], list) else [w[2]]
                break
        if resume_map:
            next_id = interrupt_id(task_ns, len(resume))
            first_id = interrupt_id(task_ns, 0)
            if next_id in resume_map:
                resume.append(resume_map[next_id])
            elif first_id in resume_map:
                resume.append(resume_map[first_id])
    return Scratchpad(step, stop, resume, null_resume, pending_writes, parent)


def should_interrupt(
    checkpoint: Mapping[str, Any], interrupt_nodes: Sequence[str] | str, tasks: Iterable[Any]
) -> list[Any]:
    """Tasks to pause at: only if some channel changed since the last interrupt/resume.

    ``"*"`` means every node the user declared: hidden tasks (tagged
    ``langsmith:hidden``, such as a graph's START input node) are left out, as
    LangGraph does, so ``interrupt_before="*"`` stops before the first real node.
    A hidden node named explicitly still counts."""
    versions = checkpoint["channel_versions"]
    null_version = checkpoint_null_version(checkpoint)
    seen = checkpoint["versions_seen"].get(INTERRUPT, {})
    if not any(v > seen.get(c, null_version) for c, v in versions.items()):
        return []
    if interrupt_nodes == "*":
        return [t for t in tasks if TAG_HIDDEN not in t.proc.tags]
    return [t for t in tasks if t.name in interrupt_nodes]


class _Plan:
    """What every task of one planning pass shares (keeps signatures short).

    A run keeps one plan for all its steps (:func:`run_plan`, then
    :func:`renew_plan` per step): the fields fixed for the run are set once."""

    __slots__ = (
        "checkpoint",
        "id_bytes",
        "id_fn",
        "pending_writes",
        "processes",
        "channels",
        "step",
        "stop",
        "parent_ns",
        "for_execution",
        "resume_map",
        "parent_scratchpad",
        "retry_policy",
        "cache_policy",
        "base_map",
        "checkpoint_map",
        "input_cache",
    )


def run_plan(
    processes: Mapping[str, Any],
    channels: Mapping[str, BaseChannel],
    checkpoint_ns: str,
    for_execution: bool,
    parent_scratchpad: Scratchpad | None,
    retry_policy: Sequence[RetryPolicy],
    cache_policy: CachePolicy | None,
    checkpoint_map: Mapping[str, str] | None,
) -> _Plan:
    """A plan's run-wide part; :func:`renew_plan` fills in each step's."""
    plan = _Plan()
    plan.processes = processes
    plan.channels = channels
    plan.parent_ns = checkpoint_ns
    plan.for_execution = for_execution
    plan.parent_scratchpad = parent_scratchpad
    plan.retry_policy = retry_policy
    plan.cache_policy = cache_policy
    plan.base_map = checkpoint_map or {}
    return plan


def renew_plan(
    plan: _Plan,
    checkpoint: Mapping[str, Any],
    pending_writes: list[Any],
    step: int,
    stop: int | None,
    resume_map: Mapping[str, Any] | None,
) -> _Plan:
    """Point ``plan`` at the step planned from ``checkpoint``."""
    plan.checkpoint = checkpoint
    plan.id_bytes = checkpoint_id_bytes(checkpoint["id"])
    plan.id_fn = task_id if checkpoint["v"] > 1 else task_id_v1
    plan.pending_writes = pending_writes
    plan.step = step
    plan.stop = stop if stop is not None else step + 1
    plan.resume_map = resume_map
    plan.checkpoint_map = {**plan.base_map, plan.parent_ns: checkpoint["id"]}
    plan.input_cache = {}
    return plan


def prepare_next_tasks(
    checkpoint: Mapping[str, Any],
    pending_writes: list[Any],
    processes: Mapping[str, Any],
    channels: Mapping[str, BaseChannel],
    *,
    step: int,
    stop: int | None = None,
    checkpoint_ns: str = "",
    for_execution: bool = False,
    trigger_to_nodes: Mapping[str, Sequence[str]] | None = None,
    updated_channels: set[str] | None = None,
    resume_map: Mapping[str, Any] | None = None,
    parent_scratchpad: Scratchpad | None = None,
    retry_policy: Sequence[RetryPolicy] = (),
    cache_policy: CachePolicy | None = None,
    checkpoint_map: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The tasks of step ``step`` planned from ``checkpoint``: ``{task_id: task}``.

    With ``for_execution=False`` the values are :class:`PregelTask` views (id,
    name, path); otherwise :class:`PregelExecutableTask` with input, scratchpad
    and cache key. ``updated_channels`` + ``trigger_to_nodes`` narrow the PULL
    candidates to nodes triggered by channels the last step changed.
    """
    plan = run_plan(
        processes,
        channels,
        checkpoint_ns,
        for_execution,
        parent_scratchpad,
        retry_policy,
        cache_policy,
        checkpoint_map,
    )
    renew_plan(plan, checkpoint, pending_writes, step, stop, resume_map)
    return plan_tasks(plan, trigger_to_nodes, updated_channels)


def plan_tasks(
    plan: _Plan,
    trigger_to_nodes: Mapping[str, Sequence[str]] | None,
    updated_channels: set[str] | None,
) -> dict[str, Any]:
    """:func:`prepare_next_tasks` for a plan already made (a run's, renewed per step)."""
    channels = plan.channels
    checkpoint = plan.checkpoint
    tasks: dict[str, Any] = {}
    tasks_channel = channels.get(TASKS)
    if tasks_channel is not None and tasks_channel.is_available():
        for idx in range(len(tasks_channel.get())):
            if task := prepare_push_task(plan, idx):
                tasks[task.id] = task
    if updated_channels and trigger_to_nodes:
        candidates: Iterable[str] = _triggered(updated_channels, trigger_to_nodes)
    elif not checkpoint["channel_versions"]:
        candidates = ()
    else:
        candidates = plan.processes.keys()
    null_version = checkpoint_null_version(checkpoint)
    if null_version is None:
        return tasks
    for name in candidates:
        if task := prepare_pull_task(plan, name, null_version):
            tasks[task.id] = task
    return tasks


def _cache_key(policy: CachePolicy | None, name: str, value: Any) -> CacheKey | None:
    if policy is None:
        return None
    args_key = policy.key_func(value)
    digest = xxh3_128_hexdigest(args_key.encode() if isinstance(args_key, str) else args_key)
    return CacheKey((CACHE_NS_WRITES, name, name), digest, policy.ttl)


def prepare_push_task(plan: _Plan, idx: int) -> Any:
    """The task for the ``idx``-th Send in ``__pregel_tasks`` (None if it names no node)."""
    sends = plan.channels[TASKS].get()
    packet = sends[idx]
    if not isinstance(packet, Send):
        logger.warning("Ignoring invalid packet type %s in pending sends", type(packet))
        return None
    proc = plan.processes.get(packet.node)
    if proc is None:
        logger.warning("Ignoring unknown node name %s in pending sends", packet.node)
        return None
    parent_ns = plan.parent_ns
    node_ns = f"{parent_ns}{NS_SEP}{packet.node}" if parent_ns else packet.node
    tid = plan.id_fn(plan.id_bytes, node_ns, str(plan.step), packet.node, PUSH, str(idx))
    path = (PUSH, idx, False)
    if not plan.for_execution:
        return PregelTask(tid, packet.node, path)
    return _executable(
        plan, proc, packet.node, packet.arg, tid, path, PUSH_TRIGGER, node_ns, packet.timeout
    )


def prepare_pull_task(plan: _Plan, name: str, null_version: Any) -> Any:
    """The task for node ``name`` if a trigger changed since it last ran, else None."""
    proc = plan.processes.get(name)
    if proc is None:
        return None
    checkpoint = plan.checkpoint
    versions = checkpoint["channel_versions"]
    seen = checkpoint["versions_seen"].get(name)
    channels = plan.channels
    for chan in proc.triggers:
        if channels[chan].is_available() and (
            seen is None or versions.get(chan, null_version) > seen.get(chan, null_version)
        ):
            break
    else:
        return None
    ids = getattr(proc, "pull_ids", None)
    if ids is None or ids[3] != name or ids[2] != tuple(proc.triggers):
        ids = _pull_ids(proc, name)
    triggers, tail, _, _ = ids
    parent_ns = plan.parent_ns
    node_ns = f"{parent_ns}{NS_SEP}{name}" if parent_ns else name
    tid = plan.id_fn(plan.id_bytes, node_ns, str(plan.step), tail)
    path = (PULL, name)
    value = _proc_input(proc, channels, plan.input_cache)
    if value is MISSING:
        return None
    if not plan.for_execution:
        return PregelTask(tid, name, path)
    if proc.managed is not None:  # RemainingSteps...: from this step (plan.step/stop)
        value.update({k: m.get(plan) for k, m in proc.managed.items()})
    if proc.mapper is not None:
        value = proc.mapper(value)
    return _executable(plan, proc, name, value, tid, path, triggers, node_ns)


def _triggered(updated: set[str], trigger_to_nodes: Mapping[str, Sequence[str]]) -> list[str]:
    """Nodes triggered by the ``updated`` channels, sorted, each once. The usual step
    updates one trigger channel (and state keys that trigger nothing): its node list
    is the answer, with no set to build."""
    found: Sequence[str] | None = None
    merged: set[str] | None = None
    for chan in updated:
        nodes = trigger_to_nodes.get(chan)
        if not nodes:
            continue
        if found is None:
            found = nodes
        else:
            if merged is None:
                merged = set(found)
            merged.update(nodes)
    if merged is not None:
        return sorted(merged)
    if found is None:
        return []
    return list(found) if len(found) == 1 else sorted(set(found))


def _pull_ids(proc: Any, name: str) -> tuple[tuple[str, ...], str, tuple[str, ...], str]:
    """A node's sorted triggers and the text its PULL task ids hash after the step
    (``name``, ``__pregel_pull``, the triggers: ids join their parts), kept on the
    node (``pull_ids``) for every later run; redone when its triggers are not the
    ones it was made from (added or replaced), or the node is planned under
    another name."""
    raw = tuple(proc.triggers)
    triggers = tuple(sorted(raw))
    ids = (triggers, "".join((name, PULL, *triggers)), raw, name)
    try:
        proc.pull_ids = ids
    except AttributeError:  # a node-like object without the slot: no cache
        pass
    return ids


def _executable(
    plan: _Plan,
    proc: Any,
    name: str,
    value: Any,
    tid: str,
    path: tuple[Any, ...],
    triggers: Sequence[str],
    node_ns: str,
    timeout: Any = None,
) -> PregelExecutableTask:
    task_ns = f"{node_ns}{NS_END}{tid}"
    pending = plan.pending_writes
    if pending:
        scratchpad = make_scratchpad(
            pending, tid, task_ns, plan.resume_map, plan.step, plan.stop, plan.parent_scratchpad
        )
    else:  # nothing to resume from (make_scratchpad's answer, without the call)
        scratchpad = Scratchpad(plan.step, plan.stop, [], None, pending, plan.parent_scratchpad)
    policy = proc.cache_policy or plan.cache_policy
    return PregelExecutableTask(  # positional: name ... step, timeout, checkpoint_map, cache_policy
        name,
        value,
        proc,
        [],
        triggers,
        proc.retry_policy or plan.retry_policy,
        _cache_key(policy, name, value) if policy else None,
        tid,
        path,
        task_ns,
        scratchpad,
        plan.step,
        proc.timeout if timeout is None else timeout,  # a Send's own limit wins
        plan.checkpoint_map,
        policy,
    )


def _proc_input(proc: Any, channels: Mapping[str, BaseChannel], cache: dict[Any, Any]) -> Any:
    """A PULL task's input: the one channel it reads, or a dict of the channels it reads."""
    key = proc.input_cache_key
    if key in cache:
        cached = cache[key]
        return dict(cached) if isinstance(cached, dict) else cached
    spec = proc.channels
    if isinstance(spec, str):
        chan = channels.get(spec)
        if chan is None or not chan.is_available():
            return MISSING
        value = chan.get()
    else:
        value = {}
        for c in spec:
            chan = channels.get(c)
            if chan is not None and chan.is_available():
                value[c] = chan.get()
    cache[key] = value
    return dict(value) if isinstance(value, dict) else value
