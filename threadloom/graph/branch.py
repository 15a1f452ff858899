"""Conditional edges: a routing function picks where the graph goes next.

``BranchSpec`` holds the routing function (``path``) and the optional mapping
from its return values to node names (``ends``). Routing itself is pure: turn
what ``path`` returned into a list of node names and :class:`Send` packets,
rejecting values that name no node. compile.py turns those into channel writes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any, Literal, NamedTuple, get_args, get_origin, get_type_hints

from threadloom.constants import END, START
from threadloom.errors import InvalidRouteError, InvalidUpdateError, UnknownRouteError
from threadloom.types import Send

__all__ = ["BranchSpec", "call_with_injected", "ends_from_literal", "injected_params"]

_INJECTABLE = ("config", "runtime", "writer", "store")


def _callable_target(fn: Any) -> Any:
    """The function whose annotations describe calling ``fn``."""
    if inspect.isroutine(fn) or isinstance(fn, type):
        return fn
    if isinstance(fn, functools.partial):
        return _callable_target(fn.func)
    return type(fn).__call__ if callable(fn) else fn


def injected_params(fn: Callable[..., Any]) -> frozenset[str]:
    """Which of ``config``/``runtime``/``writer``/``store`` a callable accepts by name."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return frozenset()
    return frozenset(name for name in _INJECTABLE if name in params)


def call_with_injected(
    fn: Callable[..., Any], value: Any, config: dict[str, Any] | None, **extra: Any
) -> Any:
    """Call ``fn(value)``, passing ``config``/``runtime``/... too when it asks for them."""
    wanted = injected_params(fn)
    kwargs = {name: extra.get(name) for name in wanted if name != "config"}
    if "config" in wanted:
        kwargs["config"] = config or {}
    return fn(value, **kwargs)


def ends_from_literal(fn: Callable[..., Any]) -> tuple[str, ...] | None:
    """Node names from a ``-> Literal["a", "b"]`` (or ``Command[Literal[...]]``) hint."""
    func = _callable_target(fn)
    try:
        hint = get_type_hints(func).get("return")
    except Exception:  # unresolvable forward refs: no static ends
        return None
    if hint is None:
        return None
    if get_origin(hint) is not Literal:
        args = get_args(hint)
        if getattr(get_origin(hint), "__name__", "") != "Command" or not args:
            return None
        hint = args[0]
        if get_origin(hint) is not Literal:
            return None
    return tuple(str(a) for a in get_args(hint))


class BranchSpec(NamedTuple):
    """A conditional edge out of one node."""

    path: Callable[..., Any]
    ends: dict[Hashable, str] | None
    input_schema: type[Any] | None = None

    @classmethod
    def from_path(
        cls,
        path: Callable[..., Any],
        path_map: dict[Hashable, str] | Sequence[str] | None,
        input_schema: type[Any] | None = None,
    ) -> BranchSpec:
        """Build a branch; without ``path_map`` the ends come from a ``Literal`` return hint."""
        if isinstance(path_map, dict):
            ends: dict[Hashable, str] | None = dict(path_map)
        elif path_map is not None and not isinstance(path_map, str):
            ends = {name: name for name in path_map}
        elif (names := ends_from_literal(path)) is not None:
            ends = {name: name for name in names}
        else:
            ends = None
        return cls(path=path, ends=ends, input_schema=input_schema)

    def destinations(self, result: Any, source: str) -> list[str | Send]:
        """Map ``path``'s return value to node names and ``Send`` packets.

        Raises:
            InvalidRouteError: ``None`` or ``START`` (also a ValueError).
            UnknownRouteError: a key missing from ``path_map`` (also a KeyError).
            InvalidUpdateError: a ``Send`` to ``END``.
        """
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        out: list[str | Send] = []
        for item in results:
            if isinstance(item, Send):
                if item.node == END:
                    raise InvalidUpdateError(
                        f"branch from node {source!r} sent a packet to END; Send needs a node"
                    )
                out.append(item)
                continue
            if self.ends is not None:
                if item not in self.ends:
                    raise UnknownRouteError(
                        f"branch from node {source!r} returned {item!r}, which is not a key "
                        f"of its path_map {sorted(map(str, self.ends))}"
                    )
                item = self.ends[item]
            if item is None or item == START:
                raise InvalidRouteError(
                    f"branch from node {source!r} did not return a valid destination: {item!r}"
                )
            out.append(plain_name(item))
        return out

    def route(self, state: Any, config: dict[str, Any] | None, source: str, **extra: Any) -> Any:
        """Run ``path`` on ``state`` (sync); an awaitable result is returned for the caller."""
        return call_with_injected(self.path, state, config, **extra)

    @property
    def is_async(self) -> bool:
        fn = self.path
        return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(_callable_target(fn))

    @property
    def targets(self) -> list[str]:
        """Static destinations for drawing and validation (empty when unknown)."""
        return list(self.ends.values()) if self.ends else []


# -- running a branch inside a task (needs the runtime) ---------------------------------


def _run_awaitable(awaitable: Any) -> Any:
    """Result of an async routing function called from a sync writer."""
    import asyncio
    import concurrent.futures

    async def wrap() -> Any:
        return await awaitable

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, wrap()).result()


