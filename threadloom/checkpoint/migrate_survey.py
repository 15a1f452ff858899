"""Pass one of :func:`~threadloom.checkpoint.migrate.import_langgraph` over a
thread: what each source checkpoint needs written (no values kept), every value
to be written checked against the target's rules, and whether the thread may
be imported at all (:func:`diverged`: the target went its own way with it;
:func:`refuse_blocked`: LangGraph handed a class over as a dict). A refusal
here writes nothing of the thread."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from threadloom.checkpoint.base import WRITES_IDX_MAP
from threadloom.checkpoint.migrate_source import Converter, order, refusal
from threadloom.checkpoint.storage.rows import check_metadata
from threadloom.errors import SerializationError

__all__ = ["Entry", "Survey", "diverged", "metadata_of", "refuse_blocked", "row"]

_PLAIN = (str, int, float, bool, type(None), bytes, bytearray)  # nothing to refuse


@dataclass
class Entry:
    """What the write pass needs to know of one source checkpoint (no values)."""

    ns: str
    cid: str
    parent: str | None
    versions: dict[str, Any]
    present: bool  # the target has this checkpoint already
    todo: dict[str, set[int]]  # task -> which of its writes (by position) to write
    kept: int  # pending writes the target has already (equal)
    differ: int  # pending writes the target holds with another value
    extra: int = 0  # target writes in a task slot the source has nothing in (its own answer)


class Survey:
    """Pass one over a thread (no values kept): what each checkpoint needs, and
    every value the write pass will write checked against the target's rules,
    so a refused value raises before the thread's first write. A channel's
    value is checked once per version (both LangGraph's savers and ours key a
    channel's value by its version), and a list's or dict's parts once per
    thread, by their serialized bytes: a message list that grows by one message
    per checkpoint is not revived whole at every checkpoint."""

    def __init__(self, conv: Converter, thread: str = "") -> None:
        self.conv = conv
        self.thread = thread
        self.at = ""  # the checkpoint being surveyed, for errors
        self.entries: list[Entry] = []
        self.versions: set[tuple[str, str, Any]] = set()
        self.parts: set[int] = set()

    def add(self, tup: Any, have: Any) -> None:
        _, ns, cid = order(tup)
        self.at = f"checkpoint {cid!r}" + (f" (namespace {ns!r})" if ns else "")
        versions = dict(tup.checkpoint.get("channel_versions") or {})
        if have is None:
            rest = dict(tup.checkpoint)
            values = rest.pop("channel_values", None) or {}
            self.conv.convert(rest)
            try:
                check_metadata(metadata_of(self.conv, tup))
            except SerializationError as exc:
                raise self._refused(exc, "", "its metadata") from None
            for channel, value in values.items():
                key = (ns, channel, versions.get(channel))
                if key not in self.versions:
                    self._check(value, str(channel))
                    if key[2] is not None:
                        self.versions.add(key)
        writes = tup.pending_writes or ()
        todo, kept, differ = self._writes(writes, have)
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        entry = Entry(ns, cid, parent, versions, have is not None, todo, kept, differ)
        entry.extra = _extra_writes(writes, have)
        self.entries.append(entry)

    def _check(self, value: Any, path: str, what: str = "") -> None:
        """Revive ``value``'s parts with the target's rules; ``path``: where
        the value sits in its channel, ``what``: which value it is (a pending
        write of a task), for the error."""
        parts: Iterable[tuple[str, Any]]
        if type(value) is dict:
            parts = (
                p
                for k, v in value.items()
                for p in ((f"{path} (a key)", k), (f"{path}.{k}" if path else str(k), v))
            )
        elif type(value) in (list, tuple):
            parts = ((f"{path}[{i}]", item) for i, item in enumerate(value))
        else:
            parts = ((path, value),)
        for where, part in parts:
            if type(part) in _PLAIN:
                continue
            dumped = self.conv.dump(part)
            key = hash(dumped)
            if key not in self.parts:
                try:
                    self.conv.load(dumped)
                except SerializationError as exc:
                    raise self._refused(exc, where, what) from None
                self.parts.add(key)

    def _refused(self, exc: SerializationError, where: str, what: str = "") -> SerializationError:
        """The target refused a value: say where it is in the source, and the
        usual way out (the graph's own classes are trusted once it is compiled
        on the target saver)."""
        inner = exc.under(where) if where else exc
        place = f"{self.at}, {what}" if what else self.at
        error = SerializationError(
            f"import_langgraph: thread {self.thread!r}, {place}: {inner}. Compiling the "
            "threadloom graph on the target saver before importing trusts the classes its "
            "state schema names; others must be allowed on the target's serializer "
            "(docs/serde.md)",
            path=inner.path,
            type_name=inner.type_name,
        )
        error.__cause__ = exc.__cause__
        return error

    def _writes(self, writes: Iterable[Any], have: Any) -> tuple[dict[str, set[int]], int, int]:
        """Which writes the target lacks. One it holds counts when equal; where
        it holds another value (its program went on differently: a special
        channel's slot taken, or the task's regular writes there) it is left."""
        stored: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in (have.pending_writes or ()) if have is not None else ():
            stored.setdefault(task_id, []).append((channel, value))
        taken = {t: {_slot(ch) for ch, _ in there} for t, there in stored.items()}
        todo: dict[str, set[int]] = {}
        kept = differ = 0
        position: dict[str, int] = {}
        for task_id, channel, value in writes:
            n = position[task_id] = position.get(task_id, -1) + 1
            there = stored.get(task_id)
            what = f"pending write {channel!r} of task {task_id!r}"
            if there is None:
                self._check(value, "", what)
                todo.setdefault(task_id, set()).add(n)
                continue
            try:
                mine = self.conv.convert(value)  # compared, and so checked
            except SerializationError as exc:
                raise self._refused(exc, "", what) from None
            same = next(
                (i for i, (ch, v) in enumerate(there) if ch == channel and _equal(v, mine)), None
            )
            if same is not None:
                del there[same]
                kept += 1
            elif _slot(channel) in taken[task_id]:
                differ += 1
            else:
                todo.setdefault(task_id, set()).add(n)
        return todo, kept, differ

    def sorted(self) -> list[Entry]:
        """Parents first: per namespace, by id (ids grow with time); each entry
        learns its parent's versions (a checkpoint stores only the channels whose
        version differs from its parent's, as a run would have)."""
        entries = self.entries
        entries.sort(key=lambda e: (e.ns, e.cid))
        versions_of = {(e.ns, e.cid): e.versions for e in entries}
        for e in entries:
            before = versions_of.get((e.ns, e.parent), {}) if e.parent else {}
            e.versions = {ch: v for ch, v in e.versions.items() if before.get(ch) != v}
        return entries


def metadata_of(conv: Converter, tup: Any) -> dict[str, Any]:
    """The checkpoint's metadata as threadloom stores it: without NaN and
    infinities (LangGraph copies them from ``config["metadata"]``; threadloom's
    runs leave them out, as JSON cannot hold them)."""
    try:
        md = conv.convert(dict(tup.metadata))
    except (TypeError, ValueError, OverflowError):
        # what msgpack cannot carry (an int beyond 64 bits) is plain JSON: as it is
        md = dict(tup.metadata)
    return {k: v for k, v in md.items() if not (type(v) is float and not math.isfinite(v))}


def _extra_writes(writes: Iterable[Any], have: Any) -> int:
    """The target's writes in a task slot where the source has none: what the
    target's own program did there (an answer, a finished task). LangGraph
    rewrites its own slots as it goes (a task's interrupt, then its resume), so
    a slot both hold with other values is not that."""
    if have is None or not have.pending_writes:
        return 0
    theirs = {(task_id, _slot(channel)) for task_id, channel, _ in writes}
    return sum(1 for task_id, ch, _ in have.pending_writes if (task_id, _slot(ch)) not in theirs)


def _slot(channel: str) -> str:
    """A special channel has its own slot in a task's writes; the regular ones
    are written together, so one of them there means all of them are."""
    return channel if channel in WRITES_IDX_MAP else ""


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an array's ==, say: not known to be equal
        return False


def row(tup: Any) -> tuple[str, str, str | None, str | None]:
    """``(ns, id, parent id, root checkpoint id)`` of a target checkpoint; the
    last is the root checkpoint a subgraph call was made from."""
    _, ns, cid = order(tup)
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    parents = (tup.metadata or {}).get("parents") or {}
    root = parents.get("") if isinstance(parents, dict) else None
    return ns, cid, parent, root if isinstance(root, str) else None


def _call_of_history(
    key: tuple[str, str],
    root_of: dict[tuple[str, str], str | None],
    linked: set[tuple[str, str]],
    source: set[tuple[str, str]],
) -> bool:
    """A subgraph call's checkpoint made from a root checkpoint that is imported
    history the source pruned since (LangGraph's prune deletes a call's
    namespace with its root checkpoint): history too. A call from a root
    checkpoint the source still has must itself be in the source."""
    root = root_of.get(key)
    pruned = root is not None and ("", root) in linked and ("", root) not in source
    return bool(key[0]) and pruned


def diverged(
    thread: str,
    survey: Survey,
    rows: Iterable[tuple[str, str, str | None, str | None]],
    conflicts: list[tuple[str, str]],
) -> bool:
    """Whether the target holds ``thread`` with checkpoints the source lacks and
    does not lead to (a threadloom thread of the same id, or one continued in
    threadloom after an earlier import, in any namespace: a subgraph's answer
    too) while the source has checkpoints the target lacks: those would land
    beside the target's own, and the newest would silently become the thread's
    state. Such a thread is left as it is and noted in ``conflicts``.

    A target checkpoint is the history the thread was imported with when the
    parent links reach it from the source: the source's own links, then the
    target's from every checkpoint both hold (the source may have pruned the
    older ones since). One they do not reach is refused even when the source
    pruned the link (LangGraph's prune leaves its kept checkpoint without a
    parent): a refusal says what to do, a silent merge loses a turn."""
    if all(e.present for e in survey.entries):
        return False
    source = {(e.ns, e.cid) for e in survey.entries}
    rows = list(rows)
    parent_of = {(ns, cid): parent for ns, cid, parent, _ in rows}
    root_of = {(ns, cid): root for ns, cid, _, root in rows}
    starts = [(e.ns, e.parent) for e in survey.entries]
    starts += [(ns, parent_of[(ns, cid)]) for ns, cid in source if (ns, cid) in parent_of]
    linked: set[tuple[str, str]] = set()
    for ns, p in starts:
        while p and (ns, p) in parent_of and (ns, p) not in linked:
            linked.add((ns, p))
            p = parent_of[(ns, p)]
    foreign = [
        key
        for key in parent_of
        if key not in source
        and key not in linked
        and not _call_of_history(key, root_of, linked, source)
    ]
    # what the target's program did at a checkpoint (an answer, a finished task:
    # writes in slots the source has nothing in) that the source has built on
    built_on = {(e.ns, e.parent) for e in survey.entries if not e.present}
    foreign += [(e.ns, e.cid) for e in survey.entries if e.extra and (e.ns, e.cid) in built_on]
    if foreign:
        conflicts.append((thread, max(foreign)[1]))
    return bool(foreign)


def refuse_blocked(thread: str, blocked: list[tuple[str, str, str]]) -> None:
    """A class LangGraph's strict mode (``LANGGRAPH_STRICT_MSGPACK``) blocked, or
    one it could not rebuild here, is handed over as a plain dict (or ``None``,
    inside a pydantic model): imported, the object would be stored as that."""
    if blocked:
        raise refusal(*blocked[0], thread=thread)
