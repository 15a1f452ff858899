"""Reading a LangGraph checkpointer for :mod:`threadloom.checkpoint.migrate`:
its threads and their checkpoints, one checkpoint in memory at a time where the
saver allows it, and its values converted for the target's serializer."""

from __future__ import annotations

import copy
import enum
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from threadloom.errors import ConfigError, SerializationError

__all__ = [
    "Converter",
    "afind_threads",
    "atask_paths",
    "athread_tuples",
    "config_of",
    "find_threads",
    "loud_langgraph_fallback",
    "refusal",
    "order",
    "task_paths",
    "thread_tuples",
]

_THREADS_SQL = "SELECT DISTINCT thread_id FROM checkpoints"
_IDS_SQL = "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = %s"
_PATHS_SQL = (
    "SELECT DISTINCT task_id, task_path FROM {table} "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
)


@contextmanager
def loud_langgraph_fallback() -> Iterator[list[tuple[str, str, str]]]:
    """While the source is read: a stored object LangGraph cannot rebuild in this
    process (its class does not import here) raises instead of coming back as
    its raw fields, which the import would otherwise store as a plain dict.

    Yields the ``(module, name, why)`` of classes LangGraph's strict mode
    blocked (``why`` "blocked") or could not rebuild (``why``: the error;
    LangGraph's pydantic branch swallows the loud error and hands over
    ``None``) in the import's own reads (the caller refuses them,
    :func:`refusal`): those made in its context (its thread or task, and worker
    threads it starts with ``asyncio.to_thread``, which copy the context), not
    another request's. A read the source makes in a thread that does not carry
    the context is not seen: its blocked class comes over as the dict LangGraph
    hands over, as in LangGraph."""
    blocked: list[tuple[str, str, str]] = []
    try:
        from langgraph.checkpoint.serde import jsonplus
    except ImportError:  # not LangGraph's serializer: nothing to make loud
        yield blocked
        return
    token = _BLOCKED.set(blocked)
    unregister = _watch_blocked()
    try:
        with _loud(jsonplus):
            yield blocked
    except Exception as exc:  # msgpack wraps what the loud fallback raised
        gone = next((b for b in blocked if b[2] != "blocked"), None)
        if gone is not None and not isinstance(exc, SerializationError):
            raise refusal(*gone) from exc
        raise
    finally:
        unregister()
        _BLOCKED.reset(token)


def refusal(module: str, name: str, why: str, thread: str | None = None) -> SerializationError:
    """The error for a class LangGraph handed over as a plain dict (or ``None``):
    blocked by its strict mode (``why`` "blocked"), or not rebuildable here, worded
    by cause: the class is missing, or it is there but rejects the stored fields."""
    where = f"thread {thread!r}: " if thread is not None else ""
    if why == "blocked":
        return SerializationError(
            f"import_langgraph: {where}LangGraph's strict mode refused {module}.{name} while "
            "reading the source and would hand it over as a plain dict; allow it on the "
            "source's serializer (with_msgpack_allowlist) and on the target's (on the command "
            f"line: --allow {module}:{name}); nothing of the thread was written"
        )
    if not _class_present(module, name):
        return SerializationError(
            f"import_langgraph: {where}LangGraph cannot rebuild {module}.{name} in this process "
            f"({why}): the class does not import here; make it importable here (and allowed on "
            "the target's serializer), then import again; nothing of the thread was written"
        )
    return SerializationError(
        f"import_langgraph: {where}LangGraph cannot rebuild {module}.{name} from what it "
        f"stored ({why}): the class imports here but has changed since the data was written "
        "(LangGraph rebuilds an object by calling its class with the stored fields or value). "
        f"{_changed_advice(module, name)} (docs/serde.md, 'Trusting your own types'); "
        "nothing of the thread was written"
    )


