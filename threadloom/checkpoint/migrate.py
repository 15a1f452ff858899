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

Re-running an import skips checkpoints the target already has and stores
pending writes idempotently, so an interrupted import can simply be run again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from threadloom.errors import ConfigError

__all__ = ["ImportResult", "import_langgraph"]


@dataclass
class ImportResult:
    """What one :func:`import_langgraph` call copied."""

    threads: set[str] = field(default_factory=set)
    checkpoints: int = 0
    skipped: int = 0  # already in the target (an earlier, interrupted import)
    writes: int = 0


def import_langgraph(
    source: Any,
    target: Any,
    *,
    thread_ids: Iterable[str] | None = None,
    progress: Callable[[ImportResult], None] | None = None,
) -> ImportResult:
    """Copy every checkpoint and pending write of ``source`` (a LangGraph
    checkpointer: ``SqliteSaver``, ``PostgresSaver``, ``InMemorySaver``...) into
    ``target`` (a threadloom saver); only ``thread_ids`` when given.

    Raises:
        ConfigError: ``source`` has no serializer or cannot list its checkpoints.
        SerializationError: a value the target's serializer refuses to revive.
    """
    convert = _converter(source, target)
    wanted = None if thread_ids is None else {str(t) for t in _ids(thread_ids)}
    result = ImportResult()
    last_versions: dict[tuple[str, str, str], dict[str, Any]] = {}
    for tup in sorted(_listed(source, wanted), key=_order):
        conf = tup.config["configurable"]
        thread, ns, cid = (
            str(conf["thread_id"]),
            conf.get("checkpoint_ns", ""),
            conf["checkpoint_id"],
        )
        result.threads.add(thread)
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        checkpoint = convert(dict(tup.checkpoint))
        versions = dict(checkpoint.get("channel_versions") or {})
        last_versions[(thread, ns, cid)] = versions
        at = _config(thread, ns, cid)
        if target.get_tuple(at) is None:
            before = last_versions.get((thread, ns, parent), {}) if parent else {}
            changed = {ch: v for ch, v in versions.items() if before.get(ch) != v}
            target.put(
                _config(thread, ns, parent), checkpoint, convert(dict(tup.metadata)), changed
            )
            result.checkpoints += 1
        else:
            result.skipped += 1
        result.writes += _put_writes(target, at, tup.pending_writes or (), convert)
        if progress is not None:
            progress(result)
    return result


def _put_writes(target: Any, at: dict[str, Any], pending: Iterable[Any], convert: Any) -> int:
    """One ``put_writes`` per task, in the stored order."""
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in pending:
        by_task.setdefault(task_id, []).append((channel, convert(value)))
    for task_id, writes in by_task.items():
        target.put_writes(at, writes, task_id)
    return sum(len(w) for w in by_task.values())


def _converter(source: Any, target: Any) -> Callable[[Any], Any]:
    dump = getattr(getattr(source, "serde", None), "dumps_typed", None)
    if dump is None or not callable(getattr(source, "list", None)):
        raise ConfigError(
            f"import_langgraph: the source must be a LangGraph checkpointer (with .list() "
            f"and .serde), got {type(source).__name__}"
        )
    serde = getattr(target, "serde", None)
    if serde is None:
        from threadloom.checkpoint.serde import MsgpackSerializer

        serde = MsgpackSerializer()
    load = serde.loads_typed

    def convert(value: Any) -> Any:
        return load(dump(value))

    return convert


def _listed(source: Any, wanted: set[str] | None) -> Iterable[Any]:
    if wanted is None:
        return source.list(None)
    return (
        tup
        for thread in sorted(wanted)
        for tup in source.list({"configurable": {"thread_id": thread}})
    )


def _ids(thread_ids: Iterable[str]) -> Iterable[str]:
    if isinstance(thread_ids, (str, bytes)):
        raise ConfigError("thread_ids must be a list of thread ids, not one string")
    return thread_ids


def _order(tup: Any) -> tuple[str, str, str]:
    """Parents first: per thread and namespace, by id (ids grow with time)."""
    conf = tup.config["configurable"]
    return str(conf["thread_id"]), conf.get("checkpoint_ns", ""), conf["checkpoint_id"]


def _config(thread: str, ns: str, checkpoint_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}
