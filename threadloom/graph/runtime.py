"""``Runtime``: what a node gets when it declares a ``runtime`` parameter.

``graph.invoke(input, config, context=Ctx(...))`` makes ``runtime.context`` the
``Ctx`` for every node and routing function of the run (subgraphs included);
it is never stored in checkpoints.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from threadloom.errors import ConfigError

__all__ = [
    "CONTEXT_KEY",
    "HEARTBEAT",
    "ExecutionInfo",
    "BaseUser",
    "RunControl",
    "Runtime",
    "ServerInfo",
    "coerce_context",
    "current_runtime",
    "scope_runtime",
    "with_runtime",
]

CONTEXT_KEY = "__threadloom_context"
"""Key in ``config["configurable"]`` that carries the run's context object."""

C = TypeVar("C")

HEARTBEAT: ContextVar[Callable[[], None] | None] = ContextVar("threadloom_heartbeat", default=None)
"""The progress signal of the idle-timed node attempt running in this context
(set by :mod:`threadloom.pregel.timeouts`; None outside one)."""


def _no_heartbeat() -> None:
    return None


def _no_writer(_chunk: Any) -> None:
    return None


@runtime_checkable
class BaseUser(Protocol):
    """An authenticated user as LangGraph Server describes one (the
    ``langgraph_sdk`` protocol): attributes, and dict-style access to the same."""

    @property
    def is_authenticated(self) -> bool: ...

    @property
    def display_name(self) -> str: ...

    @property
    def identity(self) -> str: ...

    @property
    def permissions(self) -> Sequence[str]: ...

    def __getitem__(self, key: str) -> Any: ...

    def __contains__(self, key: str) -> bool: ...

    def __iter__(self) -> Iterator[str]: ...


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What LangGraph Server injects about a deployment (``runtime.server_info``);
    threadloom has no server, so a run's is None. Here so ported type hints and
    code reading the attribute keep working."""

    assistant_id: str
    graph_id: str
    user: BaseUser | None = None
    """The authenticated user, if any."""


@dataclass(frozen=True, slots=True)
class ExecutionInfo:
    """Where and how often the running node executes, as LangGraph's
    ``runtime.execution_info``: nodes use ``node_attempt`` to know they are
    being retried and (thread_id, checkpoint_id, task_id) as an idempotency key
    for side effects a retry or a resume would repeat."""

    checkpoint_id: str
    """The checkpoint the node's step started from."""
    checkpoint_ns: str
    task_id: str
    thread_id: str | None = None
    run_id: str | None = None
    node_attempt: int = 1
    """1 on the first run of the node in this step, 2 on its first retry, ..."""
    node_first_attempt_time: float | None = None
    """Unix time (seconds) the first attempt started."""

    def patch(self, **overrides: Any) -> ExecutionInfo:
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **overrides)


class RunControl:
    """Asks one run to stop cooperatively at its next step boundary (a deploy's
    SIGTERM handler calls :meth:`request_drain`): the step running now finishes
    and is saved, then the run raises :class:`~threadloom.errors.GraphDrained`
    and ``invoke(None, config)`` resumes it later.

    Safe from any thread or a signal handler: a request is one attribute write.
    A control stays drained once asked; make a new one per run.
    """

    __slots__ = ("_drain_reason",)

    def __init__(self) -> None:
        self._drain_reason: str | None = None

    def request_drain(self, reason: str = "shutdown") -> None:
        """Stop the run before its next step (the latest reason wins)."""
        self._drain_reason = reason

    @property
    def drain_requested(self) -> bool:
        return self._drain_reason is not None

    @property
    def drain_reason(self) -> str | None:
        return self._drain_reason

    def __repr__(self) -> str:
        return f"RunControl(drain_reason={self._drain_reason!r})"