def _changed_advice(module: str, name: str) -> str:
    """What to do about a class that changed since the write, by kind: an Enum is
    revived by calling it (threadloom's codec too), a structured class is not."""
    cls = getattr(sys.modules.get(module), name, None)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return (
            "threadloom revives an Enum by calling the class with the stored value too, so "
            "the stored value must stay a member's value (keep the member, or map the old "
            "value in the class's _missing_) or the data be migrated first: imported as is, "
            "every checkpoint holding the removed value would be unreadable after the change"
        )
    return (
        "Import with a class compatible with the stored data (the version that wrote it, or "
        "one that still accepts it: a removed field kept with a default), then deploy the "
        "change: threadloom revives these fields without calling the class, so fields added "
        "since take their defaults and removed fields are dropped (a pydantic model with "
        'extra="allow" reads a removed field back as an extra)'
    )


def _class_present(module: str, name: str) -> bool:
    """Whether LangGraph's failed rebuild found the class: its import already ran,
    so the module is in ``sys.modules`` with the class on it (nothing imported here).
    A missing class needs making importable; a present one changed since the write."""
    found = sys.modules.get(module)
    return found is not None and isinstance(getattr(found, name, None), type)


# what the import reading in this context found refused (None: not an import's read)
_BLOCKED: ContextVar[list[tuple[str, str, str]] | None] = ContextVar("_BLOCKED", default=None)


def _watch_blocked() -> Callable[[], None]:
    try:
        from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
    except ImportError:
        return lambda: None
    return register_serde_event_listener(_on_serde_event)


def _on_serde_event(event: Any) -> None:
    blocked = _BLOCKED.get()
    if blocked is not None and event.get("kind") == "msgpack_blocked":
        blocked.append((str(event.get("module")), str(event.get("name")), "blocked"))


_LOUD_LOCK = threading.Lock()
_LOUD: dict[str, Any] = {"depth": 0, "quiet": None}  # imports under way; LangGraph's own fallback


def _loud_fallback(tup: Any, exc: Exception) -> Any:
    blocked = _BLOCKED.get()
    if blocked is None:  # another reader of the process (a request, say): LangGraph's way
        return _LOUD["quiet"](tup, exc)
    module, name = ([str(p) for p in tuple(tup or ())[:2]] + ["?", "?"])[:2]
    gone = (module, name, f"{type(exc).__name__}: {exc}")
    blocked.append(gone)  # (seen even where LangGraph swallows the error)
    raise refusal(*gone) from exc


@contextmanager
def _loud(jsonplus: Any) -> Iterator[None]:
    """LangGraph's reconstruction fallback made loud for the imports' own reads
    (other readers in the process keep LangGraph's). Imports may overlap
    (``asyncio.gather``): the first installs it, the last puts LangGraph's back;
    each saving and restoring it left it patched for the whole process when
    they ended out of order."""
    with _LOUD_LOCK:
        if _LOUD["depth"] == 0:
            _LOUD["quiet"] = getattr(jsonplus, "_reconstruction_fallback", None)
        _LOUD["depth"] += 1
        if _LOUD["quiet"] is not None:
            jsonplus._reconstruction_fallback = _loud_fallback
    try:
        yield
    finally:
        with _LOUD_LOCK:
            _LOUD["depth"] -= 1
            if _LOUD["depth"] == 0 and _LOUD["quiet"] is not None:
                jsonplus._reconstruction_fallback = _LOUD["quiet"]


def _plain(serde: Any) -> Any:
    """``serde`` without its cipher. Values go from the source's memory to the
    target's, never through storage, so neither side's encryption applies on
    that hop (the target encrypts what it stores): through the ciphers, a
    LangGraph AES thread could not move to a plain or AES-GCM target, nor a
    plain one to an encrypting target."""
    from threadloom.checkpoint.serde import MsgpackSerializer

    inner = getattr(serde, "serde", None)
    if inner is not None and hasattr(serde, "cipher"):  # an EncryptedSerializer (either's)
        return _plain(inner)
    if isinstance(serde, MsgpackSerializer) and serde.cipher is not None:
        clone = copy.copy(serde)
        clone._envelope = None
        return clone
    return serde


