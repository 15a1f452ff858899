"""Inspect, rewind and edit a thread: ``get_state``, ``get_state_history``,
``update_state`` and ``bulk_update_state`` (plus their async twins).

``Pregel``'s methods of the same names delegate here. The decisions live in
:mod:`threadloom.pregel.snapshot` and :mod:`threadloom.pregel.update` as
generators that yield read requests; this module only answers them with the
saver's sync or async methods, so the twins cannot drift apart.

Errors:
    ConfigError: no ``thread_id``, or the graph has no checkpointer.
    CheckpointNotFoundError: an explicit ``checkpoint_id`` the thread does not have.
    InvalidUpdateError: an update the graph cannot accept (unknown node, ambiguous
        ``as_node``, values the node's writers reject).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from typing import Any

from threadloom.channels.delta_fill import SharedReads, afill_delta, fill_delta
from threadloom.checkpoint.lease import local
from threadloom.constants import CONFIG_KEY_CHECKPOINT_ID
from threadloom.pregel.snapshot import (
    CONF,
    ReadState,
    ReadTuple,
    plan_snapshot,
    prepare_config,
    resolve_saver,
    route,
)
from threadloom.pregel.update import Op, plan_bulk, validate_supersteps
from threadloom.pregel.update_writers import RunWriters, arun_writers, run_writers
from threadloom.types import StateSnapshot, StateUpdate

__all__ = [
    "abulk_update_state",
    "aget_state",
    "aget_state_history",
    "aupdate_state",
    "bulk_update_state",
    "get_state",
    "get_state_history",
    "update_state",
]

RunnableConfig = dict[str, Any]


# -- drivers: answer the planners' read requests -------------------------------------


def _drive(gen: Generator[Any, Any, Any], saver: Any) -> Any:
    try:
        request = next(gen)
        while True:
            if isinstance(request, ReadTuple):
                answer = saver.get_tuple(request.config)
                if request.specs is not None:
                    answer = fill_delta(request.specs, saver, answer)
            elif isinstance(request, ReadState):
                answer = _get_state(request.graph, request.config, True, saver, routed=True)
            elif isinstance(request, RunWriters):
                answer = run_writers(request)
            else:  # pragma: no cover - planners only yield these
                raise TypeError(f"unknown read request {request!r}")
            request = gen.send(answer)
    except StopIteration as stop:
        return stop.value


async def _adrive(gen: Generator[Any, Any, Any], saver: Any) -> Any:
    try:
        request = next(gen)
        while True:
            if isinstance(request, ReadTuple):
                answer = await saver.aget_tuple(request.config)
                if request.specs is not None:
                    answer = await afill_delta(request.specs, saver, answer)
            elif isinstance(request, ReadState):
                answer = await _aget_state(request.graph, request.config, True, saver, routed=True)
            elif isinstance(request, RunWriters):
                answer = await arun_writers(request)
            else:  # pragma: no cover
                raise TypeError(f"unknown read request {request!r}")
            request = gen.send(answer)
    except StopIteration as stop:
        return stop.value


def _target(
    graph: Any, config: Any, saver: Any, routed: bool, *, for_update: bool = False, ns: bool = True
) -> tuple[Any, Any, RunnableConfig]:
    saver = resolve_saver(graph, saver)
    target = graph if routed else route(graph, config or {}, for_update=for_update)
    return target, saver, prepare_config(target, config, with_ns=ns)


def _thread_of(config: Any) -> Any:
    return ((config or {}).get("configurable") or {}).get("thread_id")


def _is_live(config: RunnableConfig) -> bool:
    return not config[CONF].get(CONFIG_KEY_CHECKPOINT_ID)


# -- get_state ---------------------------------------------------------------------------


def _get_state(
    graph: Any, config: Any, subgraphs: bool, saver: Any = None, *, routed: bool = False
) -> StateSnapshot:
    target, saver, config = _target(graph, config, saver, routed, ns=False)
    plan = plan_snapshot(target, config, subgraphs=subgraphs, live=_is_live(config))
    return _drive(plan, saver)


async def _aget_state(
    graph: Any, config: Any, subgraphs: bool, saver: Any = None, *, routed: bool = False
) -> StateSnapshot:
    target, saver, config = _target(graph, config, saver, routed, ns=False)
    plan = plan_snapshot(target, config, subgraphs=subgraphs, live=_is_live(config))
    return await _adrive(plan, saver)


def get_state(
    graph: Any, config: RunnableConfig, *, subgraphs: bool = False, saver: Any = None
) -> StateSnapshot:
    """The thread's state: live without ``checkpoint_id``, else that checkpoint's.

    A thread that never ran gives an empty snapshot. ``checkpoint_ns`` in the
    config routes to the subgraph it names; ``subgraphs=True`` nests each
    subgraph task's own snapshot in ``task.state``. A run of this process that
    was dropped mid-stream is given a moment to store what it streamed first.
    """
    local.settle(_thread_of(config))
    return _get_state(graph, config, subgraphs, saver)


async def aget_state(
    graph: Any, config: RunnableConfig, *, subgraphs: bool = False, saver: Any = None
) -> StateSnapshot:
    """Async twin of :func:`get_state`."""
    await local.asettle(_thread_of(config))
    return await _aget_state(graph, config, subgraphs, saver)


# -- get_state_history -------------------------------------------------------------------


def get_state_history(
    graph: Any,
    config: RunnableConfig,
    *,
    filter: dict[str, Any] | None = None,
    before: RunnableConfig | None = None,
    limit: int | None = None,
    saver: Any = None,
) -> Iterator[StateSnapshot]:
    """Snapshots of the thread's checkpoints, newest first, built one at a time.

    Lazy: reading the first ten snapshots of a 10,000-step thread loads ten
    checkpoints (as far as the saver's ``list`` is lazy).
    """
    local.settle(_thread_of(config))
    target, saver, config = _target(graph, config, saver, False)
    shared = SharedReads()
    for saved in saver.list(config, filter=filter, before=before, limit=limit):
        saved = fill_delta(target.channels, saver, saved, shared)
        yield _drive(plan_snapshot(target, saved.config, saved=saved, loaded=True), saver)


async def aget_state_history(
    graph: Any,
    config: RunnableConfig,
    *,
    filter: dict[str, Any] | None = None,
    before: RunnableConfig | None = None,
    limit: int | None = None,
    saver: Any = None,
) -> AsyncIterator[StateSnapshot]:
    """Async twin of :func:`get_state_history`."""
    await local.asettle(_thread_of(config))
    target, saver, config = _target(graph, config, saver, False)
    shared = SharedReads()
    async for saved in saver.alist(config, filter=filter, before=before, limit=limit):
        saved = await afill_delta(target.channels, saver, saved, shared)
        yield await _adrive(plan_snapshot(target, saved.config, saved=saved, loaded=True), saver)


# -- update_state / bulk_update_state ----------------------------------------------------


def _run_ops(saver: Any, ops: list[Op], final: RunnableConfig) -> RunnableConfig:
    for kind, args in ops:
        if kind == "put":
            saver.put(*args)
        else:
            _put_writes(saver, *args)
    return final


async def _arun_ops(saver: Any, ops: list[Op], final: RunnableConfig) -> RunnableConfig:
    for kind, args in ops:
        if kind == "put":
            await saver.aput(*args)
        else:
            await _aput_writes(saver, *args)
    return final


def _put_writes(saver: Any, config: Any, writes: Any, task_id: str, task_path: str) -> None:
    from threadloom.pregel.persist import accepts_task_path

    if accepts_task_path(saver, "put_writes"):
        saver.put_writes(config, writes, task_id, task_path)
    else:
        saver.put_writes(config, writes, task_id)


async def _aput_writes(saver: Any, config: Any, writes: Any, task_id: str, task_path: str) -> None:
    from threadloom.pregel.persist import accepts_task_path

    if accepts_task_path(saver, "aput_writes"):
        await saver.aput_writes(config, writes, task_id, task_path)
    else:
        await saver.aput_writes(config, writes, task_id)


def _bulk_plan(graph: Any, config: Any, supersteps: Sequence[Sequence[Any]], saver: Any):
    if len(supersteps) == 0:  # before routing, as LangGraph
        raise ValueError("bulk_update_state needs at least one superstep, got none")
    target, saver, config = _target(graph, config, saver, False, for_update=True)
    steps = validate_supersteps(target, supersteps)
    return saver, plan_bulk(target, saver, config, steps)


def bulk_update_state(
    graph: Any,
    config: RunnableConfig,
    supersteps: Sequence[Sequence[StateUpdate]],
    *,
    saver: Any = None,
) -> RunnableConfig:
    """Apply several supersteps of updates, each on the checkpoint the previous made.

    All-or-nothing: every superstep is validated and planned before the first
    write, so an invalid update anywhere leaves the thread as it was.
    Returns the config of the last checkpoint written.
    """
    saver, plan = _bulk_plan(graph, config, supersteps, saver)
    ops, final = _drive(plan, saver)
    return _run_ops(saver, ops, final)


async def abulk_update_state(
    graph: Any,
    config: RunnableConfig,
    supersteps: Sequence[Sequence[StateUpdate]],
    *,
    saver: Any = None,
) -> RunnableConfig:
    """Async twin of :func:`bulk_update_state`."""
    saver, plan = _bulk_plan(graph, config, supersteps, saver)
    ops, final = await _adrive(plan, saver)
    return await _arun_ops(saver, ops, final)


def update_state(
    graph: Any,
    config: RunnableConfig,
    values: dict[str, Any] | Any | None,
    as_node: str | None = None,
    task_id: str | None = None,
    *,
    saver: Any = None,
) -> RunnableConfig:
    """Write ``values`` as if node ``as_node`` had returned them; return the new config.

    Without ``as_node`` the node that ran last is assumed (ambiguous ->
    InvalidUpdateError). On an older checkpoint this forks the thread.
    """
    update = StateUpdate(values, as_node, task_id)
    return bulk_update_state(graph, config, [[update]], saver=saver)


async def aupdate_state(
    graph: Any,
    config: RunnableConfig,
    values: dict[str, Any] | Any | None,
    as_node: str | None = None,
    task_id: str | None = None,
    *,
    saver: Any = None,
) -> RunnableConfig:
    """Async twin of :func:`update_state`."""
    update = StateUpdate(values, as_node, task_id)
    return await abulk_update_state(graph, config, [[update]], saver=saver)
