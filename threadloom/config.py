"""Access to the running task's config and stream writer from inside a node."""

from __future__ import annotations

from typing import Any

from threadloom.pregel.context import current_task

__all__ = ["get_config", "get_stream_writer"]


def get_config() -> dict[str, Any]:
    """The config of the task running in this context (LangGraph's shape).

    Raises:
        RuntimeError: called outside a running node.
    """
    scope = current_task()
    if scope is None:
        raise RuntimeError("Called get_config outside of a runnable context")
    return scope.config()


def _noop(_: Any) -> None:
    return None


def get_stream_writer() -> Any:
    """A callable that emits ``custom`` stream events (a no-op when nobody streams them)."""
    scope = current_task()
    if scope is None or scope.custom is None:
        return _noop
    return scope.custom
