"""How blob bytes are packed in ``checkpoint_blobs.data`` (compressed when it pays).

Postgres compresses a value only when its whole row passes ~2 KB, so the
typical blob (one chat message, 300-500 bytes of msgpack with a repeated
key layout) is stored raw. The executor zstd-compresses such a value itself
when that saves at least :data:`MIN_SAVING` of it, and marks the row by
prefixing the tag with :data:`PACKED`; loading undoes both, so the storage core
sees the exact bytes and tag it wrote (the hash still names the raw content).
Rows written before this, or not worth compressing, have no prefix and are
returned as they are. The usual tags are stored as one character (:data:`TAGS`).
"""

from __future__ import annotations

from threadloom.checkpoint.serde.codec import compress, decompress
from threadloom.checkpoint.serde.inflation import DEFAULT_MAX_DECODED_ITEMS, check_items
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


def pack(tag: str, data: bytes) -> tuple[str, bytes]:
    """(tag, data) as stored: compressed and marked when that saves enough."""
    code = TAGS.get(tag)
    if len(data) < MIN_SIZE or "zstd" in tag:  # already compressed by the serializer
        return (tag, data) if code is None else ("~" + code, data)
    packed = compress(bytes(data))
    if len(packed) > len(data) * (1 - MIN_SAVING):
        return (tag, data) if code is None else ("~" + code, data)
    return (PACKED + tag if code is None else "~z" + code), packed


def unpack(row: BlobRow) -> BlobRow:
    """A stored row back as the storage core wrote it."""
    tag = row.tag
    if tag[:1] != "~":
        return row
    if tag.startswith(PACKED):
        return _inflated(row, tag[len(PACKED) :])
    if len(tag) == 3:  # "~z" + code
        return _inflated(row, _name(tag, 2))
    return BlobRow(row.hash, _name(tag, 1), row.data, row.children)


def _inflated(row: BlobRow, tag: str) -> BlobRow:
    """A compressed row's own bytes; msgpack held to the serializer's default
    item bound, as a ``msgpack+zstd`` value is (serde/inflation.py)."""
    data = decompress(row.data)
    if tag == "msgpack":
        check_items(data, len(row.data), DEFAULT_MAX_DECODED_ITEMS)
    return BlobRow(row.hash, tag, data, row.children)


def _name(tag: str, at: int) -> str:
    try:
        return _NAMES[tag[at:]]
    except KeyError:
        raise CorruptBlobError(f"blob tag {tag!r} is not one threadloom writes") from None
