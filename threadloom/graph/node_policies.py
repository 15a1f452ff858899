"""Node policies a ``StateGraph`` applies at compile: per-node timeouts and the
graph-wide defaults of :meth:`StateGraph.set_node_defaults`.

Precedence is LangGraph 1.2's: a value given to ``add_node`` always wins; a
default fills only what a node left unset, when the graph compiles (so the
order of ``set_node_defaults`` and ``add_node`` calls does not matter); a
subgraph compiled from another builder keeps its own defaults (none are
inherited). ``error_handler=`` is refused with a clear error until it is
implemented with LangGraph's checkpoint semantics (docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from threadloom.errors import InvalidGraphError
from threadloom.types import CachePolicy, RetryPolicy, TimeoutPolicy

if TYPE_CHECKING:
    from threadloom.graph.compile import CompiledStateGraph
    from threadloom.graph.state import StateGraph

__all__ = ["NodeDefaults", "apply_defaults", "attach_timeouts", "refuse_error_handler"]

TimeoutLike = float | timedelta | TimeoutPolicy | None


@dataclass(slots=True)
class NodeDefaults:
    """What ``set_node_defaults`` recorded (applied at compile)."""

    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None
    cache_policy: CachePolicy | None = None
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
            InvalidGraphError: ``error_handler`` (not supported yet).
            ValueError: a timeout <= 0 or a bad ``refresh_on``.
        """
        if error_handler is not None:
            refuse_error_handler("set_node_defaults(error_handler=...)")
        policy = TimeoutPolicy.coerce(timeout)  # checked now, as LangGraph
        if retry_policy is not None:
            self.retry_policy = retry_policy
        if cache_policy is not None:
            self.cache_policy = cache_policy
        if policy is not None:
            self.timeout = policy


def refuse_error_handler(where: str) -> None:
    """Node error handlers are not implemented: refuse them loudly rather than accept
    a handler that would never run (a silent difference from LangGraph).

    Raises:
        InvalidGraphError: always.
    """
    raise InvalidGraphError(
        f"{where} is not supported yet by threadloom: a failing node fails the run "
        "(catch the error inside the node, or route on it with a Command)"
    )


def apply_defaults(builder: StateGraph) -> None:
    """Fill each node's unset retry, cache and timeout policies from the defaults.

    Like LangGraph, this writes into the node specs: a later compile keeps what an
    earlier one filled in, and a per-node value is never replaced.
    """
    defaults: NodeDefaults = builder._node_defaults
    for spec in builder.nodes.values():
        if defaults.retry_policy is not None and spec.retry_policy is None:
            spec.retry_policy = defaults.retry_policy
        if defaults.cache_policy is not None and spec.cache_policy is None:
            spec.cache_policy = defaults.cache_policy
        if defaults.timeout is not None and spec.timeout is None:
            spec.timeout = defaults.timeout


def attach_timeouts(builder: StateGraph, compiled: CompiledStateGraph) -> None:
    """Give the compiled nodes their specs' timeouts and refuse sync timed nodes.

    Raises:
        InvalidGraphError: (a ValueError, as LangGraph's) a timeout on a sync node.
    """
    from threadloom.pregel.timeouts import check_timeout_supported  # pregel imports graph

    for name, spec in builder.nodes.items():
        if spec.timeout is not None:
            node = compiled.nodes[name]
            node.timeout = spec.timeout
            check_timeout_supported(name, node)
