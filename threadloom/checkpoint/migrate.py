"""Bringing threads over from a LangGraph checkpointer.

threadloom's savers keep their own tables (a LangGraph ``SqliteSaver`` file and
a threadloom one can even be the same file, side by side), so pointing a ported
program at its old database shows empty threads. :func:`import_langgraph` copies
what a LangGraph saver holds into a threadloom saver: every checkpoint with its
id, parent, metadata and values, and every pending write, per thread and
namespace, so ``get_state``, the history, time travel and resuming an
interrupted thread carry on where LangGraph left off.

Values travel the way they would between two processes: LangGraph's own
serializer writes them and the target saver's serializer reads them, so
LangGraph's ``Interrupt``/``Send``/``Command`` become threadloom's, LangChain
messages stay messages, and the target's safe-deserialization rules apply (an
application class the target's serializer does not allow is refused with a
``SerializationError`` naming it; allow it on the target's ``serde``).

A thread is imported whole or not at all, so a failed import never leaves a
truncated thread that a program would silently continue from: a thread the
target did not hold before is deleted from the target again when bringing it
over fails (a refused value, a storage error); for a thread it holds already
(an earlier import), the new values are converted, and so checked against the
target's rules, before the first of them is written. Threads go one at a time, and only
one checkpoint's values are held at once (a thread is read twice: once to check,
once to write), so memory does not grow with the size of the source.

Re-running an import skips checkpoints and pending writes the target already
has, so an interrupted import can simply be run again.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from threadloom.errors import ConfigError, SerializationError, StorageError

__all__ = ["ImportResult", "aimport_langgraph", "import_langgraph"]


@dataclass
class ImportResult:
    """What one :func:`import_langgraph` call did (``progress`` sees it grow)."""

    threads: set[str] = field(default_factory=set)
    checkpoints: int = 0  # written by this call
    skipped: int = 0  # checkpoints already in the target (an earlier import)
    writes: int = 0  # pending writes stored by this call
    skipped_writes: int = 0  # pending writes already in the target


Progress = Callable[[ImportResult], None]


@dataclass
class _Entry:
    """What the write pass needs to know of one source checkpoint (no values)."""

    ns: str
    cid: str
    parent: str | None
    versions: dict[str, Any]
    present: bool  # the target has this checkpoint already
    tasks: set[str]  # tasks whose pending writes the target lacks
    kept: int  # pending writes the target has already


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
    """
    convert = _converter(source, target, "list")
    result = ImportResult()
    with _loud_langgraph_fallback():
        for thread in _threads(source, thread_ids):
            fresh = next(iter(target.list(_config(thread, None, None), limit=1)), None) is None
            entries = []
            for tup in source.list(_config(thread, None, None)):
                have = None if fresh else target.get_tuple(_config(*_order(tup)))
                entries.append(_survey(tup, have, None if fresh else convert))
            if entries:
                result.threads.add(thread)
            try:
                for entry in _sorted(entries):
                    tup = source.get_tuple(_at(thread, entry)) if _needs(entry) else None
                    for method, args in _calls(thread, entry, tup, convert, result):
                        getattr(target, method)(*args)
                    if progress is not None:
                        progress(result)
            except BaseException as exc:
                if fresh:  # none of it, not a truncated thread that looks whole
                    try:
                        target.delete_thread(thread)
                    except Exception as undo:
                        _note(exc, f"removing thread {thread!r} again failed: {undo!r}")
                raise
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
    convert = _converter(source, target, "alist")
    result = ImportResult()
    with _loud_langgraph_fallback():
        if thread_ids is None:
            threads = sorted({_order(t)[0] async for t in source.alist(None)})
        else:
            threads = _wanted(thread_ids)
        for thread in threads:
            fresh = [t async for t in target.alist(_config(thread, None, None), limit=1)] == []
            entries = []
            async for tup in source.alist(_config(thread, None, None)):
                have = None if fresh else await target.aget_tuple(_config(*_order(tup)))
                entries.append(_survey(tup, have, None if fresh else convert))
            if entries:
                result.threads.add(thread)
            try:
                for entry in _sorted(entries):
                    tup = await source.aget_tuple(_at(thread, entry)) if _needs(entry) else None
                    for method, args in _calls(thread, entry, tup, convert, result):
                        await getattr(target, "a" + method)(*args)
                    if progress is not None:
                        progress(result)
            except BaseException as exc:
                if fresh:  # none of it, not a truncated thread that looks whole
                    try:
                        await target.adelete_thread(thread)
                    except Exception as undo:
                        _note(exc, f"removing thread {thread!r} again failed: {undo!r}")
                raise
    return result


