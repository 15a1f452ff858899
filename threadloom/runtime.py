"""``langgraph.runtime``'s public names, so ``from langgraph.runtime import Runtime``
ports by renaming the import: the run's :class:`Runtime` (context, store, stream
writer, :class:`ExecutionInfo`), the :class:`RunControl` that drains a run at a
step boundary, and :func:`get_runtime` for code that cannot take a ``runtime``
parameter."""

from __future__ import annotations

from typing import Any

from threadloom.graph.runtime import (
    BaseUser,
    ExecutionInfo,
    RunControl,
    Runtime,
    ServerInfo,
    current_runtime,
)

__all__ = ["BaseUser", "ExecutionInfo", "RunControl", "Runtime", "ServerInfo", "get_runtime"]


def get_runtime(context_schema: type[Any] | None = None) -> Runtime[Any]:
    """The runtime of the node running now; ``context_schema`` only types the result.

    Raises:
        RuntimeError: called outside a run (as ``get_config``).
    """
    from threadloom.config import get_config

    return current_runtime(get_config())