def _own_writes_applied(task: Any, fields: dict[str, Any], keys: list[str]) -> Any:
    """The task's input state with the task's own writes folded in (fallback reader)."""
    from threadloom.errors import EmptyChannelError
    from threadloom.graph.schema import ROOT, channels_for, fields_of

    base = task.input
    if task.name == START:  # the START node reads {__start__: input, **state}
        base = {k: v for k, v in base.items() if k != START} if isinstance(base, dict) else {}
    elif not isinstance(base, dict):
        base = (
            {ROOT: base}
            if keys == [ROOT]
            else {k: getattr(base, k) for k in fields_of(type(base)) if hasattr(base, k)}
        )
    channels = channels_for({k: fields[k] for k in keys if k in fields})
    out: dict[str, Any] = {}
    for key, channel in channels.items():
        if key in base:
            channel = channel.from_checkpoint(base[key])
        values = [v for c, v in task.writes if c == key]
        if values:
            channel.update(values)
        try:
            out[key] = channel.get()
        except EmptyChannelError:
            continue
    return out[ROOT] if keys == [ROOT] else out


def fresh_reader(
    fields: dict[str, Any],
    keys: list[str],
    managed: dict[str, Any],
    mapper: Callable[[Any], Any] | None,
    merge_output: bool,
) -> Callable[[Any], Any]:
    """Reads the state a branch decides on: the step's state plus the node's own writes.

    ``managed`` keys (``RemainingSteps``...) are computed for the task's step.
    """
    from threadloom.graph.schema import ROOT

    select: Any = ROOT if keys == [ROOT] else keys

    def read(output: Any) -> Any:
        from threadloom.pregel.context import current_task_or_raise

        scope = current_task_or_raise()
        runtime_read = getattr(scope, "read", None)
        if runtime_read is not None:
            state = runtime_read(select, fresh=True)
        else:
            state = _own_writes_applied(scope.task, fields, keys)
        if managed and isinstance(state, dict):
            window = scope.task.scratchpad
            state.update({k: m.get(window) for k, m in managed.items()})
        if mapper is not None and isinstance(state, dict):
            state = mapper(state)
        if merge_output and isinstance(state, dict) and isinstance(output, dict):
            state = {**output, **state}
        return state

    return read


def plain_name(name: Any) -> Any:
    """A ``str`` subclass (a ``class N(str, Enum)`` member) as the plain string it
    equals: ``"branch:to:{}".format(N.B)`` gives ``branch:to:N.B`` on Python
    3.11+, a channel no node listens to, so the route was silently lost."""
    return str.__str__(name) if isinstance(name, str) and type(name) is not str else name


def check_destination(source: str, target: Any, nodes: Collection[str]) -> None:
    """Refuse a route to a node the graph does not have (a typo in a router's
    return value, ``Command(goto=...)`` or ``Send``): LangGraph logs a warning
    and drops the route, so the run ends early and looks successful.

    Raises:
        InvalidRouteError: naming the source, the target and the graph's nodes.
    """
    node = target.node if isinstance(target, Send) else target
    if node == END or (node != START and node in nodes):
        return
    how = f"sent a packet to {node!r}" if isinstance(target, Send) else f"routed to {node!r}"
    raise InvalidRouteError(
        f"node {source!r} {how}, which is not a node of this graph "
        f"(nodes: {sorted(n for n in nodes if n != START)})"
    )


class BranchWriter:
    """Writer appended to a node: routes on the fresh state, writes the triggers."""

    def __init__(
        self,
        branch: BranchSpec,
        source: str,
        reader: Callable[[Any], Any],
        channel_fmt: str,
        nodes: Collection[str] | None = None,
    ) -> None:
        self.branch = branch
        self.source = source
        self.reader = reader
        self.channel_fmt = channel_fmt
        self.nodes = nodes  # the graph's node names (None: not checked)
        self._is_channel_writer = [
            (end if end == END else channel_fmt.format(end), None, str(label))
            for label, end in (branch.ends or {}).items()
        ] or True

    def _entries(self, result: Any) -> list[Any]:
        from threadloom.pregel.write import ChannelWriteEntry

        destinations = self.branch.destinations(result, self.source)
        if self.nodes is not None:
            for d in destinations:
                check_destination(self.source, d, self.nodes)
        return [
            d if isinstance(d, Send) else ChannelWriteEntry(self.channel_fmt.format(d), None)
            for d in destinations
            if isinstance(d, Send) or d != END
        ]

    def _route(self, state: Any) -> Any:
        from threadloom.graph.runtime import current_runtime
        from threadloom.pregel.context import current_task

        scope = current_task()
        config = scope.config() if scope is not None else {}
        wanted = injected_params(self.branch.path)
        extra: dict[str, Any] = {}
        if wanted & {"runtime", "store", "writer"}:
            runtime = current_runtime(config)
            extra = {"runtime": runtime, "store": runtime.store, "writer": runtime.stream_writer}
        return self.branch.route(state, config, self.source, **extra)

    def __call__(self, value: Any) -> Any:
        from threadloom.pregel.write import ChannelWrite

        state = self.reader(value)
        result = self._route(state)
        if inspect.isawaitable(result):
            result = _run_awaitable(result)
        if entries := self._entries(result):
            ChannelWrite.do_write(None, entries)
        return value

    async def acall(self, value: Any) -> Any:
        """Async twin: awaits an async routing function in the running loop."""
        from threadloom.pregel.write import ChannelWrite

        state = self.reader(value)
        result = self._route(state)
        if inspect.isawaitable(result):
            result = await result
        if entries := self._entries(result):
            ChannelWrite.do_write(None, entries)
        return value

    def __repr__(self) -> str:
        return f"BranchWriter<{self.source}:{getattr(self.branch.path, '__name__', 'path')}>"
