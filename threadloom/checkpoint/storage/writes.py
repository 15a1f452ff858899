"""Pending writes <-> one row per task.

A task's writes are one msgpack list of entries, one per write, in index order:

- ``[idx, channel]``: the value is a blob (above ``inline_max``); its hash is
  the next one of the row's ``hashes`` (which lists every blob entry's hash in
  entry order, as the references the row holds), not repeated here;
- ``[idx, channel, tag]``: an inline value whose serialized bytes are empty
  (``None`` is ``("null", b"")``: every edge's trigger write is one);
- ``[idx, channel, tag, payload]``: an inline value.

``tag`` is a small int for the usual serializer tags (reading.FIELD_TAG_CODES,
shared with dicts stored field by field), else the tag's text. A trigger
channel ``branch:to:<node>`` (every edge writes one) is stored as ``[<node>]``:
a list, so no channel name an older row holds can be read as one (9 bytes
fewer, no escaping). Rows written before this layout (every entry ``[idx,
channel, tag, payload]``, tags as text, a blob entry ``[idx, channel, None,
hash]``) read the same: :func:`decode_entries` gives ``[idx, channel, tag,
payload]`` with the tag's text (None and the hash for a blob) for both. A merge
re-encodes the whole row in the new layout. The conversation bench's rows:
52-98 -> 27-54 bytes of data.

A message list a node returns serializes to the same bytes as the delta chunk
the channel stores next, so the two share one blob. LangGraph's rules are
applied when merging a new ``put_writes`` into the row: all-special writes
replace by index (``WRITES_IDX_MAP``), otherwise the first write of an index
wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ormsgpack

from threadloom.checkpoint.base import WRITES_IDX_MAP
from threadloom.checkpoint.storage.ops import HASH_SIZE, BlobRow, WriteRow
from threadloom.checkpoint.storage.reading import FIELD_TAG_CODES, FIELD_TAG_NAMES
from threadloom.checkpoint.storage.rows import blob_hash
from threadloom.errors import CorruptBlobError, SerializationError

__all__ = ["decode_entries", "merge_writes"]

_CODES = FIELD_TAG_CODES
_NAMES = FIELD_TAG_NAMES
_NAME_OF = dict(enumerate(_NAMES))
_new = tuple.__new__  # rows built without NamedTuple's Python-level __new__
_BRANCH = "branch:to:"
_CUT = len(_BRANCH)


_BYTES = (bytes, bytearray, memoryview)


def decode_entries(row: WriteRow) -> list[list[Any]]:
    """The ``[idx, channel, tag, payload]`` entries of a task row (either
    layout): ``tag`` is the serializer's tag, or None with the blob's hash as
    ``payload``."""
    if not isinstance(row.data, _BYTES):  # a backend's damaged row (Redis: redis/fields.py)
        raise _corrupt(row, "stored value is damaged (not a pending-writes row)")
    try:
        entries = ormsgpack.unpackb(row.data)
    except Exception as exc:
        raise _corrupt(row, f"cannot be decoded ({exc})") from exc
    hashes = row.hashes
    if entries.__class__ is not list or hashes.__class__ is not bytes:
        raise _corrupt(row, "is not a list of entries")
    if row.task_path.__class__ is not str:
        raise _corrupt(row, f"task path {row.task_path!r} is not a str")
    at = 0  # offset in ``hashes`` of the next blob entry's hash
    for e in entries:
        # the shape every backend's rows must have, checked here once: a row of
        # another shape would fail later, far from the row (docs/storage.md)
        if e.__class__ is not list or not e or e[0].__class__ is not int:
            raise _corrupt(row, f"entry {_short(e)} is not [idx, channel, ...]")
        if not 2 <= len(e) <= 4:
            raise _corrupt(row, f"entry of {len(e)} items")
        if e[1].__class__ is not str:
            e[1] = _branch(row, e[1])
        n = len(e)
        if n == 2:
            h = hashes[at : at + HASH_SIZE]
            if len(h) != HASH_SIZE:
                raise _corrupt(row, f"entry {e[0]!r} names no blob")
            e += (None, h)
            at += HASH_SIZE
            continue
        if n == 3:
            e.append(b"")
        elif e[3].__class__ is not bytes:
            raise _corrupt(row, f"entry {e[0]!r} holds no bytes")
        tag = e[2]
        if tag.__class__ is int:
            e[2] = _NAME_OF.get(tag) or _name(row, tag)
        elif tag is None and n == 4:
            at += HASH_SIZE  # an older row's blob entry: its hash is held here too
        elif tag.__class__ is not str:
            raise _corrupt(row, f"entry {e[0]!r} has no tag")
    return entries


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _branch(row: WriteRow, stored: Any) -> str:
    """``[<node>]`` -> ``branch:to:<node>``."""
    if type(stored) is list and len(stored) == 1 and type(stored[0]) is str:
        return _BRANCH + stored[0]
    raise _corrupt(row, f"channel {stored!r} is not one threadloom writes")


def _name(row: WriteRow, code: int) -> str:
    if 0 <= code < len(_NAMES):
        return _NAMES[code]
    raise _corrupt(row, f"tag code {code} is not one threadloom writes")


def _corrupt(row: WriteRow, what: str) -> CorruptBlobError:
    return CorruptBlobError(
        f"writes of task {row.task_id!r}: {what}",
        thread_id=row.thread_id,
        checkpoint_id=row.checkpoint_id,
    )


def merge_writes(
    serde: Any,
    inline_max: int,
    existing: WriteRow | None,
    key: tuple[str, str, str, str],
    task_path: str,
    writes: Sequence[tuple[str, Any]],
    seen: dict[int, Any] | None = None,
) -> tuple[WriteRow | None, list[BlobRow]]:
    """The task row after ``writes`` (None when nothing changes) and new blobs.
    ``seen``: filled with ``id(value) -> (value, (tag, bytes))`` per serialized
    value (see ``step.put_step_flow``)."""
    special = 0
    for channel, _ in writes:
        if channel in WRITES_IDX_MAP:
            special += 1
    if existing is None and not special:  # a task's first writes: idx = position, in order
        return _first_writes(serde, inline_max, key, task_path, writes, seen)
    upsert = special == len(writes)
    # idx -> (stored entry, blob hash or None)
    entries = {e[0]: _stored(e) for e in decode_entries(existing)} if existing is not None else {}
    blobs: list[BlobRow] = []
    changed = False
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        if not upsert and idx in entries:
            continue
        n = len(blobs)
        entry = _entry(serde, inline_max, idx, channel, value, blobs, seen)
        entries[idx] = (entry, blobs[n].hash if len(blobs) > n else None)
        changed = True
    if not changed:
        return None, []
    ordered = [entries[i] for i in sorted(entries)]
    held = [h for _, h in ordered if h is not None]
    if len(blobs) > 1 and upsert:  # a special channel written twice: the first value is gone
        kept = set(held)
        blobs = [b for b in blobs if b.hash in kept]
    path = task_path or (existing.task_path if existing is not None else "")
    row = WriteRow(*key, path, ormsgpack.packb([e for e, _ in ordered]), b"".join(held))
    return row, blobs


def _stored(e: list[Any]) -> tuple[list[Any], bytes | None]:
    """A decoded entry back in the stored layout, with its blob hash (if any)."""
    idx, channel, tag, payload = e
    stored: Any = [channel[_CUT:]] if channel.startswith(_BRANCH) else channel
    if tag is None:
        return [idx, stored], payload
    code = _CODES.get(tag, tag)
    return ([idx, stored, code, payload] if payload else [idx, stored, code]), None


def _first_writes(
    serde: Any,
    inline_max: int,
    key: tuple[str, str, str, str],
    task_path: str,
    writes: Sequence[tuple[str, Any]],
    seen: dict[int, Any] | None = None,
) -> tuple[WriteRow, list[BlobRow]]:
    """:func:`merge_writes` into no row with no special channel among the
    writes: every write is kept at its position (its index), so the entries
    are already in index order."""
    blobs: list[BlobRow] = []
    ordered: list[list[Any]] = []
    for idx, (channel, value) in enumerate(writes):
        ordered.append(_entry(serde, inline_max, idx, channel, value, blobs, seen))
    # each entry adds at most one blob, in entry order; joined once (``+=`` on
    # bytes copied the hashes so far at every blob: W=40,000 writes, 1.3 s)
    hashes = b"".join([b.hash for b in blobs]) if blobs else b""
    return _new(WriteRow, (*key, task_path or "", ormsgpack.packb(ordered), hashes)), blobs


def _entry(
    serde: Any,
    inline_max: int,
    idx: int,
    channel: str,
    value: Any,
    blobs: list[BlobRow],
    seen: dict[int, Any] | None = None,
) -> list[Any]:
    """One stored write (see the module doc); a large value becomes a blob
    (appended to ``blobs``) and the entry is ``[idx, channel]``."""
    try:
        tag, data = tagged = serde.dumps_typed(value)
    except SerializationError as exc:
        raise exc.under(channel) from None
    if seen is not None and value is not None:  # (None costs nothing to serialize)
        seen[id(value)] = (value, tagged)
    stored: Any = [channel[_CUT:]] if channel.startswith(_BRANCH) else channel
    if len(data) > inline_max:
        h = blob_hash(tag, data)
        blobs.append(_new(BlobRow, (h, tag, data, b"")))
        return [idx, stored]
    if data:
        return [idx, stored, _CODES.get(tag, tag), data]
    return [idx, stored, _CODES.get(tag, tag)]