class Converter:
    """Values as LangGraph's serializer writes them, revived by the target's."""

    def __init__(self, source: Any, target: Any, lister: str) -> None:
        from threadloom.checkpoint.saver import BaseCheckpointSaver

        if isinstance(source, BaseCheckpointSaver):
            raise ConfigError(
                f"import_langgraph: the source is a threadloom saver ({type(source).__name__});"
                " it copies from a LangGraph checkpointer (are source and target swapped?)."
                " Between threadloom savers, copy a thread with copy_thread or a backup"
            )
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
        self.dump: Callable[[Any], tuple[str, bytes]] = _plain(source.serde).dumps_typed
        self.load: Callable[[tuple[str, bytes]], Any] = _plain(serde).loads_typed

    def convert(self, value: Any) -> Any:
        return self.load(self.dump(value))


def _wanted(thread_ids: Iterable[str]) -> list[str]:
    if isinstance(thread_ids, (str, bytes)):
        raise ConfigError("thread_ids must be a list of thread ids, not one string")
    return sorted({str(t) for t in thread_ids})


def _postgres(source: Any, name: str) -> bool:
    """LangGraph's (Async)PostgresSaver: its ``list`` buffers every row it
    returns (a client cursor), so threads and checkpoint ids are found by SQL
    and each checkpoint is read on its own."""
    module = "postgres.aio" if name.startswith("Async") else "postgres"
    return _langgraph(source, module, name) and hasattr(source, "_cursor")


def _langgraph(source: Any, module: str, name: str) -> bool:
    cls = getattr(sys.modules.get(f"langgraph.checkpoint.{module}"), name, None)
    return cls is not None and isinstance(source, cls)


def _named_or_in_memory(source: Any, thread_ids: Iterable[str] | None) -> list[str] | None:
    """The threads asked for, or the keys of an ``InMemorySaver``; None otherwise."""
    if thread_ids is not None:
        return _wanted(thread_ids)
    storage = getattr(source, "storage", None)
    if isinstance(storage, dict):
        return sorted(str(t) for t, spaces in storage.items() if spaces)
    return None


def find_threads(source: Any, thread_ids: Iterable[str] | None) -> list[str]:
    """The threads to import, found without holding the source's values: by SQL
    for LangGraph's SQLite and Postgres savers (sync and async), from the keys of its
    ``InMemorySaver``, otherwise by listing everything once (each value dropped
    as it comes, but decoded: a full pass over the source)."""
    known = _named_or_in_memory(source, thread_ids)
    if known is not None:
        return known
    conn = getattr(source, "conn", None)
    if isinstance(conn, sqlite3.Connection) and callable(getattr(source, "cursor", None)):
        with source.cursor(transaction=False) as cur:
            cur.execute(_THREADS_SQL)
            return sorted(str(row[0]) for row in cur.fetchall())
    if _postgres(source, "PostgresSaver"):
        with source._cursor() as cur:
            cur.execute(_THREADS_SQL)
            return sorted(str(row["thread_id"]) for row in cur.fetchall())
    return sorted({order(tup)[0] for tup in source.list(None)})


async def afind_threads(source: Any, thread_ids: Iterable[str] | None) -> list[str]:
    known = _named_or_in_memory(source, thread_ids)
    if known is not None:
        return known
    if _postgres(source, "AsyncPostgresSaver"):
        async with source._cursor() as cur:
            await cur.execute(_THREADS_SQL)
            return sorted(str(row["thread_id"]) for row in await cur.fetchall())
    if _langgraph(source, "sqlite.aio", "AsyncSqliteSaver"):
        await source.setup()  # (as its alist does)
        async with source.lock, source.conn.execute(_THREADS_SQL) as cur:
            return sorted(str(row[0]) for row in await cur.fetchall())
    return sorted({order(t)[0] async for t in source.alist(None)})


def thread_tuples(source: Any, thread: str) -> Iterator[Any]:
    """A thread's checkpoints with their values and writes, one at a time where
    the source allows: by id for LangGraph's ``PostgresSaver``; other savers
    through their ``list`` (LangGraph's memory and SQLite savers yield one at a
    time; a saver whose ``list`` fetches all rows first holds the thread)."""
    if not _postgres(source, "PostgresSaver"):
        yield from source.list(config_of(thread, None, None))
        return
    with source._cursor() as cur:
        cur.execute(_IDS_SQL, (thread,))
        ids = [(row["checkpoint_ns"], row["checkpoint_id"]) for row in cur.fetchall()]
    for ns, cid in ids:
        tup = source.get_tuple(config_of(thread, ns, cid))
        if tup is not None:  # (deleted meanwhile)
            yield tup


