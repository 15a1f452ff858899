"""The saver's read and write logic, once, as sans-I/O flows over :mod:`.ops`.

Each function is a generator: it yields operations, receives their results,
and returns what the saver method returns. :mod:`.drive` runs them against a
backend's executor, sync or async, inside one transaction.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from threadloom.checkpoint.base import (
    WRITES_IDX_MAP,
    CheckpointTuple,
    get_checkpoint_id,
    get_thread_id,
)
from threadloom.checkpoint.storage.drive import Emit
from threadloom.checkpoint.storage.ops import (
    AdjustRefcounts,
    CheckpointRow,
    DropUnreferenced,
    GetCheckpoint,
    ListCheckpoints,
    LoadRefs,
    LoadWrites,
    SaveCheckpoint,
    SaveWrites,
    WriteRow,
)
from threadloom.checkpoint.storage.rows import (
    decode_body,
    dump_metadata,
    encode_body,
    filter_pairs,
    load_metadata,
    unpack,
    version_key,
)
from threadloom.checkpoint.storage.values import ValueCodec
from threadloom.errors import ConfigError, CorruptBlobError

__all__ = [
    "get_tuple_flow",
    "list_flow",
    "put_flow",
    "put_writes_flow",
    "release",
    "decode_checkpoint",
]

Flow = Generator[Any, Any, Any]


def _target(config: Mapping[str, Any]) -> tuple[str, str, str | None]:
    thread_id = get_thread_id(config)
    conf = config.get("configurable") or {}
    return thread_id, conf.get("checkpoint_ns") or "", get_checkpoint_id(config)  # type: ignore[arg-type]


def decode_checkpoint(codec: ValueCodec, row: CheckpointRow) -> dict[str, Any]:
    """The checkpoint of a row, without values; names the row when undecodable."""
    try:
        body = codec.serde.loads_typed((row.tag, row.data))
        return decode_body(body, row.checkpoint_id)
    except CorruptBlobError:
        raise
    except Exception as exc:
        raise CorruptBlobError(
            f"checkpoint cannot be decoded ({type(exc).__name__}: {exc})",
            thread_id=row.thread_id,
            checkpoint_id=row.checkpoint_id,
        ) from exc


def get_tuple_flow(codec: ValueCodec, config: Mapping[str, Any]) -> Flow:
    """Latest (or addressed) checkpoint with values and writes; None if absent."""
    thread_id, ns, checkpoint_id = _target(config)
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
    only_id = conf.get("checkpoint_id")
    remaining = limit
    after = None
    page = 8
    while remaining is None or remaining > 0:
        size = page if remaining is None else min(page, remaining)
        if only_id and thread_id is not None:
            row = yield GetCheckpoint(thread_id, ns or "", only_id)
            rows = [r for r in [row] if r is not None and _matches(r, pairs, before_id)]
        else:
            rows = yield ListCheckpoints(thread_id, ns, pairs, before_id, after, size)
        if not rows:
            return
        yield Emit((yield from build_tuples(codec, rows)))
        if len(rows) < size or only_id:
            return
        if remaining is not None:
            remaining -= len(rows)
        last = rows[-1]
        after = (last.checkpoint_id, last.thread_id, last.checkpoint_ns)
        page = min(page * 2, 256)


def _matches(row: CheckpointRow, pairs: tuple[tuple[str, str], ...], before: str | None) -> bool:
    import json

    if before is not None and not row.checkpoint_id < before:
        return False
    metadata = json.loads(row.metadata)
    return all(k in metadata and metadata[k] == json.loads(v) for k, v in pairs)


def build_tuples(codec: ValueCodec, rows: Sequence[CheckpointRow], remember: bool = False) -> Flow:
    """CheckpointTuples for rows: one ref lookup, <=2 blob lookups and one
    writes lookup per (thread, namespace) in the page."""
    checkpoints = [decode_checkpoint(codec, row) for row in rows]
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        groups[(row.thread_id, row.checkpoint_ns)].append(i)
    results: list[Any] = [None] * len(rows)
    for (thread_id, ns), indexes in groups.items():
        keys = {
            (c, version_key(v))
            for i in indexes
            for c, v in checkpoints[i]["channel_versions"].items()
        }
        refs = (yield LoadRefs(thread_id, ns, tuple(keys))) if keys else []
        first_id = rows[indexes[0]].checkpoint_id
        values = yield from codec.load(thread_id, first_id, refs, remember)
        ids = tuple(rows[i].checkpoint_id for i in indexes)
        writes = yield LoadWrites(thread_id, ns, ids)
        by_checkpoint: dict[str, list[WriteRow]] = defaultdict(list)
        for w in writes:
            by_checkpoint[w.checkpoint_id].append(w)
        for i in indexes:
            results[i] = _tuple(codec, rows[i], checkpoints[i], values, by_checkpoint)
    return results


def _tuple(
    codec: ValueCodec,
    row: CheckpointRow,
    checkpoint: dict[str, Any],
    values: dict[tuple[str, str], Any],
    writes: dict[str, list[WriteRow]],
) -> CheckpointTuple:
    channel_values = checkpoint["channel_values"]
    for channel, version in checkpoint["channel_versions"].items():
        key = (channel, version_key(version))
        if key in values:
            value = values[key]
            channel_values[channel] = list(value) if type(value) is list else value
    own = sorted(writes.get(row.checkpoint_id, ()), key=lambda w: (w.task_path, w.task_id, w.idx))
    pending = [(w.task_id, w.channel, _load_write(codec, w)) for w in own]
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


def _load_write(codec: ValueCodec, w: WriteRow) -> Any:
    try:
        return codec.serde.loads_typed((w.tag, w.value))
    except Exception as exc:
        raise CorruptBlobError(
            f"pending write of task {w.task_id!r} cannot be decoded ({type(exc).__name__}: {exc})",
            thread_id=w.thread_id,
            checkpoint_id=w.checkpoint_id,
            channel=w.channel,
        ) from exc


def put_flow(
    codec: ValueCodec,
    config: Mapping[str, Any],
    checkpoint: Mapping[str, Any],
    metadata: Mapping[str, Any],
    new_versions: Mapping[str, Any],
) -> Flow:
    """Store a checkpoint: body + metadata row, refs for changed channels only."""
    thread_id, ns, parent_id = _target(config)
    tag, data = codec.serde.dumps_typed(encode_body(checkpoint))
    md_text, run_id = dump_metadata(config, metadata)
    row = CheckpointRow(thread_id, ns, checkpoint["id"], parent_id, tag, data, md_text, run_id)
    values = checkpoint["channel_values"]
    refs, states, blobs = [], [], {}
    for channel, version in new_versions.items():
        missing = channel not in values
        ref, new_blobs, state = codec.encode(
            thread_id, ns, channel, version_key(version), values.get(channel), missing
        )
        refs.append(ref)
        states.append(state)
        for blob in new_blobs:
            blobs.setdefault(blob.hash, blob)
    result = yield SaveCheckpoint(row, tuple(refs), tuple(blobs.values()))
    children: Counter[bytes] = Counter()
    for h in result.new_blobs:
        children.update(unpack(blobs[h].children))
    if children:
        yield AdjustRefcounts(tuple(children.items()))
    if result.new_blobs and not all(result.inserted_refs):
        yield from release(Counter(), candidates=tuple(result.new_blobs))
    for ref, state, inserted in zip(refs, states, result.inserted_refs):
        if state is not None and inserted:
            codec.remember(thread_id, ns, ref.channel, state)
        elif state is not None:
            codec.lists.pop((thread_id, ns, ref.channel))
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": row.checkpoint_id,
        }
    }


def release(counts: Counter[bytes], candidates: tuple[bytes, ...] = ()) -> Flow:
    """Drop ``counts`` references, then delete blobs nothing holds any more
    (cascading into a dropped manifest's segments). Returns (blobs, bytes)."""
    dropped_blobs = dropped_bytes = 0
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
) -> Flow:
    """Store a task's writes; all-special writes replace, others: first wins."""
    thread_id, ns, checkpoint_id = _target(config)
    if checkpoint_id is None:
        raise ConfigError(
            f"put_writes for thread {thread_id!r} needs config['configurable']['checkpoint_id']"
        )
    upsert = all(channel in WRITES_IDX_MAP for channel, _ in writes)
    dumps = codec.serde.dumps_typed
    rows = tuple(
        WriteRow(
            thread_id,
            ns,
            checkpoint_id,
            task_id,
            WRITES_IDX_MAP.get(channel, idx),
            channel,
            *dumps(value),
            task_path,
        )  # fmt: skip
        for idx, (channel, value) in enumerate(writes)
    )
    if rows:
        yield SaveWrites(rows, upsert)