def _note(exc: BaseException, text: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(text)


def _survey(tup: Any, have: Any, check: Callable[[Any], Any] | None) -> _Entry:
    """The entry of ``tup`` (``have``: the target's tuple of it, or None). With
    ``check`` (a thread the target holds already: it is not deleted on failure),
    what the target lacks is converted here and dropped, so a value the target
    refuses stops the import before the thread's first write."""
    _, ns, cid = _order(tup)
    convert = check or _unchecked
    if have is None:
        convert(dict(tup.checkpoint))
        convert(dict(tup.metadata))
    stored: dict[str, Counter[str]] = {}
    for task_id, channel, _ in (have.pending_writes or ()) if have is not None else ():
        stored.setdefault(task_id, Counter())[channel] += 1
    wanted: dict[str, Counter[str]] = {}
    for task_id, channel, _ in tup.pending_writes or ():
        wanted.setdefault(task_id, Counter())[channel] += 1
    tasks = {task for task, channels in wanted.items() if stored.get(task) != channels}
    kept = sum(sum(wanted[task].values()) for task in wanted.keys() - tasks)
    for task_id, _, value in tup.pending_writes or ():
        if task_id in tasks:
            convert(value)
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    # versions are plain strings or numbers: kept as stored
    versions = dict(tup.checkpoint.get("channel_versions") or {})
    return _Entry(ns, cid, parent, versions, have is not None, tasks, kept)


def _unchecked(value: Any) -> Any:
    return value


def _sorted(entries: list[_Entry]) -> list[_Entry]:
    """Parents first: per namespace, by id (ids grow with time); each entry
    learns its parent's versions (a checkpoint stores only the channels whose
    version differs from its parent's, as a run would have)."""
    entries.sort(key=lambda e: (e.ns, e.cid))
    versions_of = {(e.ns, e.cid): e.versions for e in entries}
    for e in entries:
        before = versions_of.get((e.ns, e.parent), {}) if e.parent else {}
        e.versions = {ch: v for ch, v in e.versions.items() if before.get(ch) != v}
    return entries


def _needs(entry: _Entry) -> bool:
    return not entry.present or bool(entry.tasks)


def _calls(
    thread: str, entry: _Entry, tup: Any, convert: Callable[[Any], Any], result: ImportResult
) -> list[tuple[str, tuple[Any, ...]]]:
    """The target calls that bring one checkpoint over (``tup``: read from the
    source again, None when nothing is missing), counted in ``result``."""
    at = _at(thread, entry)
    calls: list[tuple[str, tuple[Any, ...]]] = []
    result.skipped_writes += entry.kept
    if entry.present:
        result.skipped += 1
    elif tup is None:
        raise StorageError(
            f"import_langgraph: checkpoint {entry.cid!r} of thread {thread!r} left the "
            "source during the import"
        )
    else:
        checkpoint = convert(dict(tup.checkpoint))
        metadata = convert(dict(tup.metadata))
        parent = _config(thread, entry.ns, entry.parent)
        calls.append(("put", (parent, checkpoint, metadata, entry.versions)))
        result.checkpoints += 1
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in (tup.pending_writes or ()) if tup is not None else ():
        if task_id in entry.tasks:
            by_task.setdefault(task_id, []).append((channel, convert(value)))
    for task_id, writes in by_task.items():
        result.writes += len(writes)
        calls.append(("put_writes", (at, writes, task_id)))
    return calls


@contextmanager
def _loud_langgraph_fallback() -> Iterator[None]:
    """While the source is read: a stored object LangGraph cannot rebuild in this
    process (its class does not import here) raises instead of coming back as
    its raw fields, which the import would otherwise store as a plain dict."""
    try:
        from langgraph.checkpoint.serde import jsonplus
    except ImportError:  # not LangGraph's serializer: nothing to make loud
        yield
        return
    quiet = getattr(jsonplus, "_reconstruction_fallback", None)
    if quiet is None:
        yield
        return

    refused: list[SerializationError] = []

    def loud(tup: Any, exc: Exception) -> Any:
        name = ".".join(str(p) for p in tuple(tup or ())[:2]) or "a stored object"
        refused.append(
            SerializationError(
                f"import_langgraph: LangGraph cannot rebuild {name} in this process "
                f"({type(exc).__name__}: {exc}); make it importable here (and allowed "
                "on the target's serializer), then import again"
            )
        )
        raise refused[-1] from exc

    jsonplus._reconstruction_fallback = loud
    try:
        yield
    except Exception as exc:  # msgpack wraps what its ext hook raised
        if refused:
            raise refused[0] from exc
        raise
    finally:
        jsonplus._reconstruction_fallback = quiet


def _converter(source: Any, target: Any, lister: str) -> Callable[[Any], Any]:
    """Values as LangGraph's serializer writes them, revived by the target's."""
    dump = getattr(getattr(source, "serde", None), "dumps_typed", None)
    if dump is None or not callable(getattr(source, lister, None)):
        raise ConfigError(
            f"import_langgraph: the source must be a LangGraph checkpointer (with "
            f".{lister}() and .serde), got {type(source).__name__}"
        )
    serde = getattr(target, "serde", None)
    if serde is None:
        from threadloom.checkpoint.serde import MsgpackSerializer

        serde = MsgpackSerializer()
    load = serde.loads_typed

    def convert(value: Any) -> Any:
        return load(dump(value))

    return convert


def _wanted(thread_ids: Iterable[str]) -> list[str]:
    if isinstance(thread_ids, (str, bytes)):
        raise ConfigError("thread_ids must be a list of thread ids, not one string")
    return sorted({str(t) for t in thread_ids})


def _threads(source: Any, thread_ids: Iterable[str] | None) -> list[str]:
    """The threads to import, found without holding the source's values: by SQL
    for LangGraph's ``SqliteSaver``, from the keys of its ``InMemorySaver``,
    otherwise by listing everything once (each value dropped as it comes)."""
    if thread_ids is not None:
        return _wanted(thread_ids)
    conn, storage = getattr(source, "conn", None), getattr(source, "storage", None)
    if isinstance(conn, sqlite3.Connection) and callable(getattr(source, "cursor", None)):
        with source.cursor(transaction=False) as cur:
            cur.execute("SELECT DISTINCT thread_id FROM checkpoints")
            return sorted(str(row[0]) for row in cur.fetchall())
    if isinstance(storage, dict):
        return sorted(str(t) for t, spaces in storage.items() if spaces)
    return sorted({_order(tup)[0] for tup in source.list(None)})


def _order(tup: Any) -> tuple[str, str, str]:
    conf = tup.config["configurable"]
    return str(conf["thread_id"]), conf.get("checkpoint_ns", ""), conf["checkpoint_id"]


def _at(thread: str, entry: _Entry) -> dict[str, Any]:
    return _config(thread, entry.ns, entry.cid)


def _config(thread: str, ns: str | None, checkpoint_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}
