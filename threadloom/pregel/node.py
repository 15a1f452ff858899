"""``PregelNode`` (a node of a Pregel graph) and ``NodeBuilder`` (the fluent way to make one).

A node is: the channels it subscribes to (``triggers``), the channels it reads
(``channels``: one name -> the value, a list -> a dict), a function
(``bound``), and writers that turn its output into channel writes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from threadloom.pregel.write import ChannelWrite, ChannelWriteEntry
from threadloom.types import CachePolicy, RetryPolicy, TimeoutPolicy

__all__ = ["NodeBuilder", "PregelNode", "call_style", "runs_inline"]

Style = tuple[bool, bool, bool, bool, bool]
"""(is_async, wants_config, wants_writer, has_invoke, runs_inline)"""


def runs_inline(fn: Any) -> Any:
    """Mark an internal sync function (plumbing such as the START node's input read)
    that async runs call on the event loop instead of sending it to the thread pool:
    the hop to a thread and back costs far more than such a function, and LangGraph
    runs its own plumbing without one. Only for functions that never block."""
    fn.__threadloom_inline__ = True
    return fn


@runs_inline
def _identity(value: Any) -> Any:
    return value


def call_style(fn: Any) -> Style:
    """How to call ``fn``: (is_async, wants_config, wants_writer, has_invoke, runs_inline)."""
    if not callable(fn) and hasattr(fn, "invoke"):
        return (False, False, False, True, False)
    if hasattr(fn, "invoke") and hasattr(fn, "ainvoke") and not inspect.isfunction(fn):
        return (False, False, False, True, False)
    target = fn
    plain = inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, functools.partial)
    if not plain and callable(target):
        target = target.__call__  # type: ignore[operator]
    # async as LangGraph decides it: iscoroutinefunction looks through partials
    # (a partial's own __call__ is sync), a callable object by its __call__
    is_async = inspect.iscoroutinefunction(target)
    inline = not is_async and getattr(fn, "__threadloom_inline__", False) is True
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return (is_async, False, False, False, inline)
    return (is_async, "config" in params, "writer" in params, False, inline)


class PregelNode:
    """A node: triggers, what it reads, what it runs, where it writes.

    ``handle_command=True`` turns a returned :class:`~threadloom.types.Command`
    into writes (``update`` pairs, ``goto`` -> ``branch:to:<node>`` / Sends)
    instead of passing it to the writers.
    """

    managed: Mapping[str, Any] | None = None
    """Managed input keys -> manager (``threadloom.managed``), added to a pull task's input."""
    error_handler_node: str | None = None
    """The node run when this one fails (``StateGraph.add_node(..., error_handler=)``)."""
    is_error_handler: bool = False

    def __init__(
        self,
        *,
        channels: str | list[str],
        triggers: Sequence[str],
        bound: Any = None,
        writers: Sequence[Any] | None = None,
        mapper: Callable[[Any], Any] | None = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy | None = None,
        tags: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        subgraphs: Sequence[Any] | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        handle_command: bool = True,
    ) -> None:
        self.channels = channels
        self.triggers = list(triggers)
        self.bound = bound if bound is not None else _identity
        self.writers = list(writers or [])
        self.mapper = mapper
        if isinstance(retry_policy, RetryPolicy):
            retry_policy = [retry_policy]
        self.retry_policy: Sequence[RetryPolicy] | None = (
            list(retry_policy) if retry_policy else None
        )
        self.cache_policy = cache_policy
        self.tags = list(tags or ())
        self.metadata = dict(metadata or {})
        self.timeout = TimeoutPolicy.coerce(timeout)
        self.handle_command = handle_command
        if subgraphs is None:
            found = find_subgraph(self._bounds())
            subgraphs = [found] if found is not None else []
        self.subgraphs = list(subgraphs)
        self.input_cache_key = (tuple(channels) if isinstance(channels, list) else channels, mapper)
        self._steps: list[tuple[Any, Style]] | None = None
        self.pull_ids: tuple[tuple[str, ...], str, tuple[str, ...], str] | None = (
            None  # tasks._pull_ids
        )

    def _bounds(self) -> list[Any]:
        return list(self.bound) if isinstance(self.bound, (list, tuple)) else [self.bound]

    @property
    def steps(self) -> list[tuple[Any, Style]]:
        """The functions to run in order, each with its calling convention (cached)."""
        if self._steps is None:
            self._steps = [(b, call_style(b)) for b in self._bounds()]
        return self._steps

    @property
    def flat_writers(self) -> list[Any]:
        return self.writers

    @property
    def node(self) -> Any:
        return self.bound

    def copy(self, **update: Any) -> PregelNode:
        attrs = {
            "channels": self.channels,
            "triggers": self.triggers,
            "bound": self.bound,
            "writers": self.writers,
            "mapper": self.mapper,
            "retry_policy": self.retry_policy,
            "cache_policy": self.cache_policy,
            "tags": self.tags,
            "metadata": self.metadata,
            "subgraphs": self.subgraphs,
            "timeout": self.timeout,
            "handle_command": self.handle_command,
        }
        managed = update.pop("managed", self.managed)
        handler = update.pop("error_handler_node", self.error_handler_node)
        is_handler = update.pop("is_error_handler", self.is_error_handler)
        attrs.update(update)
        node = PregelNode(**attrs)
        node.managed = managed
        if handler is not None or is_handler:
            node.error_handler_node = handler
            node.is_error_handler = is_handler
        return node

    def __repr__(self) -> str:
        return f"PregelNode(triggers={self.triggers!r}, channels={self.channels!r})"


def find_subgraph(bounds: Sequence[Any]) -> Any:
    """The graph a node runs, directly or via a name its function refers to (as LangGraph).

    Graphs with ``checkpointer=False`` do not count: they keep no state to show.
    """
    candidates = list(bounds)
    for c in candidates:
        if _is_graph(c):
            if getattr(c, "checkpointer", None) is not False:
                return c
            continue
        fn = getattr(c, "__func__", c)
        if inspect.isfunction(fn) and c in bounds:
            try:
                cv = inspect.getclosurevars(fn)
            except (TypeError, ValueError):
                continue
            for value in (*cv.nonlocals.values(), *cv.globals.values()):
                candidates.append(getattr(value, "__self__", value))
    return None


def _is_graph(obj: Any) -> bool:
    from threadloom.pregel.main import Pregel

    return isinstance(obj, Pregel) or (
        hasattr(obj, "get_state") and hasattr(obj, "invoke") and hasattr(obj, "nodes")
    )


class NodeBuilder:
    """Fluent builder for :class:`PregelNode` (LangGraph's ``NodeBuilder``)."""

    __slots__ = (
        "_channels",
        "_triggers",
        "_tags",
        "_metadata",
        "_writes",
        "_bound",
        "_retry_policy",
        "_cache_policy",
        "_timeout",
    )

    def __init__(self) -> None:
        self._channels: str | list[str] = []
        self._triggers: list[str] = []
        self._tags: list[str] = []
        self._metadata: dict[str, Any] = {}
        self._writes: list[Any] = []
        self._bound: list[Any] = []
        self._retry_policy: list[RetryPolicy] = []
        self._cache_policy: CachePolicy | None = None
        self._timeout: TimeoutPolicy | None = None

    def subscribe_only(self, channel: str) -> NodeBuilder:
        """Run when ``channel`` changes; the input is its value."""
        if self._channels:
            raise ValueError(
                "Cannot subscribe to single channels when other channels are already subscribed to"
            )
        self._channels = channel
        self._triggers.append(channel)
        return self

    def subscribe_to(self, *channels: str, read: bool = True) -> NodeBuilder:
        """Run when any of ``channels`` changes; the input is a dict of them (if ``read``)."""
        if isinstance(self._channels, str):
            raise ValueError("Cannot subscribe to channels when subscribed to a single channel")
        if read:
            self._channels.extend(channels)
        self._triggers.extend(channels)
        return self

    def read_from(self, *channels: str) -> NodeBuilder:
        """Also read ``channels`` into the input dict, without being triggered by them."""
        if isinstance(self._channels, str):
            raise ValueError("Cannot read additional channels when subscribed to single channels")
        self._channels.extend(channels)
        return self

    def do(self, node: Any) -> NodeBuilder:
        """Run ``node`` (chained after earlier ``do`` calls)."""
        self._bound.append(node)
        return self

    def write_to(self, *channels: str | ChannelWriteEntry, **kwargs: Any) -> NodeBuilder:
        """Write the output to ``channels``; ``name=callable`` writes ``callable(output)``."""
        self._writes.extend(ChannelWriteEntry(c) if isinstance(c, str) else c for c in channels)
        self._writes.extend(
            ChannelWriteEntry(k, mapper=v) if callable(v) else ChannelWriteEntry(k, value=v)
            for k, v in kwargs.items()
        )
        return self

    def meta(self, *tags: str, **metadata: Any) -> NodeBuilder:
        self._tags.extend(tags)
        self._metadata.update(metadata)
        return self

    def add_retry_policies(self, *policies: RetryPolicy) -> NodeBuilder:
        self._retry_policy.extend(policies)
        return self

    def add_cache_policy(self, policy: CachePolicy) -> NodeBuilder:
        self._cache_policy = policy
        return self

    def set_timeout(self, timeout: float | timedelta | TimeoutPolicy | None) -> NodeBuilder:
        """Limit each attempt of this (async) node; see :class:`TimeoutPolicy`."""
        self._timeout = TimeoutPolicy.coerce(timeout)
        return self

    def build(self) -> PregelNode:
        bound: Any = None
        if len(self._bound) == 1:
            bound = self._bound[0]
        elif self._bound:
            bound = list(self._bound)
        return PregelNode(
            channels=self._channels if isinstance(self._channels, str) else list(self._channels),
            triggers=list(self._triggers),
            tags=self._tags,
            metadata=self._metadata,
            writers=[ChannelWrite(self._writes)],
            bound=bound,
            retry_policy=self._retry_policy,
            cache_policy=self._cache_policy,
            timeout=self._timeout,
        )
