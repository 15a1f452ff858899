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

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

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
from threadloom.checkpoint.migrate_survey import (
    Entry,
    Survey,
    diverged,
    metadata_of,
    refuse_blocked,
    row,
)
from threadloom.errors import ImportConflictError, StorageError

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
            survey = Survey(conv, thread)
            blocked.clear()  # (finding the threads may have read other threads' values)
            for tup in thread_tuples(source, thread):
                survey.add(tup, None if fresh else target.get_tuple(config_of(*order(tup))))
            refuse_blocked(thread, blocked)
            if not fresh and diverged(thread, survey, map(row, target.list(whole)), conflicts):
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
            survey = Survey(conv, thread)
            blocked.clear()  # (finding the threads may have read other threads' values)
            async for tup in athread_tuples(source, thread):
                have = None if fresh else await target.aget_tuple(config_of(*order(tup)))
                survey.add(tup, have)
            refuse_blocked(thread, blocked)
            keys = [] if fresh else [row(t) async for t in target.alist(whole)]
            if not fresh and diverged(thread, survey, keys, conflicts):
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


def _needs(entry: Entry) -> bool:
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
        self, entry: Entry, tup: Any, paths: dict[str, str]
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


def _at(thread: str, entry: Entry) -> dict[str, Any]:
    return config_of(thread, entry.ns, entry.cid)
