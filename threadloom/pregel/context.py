"""[1] The run context: config parsed once, and the task running in this context.

LangGraph threads ~20 ``__pregel_*`` keys through ``config["configurable"]`` and
re-merges the config for every task. Here the config is parsed once into a
frozen :class:`RunContext`; each running task is published in a context
variable (:data:`CURRENT`) as a :class:`TaskScope`, and ``get_config()`` builds
the LangGraph-shaped dict only when someone asks for it.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadloom.constants import (
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_THREAD_ID,
)
from threadloom.errors import ConfigError
from threadloom.pregel.replay import replay_targets

if TYPE_CHECKING:
    from threadloom.pregel.stream import StreamSink
    from threadloom.pregel.task import PregelExecutableTask, Scratchpad

__all__ = [
    "CURRENT",
    "DEFAULT_RECURSION_LIMIT",
    "RunContext",
    "TaskScope",
    "current_task",
    "current_task_or_raise",
    "parse_config",
]

DEFAULT_RECURSION_LIMIT = int(os.getenv("LANGGRAPH_DEFAULT_RECURSION_LIMIT", "10007"))
"""Same default as LangGraph 1.2 (env override kept for drop-in use)."""

CURRENT: contextvars.ContextVar[TaskScope | None] = contextvars.ContextVar(
    "threadloom_task", default=None
)


@dataclass(frozen=True, slots=True)
class RunContext:
    """Everything a run needs from its config, read once."""

    config: Mapping[str, Any]
    thread_id: str | None
    checkpoint_ns: str
    checkpoint_id: str | None
    checkpoint_map: Mapping[str, str]
    recursion_limit: int
    parent: TaskScope | None = None
    replay_targets: Mapping[str, tuple[str, str]] | None = None  # see pregel/replay.py


@dataclass(slots=True)
class TaskScope:
    """A running task and what it inherits from its run (published in :data:`CURRENT`)."""

    task: PregelExecutableTask
    run: RunContext
    checkpointer: Any
    durability: str
    resuming: bool
    resume_map: Mapping[str, Any] | None
    stream: StreamSink | None
    custom: Callable[[Any], None] | None
    cache: Any = None
    store: Any = None
    replay: Any = None  # ReplayState shared by nested runs during a root replay
    channels: Mapping[str, Any] | None = None
    checkpoint_id: str | None = None  # the checkpoint the task's step started from
    attempt: int = 1  # the runner counts retries here (runtime.execution_info)
    first_attempt_time: float | None = None
    control: Any = None  # the run's RunControl (runtime.control; subgraphs inherit it)
    _config: dict[str, Any] | None = field(default=None)

    @property
    def scratchpad(self) -> Scratchpad:
        return self.task.scratchpad

    def send(self, writes: list[tuple[str, Any]]) -> None:
        """Record writes for this task (list.extend is atomic under the GIL)."""
        self.task.writes.extend(writes)

    def read(self, select: str | list[str], fresh: bool = False) -> Any:
        """The step's channel values (LangGraph's ``local_read``).

        ``fresh=True`` also applies this task's own writes so far, on copies of
        the channels it wrote (the shared ones are not touched), e.g. for a
        conditional edge that looks at what its node just returned.
        """
        from threadloom.pregel.io import read_channels

        channels = self.channels or {}
        wanted = {select} if isinstance(select, str) else set(select)
        updated: dict[str, list[Any]] = {}
        for chan, value in self.task.writes:
            if chan in wanted:
                updated.setdefault(chan, []).append(value)
        if fresh and updated:
            local = dict(channels)
            for chan, values in updated.items():
                if chan in local:
                    copy = local[chan].copy()
                    copy.update(values)
                    local[chan] = copy
            return read_channels(local, select)
        return read_channels(channels, select)

    def config(self) -> dict[str, Any]:
        """The task's config in LangGraph's shape (built on first use)."""
        if self._config is None:
            task = self.task
            base = self.run.config
            configurable = dict(base.get("configurable") or {})
            for key, value in base.items():  # an unknown top-level key: as LangGraph
                if key not in _RUNNABLE_KEYS and _is_set(value):
                    configurable[key] = value
            configurable.update(
                {
                    CONFIG_KEY_CHECKPOINT_NS: task.checkpoint_ns,
                    CONFIG_KEY_CHECKPOINT_ID: None,
                    CONFIG_KEY_CHECKPOINT_MAP: task.checkpoint_map,
                    "__pregel_task_id": task.id,
                    "__pregel_scope": self,
                }
            )
            if self.run.thread_id is not None:
                configurable[CONFIG_KEY_THREAD_ID] = self.run.thread_id
            # where LangGraph's runnables (prebuilt ToolNode, ...) look for the runtime
            configurable[CONFIG_KEY_RUNTIME] = _scope_runtime(self, configurable)
            metadata = dict(base.get("metadata") or {})
            self._propagate(metadata, base.get("configurable") or {})
            metadata.update(task.proc.metadata)
            metadata.update(
                {
                    "langgraph_step": task.step,
                    "langgraph_node": task.name,
                    "langgraph_triggers": tuple(task.triggers),
                    "langgraph_path": task.path,
                    "langgraph_checkpoint_ns": task.checkpoint_ns,
                }
            )
            self._config = self._node_config(base, configurable, metadata)
        return self._config

    def _node_config(
        self, base: Mapping[str, Any], configurable: dict[str, Any], metadata: dict[str, Any]
    ) -> dict[str, Any]:
        """The key set LangGraph's node sees: callbacks, configurable, metadata,
        plus tags (the caller's, then the node's), a ``recursion_limit`` the
        caller set and ``max_concurrency`` only when non-empty. No ``run_name``
        or ``run_id``: a LangChain runnable called with this config must name
        its trace run after itself, not after the caller's run."""
        config: dict[str, Any] = {
            "configurable": configurable,
            "metadata": metadata,
            "callbacks": base.get("callbacks"),
        }
        if tags := [*(base.get("tags") or ()), *self.task.proc.tags]:  # the caller's first
            config["tags"] = tags
        if base.get("recursion_limit") is not None:
            config["recursion_limit"] = self.run.recursion_limit
        if max_concurrency := base.get("max_concurrency"):
            config["max_concurrency"] = max_concurrency
        return config

    def _propagate(self, metadata: dict[str, Any], configurable: Mapping[str, Any]) -> None:
        """Run coordinates a tracer reads from metadata (``thread_id``, ...), as LangGraph.

        LangGraph copies them when a run starts, unless the metadata has them
        already: a subgraph's ``checkpoint_ns`` is the calling task's namespace,
        and a deeper subgraph keeps the one its caller's metadata carries.
        """
        source = dict(configurable)
        if self.run.parent is not None:
            source[CONFIG_KEY_CHECKPOINT_NS] = self.run.checkpoint_ns
        for key in _PROPAGATE_TO_METADATA:
            if key not in metadata and (value := source.get(key)):
                metadata[key] = value


