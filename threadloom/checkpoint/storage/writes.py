"""Pending writes <-> one row per task.

A task's writes are one msgpack list of ``[idx, channel, tag, payload]``:
``payload`` is the serialized value, or, when ``tag`` is None, the hash of a
blob holding it (values above ``inline_max``). A message list a node returns
serializes to the same bytes as the delta chunk the channel stores next, so
the two share one blob. LangGraph's rules are applied when merging a new
``put_writes`` into the row: all-special writes replace by index
(``WRITES_IDX_MAP``), otherwise the first write of an index wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ormsgpack

from threadloom.checkpoint.base import WRITES_IDX_MAP
from threadloom.checkpoint.storage.ops import BlobRow, WriteRow
from threadloom.checkpoint.storage.rows import blob_hash, pack
from threadloom.errors import CorruptBlobError, SerializationError

__all__ = ["decode_entries", "merge_writes"]


def decode_entries(row: WriteRow) -> list[list[Any]]:
    """The ``[idx, channel, tag, payload]`` entries of a task row."""
    try:
        return ormsgpack.unpackb(row.data)
    except Exception as exc:
        raise CorruptBlobError(
            f"writes of task {row.task_id!r} cannot be decoded ({exc})",
            thread_id=row.thread_id,
            checkpoint_id=row.checkpoint_id,
        ) from exc


def merge_writes(
    serde: Any,
    inline_max: int,
    existing: WriteRow | None,
    key: tuple[str, str, str, str],
    task_path: str,
    writes: Sequence[tuple[str, Any]],
) -> tuple[WriteRow | None, list[BlobRow]]:
    """The task row after ``writes`` (None when nothing changes) and new blobs."""
    special = 0
    for channel, _ in writes:
        if channel in WRITES_IDX_MAP:
            special += 1
    if existing is None and not special:  # a task's first writes: idx = position, in order
        return _first_writes(serde, inline_max, key, task_path, writes)
    upsert = special == len(writes)
    entries = {e[0]: e for e in decode_entries(existing)} if existing is not None else {}
    blobs: list[BlobRow] = []
    changed = False
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        if not upsert and idx in entries:
            continue
        entries[idx] = _entry(serde, inline_max, idx, channel, value, blobs)
        changed = True
    if not changed:
        return None, []
    ordered = [entries[i] for i in sorted(entries)]
    hashes = pack(e[3] for e in ordered if e[2] is None) if blobs or existing else b""
    path = task_path or (existing.task_path if existing is not None else "")
    row = WriteRow(*key, path, ormsgpack.packb(ordered), hashes)
    return row, blobs


def _first_writes(
    serde: Any,
    inline_max: int,
    key: tuple[str, str, str, str],
    task_path: str,
    writes: Sequence[tuple[str, Any]],
) -> tuple[WriteRow, list[BlobRow]]:
    """:func:`merge_writes` into no row with no special channel among the
    writes: every write is kept at its position (its index), so the entries
    are already in index order."""
    blobs: list[BlobRow] = []
    ordered = [
        _entry(serde, inline_max, idx, channel, value, blobs)
        for idx, (channel, value) in enumerate(writes)
    ]
    hashes = b"".join([b.hash for b in blobs]) if blobs else b""  # in entry order
    return WriteRow(*key, task_path or "", ormsgpack.packb(ordered), hashes), blobs


def _entry(
    serde: Any, inline_max: int, idx: int, channel: str, value: Any, blobs: list[BlobRow]
) -> list[Any]:
    """One stored write ``[idx, channel, tag, data]``; a large value becomes a
    blob (appended to ``blobs``) and the entry holds its hash with no tag."""
    try:
        tag, data = serde.dumps_typed(value)
    except SerializationError as exc:
        raise exc.under(channel) from None
    if len(data) > inline_max:
        h = blob_hash(tag, data)
        blobs.append(BlobRow(h, tag, data, b""))
        return [idx, channel, None, h]
    return [idx, channel, tag, data]
