"""Which checkpoints a prune keeps (docs/storage.md, "Retention").

A thread's state is its root namespace. A *subgraph call* namespace (its path
holds a task id after ``:``, as ``child:<task id>``) is the state of one call
made from one root checkpoint, the one its ``metadata["parents"][""]`` names:
the call is live while that root checkpoint is kept, and goes with it
otherwise. Keeping the latest checkpoint of every call namespace (and then
the root checkpoint each one points at) kept one root checkpoint per finished
call, so ``keep_latest`` history grew with every turn of a graph that calls a
subgraph. A namespace without a task id (a ``checkpointer=True`` subgraph,
whose state outlives each call) is pruned by the strategy on its own.

Always kept besides: the calls made from a kept root checkpoint (an
interrupted subgraph's checkpoints), the
checkpoints of enclosing subgraph namespaces a kept nested one points at, and
the ancestors a kept checkpoint LangGraph wrote rebuilds a ``DeltaChannel``
value from (:func:`needs_ancestors`: back to one that holds every value). A
call namespace whose root checkpoint has no row (deleted by hand, or not
saved yet) is pruned by the strategy on its own, as before.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

from threadloom.checkpoint.storage.ops import CheckpointRow
from threadloom.constants import NS_END

__all__ = ["kept_checkpoints", "needs_ancestors"]

DELTA_COUNTERS = "counters_since_delta_snapshot"

Key = tuple[str, str]  # (checkpoint_ns, checkpoint_id)


def kept_checkpoints(
    rows: Sequence[CheckpointRow],
    strategy: str,
    keep_last: int | None,
    before: str | None,
) -> set[Key]:
    """The ``(ns, id)`` a prune keeps; ``rows`` are the thread's, newest first."""
    if strategy == "delete":
        return set()
    by_ns: dict[str, list[CheckpointRow]] = defaultdict(list)
    for row in rows:
        by_ns[row.checkpoint_ns].append(row)
    keep: set[Key] = set()
    calls = []
    for ns, ns_rows in by_ns.items():
        if NS_END in ns:
            calls.append(ns)
        else:
            keep |= _by_strategy(ns, ns_rows, strategy, keep_last, before)
    roots = {cid for ns, cid in keep if ns == ""}
    saved = {r.checkpoint_id for r in by_ns.get("", ())}
    for ns in calls:
        root = _root_of(by_ns[ns][0])
        if root is None or root in roots or root not in saved:
            keep |= _by_strategy(ns, by_ns[ns], strategy, keep_last, before)
    _enclosing(rows, keep)
    _delta_bases(rows, keep)
    return keep


def needs_ancestors(row: CheckpointRow) -> bool:
    """Whether ``row`` (a checkpoint LangGraph wrote between two ``DeltaChannel``
    snapshots, brought over by ``import_langgraph``) holds no value for some
    channel and is rebuilt from its ancestors' writes: LangGraph names those
    channels in ``metadata["counters_since_delta_snapshot"]``. threadloom's own
    checkpoints always hold every value."""
    if DELTA_COUNTERS not in row.metadata:  # the usual case: no JSON parsed
        return False
    try:
        return bool(json.loads(row.metadata).get(DELTA_COUNTERS))
    except (ValueError, AttributeError):
        return False


def _delta_bases(rows: Sequence[CheckpointRow], keep: set[Key]) -> None:
    """Add the parent chain of each kept checkpoint that :func:`needs_ancestors`,
    up to the first one holding every value: cutting it would rebuild the
    channel from nothing (LangGraph's savers refuse ``keep_latest`` on such
    threads instead)."""
    by_key = {(r.checkpoint_ns, r.checkpoint_id): r for r in rows}
    for key in list(keep):
        row = by_key.get(key)
        while row is not None and needs_ancestors(row) and row.parent_checkpoint_id:
            key = (row.checkpoint_ns, row.parent_checkpoint_id)
            row = by_key.get(key)
            if row is None:
                break
            keep.add(key)


def _by_strategy(
    ns: str,
    rows: list[CheckpointRow],
    strategy: str,
    keep_last: int | None,
    before: str | None,
) -> set[Key]:
    """One namespace's kept ids: its latest always, then by the strategy. An
    older branch tip left waiting on an interrupt (the user went back and took
    another way) is not kept: resuming goes on from the latest, and keeping
    every abandoned question let ``keep_latest`` history grow for good (LangGraph's
    ``PostgresSaver.prune`` keeps one checkpoint there too)."""
    n = keep_last if strategy == "keep_last_n" else 1
    keep = set()
    for i, row in enumerate(rows):
        key = (ns, row.checkpoint_id)
        if i < n:
            keep.add(key)
        elif strategy == "before" and row.checkpoint_id >= before:  # type: ignore[operator]
            keep.add(key)
    return keep


def _parents(row: CheckpointRow) -> dict[str, str]:
    try:
        parents = json.loads(row.metadata).get("parents")
    except (ValueError, AttributeError):
        return {}
    return parents if isinstance(parents, dict) else {}


def _root_of(row: CheckpointRow) -> str | None:
    root = _parents(row).get("")
    return root if isinstance(root, str) else None


def _enclosing(rows: Sequence[CheckpointRow], keep: set[Key]) -> None:
    """Add the enclosing subgraph checkpoints kept nested ones point at (the
    root's are kept or not by the rule above, never through this walk)."""
    by_key = {(r.checkpoint_ns, r.checkpoint_id): r for r in rows}
    todo = list(keep)
    while todo:
        row = by_key.get(todo.pop())
        if row is None:
            continue
        for ns, cid in _parents(row).items():
            key = (ns, cid)
            if ns and key in by_key and key not in keep:
                keep.add(key)
                todo.append(key)
