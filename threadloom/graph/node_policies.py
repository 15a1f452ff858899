"""Node policies a ``StateGraph`` applies at compile: per-node timeouts and the
graph-wide defaults of :meth:`StateGraph.set_node_defaults`.

Precedence is LangGraph 1.2's: a value given to ``add_node`` always wins; a
default fills only what a node left unset, when the graph compiles (so the
order of ``set_node_defaults`` and ``add_node`` calls does not matter); a
subgraph compiled from another builder keeps its own defaults (none are
inherited). Error handlers become nodes of their own, as in LangGraph
(``__error_handler__<node>``, ``__default_error_handler__``): the runtime runs
one in the step where its node failed (``threadloom/pregel/error_handlers.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from threadloom.errors import InvalidGraphError
from threadloom.types import CachePolicy, RetryPolicy, TimeoutPolicy

if TYPE_CHECKING:
    from threadloom.graph.compile import CompiledStateGraph
    from threadloom.graph.state import StateGraph

__all__ = [
    "DEFAULT_HANDLER",
    "HANDLER_PREFIX",
    "NodeDefaults",
    "add_error_handler",
    "apply_defaults",
    "attach_policies",
    "with_node_error",
]

HANDLER_PREFIX = "__error_handler__"
DEFAULT_HANDLER = "__default_error_handler__"

TimeoutLike = float | timedelta | TimeoutPolicy | None


@dataclass(slots=True)
class NodeDefaults:
    """What ``set_node_defaults`` recorded (applied at compile)."""

    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None
    cache_policy: CachePolicy | None = None
    error_handler: Any = None
    timeout: TimeoutPolicy | None = None

    def update(
        self,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None,
        cache_policy: CachePolicy | None,
        error_handler: Any,
        timeout: TimeoutLike,
    ) -> None:
        """Record the given defaults; None leaves an earlier default in place (as LangGraph).

        Raises:
            ValueError: a timeout <= 0 or a bad ``refresh_on``.
        """
        policy = TimeoutPolicy.coerce(timeout)  # checked now, as LangGraph
        if retry_policy is not None:
            self.retry_policy = retry_policy
        if cache_policy is not None:
            self.cache_policy = cache_policy
        if error_handler is not None:
            self.error_handler = error_handler
        if policy is not None:
            self.timeout = policy


def add_error_handler(builder: StateGraph, name: str, handler: Any, input_schema: Any) -> str:
    """Register ``handler`` as the node that runs when ``name`` fails; its node name.

    Raises:
        InvalidGraphError: that handler node exists already.
    """
    from threadloom.graph.state import StateNodeSpec

    handler_name = name if name == DEFAULT_HANDLER else f"{HANDLER_PREFIX}{name}"
    if handler_name in builder.nodes:
        raise InvalidGraphError(f"error handler node {handler_name!r} already exists")
    builder.nodes[handler_name] = StateNodeSpec(
        runnable=with_node_error(handler),
        metadata=None,
        input_schema=input_schema,
        retry_policy=None,
        cache_policy=None,
        is_error_handler=True,
    )
    return handler_name


def with_node_error(handler: Any) -> Any:
    """``handler`` called with the :class:`~threadloom.errors.NodeError` in its
    parameter ``error`` annotated ``NodeError`` (LangGraph's injection rule: that
    name and that annotation), plus the ``config``/``runtime``/``store``/``writer``
    parameters it asks for by name; a regular node declaring it gets None there,
    as in LangGraph. Any other function (or a runnable) is used as it is."""
    if hasattr(handler, "invoke") and not inspect.isroutine(handler):
        return handler
    target = handler if inspect.isroutine(handler) else type(handler).__call__
    try:
        params = list(inspect.signature(handler).parameters.values())[1:]
    except (TypeError, ValueError):
        return handler
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if not any(
        p.name == "error" and p.kind in kinds and _is_node_error(p.annotation) for p in params
    ):
        return handler
    named = [p.name for p in params if p.name in ("config", "runtime", "store", "writer")]

    def kwargs(config: dict[str, Any]) -> dict[str, Any]:
        from threadloom.graph.runtime import current_runtime
        from threadloom.pregel.context import current_task

        scope = current_task()
        extra = scope.task.extra if scope is not None else None
        out: dict[str, Any] = {"error": (extra or {}).get("node_error")}
        if named:
            runtime = current_runtime(config)
            given = {"config": config, "runtime": runtime, "store": runtime.store}
            given["writer"] = runtime.stream_writer
            out.update((n, given[n]) for n in named)
        return out

    run: Callable[..., Any]
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(target):
        # (the first looks through a functools.partial, whose own __call__ is sync)

        async def run(state: Any, config: dict[str, Any]) -> Any:
            return await handler(state, **kwargs(config))

    else:

        def run(state: Any, config: dict[str, Any]) -> Any:
            return handler(state, **kwargs(config))

    run.__name__ = getattr(handler, "__name__", "error_handler")
    return run


def _is_node_error(annotation: Any) -> bool:
    """``NodeError`` (threadloom's or LangGraph's class, or the bare string)."""
    if isinstance(annotation, str):
        return annotation == "NodeError"
    return isinstance(annotation, type) and annotation.__name__ == "NodeError"


def apply_defaults(builder: StateGraph) -> None:
    """Fill each node's unset retry, cache and timeout policies from the defaults.

    Like LangGraph, this writes into the node specs: a later compile keeps what an
    earlier one filled in, and a per-node value is never replaced.
    """
    defaults: NodeDefaults = builder._node_defaults
    handler = None
    if defaults.error_handler is not None:
        handler = DEFAULT_HANDLER
        if handler not in builder.nodes:  # a second compile reuses it (LangGraph raises)
            add_error_handler(
                builder, DEFAULT_HANDLER, defaults.error_handler, builder.state_schema
            )
    for spec in builder.nodes.values():
        if defaults.retry_policy is not None and spec.retry_policy is None:
            spec.retry_policy = defaults.retry_policy
        if defaults.timeout is not None and spec.timeout is None:
            spec.timeout = defaults.timeout
        if spec.is_error_handler:
            continue  # handlers are retried and timed, never cached or handled
        if defaults.cache_policy is not None and spec.cache_policy is None:
            spec.cache_policy = defaults.cache_policy
        if handler is not None and spec.error_handler_node is None:
            spec.error_handler_node = handler


def attach_policies(builder: StateGraph, compiled: CompiledStateGraph) -> None:
    """Give the compiled nodes their specs' timeouts and error handlers; refuse
    sync timed nodes.

    Raises:
        InvalidGraphError: (a ValueError, as LangGraph's) a timeout on a sync node.
    """
    from threadloom.pregel.timeouts import check_timeout_supported  # pregel imports graph

    for name, spec in builder.nodes.items():
        node = compiled.nodes[name]
        if spec.error_handler_node is not None:
            node.error_handler_node = spec.error_handler_node
        if spec.is_error_handler:
            node.is_error_handler = True
        if spec.timeout is not None:
            node.timeout = spec.timeout
            check_timeout_supported(name, node)
