"""Write flows: ``put`` (record + refs + blobs) and ``put_writes``, and
``release`` (drop references, delete blobs nothing holds)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.flows import resolve_states, target
from threadloom.checkpoint.storage.ops import (
    HASH_SIZE,
    AdjustRefcounts,
    BlobRow,
    CheckpointRow,
    DropUnreferenced,
    GetCheckpoint,
    LoadWrites,
    RefRow,
    SaveCheckpoint,
    SaveWrites,
)
from threadloom.checkpoint.storage.reading import max_items
from threadloom.checkpoint.storage.record import State
from threadloom.checkpoint.storage.rows import dump_metadata, unpack, version_key
from threadloom.checkpoint.storage.values import ListState, ValueCodec, holds_list, whole_blob
from threadloom.checkpoint.storage.writes import merge_writes
from threadloom.errors import ConfigError, SerializationError, StorageError

__all__ = ["put_flow", "put_writes_flow", "release"]

Flow = Generator[Any, Any, Any]
_MERGE_ATTEMPTS = 100
_TAG = record.RECORD_TAG
_new = tuple.__new__  # rows built without NamedTuple's Python-level __new__


def _parent_state(codec: ValueCodec, thread_id: str, ns: str, parent_id: str | None) -> Flow:
    """The parent's state: from the cache (normal loop), else rebuilt from storage."""
    if parent_id is None:
        return None
    state = codec.states.get((thread_id, ns, parent_id))
    if state is None:
        row = yield GetCheckpoint(thread_id, ns, parent_id)
        if row is not None:
            state = (yield from resolve_states(codec, [row]))[parent_id][0]
    return state


_Encoded = tuple[
    dict[str, list[Any]],  # iv: inline values
    list[RefRow],
    dict[bytes, BlobRow],
    list[tuple[str, ListState]],  # lists' writer states
    dict[str, list[Any]],  # fresh: inline entries encoded by this put (not carried)
    bool,  # children: some blob holds others (a list manifest): _settle counts them
    bool,  # split: some ref came from codec.encode (a list or dict: may hold other blobs)
]


def _encode_values(
    codec: ValueCodec,
    thread_id: str,
    ns: str,
    cv: dict[str, Any],
    versions: Mapping[str, Any],
    values: Mapping[str, Any],
    new_versions: Mapping[str, Any],
    prev: State | None,
    changed: Mapping[str, Any] | None,
    seen: dict[int, Any] | None = None,
) -> _Encoded:
    """Small values inline (carried from the parent when unchanged), large ones
    as refs + blobs. A channel not in ``new_versions`` is re-encoded only when
    its version differs from the parent's (``changed``: a copy/fork put) and its
    value is given. ``seen``: bytes this step's writes gave the same objects."""
    iv: dict[str, list[Any]] = {}
    fresh: dict[str, list[Any]] = {}
    refs: list[RefRow] = []
    blobs: dict[bytes, BlobRow] = {}
    lists: list[tuple[str, ListState]] = []
    children = split = False
    if prev is None or changed is None:
        changed, carried_iv = cv, {}
    else:
        carried_iv = prev.iv
    encode, dumps, inline_max, delta = (
        codec.encode,
        codec.serde.dumps_typed,
        codec.inline_max,
        codec.delta,
    )
    for channel, packed in cv.items():
        if channel not in changed and channel not in new_versions:
            entry = carried_iv.get(channel)
            if entry is not None:
                iv[channel] = entry
            continue
        if channel not in values:
            continue
        value = values[channel]
        kind = type(value)  # a list, or a dict holding one, may be split: codec.encode
        plain = kind is not list and not (kind is dict and delta and holds_list(value))
        if plain:  # what codec.encode does with it, without its call and result tuple
            hit = seen.get(id(value)) if seen else None
            if hit is not None and hit[0] is value:  # the object a write of this step held
                tag, data = tagged = hit[1]
            else:
                try:
                    tag, data = tagged = dumps(value)
                except SerializationError as exc:
                    raise exc.under(channel) from None
            if len(data) <= inline_max:
                iv[channel] = fresh[channel] = [packed, *tagged]
                continue
        raw = versions[channel]  # its key, as version_key gives it (spares the call)
        if type(packed) is tuple and type(raw) is str:
            vkey = f"{packed[0]}{raw[32:]}"
        else:
            vkey = version_key(raw)
        if plain:
            ref, blob = whole_blob(thread_id, ns, channel, vkey, tag, data)
            refs.append(ref)
            blobs[blob.hash] = blob
            continue
        split = True
        try:
            inline, ref, new_blobs, state = encode(thread_id, ns, channel, vkey, value)
        except SerializationError as exc:
            raise exc.under(channel) from None
        if inline is not None:
            iv[channel] = fresh[channel] = [packed, *inline]
            continue
        refs.append(ref)  # type: ignore[arg-type]
        for blob in new_blobs:
            blobs[blob.hash] = blob
            if blob.children:
                children = True
        if state is not None:
            lists.append((channel, state))
    return iv, refs, blobs, lists, fresh, children, split


