"""Trusting a graph's own classes in the saver that stores its state.

threadloom's serializer revives only registered or allowlisted classes. A graph
trusts the classes its schemas mention, and those of every subgraph it holds as
a node, when it is compiled with a saver. A subgraph that runs with a saver it
was not compiled with (one called from inside a node function runs on its
parent's) trusts its classes in that saver when its run starts.

The node cache (``compile(cache=...)``) stores a cached node's writes with its
own serializer: it is widened the same way, at compile and when a subgraph runs
on its parent's cache. Widened in place, like a saver: a cache shared by several
graphs trusts the classes of each (as a shared saver does), the user's cache
object stays the one the graph uses (``cache.clear()``, ``close()`` and direct
reads act on it), and nothing is trusted that some graph using it does not
name. A copy per graph would split or share its connection and lock behind the
user's back.

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

from threadloom.checkpoint.serde import EncryptedSerializer, MsgpackSerializer
from threadloom.checkpoint.serde.registry import default_name
from threadloom.graph.schema import schema_types

__all__ = ["apply_allowlist", "apply_cache_allowlist", "graph_types", "trust_at_run"]

_LOCK = threading.RLock()  # one widening at a time: two would lose each other's classes
# per saver: stored name -> the class last trusted under it (weakly; to see redefinitions)
_LAST: weakref.WeakKeyDictionary[Any, dict[str, weakref.ref[type]]] = weakref.WeakKeyDictionary()


def graph_types(builder: Any) -> tuple[type, ...]:
    """Every class the schemas of ``builder`` and of its subgraph nodes mention.

    Sorted by stored name. Where two classes share one (a subgraph built by a
    factory function), the one mentioned nearest the parent comes last, then the
    later-added node's: trusted last, it is the one the name revives as, the
    same in every process (set order is not).
    """
    found: dict[type, tuple[int, int]] = {}  # class -> (-depth, order) of its nearest mention
    _collect(builder, 0, found, set())
    return tuple(sorted(found, key=lambda t: (t.__module__, t.__qualname__, found[t])))


def _collect(builder: Any, depth: int, found: dict[type, tuple[int, int]], seen: set[int]) -> None:
    from threadloom.graph.state import StateGraph

    seen.add(id(builder))
    types: set[type] = set()
    for schema in {builder.state_schema, builder.input_schema, builder.output_schema}:
        types |= schema_types(schema)
    if builder.context_schema is not None:
        types |= schema_types(builder.context_schema)
    subgraphs = []
    for spec in builder.nodes.values():
        types |= schema_types(spec.input_schema)
        sub = getattr(spec.runnable, "builder", None)  # a compiled StateGraph as a node
        if isinstance(sub, StateGraph) and id(sub) not in seen:
            subgraphs.append(sub)
    order = len(found)
    for cls in types:
        if cls not in found or found[cls] < (-depth, order):
            found[cls] = (-depth, order)
    for sub in subgraphs:
        if id(sub) not in seen:
            _collect(sub, depth + 1, found, seen)


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


def apply_cache_allowlist(cache: Any, types: tuple[type, ...]) -> Any:
    """The node cache to compile with, widened in place to trust ``types`` (see above)."""
    if cache is not None and types:
        widen_in_place(cache, types)
    return cache


def trust_at_run(graph: Any, config: Any) -> None:
    """A nested run stores through its parent's saver and caches in its parent's node
    cache: trust the graph's classes in both.

    Cheap when nothing changed: the serializers last widened are remembered.
    """
    types = graph.trusted_types
    if not types:
        return
    from threadloom.pregel.options import parent_scope

    scope = parent_scope(config)
    if scope is None:
        return
    if graph.checkpointer is not False:
        graph.trusted_serde = _trust_in(scope.checkpointer, types, graph.trusted_serde)
    graph.trusted_cache_serde = _trust_in(
        getattr(scope, "cache", None), types, getattr(graph, "trusted_cache_serde", None)
    )


def _trust_in(holder: Any, types: tuple[type, ...], last: Any) -> Any:
    """Widen ``holder`` (a saver or cache) unless ``last`` is its serializer already;
    the serializer it holds afterwards."""
    serde = getattr(holder, "serde", None)
    if serde is None or serde is last:
        return last
    widen_in_place(holder, types, refresh=False)  # the parent's compile ordered the rest
    return getattr(holder, "serde", None)


def widen_in_place(saver: Any, types: tuple[type, ...], refresh: bool = True) -> None:
    """Make ``saver`` (and the saver a wrapper such as ``FencedSaver`` holds) trust ``types``.

    ``refresh=False``: classes it trusts already keep their place (see ``with_allowlist``).
    """
    with _LOCK:
        inner = getattr(saver, "__dict__", {}).get("inner")
        target = saver
        if inner is not None and inner is not saver:
            before = getattr(inner, "serde", None)
            _widen(inner, types, refresh)
            if getattr(saver, "serde", None) is before:
                saver.serde = getattr(inner, "serde", None)
            target = inner
        _widen(saver, types, refresh)
        if refresh and _redefined(target, types):
            forget = getattr(target, "forget_cached", None)
            if forget is not None:
                forget()


def _widen(saver: Any, types: tuple[type, ...], refresh: bool) -> None:
    serde = getattr(saver, "serde", None)
    if serde is None or not hasattr(serde, "with_allowlist"):
        return
    if not _takes_refresh(serde):  # a custom serializer: its own with_allowlist
        widened = serde.with_allowlist(types)
    else:  # held while the graph (or an instance) holds them: nothing piles up
        widened = serde.with_allowlist(types, refresh=refresh, weak=True)
    if widened is serde:
        return
    saver.serde = widened
    codec = getattr(saver, "codec", None)  # the storage core encodes through it
    if getattr(codec, "serde", None) is serde:
        codec.serde = widened


def _takes_refresh(serde: Any) -> bool:
    """Whether ``serde.with_allowlist`` understands ``refresh=``/``weak=`` (custom ones may not)."""
    if isinstance(serde, EncryptedSerializer):
        return _takes_refresh(serde.serde)
    return isinstance(serde, MsgpackSerializer)


def _redefined(saver: Any, types: tuple[type, ...]) -> bool:
    """Whether a class of ``types`` replaces another one last trusted under its name."""
    try:
        last = _LAST.setdefault(saver, {})
    except TypeError:  # not weakly referenceable: nothing remembered
        return False
    latest = {default_name(cls): cls for cls in types}  # last one wins
    changed = False
    for name, cls in latest.items():
        known = last.get(name)
        before = known() if known is not None else None  # a dead class has no cached values
        changed = changed or (before is not None and before is not cls)
        last[name] = weakref.ref(cls)
    return changed
