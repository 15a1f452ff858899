"""Shared row helpers: version keys, hashes, metadata filters."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.ids import next_version
from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.rows import (
    _version_key,
    blob_hash,
    filter_pairs,
    load_metadata,
    pack,
    unpack,
    version_key,
)
from threadloom.errors import ConfigError, CorruptBlobError


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
    assert filter_pairs({"x'": 1, "a b": 2, "$": 3}) == (("x'", "1"), ("a b", "2"), ("$", "3"))
    for bad in ("", 'a"', "a\\b", "a\nb", 3):
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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.dictionaries(st.text(max_size=5), json_values, max_size=4).map(
            lambda d: json.dumps(d, ensure_ascii=False, separators=(",", ":"))
        ),
        st.dictionaries(st.text(max_size=5), json_values, max_size=4).map(json.dumps),
        st.tuples(
            st.sampled_from(["", " ", "\n", "\\n"]), json_values, st.sampled_from(["", " ", "x"])
        ).map(lambda t: t[0] + json.dumps(t[1]) + t[2]),
        st.text(max_size=12),
    )
)
@example("NaN")  # found by hypothesis: json.loads accepts it, and nan != nan
@example('{"a":[Infinity,-Infinity]}')
def test_load_metadata_accepts_exactly_what_json_loads_accepts(text) -> None:
    """...when it is an object: other JSON (a list, a number) is corrupt metadata."""
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(CorruptBlobError):
            load_metadata(text, "t", "c")
    else:  # compared as JSON text: NaN (accepted by both) is not equal to itself
        if type(expected) is not dict:  # metadata is an object (readers take it for one)
            with pytest.raises(CorruptBlobError, match="not a JSON object"):
                load_metadata(text, "t", "c")
            return
        got = load_metadata(text, "t", "c")
        assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
