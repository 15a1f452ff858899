"""``Pregel``: a graph of nodes and channels, run in supersteps.

Construction validates and indexes the graph once (which channel triggers
which node); ``stream``/``astream`` hand the run to the drivers; ``invoke``,
``batch`` and their async twins are thin wrappers. State inspection and
editing (``get_state``, ``update_state``, ...) live in ``history.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from threadloom.channels.base import BaseChannel
from threadloom.channels.topic import Topic
from threadloom.constants import TASKS
from threadloom.pregel import multitask, v2
from threadloom.pregel.adriver import astream_run
from threadloom.pregel.batching import BatchMixin
from threadloom.pregel.driver import stream_run
from threadloom.pregel.node import NodeBuilder, PregelNode
from threadloom.pregel.output import InvokeResult
from threadloom.pregel.run_kwargs import check_run_kwargs
from threadloom.pregel.state_api import StateMixin
from threadloom.pregel.timeouts import check_timeout_supported
from threadloom.types import CachePolicy, RetryPolicy, Send

__all__ = ["Pregel"]


def _cache_ns(node: str) -> tuple[str, ...]:
    from threadloom.pregel.tasks import CACHE_NS_WRITES

    return (CACHE_NS_WRITES, node, node)


class Pregel(StateMixin, BatchMixin):
    """A Pregel graph: ``nodes`` read and write ``channels`` in supersteps.

    Args:
        nodes: name -> :class:`PregelNode` (or a :class:`NodeBuilder`).
        channels: name -> channel spec; ``__pregel_tasks`` is added for Sends.
        input_channels / output_channels: one name (values in and out as is)
            or a list (dicts keyed by channel).
        checkpointer: a saver; in a subgraph ``None`` inherits the parent's,
            ``True`` keeps one persistent history, ``False`` disables it.
        interrupt_before_nodes / interrupt_after_nodes: node names or ``"*"``.
        retry_policy / cache_policy: defaults for nodes that set none.
        cache: a :class:`~threadloom.cache.BaseCache` for node cache policies.

    Raises:
        ValueError: a node subscribes to, or reads, a channel that does not exist.
    """

    def __init__(
        self,
        *,
        nodes: Mapping[str, PregelNode | NodeBuilder],
        channels: Mapping[str, BaseChannel] | None,
        input_channels: str | Sequence[str],
        output_channels: str | Sequence[str],
        stream_channels: str | Sequence[str] | None = None,
        interrupt_before_nodes: Any = (),
        interrupt_after_nodes: Any = (),
        stream_mode: Any = "values",
        checkpointer: Any = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] = (),
        cache_policy: CachePolicy | None = None,
        cache: Any = None,
        store: Any = None,
        name: str = "LangGraph",
        debug: bool = False,
        auto_validate: bool = True,
        trigger_to_nodes: Mapping[str, Sequence[str]] | None = None,
        config: Mapping[str, Any] | None = None,
        step_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.nodes: dict[str, PregelNode] = {
            k: v.build() if isinstance(v, NodeBuilder) else v for k, v in nodes.items()
        }
        self.channels: dict[str, BaseChannel] = dict(channels or {})
        if TASKS not in self.channels:
            self.channels[TASKS] = Topic(Send, accumulate=False)
        for key, chan in self.channels.items():
            chan.key = key
        self.input_channels = input_channels
        self.output_channels = output_channels
        self.stream_channels = stream_channels
        self.interrupt_before_nodes = interrupt_before_nodes
        self.interrupt_after_nodes = interrupt_after_nodes
        self.stream_mode = stream_mode
        self.checkpointer = checkpointer
        self.retry_policy = (
            [retry_policy] if isinstance(retry_policy, RetryPolicy) else list(retry_policy)
        )
        self.cache_policy = cache_policy
        self.cache = cache
        self.store = store
        self.name = name
        self.debug = debug
        self.config = dict(config or {})
        self.step_timeout = step_timeout
        self.trigger_to_nodes: dict[str, list[str]] = dict(
            trigger_to_nodes or self._index_triggers()
        )
        if auto_validate:
            self.validate()

    def _index_triggers(self) -> dict[str, list[str]]:
        index: dict[str, list[str]] = {}
        for name, node in self.nodes.items():
            for trigger in node.triggers:
                index.setdefault(trigger, []).append(name)
        return index

    def validate(self) -> Pregel:
        """Check that every channel a node or the graph names exists."""
        for name, node in self.nodes.items():
            for chan in node.triggers:
                if chan not in self.channels:
                    raise ValueError(f"Node {name!r} subscribes to unknown channel {chan!r}")
            reads = [node.channels] if isinstance(node.channels, str) else node.channels
            for chan in reads:
                if chan not in self.channels:
                    raise ValueError(f"Node {name!r} reads unknown channel {chan!r}")
        for group in (self.input_channels, self.output_channels, self.stream_channels or ()):
            for chan in [group] if isinstance(group, str) else group:
                if chan not in self.channels:
                    raise ValueError(f"Graph names unknown channel {chan!r}")
        for nodes in (self.interrupt_before_nodes, self.interrupt_after_nodes):
            if nodes != "*":
                for n in nodes:
                    if n not in self.nodes:
                        raise ValueError(f"Interrupt node {n!r} not in graph")
        for name, node in self.nodes.items():
            check_timeout_supported(name, node)
        return self

    @property
    def stream_channels_asis(self) -> str | Sequence[str]:
        return self.stream_channels or list(self.channels)

    @property
    def stream_channels_list(self) -> Sequence[str]:
        s = self.stream_channels_asis
        return [s] if isinstance(s, str) else s

    def get_name(self) -> str:
        return self.name

    def copy(self, update: Mapping[str, Any] | None = None, **fields: Any) -> Pregel:
        """A shallow copy with some attributes replaced: ``copy({"name": "x"})`` as
        LangGraph's signature, or ``copy(name="x")``."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(update or {})
        new.__dict__.update(fields)
        return new

    def with_config(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Pregel:
        return self.copy(config={**self.config, **(config or {}), **kwargs})

    def _merge_config(self, config: Mapping[str, Any] | None) -> Any:
        if not self.config:
            return config
        merged = {**self.config, **(config or {})}
        merged["configurable"] = {
            **(self.config.get("configurable") or {}),
            **((config or {}).get("configurable") or {}),
        }
        return merged

    # -- running ------------------------------------------------------------------

    def stream(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: Any = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Run the graph, yielding chunks per ``stream_mode`` (LangGraph's v1 format).

        Keyword args: ``output_keys``, ``interrupt_before``, ``interrupt_after``,
        ``durability`` ("sync" | "async" | "exit"), ``subgraphs``, ``debug``,
        ``print_mode``, ``multitask_strategy`` ("reject" | "enqueue" | "interrupt" |
        "rollback", see :mod:`threadloom.pregel.multitask`), ``multitask_timeout``,
        ``lease`` (False: no thread lease), ``control`` (a
        :class:`~threadloom.runtime.RunControl`: ``request_drain()`` stops the run
        at the next step boundary, docs/runtime.md "Draining a run").

        Raises:
            GraphRecursionError: ``recursion_limit`` steps ran without finishing.
            GraphDrained: the run's control asked it to drain; every step before is
                saved and ``invoke(None, config)`` continues it.
            Exception: whatever a node raised (after its step's other tasks finished).
        """
        if v2.is_v2(kwargs.pop("version", None)):
            return v2.stream(self, input, config, stream_mode, kwargs)
        kwargs["stream_mode"] = stream_mode
        check_run_kwargs(kwargs, self.nodes)
        return multitask.stream(self, input, self._merge_config(config), kwargs, stream_run)

    def astream(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """Async twin of :meth:`stream`."""
        if v2.is_v2(kwargs.pop("version", None)):
            return v2.astream(self, input, config, stream_mode, kwargs)
        kwargs["stream_mode"] = stream_mode
        check_run_kwargs(kwargs, self.nodes)
        return multitask.astream(self, input, self._merge_config(config), kwargs, astream_run)

    def invoke(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: Any = "values",
        output_keys: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Run to completion; the final output (with ``__interrupt__`` if paused).

        With another ``stream_mode``, the list of chunks. ``version="v2"``:
        a ``GraphOutput(value, interrupts)``, or the list of v2 parts
        (:mod:`threadloom.pregel.v2`).
        """
        output_keys = output_keys if output_keys is not None else self.output_channels
        if v2.is_v2(kwargs.pop("version", None)):
            kwargs["output_keys"] = output_keys
            return v2.invoke(self, input, config, stream_mode, kwargs)
        if stream_mode != "values":
            return list(
                self.stream(
                    input, config, stream_mode=stream_mode, output_keys=output_keys, **kwargs
                )
            )
        out = InvokeResult()
        for chunk in self.stream(
            input,
            config,
            stream_mode=["updates", "values"],
            output_keys=output_keys,
            _invoke=True,  # its sink skips task-result updates (InvokeResult drops them)
            **kwargs,
        ):
            out.add(chunk)
        return out.result()

    async def ainvoke(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: Any = "values",
        output_keys: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Async twin of :meth:`invoke`."""
        output_keys = output_keys if output_keys is not None else self.output_channels
        if v2.is_v2(kwargs.pop("version", None)):
            kwargs["output_keys"] = output_keys
            return await v2.ainvoke(self, input, config, stream_mode, kwargs)
        if stream_mode != "values":
            return [
                c
                async for c in self.astream(
                    input, config, stream_mode=stream_mode, output_keys=output_keys, **kwargs
                )
            ]
        out = InvokeResult()
        async for chunk in self.astream(
            input,
            config,
            stream_mode=["updates", "values"],
            output_keys=output_keys,
            _invoke=True,  # its sink skips task-result updates (InvokeResult drops them)
            **kwargs,
        ):
            out.add(chunk)
        return out.result()

    # -- cache --------------------------------------------------------------------

    def clear_cache(self, nodes: Sequence[str] | None = None) -> None:
        """Forget the cached writes of ``nodes`` (all nodes when None).

        Raises:
            ValueError: the graph has no cache.
        """
        if self.cache is None:
            raise ValueError("No cache is set for this graph. Cannot clear cache.")
        self.cache.clear([_cache_ns(n) for n in (nodes or self.nodes)])

    async def aclear_cache(self, nodes: Sequence[str] | None = None) -> None:
        """Async twin of :meth:`clear_cache`."""
        if self.cache is None:
            raise ValueError("No cache is set for this graph. Cannot clear cache.")
        await self.cache.aclear([_cache_ns(n) for n in (nodes or self.nodes)])

    def get_subgraphs(
        self, *, namespace: str | None = None, recurse: bool = False
    ) -> Iterator[tuple[str, Any]]:
        """Subgraphs used as nodes: ``(name, graph)`` (nested names joined by ``|``)."""
        for name, node in self.nodes.items():
            for sub in node.subgraphs:
                if namespace is None or namespace == name or namespace.startswith(name + "|"):
                    if namespace is None or namespace == name:
                        yield name, sub
                    if recurse and hasattr(sub, "get_subgraphs"):
                        rest = (
                            None
                            if namespace is None or namespace == name
                            else namespace[len(name) + 1 :]
                        )
                        for n, s in sub.get_subgraphs(namespace=rest, recurse=True):
                            yield f"{name}|{n}", s

    async def aget_subgraphs(
        self, *, namespace: str | None = None, recurse: bool = False
    ) -> AsyncIterator[tuple[str, Any]]:
        """Async twin of :meth:`get_subgraphs`."""
        for item in self.get_subgraphs(namespace=namespace, recurse=recurse):
            yield item

    def __repr__(self) -> str:
        return f"Pregel(name={self.name!r}, nodes={list(self.nodes)!r})"
