"""Bringing threads over from a LangGraph checkpointer.

threadloom's savers keep their own tables (a LangGraph ``SqliteSaver`` file and
a threadloom one can even be the same file, side by side), so pointing a ported
program at its old database shows empty threads. :func:`import_langgraph` copies
what a LangGraph saver holds into a threadloom saver: every checkpoint with its
id, parent, metadata and values, and every pending write, per thread and
namespace, so ``get_state``, the history, time travel and resuming an
interrupted thread carry on where LangGraph left off.

Values travel the way they would between two processes: LangGraph's serializer
writes them and the target's reads them, so LangGraph's ``Interrupt``/``Send``/
``Command`` become threadloom's, LangChain messages stay messages, and the
target's safe-deserialization rules apply (a class it does not allow is refused
with a ``SerializationError`` naming it; allow it on the target's ``serde``).

A thread comes over whole or not at all. It is read twice, one checkpoint at a
time: a survey checks every value to be written against the target's rules (a
refused value writes nothing), then the checkpoints are written oldest first.
When a write fails, a thread the target did not hold before is deleted again,
unless another program wrote to it meanwhile (then it stays, and the error
says so). Re-running skips checkpoints and pending writes the target holds
already (equal values); a pending write it holds with another value (its
program went on differently) is left and counted in ``differing_writes``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from threadloom.checkpoint.base import WRITES_IDX_MAP
from threadloom.checkpoint.migrate_source import (
    Converter,
    afind_threads,
    atask_paths,
    athread_tuples,
    config_of,
    find_threads,
    loud_langgraph_fallback,
    order,
    task_paths,
    thread_tuples,
)
from threadloom.checkpoint.storage.rows import check_metadata
from threadloom.errors import ImportConflictError, SerializationError, StorageError

__all__ = ["ImportResult", "aimport_langgraph", "import_langgraph"]


@dataclass
class ImportResult:
    """What one :func:`import_langgraph` call did (``progress`` sees it grow)."""

    threads: set[str] = field(default_factory=set)
    checkpoints: int = 0  # written by this call
    skipped: int = 0  # checkpoints already in the target (an earlier import)
    writes: int = 0  # pending writes stored by this call
    skipped_writes: int = 0  # pending writes the target holds already, equal
    differing_writes: int = 0  # the target holds another value there: left as it is


Progress = Callable[[ImportResult], None]
_PLAIN = (str, int, float, bool, type(None), bytes, bytearray)  # nothing to refuse


@dataclass
class _Entry:
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


def import_langgraph(
    source: Any,
    target: Any,
    *,
    thread_ids: Iterable[str] | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Copy every checkpoint and pending write of ``source`` (a LangGraph
    checkpointer: ``SqliteSaver``, ``PostgresSaver``, ``InMemorySaver``...) into
    ``target`` (a threadloom saver); only ``thread_ids`` when given. Each thread
    is all-or-nothing (see the module docstring); ``progress`` is called after
    each checkpoint, written or skipped.

    Raises:
        ConfigError: ``source`` has no serializer or cannot list its checkpoints.
        SerializationError: a value the target's serializer refuses to revive
            (nothing of that thread was written).
        ImportConflictError: the target holds the thread with checkpoints the
            source lacks (nothing of that thread was written).
    """
    conv = Converter(source, target, "list")
    result = ImportResult()
    conflicts: list[tuple[str, str]] = []
    with loud_langgraph_fallback() as blocked:
        for thread in find_threads(source, thread_ids):
            whole = config_of(thread, None, None)
            fresh = next(iter(target.list(whole, limit=1)), None) is None
            survey = _Survey(conv, thread)
            blocked.clear()  # (finding the threads may have read other threads' values)
            for tup in thread_tuples(source, thread):
                survey.add(tup, None if fresh else target.get_tuple(config_of(*order(tup))))
            _refuse_blocked(thread, blocked)
            if not fresh and _diverged(thread, survey, map(_row, target.list(whole)), conflicts):
                continue
            if survey.entries:
                result.threads.add(thread)
            writer = _Writer(thread, conv, result)
            try:
                for entry in survey.sorted():
                    tup = source.get_tuple(_at(thread, entry)) if _needs(entry) else None
                    paths = task_paths(source, tup) if tup is not None and entry.todo else {}
                    for method, args in writer.calls(entry, tup, paths):
                        getattr(target, method)(*args)
                    if progress is not None:
                        progress(result)
            except BaseException as exc:
                if fresh:  # none of it, unless another program wrote to it meanwhile
                    try:
                        if _removable(exc, thread, writer.written, map(order, target.list(whole))):
                            target.delete_thread(thread)
                    except Exception as undo:
                        _note(exc, f"removing thread {thread!r} again failed: {undo!r}")
                raise
    _refuse(conflicts, result)
    return result


