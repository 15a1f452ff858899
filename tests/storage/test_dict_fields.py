"""A dict stored field by field (a graph input holding a list): a blob field's
hash is not repeated in the row's data and inline fields' usual tags are small
ints; rows written before (hash repeated, tags as text) read the same."""

from __future__ import annotations

from typing import Any

import ormsgpack
import pytest

from threadloom.checkpoint.serde.jsonplus import JsonPlusSerializer
from threadloom.checkpoint.storage.ops import KIND_DICT, LoadBlobs, RefRow
from threadloom.checkpoint.storage.rows import unpack
from threadloom.checkpoint.storage.values import ValueCodec
from threadloom.errors import CorruptBlobError

VALUE = {"messages": ["hello " * 20, "world " * 20], "turn": 3, "note": None, "more": ["x" * 80]}


def _load(codec: ValueCodec, ref: RefRow, blobs: dict[bytes, Any]) -> Any:
    flow = codec.load("t", "c1", [ref])
    try:
        op = next(flow)
        while True:
            assert isinstance(op, LoadBlobs)
            op = flow.send({h: blobs[h] for h in op.hashes if h in blobs})
    except StopIteration as done:
        return done.value[(ref.channel, ref.version)]


def _encode(value: dict[str, Any]) -> tuple[ValueCodec, RefRow, dict[bytes, Any]]:
    codec = ValueCodec(JsonPlusSerializer())
    inline, ref, blobs, _ = codec.encode("t", "", "__start__", "v1", value)
    assert inline is None and ref is not None and ref.kind == KIND_DICT
    return codec, ref, {b.hash: b for b in blobs}


def test_blob_fields_name_their_hash_once_and_tags_are_codes():
    codec, ref, blobs = _encode(VALUE)
    fields = ormsgpack.unpackb(ref.data)
    assert fields == [
        ["messages", None, None],
        ["turn", 0, b"\x03"],
        ["note", 1, b""],
        ["more", None, None],
    ]
    assert len(unpack(ref.hashes)) == 2 and set(unpack(ref.hashes)) == set(blobs)
    assert _load(ValueCodec(JsonPlusSerializer()), ref, blobs) == VALUE
    # per blob field the 16-byte hash (+2 header) became nil; "msgpack" and "null" 1-byte ints
    assert len(_old_format(ref).data) - len(ref.data) == 2 * 17 + 7 + 4


def _old_format(ref: RefRow) -> RefRow:
    """``ref`` as written before: each blob field repeats its hash, tags as text."""
    held = iter(unpack(ref.hashes))
    old_fields = []
    for key, tag, payload in ormsgpack.unpackb(ref.data):
        if tag is None:
            old_fields.append([key, None, next(held)])
        else:
            old_fields.append([key, ("msgpack", "null")[tag], payload])
    return ref._replace(data=ormsgpack.packb(old_fields))


def test_rows_written_before_read_the_same():
    codec, ref, blobs = _encode(VALUE)
    assert _load(ValueCodec(JsonPlusSerializer()), _old_format(ref), blobs) == VALUE


def test_a_field_without_a_hash_or_with_an_unknown_code_is_reported():
    codec, ref, blobs = _encode(VALUE)
    short = ref._replace(hashes=ref.hashes[:16])
    with pytest.raises(CorruptBlobError, match="names no blob"):
        _load(ValueCodec(JsonPlusSerializer()), short, blobs)
    fields = ormsgpack.unpackb(ref.data)
    fields[1][1] = 99
    bad = ref._replace(data=ormsgpack.packb(fields))
    with pytest.raises(CorruptBlobError, match="tag code 99"):
        _load(ValueCodec(JsonPlusSerializer()), bad, blobs)