def put_flow(
    codec: ValueCodec,
    config: Mapping[str, Any],
    checkpoint: Mapping[str, Any],
    metadata: Mapping[str, Any],
    new_versions: Mapping[str, Any],
    retry: bool = True,
    seen: dict[int, Any] | None = None,
) -> Flow:
    """Store a checkpoint: a record (diff against the parent when possible),
    refs and blobs for changed large values only. ``seen``: what the writes
    before it in the same flow serialized, by object (``step.put_step_flow``)."""
    thread_id, ns, parent_id = target(config)
    if parent_id is not None and parent_id == checkpoint["id"]:
        # a checkpoint cannot be its own parent: every walk up the history
        # (diff chains, prune's ancestors) would loop on it
        raise ConfigError(
            f"checkpoint {parent_id!r} is put with itself as parent: the config's"
            " checkpoint_id names the parent, the checkpoint's id must be a new one"
        )
    prev: State | None = codec.states.get((thread_id, ns, parent_id)) if parent_id else None
    if prev is None and parent_id is not None:  # not the process's last put: read it
        prev = yield from _parent_state(codec, thread_id, ns, parent_id)
    raw_cv = checkpoint["channel_versions"]
    cv, vs, raw, changes = record.pack_state(raw_cv, checkpoint["versions_seen"], prev)
    iv, refs, blobs, lists, fresh, children, split = _encode_values(
        codec,
        thread_id,
        ns,
        cv,
        raw_cv,
        checkpoint["channel_values"],
        new_versions,
        prev,
        changes[0] if changes is not None else None,
        seen,
    )
    depth = prev.depth + 1 if prev is not None and prev.depth + 1 < codec.keyframe_every else 0
    state = State(cv, vs, iv, depth, raw=raw)
    core, extra = record.core_fields(checkpoint)  # type: ignore[arg-type]
    extra_typed = list(codec.serde.dumps_typed(extra)) if extra else None
    iv_changes = _iv_changes(iv, fresh, prev.iv) if depth else None  # type: ignore[union-attr]
    data = record.encode(core, extra_typed, state, prev if depth else None, changes, iv_changes)
    state.data, state.core, state.extra = data, core, extra_typed
    md_text, run_id = dump_metadata(config, metadata)
    cid = checkpoint["id"]
    row = _new(CheckpointRow, (thread_id, ns, cid, parent_id, _TAG, data, md_text, run_id))
    needs = _needs(refs, blobs) if split else ()  # a plain value's ref holds its own blob
    base = parent_id if depth else None
    result = yield SaveCheckpoint(
        row, tuple(refs), tuple(blobs.values()), base, needs, max_items(codec.serde)
    )
    if result.stale and retry:  # cached bases were deleted by someone else: start over
        codec.forget_thread(thread_id)
        return (yield from put_flow(codec, config, checkpoint, metadata, new_versions, False, seen))
    new = result.new_blobs
    if new:
        all_held = all(result.inserted_refs)
        if not all_held or (children and any(blobs[h].children for h in new)):
            yield from _settle(blobs, new, all_held)
    if lists:
        inserted = {ref.channel for ref, ok in zip(refs, result.inserted_refs) if ok}
        for channel, list_state in lists:
            if channel in inserted:
                codec.remember(thread_id, ns, channel, list_state)
            else:
                codec.lists.pop((thread_id, ns, channel))
    codec.states.put((thread_id, ns, cid), state)
    if prev is not None:  # no longer the tip: see _retire
        _retire(prev)
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}


def _retire(prev: State) -> None:
    """Drop what only a put of the parent's next child reads (its table index, its
    versions as given), keeping what readers use: the run's next put builds on
    the new state, and a fork from this one (time travel) rebuilds both
    (``tables.open_tables``, ``state.raw_versions``). Why: the states cache
    holds thousands of states, and these containers of each one only made the
    garbage collector's passes longer (bench chain: ~20% less collector work per
    step); freed now, while they are still in the CPU cache."""
    prev.index = prev.raw = None


def _iv_changes(
    iv: dict[str, list[Any]], fresh: dict[str, list[Any]], old: dict[str, list[Any]]
) -> tuple[dict[str, list[Any]], list[str]]:
    """What :func:`record.encode` would find diffing ``iv`` against the parent's
    ``old``: only ``fresh`` entries can differ (the others are the parent's own
    objects), so the rest is not compared again."""
    changed = {c: e for c, e in fresh.items() if old.get(c) != e}
    gone = [c for c in old if c not in iv] if len(old) > len(iv) - len(changed) else []
    return changed, gone


def _needs(refs: list[RefRow], blobs: dict[bytes, BlobRow]) -> tuple[bytes, ...]:
    """Hashes the refs hold that this put does not send (they must exist)."""
    needs: set[bytes] = set()
    for ref in refs:
        hashes = ref.hashes
        if hashes in blobs:  # a whole value: one hash, usually just sent
            continue
        if len(hashes) == HASH_SIZE:
            needs.add(hashes)
        elif hashes:
            needs.update(h for h in unpack(hashes) if h not in blobs)
    return tuple(needs) if needs else ()


