"""Access to the running task's config, store and stream writer from inside a node."""

from __future__ import annotations

from typing import Any

from threadloom.pregel.context import TaskScope, current_task

__all__ = ["get_config", "get_store", "get_stream_writer"]


def _scope(what: str) -> TaskScope:
    scope = current_task()
    if scope is None:
        raise RuntimeError(f"Called {what} outside of a runnable context")
    return scope


def get_config() -> dict[str, Any]:
    """The config of the task running in this context (LangGraph's shape).

    Raises:
        RuntimeError: called outside a running node.
    """
    return _scope("get_config").config()


def get_store() -> Any:
    """The store given to ``compile(store=...)`` (None when the graph has none).

    A subgraph sees its parent's store. Any object with LangGraph's ``BaseStore``
    API works; threadloom ships no store of its own.

    Raises:
        RuntimeError: called outside a running node.
    """
    return _scope("get_store").store


def _noop(_: Any) -> None:
    return None


def get_stream_writer() -> Any:
    """A callable that emits ``custom`` stream events (a no-op when nobody streams them).

    Raises:
        RuntimeError: called outside a running node (as LangGraph: there is no run to
            stream to, so a silent no-op would hide the mistake).
    """
    scope = _scope("get_stream_writer")
    return scope.custom if scope.custom is not None else _noop
