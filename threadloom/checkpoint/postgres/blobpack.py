"""How blob bytes are packed in ``checkpoint_blobs.data`` (compressed when it pays).

Postgres compresses a value only when its whole row passes ~2 KB, so the
typical blob (one chat message, 300-500 bytes of msgpack with a repeated
key layout) is stored raw. The executor zstd-compresses such a value itself
when that saves at least :data:`MIN_SAVING` of it, and marks the row by
prefixing the tag with :data:`PACKED`; loading undoes both, so the storage core
sees the exact bytes and tag it wrote (the hash still names the raw content).
Rows written before this, or not worth compressing, have no prefix and are
returned as they are.
"""

from __future__ import annotations

from threadloom.checkpoint.serde.codec import compress, decompress
from threadloom.checkpoint.storage.ops import BlobRow

__all__ = ["PACKED", "pack", "unpack"]

PACKED = "~z:"
"""Tag prefix of a row whose data this module compressed (no serde tag starts with ``~``)."""

MIN_SIZE = 96
"""Smaller values are stored raw: a zstd frame header would eat most of the gain."""

MIN_SAVING = 0.1
"""Keep the compressed form only when it is at least this much smaller."""


def pack(tag: str, data: bytes) -> tuple[str, bytes]:
    """(tag, data) as stored: compressed and marked when that saves enough."""
    if len(data) < MIN_SIZE or "zstd" in tag:  # already compressed by the serializer
        return tag, data
    packed = compress(bytes(data))
    if len(packed) > len(data) * (1 - MIN_SAVING):
        return tag, data
    return PACKED + tag, packed


def unpack(row: BlobRow) -> BlobRow:
    """A stored row back as the storage core wrote it."""
    if not row.tag.startswith(PACKED):
        return row
    return BlobRow(row.hash, row.tag[len(PACKED) :], decompress(row.data), row.children)