async def athread_tuples(source: Any, thread: str) -> AsyncIterator[Any]:
    if not _postgres(source, "AsyncPostgresSaver"):
        async for tup in source.alist(config_of(thread, None, None)):
            yield tup
        return
    async with source._cursor() as cur:
        await cur.execute(_IDS_SQL, (thread,))
        ids = [(row["checkpoint_ns"], row["checkpoint_id"]) for row in await cur.fetchall()]
    for ns, cid in ids:
        tup = await source.aget_tuple(config_of(thread, ns, cid))
        if tup is not None:
            yield tup


def order(tup: Any) -> tuple[str, str, str]:
    conf = tup.config["configurable"]
    return str(conf["thread_id"]), conf.get("checkpoint_ns", ""), conf["checkpoint_id"]


def config_of(thread: str, ns: str | None, checkpoint_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


# -- task paths --------------------------------------------------------------------
# A step's writes replay in (task_path, task_id, idx) order (LangGraph's
# writes_sort_key): a DeltaChannel value rebuilt from imported writes, or a
# resumed step, must apply parallel tasks' writes in the order LangGraph did.
# LangGraph's PendingWrite carries no path, so it is read from the source's
# storage; where that is not possible, the order the source returned the writes
# in (writes_sort_key order, LangGraph's contract) becomes ranked paths.


def _ranked(tup: Any) -> dict[str, str]:
    ranks: dict[str, str] = {}
    for task_id, _, _ in tup.pending_writes or ():
        ranks.setdefault(str(task_id), f"~{len(ranks):06d}")
    return ranks


def _from_memory(source: Any, key: tuple[str, str, str]) -> dict[str, str] | None:
    writes = getattr(source, "writes", None)
    if not _langgraph(source, "memory", "InMemorySaver") or not isinstance(writes, dict):
        return None
    return {str(w[0]): str(w[3]) for w in writes.get(key, {}).values() if len(w) > 3}


def task_paths(source: Any, tup: Any) -> dict[str, str]:
    """task id -> the path LangGraph stored with its writes on ``tup``'s checkpoint."""
    if not tup.pending_writes:
        return {}
    key = order(tup)
    found = _from_memory(source, key)
    if found is None and _langgraph(source, "sqlite", "SqliteSaver"):
        if getattr(source, "_has_task_path", True):
            with source.cursor(transaction=False) as cur:
                cur.execute(_PATHS_SQL.format(table="writes").replace("%s", "?"), key)
                found = {str(t): str(p) for t, p in cur.fetchall()}
    elif found is None and _postgres(source, "PostgresSaver"):
        with source._cursor() as cur:
            cur.execute(_PATHS_SQL.format(table="checkpoint_writes"), key)
            found = {str(r["task_id"]): str(r["task_path"]) for r in cur.fetchall()}
    return _complete(found, tup)


async def atask_paths(source: Any, tup: Any) -> dict[str, str]:
    """Async twin of :func:`task_paths` (LangGraph's async SQLite and Postgres savers)."""
    if not tup.pending_writes:
        return {}
    key = order(tup)
    found = _from_memory(source, key)
    if found is None and _langgraph(source, "sqlite.aio", "AsyncSqliteSaver"):
        sql = _PATHS_SQL.format(table="writes").replace("%s", "?")
        try:
            async with source.lock, source.conn.execute(sql, key) as cur:
                found = {str(t): str(p) for t, p in await cur.fetchall()}
        except Exception:  # a file from before LangGraph stored task paths
            found = None
    elif found is None and _postgres(source, "AsyncPostgresSaver"):
        async with source._cursor() as cur:
            await cur.execute(_PATHS_SQL.format(table="checkpoint_writes"), key)
            found = {str(r["task_id"]): str(r["task_path"]) for r in await cur.fetchall()}
    return _complete(found, tup)


def _complete(found: dict[str, str] | None, tup: Any) -> dict[str, str]:
    """``found`` when it names every task with writes here, else ranked paths."""
    ranked = _ranked(tup)
    if found is not None and all(found.get(t) is not None for t in ranked):
        return found
    return ranked
