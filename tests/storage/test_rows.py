"""Shared row helpers: version keys, hashes, metadata filters."""

from __future__ import annotations

import pytest

from threadloom.checkpoint.ids import next_version
from threadloom.checkpoint.storage.rows import blob_hash, filter_pairs, pack, unpack, version_key
from threadloom.errors import ConfigError


def test_version_keys_are_short_and_injective() -> None:
    versions = [next_version(n) for n in range(50)] + [1, "1", 1.5, "abc", "=1", "0001.0.5"]
    keys = [version_key(v) for v in versions]
    assert len(set(keys)) == len(set(map(str, versions)))  # only 1 and "1" share a key
    assert version_key(next_version(6)).startswith("7.")


def test_hashes_cover_tag_and_bytes() -> None:
    assert blob_hash("msgpack", b"x") != blob_hash("msgpack+zstd", b"x")
    assert blob_hash("a", b"bc") != blob_hash("ab", b"c")
    hashes = (blob_hash("t", b"1"), blob_hash("t", b"2"))
    assert unpack(pack(hashes)) == hashes and len(hashes[0]) == 16


def test_filter_pairs_validate_keys_and_encode_values() -> None:
    assert filter_pairs({"step": 1, "source": "loop", "a.b-c_d": None}) == (
        ("step", "1"),
        ("source", '"loop"'),
        ("a.b-c_d", "null"),
    )
    assert filter_pairs(None) == ()
    for bad in ("x'", "a b", "$", "", 'a"', 3):
        with pytest.raises(ConfigError):
            filter_pairs({bad: 1})
