"""State snapshots: what ``get_state`` / ``get_state_history`` show (no I/O here).

A snapshot is a saved checkpoint seen through the graph's channels: its values,
the tasks of the step that follows it, and what the pending writes say about
those tasks (results, errors, interrupts). Two views exist:

* **live** (the config names no ``checkpoint_id``): "where is the thread now".
  Writes of tasks that already finished are applied, so ``values`` include them
  and ``next`` lists only tasks still to run; ``interrupts`` are those still
  waiting for an answer.
* **historical** (explicit ``checkpoint_id``, and every history entry): "what
  this step looked like". Values as of the start of the step, every task of the
  step, every interrupt it raised.

The planners here are generators that *yield* what they need read
(:class:`ReadTuple`, :class:`ReadState`) and get the answer sent back, so the
sync and async drivers in :mod:`threadloom.pregel.history` share one brain.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, NamedTuple

from threadloom.checkpoint.base import CheckpointTuple, copy_checkpoint, get_thread_id
from threadloom.constants import (
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    INPUT,
    NS_END,
    NS_SEP,
    NULL_TASK_ID,
)
from threadloom.errors import CheckpointNotFoundError, ConfigError
from threadloom.pregel.checkpoint import channels_from_checkpoint, migrate_checkpoint
from threadloom.pregel.debug import tasks_w_writes
from threadloom.pregel.ids import recast_checkpoint_ns
from threadloom.pregel.io import read_channels
from threadloom.pregel.task import PregelTaskWrites
from threadloom.pregel.tasks import prepare_next_tasks
from threadloom.pregel.writes import apply_writes, read_task_statuses
from threadloom.types import StateSnapshot

__all__ = [
    "ReadState",
    "ReadTuple",
    "find_subgraph",
    "output_keys",
    "patch_checkpoint_map",
    "plan_snapshot",
    "prepare_config",
    "resolve_saver",
    "route",
    "subgraph_of",
    "trigger_to_nodes",
]

CONF = "configurable"


class ReadTuple(NamedTuple):
    """Ask the driver for ``saver.get_tuple(config)``; with ``specs`` (the graph's
    channels), a ``DeltaChannel`` value the checkpoint lacks is rebuilt first
    (:func:`~threadloom.channels.delta_fill.fill_delta`)."""

    config: dict[str, Any]
    specs: Any = None


class ReadState(NamedTuple):
    """Ask the driver for the nested snapshot of ``graph`` at ``config``."""

    graph: Any
    config: dict[str, Any]


# -- graph introspection ------------------------------------------------------------


def resolve_saver(graph: Any, saver: Any = None) -> Any:
    """The saver state methods use: the one lent by a parent, else the graph's own.

    Raises:
        ConfigError: the graph has no checkpointer (``None``/``False``), or is a
            ``checkpointer=True`` subgraph used as a root graph.
    """
    if saver is not None:
        return saver
    own = getattr(graph, "checkpointer", None)
    name = getattr(graph, "name", None) or type(graph).__name__
    if own is True:
        raise ConfigError(
            f"graph {name!r} was compiled with checkpointer=True, which only works for a "
            "subgraph: read its state through the parent graph"
        )
    if own is None or own is False:
        raise ConfigError(
            f"graph {name!r} has no checkpointer: compile it with checkpointer=... "
            "to read or change its state"
        )
    return own


def output_keys(graph: Any) -> Any:
    """The channels a snapshot's ``values`` shows (LangGraph's ``stream_channels_asis``)."""
    asis = getattr(graph, "stream_channels_asis", None)
    if asis is not None:
        return asis
    return graph.output_channels


def trigger_to_nodes(graph: Any) -> Mapping[str, Any]:
    """channel -> nodes it triggers (the graph's own index when it has one)."""
    index = getattr(graph, "trigger_to_nodes", None)
    if index is not None:
        return index
    out: dict[str, list[str]] = {}
    for name, node in graph.nodes.items():
        for trigger in node.triggers:
            out.setdefault(trigger, []).append(name)
    return out


def subgraph_of(node: Any) -> Any:
    """The subgraph a node runs, if it keeps state (``checkpointer=False`` ones do not)."""
    for sub in getattr(node, "subgraphs", None) or ():
        if getattr(sub, "checkpointer", None) is not False:
            return sub
    return None


def find_subgraph(graph: Any, recast_ns: str) -> Any:
    """The (possibly nested) subgraph at ``recast_ns`` (``parent|child``), or None."""
    head, _, rest = recast_ns.partition(NS_SEP)
    node = graph.nodes.get(head)
    sub = subgraph_of(node) if node is not None else None
    if sub is None:
        return None
    return find_subgraph(sub, rest) if rest else sub


def route(graph: Any, config: Mapping[str, Any], *, for_update: bool = False) -> Any:
    """The graph a namespaced config addresses (``graph`` itself at the root).

    Raises:
        ConfigError: ``for_update`` and the namespace names no subgraph of ``graph``
            (its channels would write the wrong state into that namespace).
    """
    ns = (config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINT_NS) or ""
    if not ns:
        return graph
    recast = recast_checkpoint_ns(ns)
    sub = find_subgraph(graph, recast)
    if sub is not None:
        return sub
    if for_update:
        names = sorted(n for n, node in graph.nodes.items() if subgraph_of(node) is not None)
        raise ConfigError(
            f"checkpoint_ns {ns!r} names no subgraph {recast!r} of this graph; "
            f"subgraph nodes are: {', '.join(names) or '(none)'}"
        )
    return graph


def prepare_config(
    graph: Any, config: Mapping[str, Any] | None, *, with_ns: bool = True
) -> dict[str, Any]:
    """The config a state method reads with: defaults merged, thread id a string,
    ``checkpoint_ns`` present (unless not ``with_ns``), and task ids dropped for ``checkpointer=True`` graphs.

    Raises:
        ConfigError: no ``thread_id``.
    """
    config = dict(config or {})
    defaults = (getattr(graph, "config", None) or {}).get(CONF) or {}
    configurable = {**defaults, **(config.get(CONF) or {})}
    configurable[CONFIG_KEY_THREAD_ID] = get_thread_id({CONF: configurable})
    ns = configurable.get(CONFIG_KEY_CHECKPOINT_NS) or ""
    if getattr(graph, "checkpointer", None) is True:
        # one history per thread: drop task ids, keep numeric parts (repeat calls)
        ns = NS_SEP.join(part.split(NS_END)[0] for part in ns.split(NS_SEP)) if ns else ns
    if with_ns or CONFIG_KEY_CHECKPOINT_NS in configurable:
        configurable[CONFIG_KEY_CHECKPOINT_NS] = ns
    config[CONF] = configurable
    return config


def patch_checkpoint_map(config: Any, metadata: Mapping[str, Any] | None) -> Any:
    """``config`` with ``checkpoint_map`` = the ancestors' ids plus its own (nested only).

    A root checkpoint (no ``parents``) keeps its config as is, as in LangGraph.
    """
    if config is None or not (parents := (metadata or {}).get("parents")):
        return config
    conf = config[CONF]
    cmap = {**parents, conf.get(CONFIG_KEY_CHECKPOINT_NS, ""): conf.get(CONFIG_KEY_CHECKPOINT_ID)}
    return {**config, CONF: {**conf, "checkpoint_map": cmap}}


def _empty(config: dict[str, Any]) -> StateSnapshot:
    return StateSnapshot({}, (), config, None, None, None, (), ())


# -- building a snapshot --------------------------------------------------------------


def plan_snapshot(
    graph: Any,
    config: dict[str, Any],
    *,
    saved: CheckpointTuple | None = None,
    subgraphs: bool = False,
    live: bool = False,
    loaded: bool = False,
) -> Generator[Any, Any, StateSnapshot]:
    """Snapshot of ``config``'s checkpoint (or of ``saved``, when ``loaded``).

    Raises:
        CheckpointNotFoundError: the config names a ``checkpoint_id`` the saver lacks.
    """
    if not loaded:
        saved = yield ReadTuple(config, graph.channels)
    if saved is None:
        conf = config[CONF]
        if conf.get(CONFIG_KEY_CHECKPOINT_ID):
            raise CheckpointNotFoundError(
                conf[CONFIG_KEY_THREAD_ID],
                conf[CONFIG_KEY_CHECKPOINT_ID],
                conf.get(CONFIG_KEY_CHECKPOINT_NS, ""),
            )
        return _empty(config)
    checkpoint = copy_checkpoint(saved.checkpoint)
    migrate_checkpoint(checkpoint)
    pending = list(saved.pending_writes or [])
    channels = channels_from_checkpoint(graph.channels, checkpoint)
    next_tasks = prepare_next_tasks(
        checkpoint,
        pending,
        graph.nodes,
        channels,
        step=(saved.metadata or {}).get("step", -1) + 1,
        stop=(saved.metadata or {}).get("step", -1) + 3,
        checkpoint_ns=saved.config[CONF].get(CONFIG_KEY_CHECKPOINT_NS, ""),
        for_execution=True,
    )
    states: dict[str, Any] = {}
    for task_id, sub, sub_config in _subgraph_tasks(graph, saved.config, next_tasks):
        states[task_id] = (yield ReadState(sub, sub_config)) if subgraphs else sub_config
    _apply_pending(graph, checkpoint, channels, pending, next_tasks, live)
    keys = output_keys(graph)
    tasks = tasks_w_writes(next_tasks.values(), pending, states, keys, live=live)
    return StateSnapshot(
        read_channels(channels, keys),
        tuple(t.name for t in next_tasks.values() if not t.writes),
        patch_checkpoint_map(saved.config, saved.metadata),
        saved.metadata,
        checkpoint["ts"],
        patch_checkpoint_map(saved.parent_config, saved.metadata),
        tasks,
        tuple(i for t in tasks for i in t.interrupts),
    )


def _subgraph_tasks(
    graph: Any, saved_config: Mapping[str, Any], next_tasks: Mapping[str, Any]
) -> list[tuple[str, Any, dict[str, Any]]]:
    """``(task id, subgraph, config of its state)`` for each task that runs a subgraph."""
    conf = saved_config[CONF]
    parent_ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
    out = []
    for task in next_tasks.values():
        sub = subgraph_of(graph.nodes.get(task.name))
        if sub is None:
            continue
        task_ns = f"{task.name}{NS_END}{task.id}"
        if parent_ns:
            task_ns = f"{parent_ns}{NS_SEP}{task_ns}"
        sub_conf = {
            CONFIG_KEY_THREAD_ID: conf[CONFIG_KEY_THREAD_ID],
            CONFIG_KEY_CHECKPOINT_NS: task_ns,
        }
        out.append((task.id, sub, {CONF: sub_conf}))
    return out


def _apply_pending(
    graph: Any,
    checkpoint: Any,
    channels: Mapping[str, Any],
    pending: list[Any],
    next_tasks: Mapping[str, Any],
    live: bool,
) -> None:
    """Apply input/Command writes always; finished tasks' writes only in the live view."""
    triggers = trigger_to_nodes(graph)
    if null_writes := [(c, v) for t, c, v in pending if t == NULL_TASK_ID]:
        writes = [PregelTaskWrites((), INPUT, null_writes, [])]
        apply_writes(checkpoint, channels, writes, None, triggers)
    if live and pending:
        for tid, status in read_task_statuses(pending).items():
            if tid in next_tasks:
                next_tasks[tid].writes.extend(status.output)
        if done := [t for t in next_tasks.values() if t.writes]:
            apply_writes(checkpoint, channels, done, None, triggers)
