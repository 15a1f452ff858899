"""Serializer tags stored as small ints: one table for every stored form.

A record's inline channel values (:mod:`.record`), a dict stored field by field
(:mod:`.values`, :mod:`.reading`) and a pending write (:mod:`.writes`) store the
serializer's usual tags as their index here and any other tag as text, so the
common case costs one byte. Never renumber or reorder: stored rows name them.

``"empty"`` (the marker of an empty channel, not a tag the serializer gives a
field or a write) comes last, so fields and writes use the table without it
(:data:`FIELD_TAG_NAMES`) and a reader there refuses code 4 as one threadloom
never writes.
"""

from __future__ import annotations

__all__ = ["EMPTY_TAG", "FIELD_TAG_CODES", "FIELD_TAG_NAMES", "TAG_CODES", "TAG_NAMES"]

EMPTY_TAG = "empty"
TAG_NAMES = ("msgpack", "null", "bytes", "msgpack+zstd", EMPTY_TAG)
TAG_CODES = {tag: i for i, tag in enumerate(TAG_NAMES)}
FIELD_TAG_NAMES = TAG_NAMES[:4]
FIELD_TAG_CODES = {tag: i for i, tag in enumerate(FIELD_TAG_NAMES)}
