"""Trusting a graph's own classes in the saver that stores its state.

threadloom's serializer revives only registered or allowlisted classes. A graph
trusts the classes its schemas mention, and those of every subgraph it holds as
a node, when it is compiled with a saver. A subgraph that runs with a saver it
was not compiled with (one called from inside a node function runs on its
parent's) trusts its classes in that saver when its run starts.

A saver is widened in place (``saver.serde`` and the storage core's
``codec.serde`` become a copy trusting more), so reading the same saver directly
(``saver.get_tuple``) decodes those classes too. When a class replaces another
one of the same name (a notebook cell defining the state run again), the
saver's decoded-value caches are dropped: they may hold instances of the old one.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from threadloom.graph.schema import schema_types

__all__ = ["apply_allowlist", "graph_types", "trust_at_run"]

_LOCK = threading.RLock()  # one widening at a time: two would lose each other's classes
# per saver: stored name -> the class last trusted under it (to see redefinitions)
_LAST: weakref.WeakKeyDictionary[Any, dict[str, type]] = weakref.WeakKeyDictionary()


def graph_types(builder: Any, _seen: set[int] | None = None) -> tuple[type, ...]:
    """Every class the schemas of ``builder`` and of its subgraph nodes mention, sorted."""
    from threadloom.graph.state import StateGraph

    seen = _seen if _seen is not None else set()
    seen.add(id(builder))
    types: set[type] = set()
    for schema in {builder.state_schema, builder.input_schema, builder.output_schema}:
        types |= schema_types(schema)
    if builder.context_schema is not None:
        types |= schema_types(builder.context_schema)
    for spec in builder.nodes.values():
        types |= schema_types(spec.input_schema)
        sub = getattr(spec.runnable, "builder", None)  # a compiled StateGraph as a node
        if isinstance(sub, StateGraph) and id(sub) not in seen:
            types |= set(graph_types(sub, seen))
    return tuple(sorted(types, key=lambda t: (t.__module__, t.__qualname__)))


def apply_allowlist(checkpointer: Any, types: tuple[type, ...]) -> Any:
    """The saver to compile with, trusting ``types`` (:func:`graph_types` of the graph).

    A saver offering ``with_allowlist`` returns a copy; others are widened in place.
    """
    if checkpointer is None or isinstance(checkpointer, bool):
        return checkpointer
    if not types:
        return checkpointer
    if hasattr(checkpointer, "with_allowlist"):
        return checkpointer.with_allowlist(types)
    widen_in_place(checkpointer, types)
    return checkpointer


def trust_at_run(graph: Any, config: Any) -> None:
    """A nested run stores through its parent's saver: trust the graph's classes there.

    Cheap when nothing changed: the serializer last widened is remembered.
    """
    types = graph.trusted_types
    if not types or graph.checkpointer is False:
        return
    from threadloom.pregel.options import _parent_scope

    scope = _parent_scope(config)
    saver = scope.checkpointer if scope is not None else None
    if saver is None:
        return
    serde = getattr(saver, "serde", None)
    if serde is None or serde is graph.trusted_serde:
        return
    widen_in_place(saver, types)
    graph.trusted_serde = getattr(saver, "serde", None)


def widen_in_place(saver: Any, types: tuple[type, ...]) -> None:
    """Make ``saver`` (and the saver a wrapper such as ``FencedSaver`` holds) trust ``types``."""
    with _LOCK:
        inner = getattr(saver, "__dict__", {}).get("inner")
        target = saver
        if inner is not None and inner is not saver:
            before = getattr(inner, "serde", None)
            _widen(inner, types)
            if getattr(saver, "serde", None) is before:
                saver.serde = getattr(inner, "serde", None)
            target = inner
        _widen(saver, types)
        if _redefined(target, types):
            forget = getattr(target, "forget_cached", None)
            if forget is not None:
                forget()


def _widen(saver: Any, types: tuple[type, ...]) -> None:
    serde = getattr(saver, "serde", None)
    if serde is None or not hasattr(serde, "with_allowlist"):
        return
    widened = serde.with_allowlist(types)
    if widened is serde:
        return
    saver.serde = widened
    codec = getattr(saver, "codec", None)  # the storage core encodes through it
    if getattr(codec, "serde", None) is serde:
        codec.serde = widened


def _redefined(saver: Any, types: tuple[type, ...]) -> bool:
    """Whether a class of ``types`` replaces another one last trusted under its name."""
    try:
        last = _LAST.setdefault(saver, {})
    except TypeError:  # not weakly referenceable: nothing remembered
        return False
    changed = False
    for cls in types:
        name = f"{cls.__module__}.{cls.__qualname__}"
        known = last.get(name)
        changed = changed or (known is not None and known is not cls)
        last[name] = cls
    return changed
