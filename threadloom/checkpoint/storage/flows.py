"""The saver's read and write logic, once, as sans-I/O flows over :mod:`.ops`.

Each function is a generator: it yields operations, receives their results,
and returns what the saver method returns. :mod:`.drive` runs them against a
backend's executor, sync or async, inside one transaction.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from threadloom.checkpoint.base import CheckpointTuple, get_checkpoint_id, get_thread_id
from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.drive import Emit
from threadloom.checkpoint.storage.ops import (
    CheckpointRow,
    GetCheckpoint,
    ListCheckpoints,
    LoadAncestors,
    LoadBlobs,
    LoadRefs,
    LoadWrites,
    WriteRow,
)
from threadloom.checkpoint.storage.record import State
from threadloom.checkpoint.storage.rows import (
    filter_pairs,
    load_metadata,
)
from threadloom.checkpoint.storage.values import ValueCodec
from threadloom.checkpoint.storage.writes import decode_entries
from threadloom.errors import CorruptBlobError

__all__ = ["build_tuples", "get_tuple_flow", "list_flow", "load_writes", "resolve_states", "target"]

Flow = Generator[Any, Any, Any]


def target(config: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """``(thread_id, checkpoint_ns, checkpoint_id)`` of a config (every put and
    put_writes starts here: a plain ``str`` thread id takes no other call)."""
    conf = config.get("configurable")
    if conf:
        thread_id = conf.get("thread_id")
        if type(thread_id) is str and thread_id:
            return thread_id, conf.get("checkpoint_ns") or "", conf.get("checkpoint_id")
    thread_id = get_thread_id(config)  # type: ignore[arg-type]
    conf = config.get("configurable") or {}
    return thread_id, conf.get("checkpoint_ns") or "", get_checkpoint_id(config)  # type: ignore[arg-type]


def _corrupt(row: CheckpointRow, why: str) -> CorruptBlobError:
    return CorruptBlobError(why, thread_id=row.thread_id, checkpoint_id=row.checkpoint_id)


def _decode(row: CheckpointRow) -> dict[str, Any]:
    if row.tag != record.RECORD_TAG:
        raise _corrupt(row, f"unknown checkpoint record format {row.tag!r}")
    try:
        rec = record.decode(row.data)
    except Exception as exc:
        raise _corrupt(row, f"checkpoint record cannot be decoded ({exc})") from exc
    if type(rec) is not dict or type(rec.get("k")) is not int:
        raise _corrupt(row, "checkpoint record cannot be decoded (not a record)")
    return rec


def resolve_states(codec: ValueCodec, rows: Sequence[CheckpointRow]) -> Flow:
    """``{checkpoint_id: (State, core fields, extra)}`` for rows of ONE
    thread/namespace, fetching diff bases with :class:`LoadAncestors` only when
    they are neither in the page nor cached."""
    out: dict[str, tuple[State, dict[str, Any], Any]] = {}
    todo = []
    for row in rows:  # a cached state of the very same record bytes is current
        cached = codec.states.get((row.thread_id, row.checkpoint_ns, row.checkpoint_id))
        if cached is not None and cached.data == row.data and cached.core is not None:
            out[row.checkpoint_id] = (cached, cached.core, cached.extra)
        else:
            todo.append(row)
    if not todo:
        return out
    known = {r.checkpoint_id: r for r in rows}
    recs = {r.checkpoint_id: _decode(r) for r in todo}
    states: dict[str, State] = {}
    for row in sorted(todo, key=lambda r: r.checkpoint_id):
        if row.checkpoint_id in out:
            continue
        tid, ns = row.thread_id, row.checkpoint_ns
        chain, cur, base = [], row, None
        while True:
            rec = recs.get(cur.checkpoint_id) or recs.setdefault(cur.checkpoint_id, _decode(cur))
            chain.append(cur)
            if rec["k"] == 0:
                break
            parent = cur.parent_checkpoint_id
            base = states.get(parent) or codec.states.get((tid, ns, parent))  # type: ignore[arg-type]
            if base is not None:
                break
            if parent is not None and parent not in known:
                fetched = yield LoadAncestors(tid, ns, parent, rec["k"] - 1)
                known.update((r.checkpoint_id, r) for r in fetched)
            if parent is None or parent not in known:
                raise _corrupt(row, f"diff base {parent!r} of {cur.checkpoint_id!r} is missing")
            cur = known[parent]
        for link in reversed(chain):
            try:
                base, core, extra = record.apply(recs[link.checkpoint_id], base)
            except (KeyError, IndexError, ValueError, TypeError) as exc:
                raise _corrupt(link, f"checkpoint record is inconsistent ({exc!r})") from exc
            base.data, base.core, base.extra = link.data, core, extra
            states[link.checkpoint_id] = base
            codec.states.put((tid, ns, link.checkpoint_id), base)
            out[link.checkpoint_id] = (base, core, extra)
    return {r.checkpoint_id: out[r.checkpoint_id] for r in rows}


def get_tuple_flow(codec: ValueCodec, config: Mapping[str, Any]) -> Flow:
    """Latest (or addressed) checkpoint with values and writes; None if absent."""
    thread_id, ns, checkpoint_id = target(config)
    row = yield GetCheckpoint(thread_id, ns, checkpoint_id)
    if row is None:
        return None
    tuples = yield from build_tuples(codec, [row], remember=True)
    return tuples[0]


def list_flow(
    codec: ValueCodec,
    config: Mapping[str, Any] | None,
    filter: Mapping[str, Any] | None,
    before: Mapping[str, Any] | None,
    limit: int | None,
) -> Flow:
    """Newest first, a page at a time (emitted through :class:`Emit`)."""
    conf = (config or {}).get("configurable") or {}
    thread_id = conf.get("thread_id")
    thread_id = str(thread_id) if thread_id not in (None, "") else None
    ns = conf.get("checkpoint_ns")
    pairs = filter_pairs(filter)
    before_id = get_checkpoint_id(before) if before else None  # type: ignore[arg-type]
    only_id = conf.get("checkpoint_id") if thread_id is not None else None
    if only_id:
        row = yield GetCheckpoint(thread_id, ns or "", only_id)  # type: ignore[arg-type]
        if row is not None and (limit is None or limit > 0) and _matches(row, pairs, before_id):
            yield Emit((yield from build_tuples(codec, [row])))
        return
    # an explicit limit up to 32 is one page (one round of reads); lazy
    # consumers of a long or unbounded history still start with 8
    remaining, after = limit, None
    page = limit if limit is not None and 0 < limit <= 32 else 8
    while remaining is None or remaining > 0:
        size = page if remaining is None else min(page, remaining)
        rows = yield ListCheckpoints(thread_id, ns, pairs, before_id, after, size)
        if rows:
            yield Emit((yield from build_tuples(codec, rows)))
        if len(rows) < size:
            return
        if remaining is not None:
            remaining -= len(rows)
        last = rows[-1]
        after = (last.checkpoint_id, last.thread_id, last.checkpoint_ns)
        page = min(page * 2, 256)


def _matches(row: CheckpointRow, pairs: tuple[tuple[str, str], ...], before: str | None) -> bool:
    if before is not None and not row.checkpoint_id < before:
        return False
    metadata = json.loads(row.metadata)
    return all(k in metadata and metadata[k] == json.loads(v) for k, v in pairs)


def build_tuples(codec: ValueCodec, rows: Sequence[CheckpointRow], remember: bool = False) -> Flow:
    """CheckpointTuples for rows: per (thread, namespace) in the page, at most
    one ancestors, one refs, two blobs and two writes lookups."""
    groups: dict[tuple[str, str], list[CheckpointRow]] = defaultdict(list)
    for row in rows:
        groups[(row.thread_id, row.checkpoint_ns)].append(row)
    done: dict[tuple[str, str, str], CheckpointTuple] = {}
    for (thread_id, ns), group in groups.items():
        resolved = yield from resolve_states(codec, group)
        keys = set()
        for state, _, _ in resolved.values():
            keys.update(record.ref_keys(state).items())
        refs, hits = yield from _load_refs(codec, thread_id, ns, keys)
        ids = tuple(r.checkpoint_id for r in group)
        decoded, wanted = _decode_writes(codec, (yield LoadWrites(thread_id, ns, ids)))
        blobs: dict[bytes, Any] = {}  # the writes' blobs come with the values' first lookup
        try:
            values = yield from codec.load(thread_id, ids[0], refs, remember, wanted, blobs)
        except CorruptBlobError:
            if not hits:
                raise
            # a cached ref outlived its blobs (another process rewrote the thread)
            codec.forget_thread(thread_id)
            refs, _ = yield from _load_refs(codec, thread_id, ns, keys)
            blobs.clear()
            values = yield from codec.load(thread_id, ids[0], refs, remember, wanted, blobs)
        late = _uncached(codec, decoded, blobs)  # evicted while the values loaded
        if late:
            blobs.update((yield LoadBlobs(late)))
        writes = _write_values(codec, thread_id, decoded, blobs)
        for row in group:
            resolved_row = resolved[row.checkpoint_id]
            done[(thread_id, ns, row.checkpoint_id)] = _tuple(
                codec, row, resolved_row, values, writes
            )
    return [done[(r.thread_id, r.checkpoint_ns, r.checkpoint_id)] for r in rows]


def unique_version_key(vkey: str) -> bool:
    """Whether a version key (:func:`.rows.version_key`) names one write only:
    the standard form with a random fraction of at least 12 digits."""
    _, dot, fraction = vkey.partition(".")
    digits = fraction[2:]
    return (
        bool(dot)
        and vkey[0] != "="
        and fraction[:2] == "0."
        and len(digits) >= 12
        and len(set(digits)) >= 4
    )


def _load_refs(codec: ValueCodec, thread_id: str, ns: str, keys: set[tuple[str, str]]) -> Flow:
    """``(ref rows, how many came from the cache)``. A ref row never changes
    once written (first write wins; versions identify values), so rows read
    once are kept in ``codec.ref_cache`` until retention touches the thread.

    Only refs whose version carries a random part (``<counter>.<random>``, what
    the runtime writes) are cached: another process may delete a thread and
    write it again, and with deterministic versions ("1", "2", ...) the new
    rows would have the old keys, so a cached row could be stale."""
    if not codec.cache_reads:
        return ((yield LoadRefs(thread_id, ns, tuple(keys))) if keys else []), 0
    cache, refs, ask = codec.ref_cache, [], []
    for channel, vkey in keys:
        ref = cache.get((thread_id, ns, channel, vkey))
        if ref is None:
            ask.append((channel, vkey))
        else:
            refs.append(ref)
    hits = len(refs)
    if ask:
        fetched = yield LoadRefs(thread_id, ns, tuple(ask))
        for ref in fetched:
            if unique_version_key(ref.version):
                cache.put((thread_id, ns, ref.channel, ref.version), ref)
        refs.extend(fetched)
    return refs, hits


def _tuple(
    codec: ValueCodec,
    row: CheckpointRow,
    resolved: tuple[State, dict[str, Any], Any],
    values: dict[tuple[str, str], Any],
    writes: dict[str, list[Any]],
) -> CheckpointTuple:
    state, core, extra_typed = resolved
    extra = _loads(codec, extra_typed, row, None) if extra_typed else None
    checkpoint = record.to_checkpoint(row.checkpoint_id, core, extra, state)
    channel_values = checkpoint["channel_values"]
    keys = record.ref_keys(state)
    for channel in state.cv:
        vkey = keys.get(channel)
        if vkey is None:
            channel_values[channel] = _loads(codec, state.iv[channel][1:], row, channel)
            continue
        value = values.get((channel, vkey), _ABSENT)
        if value is not _ABSENT:
            channel_values[channel] = list(value) if type(value) is list else value
    base = {"thread_id": row.thread_id, "checkpoint_ns": row.checkpoint_ns}
    parent = None
    if row.parent_checkpoint_id:
        parent = {"configurable": {**base, "checkpoint_id": row.parent_checkpoint_id}}
    return CheckpointTuple(
        config={"configurable": {**base, "checkpoint_id": row.checkpoint_id}},
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=load_metadata(row.metadata, row.thread_id, row.checkpoint_id),  # type: ignore[arg-type]
        parent_config=parent,
        pending_writes=writes.get(row.checkpoint_id, []),
    )


_ABSENT: Any = object()


def _loads(codec: ValueCodec, typed: Sequence[Any], row: Any, channel: str | None) -> Any:
    try:
        return codec.serde.loads_typed((typed[0], typed[1]))
    except Exception as exc:
        raise CorruptBlobError(
            f"stored value cannot be decoded ({type(exc).__name__}: {exc})",
            thread_id=row.thread_id,
            checkpoint_id=row.checkpoint_id,
            channel=channel,
        ) from exc


def load_writes(codec: ValueCodec, thread_id: str, ns: str, ids: list[str]) -> Flow:
    """``{checkpoint_id: pending writes}``, sorted by (task_path, task_id, idx)."""
    rows: list[WriteRow] = yield LoadWrites(thread_id, ns, tuple(ids))
    decoded, missing = _decode_writes(codec, rows)
    blobs = (yield LoadBlobs(missing)) if missing else {}
    return _write_values(codec, thread_id, decoded, blobs)


def _decode_writes(codec: ValueCodec, rows: list[WriteRow]) -> tuple[list[Any], tuple[bytes, ...]]:
    """Decoded task rows and the blob hashes their values need (not cached)."""
    decoded = [(row, decode_entries(row)) for row in rows]
    return decoded, _uncached(codec, decoded, {})


def _uncached(
    codec: ValueCodec, decoded: list[Any], blobs: Mapping[bytes, Any]
) -> tuple[bytes, ...]:
    wanted = {e[3] for _, entries in decoded for e in entries if e[2] is None}
    return tuple(h for h in wanted if h not in blobs and codec.chunks.get(h) is None)


def _write_values(
    codec: ValueCodec, thread_id: str, decoded: list[Any], blobs: Mapping[bytes, Any]
) -> dict[str, list[Any]]:
    by_checkpoint: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row, entries in decoded:
        for idx, channel, tag, payload in entries:
            if tag is None:
                cached = None if payload in blobs else codec.chunks.get(payload)
                if cached is not None:
                    value: Any = list(cached)
                else:
                    blob = blobs.get(payload)
                    if blob is None:
                        raise CorruptBlobError(
                            f"blob {payload.hex()} of a pending write is missing",
                            thread_id=thread_id,
                            checkpoint_id=row.checkpoint_id,
                            channel=channel,
                        )
                    value = _loads(codec, (blob.tag, blob.data), row, channel)
            else:
                value = _loads(codec, (tag, payload), row, channel)
            key = (row.task_path, row.task_id, idx)
            by_checkpoint[row.checkpoint_id].append((key, (row.task_id, channel, value)))
    return {
        cid: [w for _, w in sorted(ws, key=lambda kw: kw[0])] for cid, ws in by_checkpoint.items()
    }