# RunnableConfig's own keys; any other top-level key moves into configurable
def _scope_runtime(scope: TaskScope, configurable: dict[str, Any]) -> Any:
    from threadloom.graph.runtime import scope_runtime  # (graph/ imports the runtime)

    return scope_runtime(scope, configurable)


_RUNNABLE_KEYS = frozenset(
    (
        "tags",
        "metadata",
        "callbacks",
        "run_name",
        "max_concurrency",
        "recursion_limit",
        "configurable",
        "run_id",
    )
)


def _is_set(value: Any) -> bool:
    """Not None, and not an empty list, tuple or dict (LangGraph skips those)."""
    return len(value) > 0 if isinstance(value, (list, tuple, dict)) else value is not None


_PROPAGATE_TO_METADATA = (
    CONFIG_KEY_THREAD_ID,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    "task_id",
    "run_id",
    "assistant_id",
    "graph_id",
)


def current_task() -> TaskScope | None:
    """The task running in this context, if any."""
    return CURRENT.get()


def current_task_or_raise() -> TaskScope:
    scope = CURRENT.get()
    if scope is None:
        raise RuntimeError("Called outside of a running threadloom task")
    return scope


def parse_config(config: Mapping[str, Any] | None, parent: TaskScope | None) -> RunContext:
    """Read ``config`` (and the enclosing task, for subgraphs) into a :class:`RunContext`.

    Raises:
        ConfigError: ``recursion_limit`` is not a positive integer.
    """
    config = dict(config or {})
    own = dict(config.get("configurable") or {})
    targets = None
    if parent is not None:
        pconf = parent.run.config
        merged = {**pconf, **{k: v for k, v in config.items() if k != "configurable"}}
        merged["configurable"] = {
            **dict(pconf.get("configurable") or {}),
            **{k: v for k, v in own.items() if not k.startswith("__pregel")},
        }
        merged["metadata"] = {
            **dict(pconf.get("metadata") or {}),
            **dict(config.get("metadata") or {}),
        }
        config = merged
        own = merged["configurable"]
        ns = parent.task.checkpoint_ns
        cmap = dict(parent.task.checkpoint_map)
        checkpoint_id = None
        thread_id = parent.run.thread_id
    else:
        ns = own.get(CONFIG_KEY_CHECKPOINT_NS) or ""
        cmap = dict(own.get(CONFIG_KEY_CHECKPOINT_MAP) or {})
        checkpoint_id = own.get(CONFIG_KEY_CHECKPOINT_ID)
        thread_id = own.get(CONFIG_KEY_THREAD_ID)
        if ns:  # a root run always starts at the root namespace (as LangGraph)
            # a subgraph's checkpoint: replay the root from the checkpoint the child ran
            # under, each child level from its own checkpoint (pregel/replay.py)
            if "" in cmap:
                targets = replay_targets(ns, checkpoint_id, cmap)
            ns, checkpoint_id = "", cmap.get("")
    limit = config.get("recursion_limit")
    if limit is None:
        limit = parent.run.recursion_limit if parent is not None else DEFAULT_RECURSION_LIMIT
    if not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"recursion_limit must be a positive integer, got {limit!r}")
    return RunContext(
        config=config,
        thread_id=str(thread_id) if thread_id is not None else None,
        checkpoint_ns=ns,
        checkpoint_id=checkpoint_id,
        checkpoint_map=cmap,
        recursion_limit=limit,
        parent=parent,
        replay_targets=targets,
    )