@dataclass(frozen=True)
class Runtime(Generic[C]):
    """Run-scoped things a node may need: the user context, store, custom stream
    writer, and (inside a node) its :class:`ExecutionInfo`."""

    context: C | None = None
    store: Any = None
    stream_writer: Callable[[Any], None] = _no_writer
    heartbeat: Callable[[], None] = _no_heartbeat
    """Call from long async work that emits nothing else, so the node's
    ``idle_timeout`` does not fire; a no-op outside an idle-timed attempt."""
    previous: Any = None
    execution_info: ExecutionInfo | None = None
    control: RunControl | None = None
    """The run's :class:`RunControl` (the caller's ``control=``, a parent graph's,
    or a fresh one); None outside a run."""
    server_info: ServerInfo | None = None
    """What a LangGraph Server deployment injects; always None in threadloom, kept
    so code (LangGraph's prebuilt ``ToolNode``) that copies it finds it."""

    def override(self, **overrides: Any) -> Runtime[C]:
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **overrides)

    def merge(self, other: Runtime[Any]) -> Runtime[C]:
        """``other``'s fields where it sets them, else this runtime's (as LangGraph)."""
        mine, theirs = self, other
        return Runtime(
            context=theirs.context or mine.context,
            store=theirs.store or mine.store,
            stream_writer=mine.stream_writer
            if theirs.stream_writer is _no_writer
            else theirs.stream_writer,
            heartbeat=mine.heartbeat if theirs.heartbeat is _no_heartbeat else theirs.heartbeat,
            previous=mine.previous if theirs.previous is None else theirs.previous,
            execution_info=theirs.execution_info or mine.execution_info,
            control=theirs.control or mine.control,
            server_info=theirs.server_info or mine.server_info,
        )

    @property
    def drain_requested(self) -> bool:
        """Whether this run was asked to drain (a long node may stop early)."""
        return self.control is not None and self.control.drain_requested

    @property
    def drain_reason(self) -> str | None:
        return self.control.drain_reason if self.control is not None else None


def coerce_context(schema: Any, context: Any) -> Any:
    """``context={"user": "d"}`` -> ``Ctx(user="d")`` when ``context_schema`` is a class.

    As LangGraph: a dict becomes the dataclass or pydantic model it describes, so
    nodes read ``runtime.context.user`` whichever form the caller passed; anything
    else (an instance, a dict for a TypedDict schema, no schema) passes unchanged.

    Raises:
        ConfigError: the dict does not fit the schema (missing/unknown/invalid field).
    """
    if context is None or schema is None or not isinstance(context, dict):
        return context
    is_class = isinstance(schema, type) and (
        dataclasses.is_dataclass(schema) or hasattr(schema, "model_fields")
    )
    if not is_class:
        return context
    try:
        return schema(**context)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise ConfigError(
            f"context {context!r} does not fit context_schema {schema.__qualname__}: {exc}"
        ) from exc


def current_runtime(config: dict[str, Any] | None = None) -> Runtime[Any]:
    """The runtime of the task running in this context (or built from ``config``)."""
    from threadloom.pregel.context import current_task

    scope = current_task()
    if config is None and scope is not None:
        config = scope.config()
    return scope_runtime(scope, (config or {}).get("configurable") or {})


def scope_runtime(scope: Any, configurable: dict[str, Any]) -> Runtime[Any]:
    """The runtime of task ``scope`` (None: outside a task) whose config holds
    ``configurable``."""
    return Runtime(
        context=configurable.get(CONTEXT_KEY),
        store=getattr(scope, "store", None),
        stream_writer=getattr(scope, "custom", None) or _no_writer,
        heartbeat=HEARTBEAT.get() or _no_heartbeat,
        execution_info=_execution_info(scope) if scope is not None else None,
        control=getattr(scope, "control", None),
    )


def _execution_info(scope: Any) -> ExecutionInfo:
    run_id = scope.run.config.get("run_id")
    return ExecutionInfo(
        checkpoint_id=scope.checkpoint_id or "",
        checkpoint_ns=scope.task.checkpoint_ns,
        task_id=scope.task.id,
        thread_id=scope.run.thread_id,
        run_id=str(run_id) if run_id else None,
        node_attempt=scope.attempt,
        node_first_attempt_time=scope.first_attempt_time,
    )


def with_runtime(fn: Callable[..., Any], wanted: frozenset[str]) -> Callable[..., Any]:
    """Wrap a node that asks for ``runtime``/``store`` so the runtime can call it with config."""

    def kwargs(config: dict[str, Any]) -> dict[str, Any]:
        runtime = current_runtime(config)
        out: dict[str, Any] = {}
        if "config" in wanted:
            out["config"] = config
        if "runtime" in wanted:
            out["runtime"] = runtime
        if "store" in wanted:
            out["store"] = runtime.store
        if "writer" in wanted:
            out["writer"] = runtime.stream_writer
        return out

    target = fn if inspect.isroutine(fn) else type(fn).__call__
    # (iscoroutinefunction(fn) sees through functools.partial; partial.__call__ does not)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target):

        async def async_node(state: Any, config: dict[str, Any]) -> Any:
            return await fn(state, **kwargs(config))

        async_node.__name__ = getattr(fn, "__name__", "node")
        return async_node

    def node(state: Any, config: dict[str, Any]) -> Any:
        return fn(state, **kwargs(config))

    node.__name__ = getattr(fn, "__name__", "node")
    return node
