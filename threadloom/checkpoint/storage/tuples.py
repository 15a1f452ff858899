"""Checkpoint rows -> ``CheckpointTuple``s, through a cache of *recipes*.

A recipe is what a tuple is made of before anything is deserialized: the
checkpoint's rebuilt state, and per channel value and pending write its
serialized ``(tag, bytes)`` (or a decoded list chunk's items). Every read ends
by *serving* a recipe: values are deserialized there, once per read, so
callers always get fresh objects (list items are shared, as documented).

Recipes are kept per checkpoint (:class:`ReadCodec.recipes`). A re-read whose
checkpoint row holds the very same record bytes and whose pending-write rows
are the very same rows is served from its recipe: no refs, blobs, ancestors or
record decoding, only the checkpoint and writes lookups every read does. That
is exact for the same reasons as the ref and blob caches (docs/storage.md): ref
rows never change once written, blobs are content-addressed, write rows are
compared whole. Where another process may share the store (``cache_reads``), a
recipe is kept only when every ref version has a random part, like a cached
ref row; retention in the process drops a thread's recipes with its other
cached state (:meth:`ReadCodec.forget_thread`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadloom.checkpoint.base import CheckpointTuple
from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.cache import LRU
from threadloom.checkpoint.storage.ops import KIND_LIST, CheckpointRow, WriteRow
from threadloom.checkpoint.storage.reading import ListState, undecodable
from threadloom.checkpoint.storage.record import State
from threadloom.checkpoint.storage.rows import load_metadata
from threadloom.checkpoint.storage.values import ValueCodec
from threadloom.checkpoint.storage.writes import decode_entries
from threadloom.errors import CorruptBlobError, SerializationError

__all__ = [
    "ReadCodec",
    "Recipe",
    "decode_writes",
    "fits",
    "keep",
    "list_states",
    "loads",
    "serve",
    "uncached",
    "value_sources",
    "write_sources",
]


class ReadCodec(ValueCodec):
    """The saver's codec plus the recipe cache (bounded by entries and by the
    bytes the recipes hold; a recipe shares those bytes with storage rows or
    the blob cache, it copies nothing)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        budget = kwargs.get("cache_bytes", 64 * 1024 * 1024)
        self.recipes: LRU[tuple[str, str, str], Recipe] = LRU(4096, budget // 4)

    def forget_thread(self, thread_id: str | None) -> None:
        super().forget_thread(thread_id)
        if thread_id is None:
            self.recipes.clear()
        else:
            self.recipes.discard_where(lambda key: key[0] == thread_id)


@dataclass(slots=True)
class Recipe:
    """One checkpoint's tuple before deserialization (see the module doc)."""

    tag: str
    data: bytes  # the record it was built from
    writes: tuple[WriteRow, ...]  # the write rows it was built from
    state: State
    core: dict[str, Any]
    extra: Any  # the extra keys, serialized
    values: list[tuple[str, Any]]  # (channel, source) in checkpoint order
    pending: list[tuple[str, str, Any]]  # (task_id, channel, source), sorted
    lists: list[tuple[str, ListState]] | None  # list states to remember; None: unknown
    # the checkpoint without values and extra keys, made at the first re-read
    # (copied per read: cheaper than rebuilding it from the state)
    skeleton: dict[str, Any] | None = None


def fits(recipe: Recipe, row: CheckpointRow, writes: list[WriteRow] | None, remember: bool) -> bool:
    if recipe.data != row.data or recipe.tag != row.tag:
        return False
    if recipe.writes != (tuple(writes) if writes else ()):
        return False
    return not remember or recipe.lists is not None


def keep(codec: ValueCodec, thread_id: str, ns: str, cid: str, recipe: Recipe) -> None:
    """Cache ``recipe`` unless a value of it was decoded while building it."""
    recipes = getattr(codec, "recipes", None)
    if recipes is None:
        return
    weight = 256
    for _, src in recipe.values:
        if type(src) is tuple:
            weight += len(src[1]) + 64
        elif type(src) is list:
            weight += 64 * len(src) + 64
        else:
            return  # already decoded (a dict stored field by field): not shareable
    for _, _, src in recipe.pending:
        weight += len(src[1]) + 64 if type(src) is tuple else 64 * len(src) + 64
    recipes.put((thread_id, ns, cid), recipe, weight)


def serve(
    codec: ValueCodec, row: CheckpointRow, recipe: Recipe, remember: bool, first: bool = False
) -> CheckpointTuple:
    """The tuple of ``row`` from its recipe, every value deserialized afresh
    (``first``: the read that built the recipe)."""
    extra = loads(codec, recipe.extra, row, None) if recipe.extra else None
    if first:
        checkpoint = record.to_checkpoint(row.checkpoint_id, recipe.core, extra, recipe.state)
        channel_values = checkpoint["channel_values"]
    else:
        skeleton = recipe.skeleton
        if skeleton is None:
            skeleton = recipe.skeleton = record.to_checkpoint(
                row.checkpoint_id, recipe.core, None, recipe.state
            )
        checkpoint = skeleton.copy()  # same keys in the same order; fresh containers
        channel_values = checkpoint["channel_values"] = {}
        checkpoint["channel_versions"] = skeleton["channel_versions"].copy()
        seen = skeleton["versions_seen"]
        checkpoint["versions_seen"] = {n: s.copy() for n, s in seen.items()}
        if type(updated := skeleton.get("updated_channels")) is list:
            checkpoint["updated_channels"] = list(updated)
        if extra:
            checkpoint.update(extra)
    loads_typed = codec.serde.loads_typed
    for channel, src in recipe.values:
        kind = type(src)
        if kind is tuple:
            try:
                channel_values[channel] = loads_typed(src)
            except Exception as exc:
                raise _undecodable(exc, row, channel) from exc
        else:
            channel_values[channel] = list(src) if kind is list else src.value
    pending = []
    for task_id, channel, src in recipe.pending:
        if type(src) is tuple:
            try:
                value = loads_typed(src)
            except Exception as exc:
                raise _undecodable(exc, row, channel) from exc
        else:
            value = list(src)
        pending.append((task_id, channel, value))
    if remember and recipe.lists:
        for channel, state in recipe.lists:
            codec.remember(row.thread_id, row.checkpoint_ns, channel, state)
    base = {"thread_id": row.thread_id, "checkpoint_ns": row.checkpoint_ns}
    parent = None
    if row.parent_checkpoint_id:
        parent = {"configurable": {**base, "checkpoint_id": row.parent_checkpoint_id}}
    return CheckpointTuple(
        config={"configurable": {**base, "checkpoint_id": row.checkpoint_id}},
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=load_metadata(row.metadata, row.thread_id, row.checkpoint_id),  # type: ignore[arg-type]
        parent_config=parent,
        pending_writes=pending,
    )


def value_sources(state: State, values: Mapping[tuple[str, str], Any]) -> list[tuple[str, Any]]:
    """``(channel, source)`` per channel of ``state``: inline ones from the
    record, the others from ``values`` (a channel without one is absent)."""
    keys = record.ref_keys(state)
    out = []
    for channel in state.cv:
        vkey = keys.get(channel)
        if vkey is None:
            inline = state.iv[channel]
            out.append((channel, (inline[1], inline[2])))
        else:
            src = values.get((channel, vkey), _ABSENT)
            if src is not _ABSENT:
                out.append((channel, src))
    return out


def list_states(
    codec: ValueCodec, thread_id: str, ns: str, refs: Sequence[Any]
) -> list[tuple[str, ListState]]:
    """The list states a remembering read just recorded (re-recorded on a hit)."""
    lists = getattr(codec, "lists", None)
    out = []
    for ref in refs:
        if ref.kind == KIND_LIST and lists is not None:
            state = lists.get((thread_id, ns, ref.channel))
            if state is not None:
                out.append((ref.channel, state))
    return out


_ABSENT: Any = object()


def loads(codec: ValueCodec, typed: Sequence[Any], row: Any, channel: str | None) -> Any:
    try:
        return codec.serde.loads_typed((typed[0], typed[1]))
    except Exception as exc:
        raise _undecodable(exc, row, channel) from exc


def _undecodable(exc: Exception, row: Any, channel: str | None) -> SerializationError:
    return undecodable(exc, row.thread_id, row.checkpoint_id, channel)


def decode_writes(codec: ValueCodec, rows: list[WriteRow]) -> tuple[list[Any], tuple[bytes, ...]]:
    """Decoded task rows and the blob hashes their values need (not cached)."""
    decoded = [(row, decode_entries(row)) for row in rows]
    return decoded, uncached(codec, decoded, {})


def uncached(
    codec: ValueCodec, decoded: list[Any], blobs: Mapping[bytes, Any]
) -> tuple[bytes, ...]:
    wanted = {e[3] for _, entries in decoded for e in entries if e[2] is None}
    return tuple(h for h in wanted if h not in blobs and codec.chunks.get(h) is None)


def write_sources(
    codec: ValueCodec, thread_id: str, decoded: list[Any], blobs: Mapping[bytes, Any]
) -> dict[str, list[tuple[str, str, Any]]]:
    """``{checkpoint_id: [(task_id, channel, source)]}``, sorted by (task_path,
    task_id, idx) as LangGraph returns pending writes."""
    by_checkpoint: dict[str, list[tuple[Any, ...]]] = {}
    for row, entries in decoded:
        for idx, channel, tag, payload in entries:
            if tag is not None:
                src: Any = (tag, payload)
            elif payload not in blobs and (cached := codec.chunks.get(payload)) is not None:
                src = list(cached)
            else:
                blob = blobs.get(payload)
                if blob is None:
                    raise CorruptBlobError(
                        f"blob {payload.hex()} of a pending write is missing",
                        thread_id=thread_id,
                        checkpoint_id=row.checkpoint_id,
                        channel=channel,
                    )
                src = (blob.tag, blob.data)
            key = (row.task_path, row.task_id, idx)
            by_checkpoint.setdefault(row.checkpoint_id, []).append(
                (key, (row.task_id, channel, src))
            )
    return {
        cid: [w for _, w in sorted(ws, key=lambda kw: kw[0])] for cid, ws in by_checkpoint.items()
    }