def _settle(blobs: dict[bytes, BlobRow], new: frozenset[bytes], all_held: bool) -> Flow:
    """After inserting blobs: count manifests' holds on their segments, and
    drop new blobs that ended up unreferenced."""
    children: Counter[bytes] = Counter()
    for h in new:
        children.update(unpack(blobs[h].children))
    if children:
        yield AdjustRefcounts(tuple(children.items()))
    if new and not all_held:
        yield from release(Counter(), candidates=tuple(new))


def release(counts: Counter[bytes], candidates: tuple[bytes, ...] = ()) -> Flow:
    """Drop ``counts`` references, then delete blobs nothing holds any more
    (cascading into a dropped manifest's segments). Returns (blobs, bytes)."""
    dropped_blobs = dropped_bytes = 0
    counts = Counter({h: c for h, c in counts.items() if c})
    while counts or candidates:
        if counts:
            yield AdjustRefcounts(tuple((h, -c) for h, c in counts.items()))
        dropped = yield DropUnreferenced(tuple(set(counts) | set(candidates)))
        dropped_blobs += len(dropped)
        dropped_bytes += sum(len(b.data) for b in dropped)
        counts = Counter()
        for blob in dropped:
            counts.update(unpack(blob.children))
        candidates = ()
    return dropped_blobs, dropped_bytes


def put_writes_flow(
    codec: ValueCodec,
    config: Mapping[str, Any],
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    seen: dict[int, Any] | None = None,
) -> Flow:
    """Merge a task's writes into its row (LangGraph's upsert / first-wins rules).
    ``seen``: filled with the bytes of the values serialized (``merge_writes``)."""
    thread_id, ns, checkpoint_id = target(config)
    if checkpoint_id is None:
        raise ConfigError(
            f"put_writes for thread {thread_id!r} needs config['configurable']['checkpoint_id']"
        )
    if not writes:
        return
    for write in writes:
        if not isinstance(write[0], str):
            raise SerializationError(
                f"put_writes for thread {thread_id!r}, task {task_id!r}: a channel name must be"
                f" a str, got {type(write[0]).__name__} {write[0]!r}",
                path=str(write[0]),
                type_name=type(write[0]).__name__,
            )
    key = (thread_id, ns, checkpoint_id, str(task_id))
    if codec.strict_writes and codec.tasks.get(key) is None:
        # a task's first put_writes, without reading its row first: the row is
        # built as if none existed and sent ``strict`` (the executor writes
        # nothing when one does, e.g. written by another process); inline here,
        # not a sub-flow: every step's put_writes takes this path
        row, blobs = merge_writes(codec.serde, codec.inline_max, None, key, task_path, writes, seen)
        add = codec.writes_add_refs and bool(row.hashes)  # type: ignore[union-attr]
        if len(blobs) > 1 and len({b[0] for b in blobs}) < len(blobs):
            blobs = list({b.hash: b for b in blobs}.values())  # one value written twice: one blob
        bound = max_items(codec.serde)
        new = yield SaveWrites((row,), tuple(blobs), (None,), True, add, bound)
        if new is not None:
            codec.tasks.put(key, True)
            if row.hashes and not add:  # type: ignore[union-attr]
                yield AdjustRefcounts(tuple(Counter(unpack(row.hashes)).items()))  # type: ignore[union-attr]
            return
    for _ in range(_MERGE_ATTEMPTS):
        # the task's own row only: a resumed fan-out merges W/10 tasks, and
        # reading the checkpoint's every row for each was W x W/10 rows
        rows = yield LoadWrites(thread_id, ns, (checkpoint_id,), key[3])
        existing = next((r for r in rows if r.task_id == key[3]), None)
        row, blobs = merge_writes(
            codec.serde, codec.inline_max, existing, key, task_path, writes, seen
        )
        if row is None:
            return
        by_hash = {b.hash: b for b in blobs}
        new = yield SaveWrites(
            (row,), tuple(by_hash.values()), (existing,), max_items=max_items(codec.serde)
        )
        if new is not None:  # None: the row changed since we read it (Redis); merge again
            codec.tasks.put(key, True)
            break
    else:
        raise StorageError(
            f"put_writes of task {task_id!r} in thread {thread_id!r} kept racing concurrent"
            f" put_writes of the same task ({_MERGE_ATTEMPTS} attempts)"
        )
    if existing is None or not existing.hashes:  # the usual case: only gains
        if row.hashes:  # (else small values only: no references to count)
            held = unpack(row.hashes)
            if len(held) == 1 or len(set(held)) == len(held):
                yield AdjustRefcounts(tuple((h, 1) for h in held))
            else:
                yield AdjustRefcounts(tuple(Counter(held).items()))
        return  # every new blob came from this row: all held
    delta: Counter[bytes] = Counter(unpack(row.hashes))
    if existing is not None:
        delta.subtract(unpack(existing.hashes))
    gained = tuple((h, c) for h, c in delta.items() if c > 0)
    if gained:
        yield AdjustRefcounts(gained)
    lost = Counter({h: -c for h, c in delta.items() if c < 0})
    unheld = tuple(h for h in new if delta[h] <= 0)
    if lost or unheld:
        yield from release(lost, candidates=unheld)
