"""Conditional edges: a routing function picks where the graph goes next.

``BranchSpec`` holds the routing function (``path``) and the optional mapping
from its return values to node names (``ends``). Routing itself is pure: turn
what ``path`` returned into a list of node names and :class:`Send` packets,
rejecting values that name no node. compile.py turns those into channel writes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Literal, NamedTuple, get_args, get_origin, get_type_hints

from threadloom.constants import END, START
from threadloom.errors import InvalidUpdateError
from threadloom.types import Send

__all__ = ["BranchSpec", "call_with_injected", "ends_from_literal", "injected_params"]

_INJECTABLE = ("config", "runtime", "writer", "store")


def injected_params(fn: Callable[..., Any]) -> frozenset[str]:
    """Which of ``config``/``runtime``/``writer``/``store`` a callable accepts by name."""
    target = fn if inspect.isroutine(fn) else type(fn).__call__
    try:
        params = inspect.signature(target if target is not None else fn).parameters
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
    func = fn if inspect.isroutine(fn) else type(fn).__call__
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
            InvalidUpdateError: a value with no node (``None``, ``START``, a key
                missing from ``path_map``) or a ``Send`` to ``END``.
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
                    raise InvalidUpdateError(
                        f"branch from node {source!r} returned {item!r}, which is not a key "
                        f"of its path_map {sorted(map(str, self.ends))}"
                    )
                item = self.ends[item]
            if item is None or item == START:
                raise InvalidUpdateError(
                    f"branch from node {source!r} did not return a valid destination: {item!r}"
                )
            out.append(item)
        return out

    def route(self, state: Any, config: dict[str, Any] | None, source: str, **extra: Any) -> Any:
        """Run ``path`` on ``state`` (sync); an awaitable result is returned for the caller."""
        return call_with_injected(self.path, state, config, **extra)

    @property
    def is_async(self) -> bool:
        fn = self.path
        return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)

    @property
    def targets(self) -> list[str]:
        """Static destinations for drawing and validation (empty when unknown)."""
        return list(self.ends.values()) if self.ends else []
