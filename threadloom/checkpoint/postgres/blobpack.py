"""How blob bytes are packed in ``checkpoint_blobs.data`` (compressed when it pays).

Postgres compresses a value only when its whole row passes ~2 KB, so the
typical blob (one chat message, 300-500 bytes of msgpack with a repeated
key layout) is stored raw. The executor zstd-compresses such a value itself
when that saves at least :data:`MIN_SAVING` of it, and marks the row by
prefixing the tag with :data:`PACKED`; loading undoes both, so the storage core
sees the exact bytes and tag it wrote (the hash still names the raw content).
Rows written before this, or not worth compressing, have no prefix and are
returned as they are. The usual tags are stored as one character (:data:`TAGS`).

Inflated msgpack is held to the reading serializer's ``max_decoded_items``
(passed with the lookup: :class:`~threadloom.checkpoint.storage.ops.LoadBlobs`),
as a ``msgpack+zstd`` value is (serde/inflation.py). So that what this writes
reads back, msgpack over the writing serializer's ``max_decoded_items`` bytes
(passed with the write: ``SaveCheckpoint``/``SaveWrites.max_items``) or over
:data:`MAX_PACKED` bytes is stored raw, since it could hold more items than
that serializer's or the default bound accepts (a bound of 100,000 refused
its own ``[0] * 150_000``, compressed here); Postgres compresses such a row
itself. A damaged row names the thread and checkpoint it was read for.
Deleting a row never inflates it (the reference counting reads only its
``children`` and size: :mod:`.blobplans`).
"""

from __future__ import annotations

from threadloom.checkpoint.serde.codec import compress, decompress
from threadloom.checkpoint.serde.inflation import (
    DEFAULT_MAX_DECODED_ITEMS,
    check_items,
    compressible,
)
from threadloom.checkpoint.storage.ops import BlobRow
from threadloom.checkpoint.storage.reading import MANIFEST2_TAG, MANIFEST_TAG
from threadloom.errors import CorruptBlobError

__all__ = ["PACKED", "TAGS", "pack", "unpack"]

PACKED = "~z:"
"""Tag prefix of a row whose data this module compressed (no serde tag starts with ``~``)."""

MIN_SIZE = 96
"""Smaller values are stored raw: a zstd frame header would eat most of the gain."""

MIN_SAVING = 0.1
"""Keep the compressed form only when it is at least this much smaller."""

MAX_PACKED = DEFAULT_MAX_DECODED_ITEMS
"""Larger values are stored raw: at most this many bytes hold at most this many
msgpack items, so a reader with the default bound never counts or refuses them."""


TAGS = {
    "msgpack": "m",
    "msgpack+zstd": "Z",
    "bytes": "b",
    "null": "n",
    MANIFEST_TAG: "M",
    MANIFEST2_TAG: "N",
}
"""The usual tags, stored as ``~`` + one character (``~z`` + it when compressed):
``~z:msgpack`` (11 bytes a message blob) becomes ``~zm`` (4). Other tags are
stored whole (``~z:`` + tag when compressed), as before this."""
_NAMES = {code: tag for tag, code in TAGS.items()}


def pack(tag: str, data: bytes, max_items: int | None = None) -> tuple[str, bytes]:
    """(tag, data) as stored: compressed and marked when that saves enough.
    ``max_items``: the writing serializer's ``max_decoded_items`` (None: the
    default); msgpack of more bytes than it is stored raw (see the module doc)."""
    code = TAGS.get(tag)
    limit = MAX_PACKED if max_items is None or tag != "msgpack" else min(MAX_PACKED, max_items)
    if len(data) < MIN_SIZE or not compressible(data, limit) or "zstd" in tag:  # (zstd: serde)
        return (tag, data) if code is None else ("~" + code, data)
    packed = compress(bytes(data))
    if len(packed) > len(data) * (1 - MIN_SAVING):
        return (tag, data) if code is None else ("~" + code, data)
    return (PACKED + tag if code is None else "~z" + code), packed


def unpack(
    row: BlobRow,
    max_items: int | None = None,
    thread_id: str | None = None,
    checkpoint_id: str | None = None,
) -> BlobRow:
    """A stored row back as the storage core wrote it; inflated msgpack holds at
    most ``max_items`` items (the serializer's ``max_decoded_items``; None: the
    default). A damaged row raises CorruptBlobError naming the blob and where
    it was read for (``thread_id``, ``checkpoint_id``)."""
    tag = row.tag
    if tag[:1] != "~":
        return row
    try:
        if tag.startswith(PACKED):
            return _inflated(row, tag[len(PACKED) :], max_items)
        if len(tag) == 3:  # "~z" + code
            return _inflated(row, _name(tag, 2), max_items)
        return BlobRow(row.hash, _name(tag, 1), row.data, row.children)
    except CorruptBlobError as exc:
        if thread_id is None and checkpoint_id is None:
            raise
        raise CorruptBlobError(
            f"blob {row.hash.hex()}: {exc}", thread_id=thread_id, checkpoint_id=checkpoint_id
        ) from None


def _inflated(row: BlobRow, tag: str, max_items: int | None) -> BlobRow:
    """A compressed row's own bytes (msgpack: bounded in items, see the module doc)."""
    data = decompress(row.data)
    if tag == "msgpack":
        bound = DEFAULT_MAX_DECODED_ITEMS if max_items is None else max_items
        check_items(data, len(row.data), bound)
    return BlobRow(row.hash, tag, data, row.children)


def _name(tag: str, at: int) -> str:
    try:
        return _NAMES[tag[at:]]
    except KeyError:
        raise CorruptBlobError(f"blob tag {tag!r} is not one threadloom writes") from None
