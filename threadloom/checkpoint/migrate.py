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

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from threadloom.errors import ConfigError, SerializationError

__all__ = ["ImportResult", "aimport_langgraph", "import_langgraph"]


@dataclass
class ImportResult:
    """What one :func:`import_langgraph` call copied."""

    threads: set[str] = field(default_factory=set)
    checkpoints: int = 0
    skipped: int = 0  # already in the target (an earlier, interrupted import)
    writes: int = 0


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
    ``target`` (a threadloom saver); only ``thread_ids`` when given.

    Raises:
        ConfigError: ``source`` has no serializer or cannot list its checkpoints.
        SerializationError: a value the target's serializer refuses to revive.
    """
    convert = _converter(source, target, "list")
    configs = _listing(thread_ids)
    with _loud_langgraph_fallback():
        tuples = [t for config in configs for t in source.list(config)]
    result = ImportResult()
    plan = _plan(tuples, convert, result)
    answer: Any = None
    while True:
        try:
            method, args = plan.send(answer)
        except StopIteration:
            return result
        answer = getattr(target, method)(*args)
        if progress is not None and method == "put_writes":
            progress(result)


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
    with _loud_langgraph_fallback():
        tuples = [t for config in _listing(thread_ids) async for t in source.alist(config)]
    result = ImportResult()
    plan = _plan(tuples, convert, result)
    answer: Any = None
    while True:
        try:
            method, args = plan.send(answer)
        except StopIteration:
            return result
        answer = await getattr(target, "a" + method)(*args)
        if progress is not None and method == "put_writes":
            progress(result)


def _plan(tuples: list[Any], convert: Callable[[Any], Any], result: ImportResult) -> Any:
    """The target calls of an import, as ``(method, args)``, for both drivers
    above; a ``get_tuple``'s answer is sent back in (a checkpoint already in the
    target is skipped). Parents come first: per thread and namespace, by id (ids
    grow with time). A checkpoint stores only the channels whose version differs
    from its parent's, as a run would have."""
    versions_of: dict[tuple[str, str, str], dict[str, Any]] = {}
    for tup in sorted(tuples, key=_order):
        thread, ns, cid = _order(tup)
        result.threads.add(thread)
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        # versions are plain strings or numbers: read as stored, values converted
        # only for a checkpoint the target does not have yet
        versions = dict(tup.checkpoint.get("channel_versions") or {})
        versions_of[(thread, ns, cid)] = versions
        at = _config(thread, ns, cid)
        if (yield "get_tuple", (at,)) is None:
            before = versions_of.get((thread, ns, parent), {}) if parent else {}
            changed = {ch: v for ch, v in versions.items() if before.get(ch) != v}
            checkpoint = convert(dict(tup.checkpoint))
            metadata = convert(dict(tup.metadata))
            yield "put", (_config(thread, ns, parent), checkpoint, metadata, changed)
            result.checkpoints += 1
        else:
            result.skipped += 1
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, convert(value)))
        for task_id, writes in by_task.items():
            result.writes += len(writes)
            yield "put_writes", (at, writes, task_id)


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


def _listing(thread_ids: Iterable[str] | None) -> list[Any]:
    """The source ``list`` configs: everything, or one per wanted thread."""
    if thread_ids is None:
        return [None]
    if isinstance(thread_ids, (str, bytes)):
        raise ConfigError("thread_ids must be a list of thread ids, not one string")
    return [{"configurable": {"thread_id": t}} for t in sorted({str(t) for t in thread_ids})]


def _order(tup: Any) -> tuple[str, str, str]:
    conf = tup.config["configurable"]
    return str(conf["thread_id"]), conf.get("checkpoint_ns", ""), conf["checkpoint_id"]


def _config(thread: str, ns: str, checkpoint_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}
