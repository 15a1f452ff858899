"""Shared row helpers: version keys, hashes, metadata filters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.ids import next_version
from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.rows import (
    _version_key,
    blob_hash,
    filter_pairs,
    pack,
    unpack,
    version_key,
)
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


@settings(max_examples=200, deadline=None)
@given(
    counter=st.integers(0, 2**64),
    tail=st.one_of(
        st.integers(0, 10**19).map(lambda n: f"0.{n}"),
        st.text("0123456789", min_size=1, max_size=20).map(lambda d: f"0.{d}"),
        st.floats(0, 1, exclude_max=True).map(lambda f: f"{f:016}"),
        st.text(max_size=6),
    ),
)
def test_version_key_after_packing_is_the_parsed_key(counter, tail) -> None:
    """version_key reuses the counter packing parsed (the put packs first)."""
    version = f"{counter:032}.{tail}"
    record.pack_version(version)
    assert version_key(version) == _version_key(version)