async def aimport_langgraph(
    source: Any,
    target: Any,
    *,
    thread_ids: Iterable[str] | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Async twin of :func:`import_langgraph`: LangGraph's async savers
    (``AsyncPostgresSaver``, ``AsyncSqliteSaver``) list only through ``alist``."""
    conv = Converter(source, target, "alist")
    result = ImportResult()
    conflicts: list[tuple[str, str]] = []
    with loud_langgraph_fallback() as blocked:
        for thread in await afind_threads(source, thread_ids):
            whole = config_of(thread, None, None)
            fresh = [t async for t in target.alist(whole, limit=1)] == []
            survey = _Survey(conv, thread)
            blocked.clear()  # (finding the threads may have read other threads' values)
            async for tup in athread_tuples(source, thread):
                have = None if fresh else await target.aget_tuple(config_of(*order(tup)))
                survey.add(tup, have)
            _refuse_blocked(thread, blocked)
            keys = [] if fresh else [_row(t) async for t in target.alist(whole)]
            if not fresh and _diverged(thread, survey, keys, conflicts):
                continue
            if survey.entries:
                result.threads.add(thread)
            writer = _Writer(thread, conv, result)
            try:
                for entry in survey.sorted():
                    tup = await source.aget_tuple(_at(thread, entry)) if _needs(entry) else None
                    paths = await atask_paths(source, tup) if tup is not None and entry.todo else {}
                    for method, args in writer.calls(entry, tup, paths):
                        await getattr(target, "a" + method)(*args)
                    if progress is not None:
                        progress(result)
            except BaseException as exc:
                if fresh:  # none of it, unless another program wrote to it meanwhile
                    try:
                        keys = [order(t) async for t in target.alist(whole)]
                        if _removable(exc, thread, writer.written, keys):
                            await target.adelete_thread(thread)
                    except Exception as undo:
                        _note(exc, f"removing thread {thread!r} again failed: {undo!r}")
                raise
    _refuse(conflicts, result)
    return result


def _row(tup: Any) -> tuple[str, str, str | None, str | None]:
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


def _diverged(
    thread: str,
    survey: _Survey,
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


def _refuse_blocked(thread: str, blocked: list[tuple[str, str, str]]) -> None:
    """A class LangGraph's strict mode (``LANGGRAPH_STRICT_MSGPACK``) blocked, or
    one it could not rebuild here, is handed over as a plain dict (or ``None``,
    inside a pydantic model): imported, the object would be stored as that."""
    if not blocked:
        return
    module, name, why = blocked[0]
    if why == "blocked":
        raise SerializationError(
            f"import_langgraph: thread {thread!r}: LangGraph's strict mode refused "
            f"{module}.{name} while reading the source and would hand it over as a plain dict; "
            "allow it on the source's serializer (with_msgpack_allowlist) and on the "
            f"target's (on the command line: --allow {module}:{name}); nothing of the thread "
            "was written"
        )
    raise SerializationError(
        f"import_langgraph: thread {thread!r}: LangGraph cannot rebuild {module}.{name} in "
        f"this process ({why}); make it importable here (and allowed on the target's "
        "serializer), then import again; nothing of the thread was written"
    )


def _refuse(conflicts: list[tuple[str, str]], result: ImportResult) -> None:
    """After every other thread came over: say which ones were left out."""
    if not conflicts:
        return
    names = ", ".join(f"{t!r} (e.g. checkpoint {c!r})" for t, c in conflicts[:5])
    more = f" and {len(conflicts) - 5} more" if len(conflicts) > 5 else ""
    error = ImportConflictError(
        f"import_langgraph: {len(conflicts)} thread(s) were not imported: the target already "
        f"holds them with checkpoints the LangGraph source does not have: {names}{more}. Each "
        "is another thread with the same id, or was continued in threadloom after an earlier "
        "import (or the LangGraph saver pruned the checkpoints that linked them: its prune "
        "leaves the kept one without a parent); importing would make LangGraph's checkpoints "
        "its latest state. Leave them out (thread_ids=...), or, to take LangGraph's (as after "
        "a prune, when threadloom never ran on it), delete_thread them on the target first. "
        f"The other threads were imported ({len(result.threads)}; the error's .result)",
        thread_id=conflicts[0][0],
    )
    error.thread_ids = [t for t, _ in conflicts]
    error.result = result
    raise error


def _removable(
    exc: BaseException, thread: str, written: set[tuple[str, str]], keys: Iterable[Any]
) -> bool:
    """Whether the failed thread holds only what this call wrote: a checkpoint
    another program wrote to it meanwhile would be deleted with it."""
    foreign = [cid for _, ns, cid in keys if (ns, cid) not in written]
    if foreign:
        _note(
            exc,
            f"thread {thread!r} was not removed again: it holds {len(foreign)} checkpoint(s) "
            f"this import did not write (e.g. {foreign[0]!r}, written meanwhile by another "
            f"program); the {len(written)} checkpoint(s) this import wrote are still there",
        )
    return not foreign


def _note(exc: BaseException, text: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(text)


class _Survey:
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
        self.entries: list[_Entry] = []
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
        entry = _Entry(ns, cid, parent, versions, have is not None, todo, kept, differ)
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

    def sorted(self) -> list[_Entry]:
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


def _needs(entry: _Entry) -> bool:
    return not entry.present or bool(entry.todo)


class _Writer:
    """Pass two: the target calls that bring one checkpoint over, counted. The
    converted values of the last checkpoint written are kept, so a channel whose
    version did not change is not converted again."""

    def __init__(self, thread: str, conv: Converter, result: ImportResult) -> None:
        self.thread, self.conv, self.result = thread, conv, result
        self.written: set[tuple[str, str]] = set()  # (ns, id) of checkpoints put
        self.last: dict[str, tuple[tuple[str, Any], Any]] = {}

    def calls(
        self, entry: _Entry, tup: Any, paths: dict[str, str]
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """``tup``: read from the source again, None when nothing is missing;
        ``paths``: each task's path (its writes replay in path order)."""
        result, thread = self.result, self.thread
        at = _at(thread, entry)
        calls: list[tuple[str, tuple[Any, ...]]] = []
        result.skipped_writes += entry.kept
        result.differing_writes += entry.differ
        if entry.present:
            result.skipped += 1
        elif tup is None:
            raise StorageError(
                f"import_langgraph: checkpoint {entry.cid!r} of thread {thread!r} left the "
                "source during the import"
            )
        else:
            checkpoint = self._checkpoint(entry.ns, tup.checkpoint)
            metadata = metadata_of(self.conv, tup)
            parent = config_of(thread, entry.ns, entry.parent)
            calls.append(("put", (parent, checkpoint, metadata, entry.versions)))
            self.written.add((entry.ns, entry.cid))
            result.checkpoints += 1
        by_task: dict[str, list[tuple[str, Any]]] = {}
        position: dict[str, int] = {}
        for task_id, channel, value in (tup.pending_writes or ()) if tup is not None else ():
            n = position[task_id] = position.get(task_id, -1) + 1
            if n in entry.todo.get(task_id, ()):
                by_task.setdefault(task_id, []).append((channel, self.conv.convert(value)))
        for task_id, writes in by_task.items():
            result.writes += len(writes)
            calls.append(("put_writes", (at, writes, task_id, paths.get(task_id, ""))))
        return calls

    def _checkpoint(self, ns: str, checkpoint: Any) -> dict[str, Any]:
        rest = dict(checkpoint)
        values = rest.pop("channel_values", None) or {}
        versions = rest.get("channel_versions") or {}
        out = self.conv.convert(rest)
        keys = {channel: (ns, versions.get(channel)) for channel in values}
        last = self.last
        need = {
            channel: value
            for channel, value in values.items()
            if keys[channel][1] is None or last.get(channel, ((), None))[0] != keys[channel]
        }
        fresh = self.conv.convert(need) if need else {}
        cv = {ch: fresh[ch] if ch in need else last[ch][1] for ch in values}
        self.last = {ch: (keys[ch], value) for ch, value in cv.items()}
        out["channel_values"] = cv
        return out


def _at(thread: str, entry: _Entry) -> dict[str, Any]:
    return config_of(thread, entry.ns, entry.cid)
